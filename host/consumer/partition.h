/* partition: the keys of a partitioned stream.
 *
 * A handler with `partitions = N` reads N keys, "<stream>:{0}" ...
 * "<stream>:{N-1}": the hash tag {p} puts each partition in the Redis
 * Cluster slot of "p" whatever the stream is called, and every key the host
 * derives from a partition's name (its retry stream, its delay set) or
 * writes with its acks (reply_to and dead_letter, partitioned the same way)
 * shares that slot. Which partition an entry belongs to is
 * keyslot_partition(partition key, N) (keyslot.h). */
#ifndef LUASTREAM_PARTITION_H
#define LUASTREAM_PARTITION_H

#include <stddef.h>

#include "runtime.h"

/* The most partitions a handler may have (luastream.handler's MAX_PARTITIONS). */
#define PARTITIONS_MAX 1024

/* "<name>:{p}" into out; returns its length, or -1 when it does not fit. */
int partition_key_into(const char *name, int p, char *out, size_t len);
/* "<name>:{p}", allocated (free it), or NULL when out of memory. */
char *partition_key(const char *name, int p);
/* out = base for partition p: stream, reply_to and dead_letter are the
 * partition's keys (owned by out: partition_spec_free); every other field
 * is base's (borrowed: out is valid while base is). Returns 0, or -1 when
 * out of memory (out then holds nothing to free). */
int partition_spec(const struct handler_spec *base, int p, struct handler_spec *out);
void partition_spec_free(struct handler_spec *s);
/* fn(data, spec) for base when it has no partitions, else for each
 * partition's spec in order (partition_spec; valid during the call only).
 * Returns 0, or -1 when out of memory (the partitions before were given). */
int partition_each(const struct handler_spec *base,
                   void (*fn)(void *data, const struct handler_spec *s), void *data);

#endif
