/* keyslot: CRC-16/XMODEM, Redis Cluster's hash slots, partitions. */
#include "keyslot.h"

#include <string.h>

uint16_t keyslot_crc16(const char *buf, size_t len) {
  uint16_t crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (uint16_t)((unsigned char)buf[i] << 8);
    for (int bit = 0; bit < 8; bit++)
      crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

unsigned keyslot_of(const char *key, size_t len) {
  const char *open = memchr(key, '{', len);
  if (open) {
    size_t from = (size_t)(open - key) + 1;
    const char *close = memchr(key + from, '}', len - from);
    if (close && close > key + from) {
      key += from;
      len = (size_t)(close - key);
    }
  }
  return keyslot_crc16(key, len) & (KEYSLOT_COUNT - 1);
}

unsigned keyslot_partition(const char *key, size_t len, unsigned partitions) {
  return partitions ? keyslot_crc16(key, len) % partitions : 0;
}
