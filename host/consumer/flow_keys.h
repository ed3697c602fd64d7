/* flow_keys: the names of the keys luastream keeps beside a group, in the
 * stream's Redis Cluster slot, so one script may touch them with the stream:
 *
 *   luastream:<kind>:{<stream>}:<group>[:<suffix>]
 *
 * or, for a stream whose name has a hash tag of its own ({tag}), that tag
 * with the whole name after it: luastream:<kind>:{tag}:<stream>:<group>...
 * (braces around a whole name that has braces would give another slot).
 * The consumer leases (kind "consumer", suffix the consumer name), the pause
 * of a group ("pause") and its flow limits ("rate", "inflight") are named
 * this way. */
#ifndef LUASTREAM_FLOW_KEYS_H
#define LUASTREAM_FLOW_KEYS_H

/* The key (malloc'd; NULL when out of memory); suffix may be NULL. */
char *flow_key(const char *kind, const char *stream, const char *group, const char *suffix);

#endif
