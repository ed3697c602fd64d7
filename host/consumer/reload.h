/* reload: hot reload of a host's handler directory.
 *
 * Looks at the directory again: a file whose content changed (force: every
 * file) is loaded into a fresh state and validated as at start-up; only then
 * does its subscription switch. A change to `handle` only swaps the handler
 * in place; a change to a subscription field stops that subscription, drains
 * it and starts a new one; a new file starts a subscription; a removed
 * file's subscription is stopped and drained; a directory that no longer
 * exists counts as empty. A file that fails to load keeps the running
 * version and is reported once per content.
 *
 * It works on the host's slots (slots.h) and reaches the rest of the host
 * only through struct reload_ops, so it needs nothing of host.c. */
#ifndef LUASTREAM_RELOAD_H
#define LUASTREAM_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime.h"
#include "slots.h"

/* What a reload asks of its host. */
struct reload_ops {
  void *data;
  /* Starts a subscription for hd in sl (hd is the subscription's from here
   * on, also when that fails). keep_cursor: it takes over from an earlier one. */
  void (*start)(void *data, struct slot *sl, handler *hd, bool keep_cursor);
  /* Binds hd to its consumer name and remembers it in sl: 0, or -1. */
  int (*bind)(void *data, struct slot *sl, handler *hd);
  /* Whether this server cannot run the file at path (spec): true with why. */
  bool (*refuse)(void *data, const char *path, const struct handler_spec *spec, char *why,
                 size_t len);
};

struct reloader {
  const char *dir;          /* the handler directory (borrowed) */
  const struct rt_env *env; /* what loaded handlers see (borrowed) */
  struct slots *slots;      /* the host's (borrowed) */
  struct reload_ops ops;
  bool dir_gone; /* the last reload found no handler directory */
};

void reload_init(struct reloader *r, const char *dir, const struct rt_env *env, struct slots *slots,
                 const struct reload_ops *ops);
/* Looks at the directory again (see above); only once the host runs its
 * subscriptions. */
void reload_dir(struct reloader *r, bool force);
/* Drained subscriptions of reloads: freed; a restart's successor starts; a
 * removed file's slot goes. Not while the host stops (it frees them). */
void reload_reap(struct reloader *r);

#endif
