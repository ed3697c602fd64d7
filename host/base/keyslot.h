/* keyslot: where a key lives in Redis Cluster, and which partition of a
 * partitioned stream a partition key belongs to.
 *
 * Both use CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection),
 * the function Redis Cluster hashes keys with, so that any producer in any
 * language can compute the same partition with code it most likely has
 * already (every cluster client carries it). Check value: the CRC of
 * "123456789" is 0x31C3. */
#ifndef LUASTREAM_KEYSLOT_H
#define LUASTREAM_KEYSLOT_H

#include <stddef.h>
#include <stdint.h>

#define KEYSLOT_COUNT 16384

uint16_t keyslot_crc16(const char *buf, size_t len);
/* The hash slot of key: the CRC of its hash tag (what lies between the first
 * '{' and the first '}' after it, when that is not empty), else of the whole
 * key, modulo 16384. */
unsigned keyslot_of(const char *key, size_t len);
/* The partition (0 .. partitions - 1) of an entry whose partition key is
 * key: crc16(key) modulo partitions. The whole key, hash tags included:
 * braces in a partition key mean nothing. */
unsigned keyslot_partition(const char *key, size_t len, unsigned partitions);

#endif
