/* slots: the host's handler files, each with what runs it. A reload
 * restart stops `sub` (it becomes `old`) and starts `next` once old has
 * drained; a removed file's slot goes once its subscription has drained.
 * Invariant: sub and old are never both set. */
#ifndef LUASTREAM_SLOTS_H
#define LUASTREAM_SLOTS_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime.h"
#include "subscription.h"

struct slot {
  char *path;                  /* the handler file, as listed */
  handler *loaded;             /* before start: loaded and bound, not yet running */
  subscription *sub;           /* running */
  subscription *old;           /* stopping (restart or removal); freed once drained */
  handler *next;               /* restart: bound, starts once old has drained */
  char *consumer;              /* the consumer name bound last */
  bool own_consumer;           /* it is the file's own `consumer` field */
  bool initial;                /* started with the host: a refused lease fails the host */
  bool removed;                /* the file is gone */
  char failed[RT_VERSION_LEN]; /* content that failed to load (reported once); "" none */
};

/* By load order; files added later at the end. */
struct slots {
  struct slot *v;
  size_t n, cap;
};

/* A new empty slot for path at the end, or NULL (out of memory). May move
 * the others: pointers into v do not survive it. */
struct slot *slot_add(struct slots *ss, const char *path);
/* Only once nothing runs in it. */
void slot_delete(struct slots *ss, size_t i);
struct slot *slot_find(struct slots *ss, const char *path);
/* The spec of what the slot runs (or will run once restarted), or NULL. */
const struct handler_spec *slot_spec(const struct slot *sl);
const char *slot_version(const struct slot *sl);
/* The file's basename without .lua, for log lines about a file without a handler. */
const char *slot_name(const struct slot *sl, char *buf, size_t len);

#endif
