/* cluster_keys: whether the keys one subscription writes together share a
 * Redis Cluster hash slot.
 *
 * An outcome is one script call (writer.h): the entry's ack on its stream
 * or retry stream, with the reply on reply_to, the copy on the retry stream,
 * the delay set entry or the dead letter, all in one step. Redis Cluster
 * runs a script on one node and refuses keys of two slots in it, so those
 * keys (stream, retry stream, delay set, reply_to, dead_letter) must hash to
 * one slot: each name carries the same hash tag, e.g. "{payments}". The
 * retry stream and the delay set are named after the stream, so a tagged
 * stream gives them its tag. No I/O: `run` checks on a cluster, `check
 * --cluster` without a server. */
#ifndef LUASTREAM_CLUSTER_KEYS_H
#define LUASTREAM_CLUSTER_KEYS_H

#include <stddef.h>

#include "runtime.h"

/* 0 when s's keys share one slot; else -1 and, in why, which keys are in
 * which slot and how to name them ("stream \"payments\" (slot 4847), ..."). */
int cluster_keys_check(const struct handler_spec *s, char *why, size_t len);

#endif
