/* outcome: builders of the commands behind each outcome (see outcome.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "handler_name.h"
#include "outcome.h"
#include "trace.h"

void outcome_txn_init(struct txn *t) {
  memset(t, 0, sizeof *t);
  for (int i = 0; i < TXN_MAX; i++) bk_args_init(&t->cmd[i]);
}

void outcome_txn_reset(struct txn *t) {
  for (int i = 0; i < t->n; i++) bk_args_reset(&t->cmd[i]);
  for (int i = 0; i < t->nowned; i++) free(t->owned[i]);
  t->n = t->nowned = 0;
  t->delays = false;
}

void outcome_txn_free(struct txn *t) {
  for (int i = 0; i < TXN_MAX; i++) bk_args_free(&t->cmd[i]);
  for (int i = 0; i < t->nowned; i++) free(t->owned[i]);
  t->n = t->nowned = 0;
}

static struct bk_args *next(struct txn *t) {
  if (t->n == TXN_MAX) abort(); /* builders add a bounded number: a programming error */
  return &t->cmd[t->n++];
}

/* Keeps s (malloc'd) until outcome_txn_free and returns it. */
static const char *own(struct txn *t, char *s) {
  if (s == NULL || t->nowned == (int)(sizeof t->owned / sizeof t->owned[0])) abort();
  t->owned[t->nowned++] = s;
  return s;
}

static const char *own_printf(struct txn *t, const char *fmt, long long n) {
  char *s = malloc(24);
  if (s) snprintf(s, 24, fmt, n);
  return own(t, s);
}

static bool is(const char *name, size_t len, const char *header) {
  return len == strlen(header) && memcmp(name, header, len) == 0;
}

int outcome_writes(struct txn *t, const struct rt_result *res) {
  if (res->nwrites + 2 > (size_t)(TXN_MAX - t->n)) return -1;
  for (size_t w = 0; w < res->nwrites; w++) {
    const struct rt_write *wr = &res->writes[w];
    struct bk_args *a = next(t);
    for (size_t i = 0; i < wr->argc; i++) bk_args_add(a, wr->argv[i], wr->argvlen[i]);
  }
  return 0;
}

/* Is field i of e one of the names in skip (NULL-terminated)? */
static bool skipped(const struct entry *e, size_t i, const char *const *skip) {
  for (const char *const *h = skip; *h; h++)
    if (is(e->field[i], e->field_len[i], *h)) return true;
  return false;
}

/* A header a copy of an entry gets: its name and value. */
struct header {
  const char *name;
  const char *value;
  size_t len;
};

typedef void put_fn(void *ctx, const char *s, size_t n);

/* The field list of a copy of e, name and value by turns, to put: e's own
 * fields without those named in skip (the headers a copy rewrites), then
 * the nhdr headers. Every copy (retry, dead letter, delay-set member) is
 * built by this one function. */
static void entry_fields(const struct entry *e, const char *const *skip, const struct header *hdr,
                         size_t nhdr, put_fn *put, void *ctx) {
  for (size_t i = 0; i + 1 < e->nfields; i += 2) {
    if (skipped(e, i, skip)) continue;
    put(ctx, e->field[i], e->field_len[i]);
    put(ctx, e->field[i + 1], e->field_len[i + 1]);
  }
  for (size_t i = 0; i < nhdr; i++) {
    put(ctx, hdr[i].name, strlen(hdr[i].name));
    put(ctx, hdr[i].value, hdr[i].len);
  }
}

static void put_arg(void *ctx, const char *s, size_t n) { bk_args_add(ctx, s, n); }

#define HDR(name, value) \
  { name, value, strlen(value) }

/* The headers a copy rewrites; with _TRACED also traceparent, which a copy
 * of an entry with a valid one gets as a child (copy_trace). */
static const char *const COPY_HEADERS[] = {HDR_DELIVERY_COUNT, HDR_RETRY_GROUP, HDR_ORIGINAL_ID,
                                           NULL};
static const char *const COPY_HEADERS_TRACED[] = {HDR_DELIVERY_COUNT, HDR_RETRY_GROUP,
                                                  HDR_ORIGINAL_ID, HDR_TRACEPARENT, NULL};

/* A copy of e is a new message of e's trace: a child of its traceparent
 * (the same trace id, a new parent id) into child, when e has a valid one;
 * else false, and e's traceparent, if any, is data and goes as it is. */
static bool copy_trace(const struct entry *e, char *child) {
  size_t len = 0;
  const char *tp = entry_get(e, HDR_TRACEPARENT, &len);
  return tp && trace_child(tp, len, child);
}

/* copy_trace's child, owned by t (the args point into it until the command is
 * sent); NULL when e has no valid traceparent or memory ran out. */
static const char *own_trace(struct txn *t, const struct entry *e) {
  char child[TRACEPARENT_LEN + 1];
  if (!copy_trace(e, child)) return NULL;
  char *s = malloc(sizeof child);
  if (s) memcpy(s, child, sizeof child);
  return own(t, s);
}

/* The fields of a retry copy of e onto a; trace: the copy's traceparent or
 * NULL. */
static void retry_fields(struct bk_args *a, const struct entry *e, const char *count,
                         const char *original_id, const char *trace) {
  const struct header hdr[] = {HDR(HDR_DELIVERY_COUNT, count),
                               HDR(HDR_ORIGINAL_ID, original_id),
                               {HDR_TRACEPARENT, trace, TRACEPARENT_LEN}};
  bool traced = trace != NULL;
  entry_fields(e, traced ? COPY_HEADERS_TRACED : COPY_HEADERS, hdr, traced ? 3 : 2, put_arg, a);
}

void outcome_retry_copy(struct txn *t, const char *retry_key, const struct entry *e,
                        long long deliveries, const char *original_id) {
  struct bk_args *a = next(t);
  bk_args_str(a, "XADD");
  bk_args_str(a, retry_key);
  bk_args_str(a, "*");
  retry_fields(a, e, own_printf(t, "%lld", deliveries), original_id, own_trace(t, e));
}

int outcome_retry_fields(struct bk_args *a, const struct entry *e, const char *count,
                         const char *original_id, char trace[TRACEPARENT_LEN + 1]) {
  int before = a->argc;
  retry_fields(a, e, count, original_id, copy_trace(e, trace) ? trace : NULL);
  return a->argc - before;
}

void outcome_dead_letter(struct txn *t, const struct handler_spec *spec, const struct entry *e,
                         const char *original_id, const char *reason, const char *error,
                         size_t error_len, long long deliveries, uint64_t wall_ms) {
  static const char *const provenance[] = {
      HDR_DL_STREAM, HDR_DL_GROUP, HDR_DL_ID,   HDR_DL_DELIVERIES, HDR_DL_HANDLER,
      HDR_DL_REASON, HDR_DL_ERROR, HDR_DL_TIME, HDR_DL_CUT,        NULL};
  static const char *const provenance_traced[] = {
      HDR_DL_STREAM,  HDR_DL_GROUP,    HDR_DL_ID,    HDR_DL_DELIVERIES,
      HDR_DL_HANDLER, HDR_DL_REASON,   HDR_DL_ERROR, HDR_DL_TIME,
      HDR_DL_CUT,     HDR_TRACEPARENT, NULL};
  const char *trace = own_trace(t, e);
  bool traced = trace != NULL;
  struct bk_args *a = next(t);
  bk_args_str(a, "XADD");
  bk_args_str(a, spec->dead_letter);
  if (spec->dead_letter_max_len > 0) { /* the stream keeps its newest N dead letters */
    bk_args_str(a, "MAXLEN");
    bk_args_str(a, own_printf(t, "%d", spec->dead_letter_max_len));
  }
  bk_args_str(a, "*");
  const char *count = own_printf(t, "%lld", deliveries);
  const char *time = own_printf(t, "%lld", (long long)wall_ms);
  struct header hdr[11] = {
      HDR(HDR_DL_STREAM, spec->stream),
      HDR(HDR_DL_GROUP, spec->group),
      HDR(HDR_DL_ID, original_id),
      HDR(HDR_DL_DELIVERIES, count),
      HDR(HDR_DL_HANDLER, handler_name_file(spec->path)),
      HDR(HDR_DL_REASON, reason),
      {HDR_DL_ERROR, error ? error : "", error ? error_len : 0},
      HDR(HDR_DL_TIME, time),
  };
  size_t nhdr = 8;
  /* read cut (entry.h): the fields below are cut, and this says so */
  if (e->entry_size) {
    const char *size = own_printf(t, "%lld", (long long)e->entry_size);
    hdr[nhdr++] = (struct header)HDR(HDR_DL_CUT, size);
  }
  /* a replayed dead letter gets fresh provenance */
  if (traced) hdr[nhdr++] = (struct header){HDR_TRACEPARENT, trace, TRACEPARENT_LEN};
  entry_fields(e, traced ? provenance_traced : provenance, hdr, nhdr, put_arg, a);
}

/* The delay-set member: netstrings ("<len>:<bytes>") of the entry's id, then
 * its fields with delivery-count and original-id rewritten (retry-group
 * dropped). The id keeps members unique; the sweep script (scripts.h)
 * decodes the rest. */
/* put_fn of the member: a netstring at p (sized by a first pass with p NULL). */
struct netstrings {
  char *p;
  size_t len;
};

static void put_netstring(void *ctx, const char *s, size_t n) {
  struct netstrings *ns = ctx;
  char head[24];
  int h = snprintf(head, sizeof head, "%zu:", n);
  if (ns->p) {
    memcpy(ns->p + ns->len, head, (size_t)h);
    memcpy(ns->p + ns->len + h, s, n);
  }
  ns->len += (size_t)h + n;
}

static char *delay_member(const struct entry *e, const char *deliveries, const char *original_id,
                          size_t *len_out) {
  char child[TRACEPARENT_LEN + 1]; /* made once: both passes write the same bytes */
  bool traced = copy_trace(e, child);
  const struct header hdr[] = {HDR(HDR_DELIVERY_COUNT, deliveries),
                               HDR(HDR_ORIGINAL_ID, original_id),
                               {HDR_TRACEPARENT, child, TRACEPARENT_LEN}};
  struct netstrings ns = {NULL, 0};
  for (int pass = 0; pass < 2; pass++) {
    put_netstring(&ns, e->id, strlen(e->id));
    entry_fields(e, traced ? COPY_HEADERS_TRACED : COPY_HEADERS, hdr, traced ? 3 : 2, put_netstring,
                 &ns);
    if (pass == 0) {
      if ((ns.p = malloc(ns.len ? ns.len : 1)) == NULL) return NULL;
      ns.len = 0;
    }
  }
  *len_out = ns.len;
  return ns.p;
}

char *outcome_retry_key(const struct handler_spec *spec) {
  size_t n = strlen(spec->stream) + strlen(spec->group) + sizeof ":retry:";
  char *k = malloc(n);
  if (k) snprintf(k, n, "%s:retry:%s", spec->stream, spec->group);
  return k;
}

char *outcome_delay_key(const struct handler_spec *spec) {
  size_t n = strlen(spec->stream) + strlen(spec->group) + sizeof ":delayed:";
  char *k = malloc(n);
  if (k) snprintf(k, n, "%s:delayed:%s", spec->stream, spec->group);
  return k;
}

void outcome_delay(struct txn *t, const struct handler_spec *spec, const struct entry *e,
                   long long deliveries, const char *original_id, uint64_t due_wall_ms) {
  t->delays = true;
  size_t len = 0;
  const char *member =
      own(t, delay_member(e, own_printf(t, "%lld", deliveries), original_id, &len));
  struct bk_args *a = next(t);
  bk_args_str(a, "ZADD");
  bk_args_str(a, own(t, outcome_delay_key(spec)));
  bk_args_str(a, own_printf(t, "%lld", (long long)due_wall_ms));
  bk_args_add(a, member, len);
}

void outcome_restamp(struct txn *t, const struct handler_spec *spec, const char *key,
                     const struct entry *e, int64_t delay_ms) {
  /* Idle min_idle - delay now means claimable in delay ms. JUSTID: the
   * delivery that asked for the delay has been counted already. */
  int64_t idle = spec->min_idle_ms - delay_ms;
  struct bk_args *a = next(t);
  bk_args_str(a, "XCLAIM");
  bk_args_str(a, key);
  bk_args_str(a, spec->group);
  bk_args_str(a, spec->consumer);
  bk_args_str(a, "0");
  bk_args_str(a, e->id);
  bk_args_str(a, "IDLE");
  bk_args_str(a, own_printf(t, "%lld", (long long)(idle > 0 ? idle : 0)));
  bk_args_str(a, "JUSTID");
}
