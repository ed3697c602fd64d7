/* reload: hot reload of the handler directory (see reload.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handler_dir.h"
#include "log.h"
#include "metrics.h"
#include "reload.h"
#include "subscription.h"

#define ERR_MAX 4096

void reload_init(struct reloader *r, const char *dir, const struct rt_env *env, struct slots *slots,
                 const struct reload_ops *ops) {
  r->dir = dir;
  r->env = env;
  r->slots = slots;
  r->ops = *ops;
  r->dir_gone = false;
}

void reload_reap(struct reloader *r) {
  struct slots *ss = r->slots;
  for (size_t i = 0; i < ss->n;) {
    struct slot *sl = &ss->v[i];
    if (sl->old && sub_drained(sl->old)) {
      sub_free(sl->old);
      sl->old = NULL;
      if (sl->next) {
        handler *hd = sl->next;
        sl->next = NULL;
        sl->initial = false;
        r->ops.start(r->ops.data, sl, hd, true);
      }
    }
    if (sl->removed && !sl->old && !sl->sub && !sl->next) {
      slot_delete(ss, i);
      continue;
    }
    i++;
  }
}

/* A handler file that is no longer in the directory. */
static void file_gone(struct reloader *r, size_t i) {
  struct slot *sl = &r->slots->v[i];
  char name[256];
  sl->removed = true;
  sl->failed[0] = '\0';
  if (sl->next) {
    handler_release(sl->next);
    sl->next = NULL;
  }
  if (sl->sub) {
    log_line(LOG_INFO, slot_name(sl, name, sizeof name),
             "handler file removed, stopping its subscription", "version", sub_version(sl->sub),
             NULL);
    sl->old = sl->sub;
    sl->sub = NULL;
    sub_stop(sl->old); /* may drain at once: reap frees it */
  } else if (!sl->old) {
    slot_delete(r->slots, i);
  }
}

/* luastream_reloads_total{handler, result}: a changed file loaded (ok) or
 * refused (failed). */
static void count_reload(const char *name, bool ok) {
  static const char *const labels[] = {"handler", "result"};
  struct metric_family *f =
      metrics_family("luastream_reloads_total", "Handler files reloaded while running, by result",
                     METRIC_COUNTER, 2, labels, NULL, 0);
  const char *values[] = {name, ok ? "ok" : "failed"};
  metric_add(metrics_series(f, values), 1);
}

/* A changed or new file that cannot run: logged once (sl->failed remembers
 * the version), and whatever runs keeps running. */
static void reload_refused(struct slot *sl, const char *version, const char *name, const char *cur,
                           const char *err) {
  snprintf(sl->failed, sizeof sl->failed, "%s", version);
  count_reload(name, false);
  log_line(LOG_ERROR, name,
           cur ? "handler reload failed, the running version stays"
               : "handler reload failed, not started",
           "version", cur, "error", err, NULL);
}

/* A handler file that is in the directory: loaded again when it changed. */
static void file_seen(struct reloader *r, const char *path, bool force) {
  struct slots *ss = r->slots;
  char now[RT_VERSION_LEN], err[ERR_MAX], name[256], versions[2 * RT_VERSION_LEN + 4];
  struct slot *sl = slot_find(ss, path);
  if (handler_file_version(path, now) != 0) return; /* gone again: the next reload sees it */
  if (sl && sl->removed) sl->removed = false;       /* back while its old one drains */
  const char *cur = sl ? slot_version(sl) : NULL;
  if (!force && cur && strcmp(cur, now) == 0) {
    if (sl) sl->failed[0] = '\0'; /* back to what runs: a later failure is news */
    return;
  }
  if (!force && sl && strcmp(sl->failed, now) == 0) return; /* reported already */
  if (sl == NULL && (sl = slot_add(ss, path)) == NULL) {
    log_line(LOG_ERROR, NULL, "out of memory: handler file not loaded", "file", path, NULL);
    return;
  }
  slot_name(sl, name, sizeof name);
  handler *hd = NULL;
  if (handler_load(path, r->env, &hd, err, sizeof err) != 0) {
    reload_refused(sl, now, name, cur, err);
    return;
  }
  const struct handler_spec *ns = handler_spec(hd);
  bool refused = r->ops.refuse(r->ops.data, path, ns, err, sizeof err);
  for (size_t j = 0; j < ss->n && !refused; j++) {
    const struct handler_spec *o = slot_spec(&ss->v[j]);
    if (&ss->v[j] == sl || o == NULL || ss->v[j].removed) continue;
    refused = handler_dir_split_group(o, ns, err, sizeof err);
  }
  if (refused) {
    reload_refused(sl, handler_version(hd), name, cur, err);
    handler_release(hd);
    return;
  }
  if (r->ops.bind(r->ops.data, sl, hd) != 0) {
    snprintf(sl->failed, sizeof sl->failed, "%s", handler_version(hd));
    handler_release(hd);
    return;
  }
  sl->failed[0] = '\0';
  if (cur) count_reload(name, true);
  snprintf(versions, sizeof versions, "%s->%s", cur ? cur : "", handler_version(hd));
  const struct handler_spec *cs = slot_spec(sl);
  char changed[256] = "";
  /* The fields named force a restart; `handle` and start_at swap in place. */
  if (cs) handler_spec_diff(cs, ns, changed, sizeof changed);
  if (cs && changed[0] == '\0') { /* only `handle` (or nothing) changed: swap in place */
    log_line(LOG_INFO, name, "handler reloaded", "version", versions, NULL);
    if (sl->next) {
      handler_release(sl->next);
      sl->next = hd;
    } else {
      sub_swap_handler(sl->sub, hd);
    }
    return;
  }
  if (sl->sub) { /* subscription fields changed: stop, drain, start anew */
    log_line(LOG_INFO, name, "handler reloaded, restarting its subscription", "version", versions,
             "changed", changed, NULL);
    sl->next = hd;
    sl->old = sl->sub;
    sl->sub = NULL;
    sub_stop(sl->old); /* may drain at once: reap starts next */
    return;
  }
  if (sl->next || sl->old) { /* a restart or removal still draining: next waits for it */
    log_line(LOG_INFO, name,
             sl->next ? "handler reloaded, restarting its subscription"
                      : "handler added, starting once its old subscription has drained",
             "version", versions, "changed", changed[0] ? changed : NULL, NULL);
    if (sl->next) handler_release(sl->next);
    sl->next = hd;
    return;
  }
  log_line(LOG_INFO, name, "handler added", "version", handler_version(hd), NULL);
  sl->initial = false;
  r->ops.start(r->ops.data, sl, hd, false);
}

void reload_dir(struct reloader *r, bool force) {
  char err[ERR_MAX];
  char **paths = NULL;
  int n = handler_dir_list(r->dir, r->env->trust, true, &paths, err, sizeof err);
  if (n == -2) {
    /* Gone (a deploy replacing it): so are its files. Their subscriptions
     * stop; the directory is looked for again at the next reload. */
    if (!r->dir_gone)
      log_line(LOG_WARN, NULL,
               "handler directory is gone: stopping its subscriptions until it is back", "dir",
               r->dir, NULL);
    r->dir_gone = true;
    n = 0;
    paths = NULL;
  } else if (n == -3) {
    log_line(LOG_ERROR, NULL,
             "reload refused: other users can change the handler directory, the running handlers "
             "stay",
             "error", err, NULL);
    return;
  } else if (n < 0) {
    log_line(LOG_ERROR, NULL, "reload failed: cannot list the handler directory", "error", err,
             NULL);
    return;
  } else if (r->dir_gone) {
    r->dir_gone = false;
    log_line(LOG_INFO, NULL, "handler directory is back", "dir", r->dir, NULL);
  }
  for (int i = 0; i < n; i++) file_seen(r, paths[i], force);
  for (size_t i = r->slots->n; i-- > 0;) {
    struct slot *sl = &r->slots->v[i];
    if (sl->removed) continue;
    bool present = false;
    for (int j = 0; j < n && !present; j++) present = strcmp(paths[j], sl->path) == 0;
    if (!present) file_gone(r, i);
  }
  handler_dir_free(paths);
}
