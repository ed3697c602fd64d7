/* handback: giving back the entries a stopping subscription holds (see
 * handback.h). */
#include "handback.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "outcome.h"
#include "policy.h"
#include "scripts.h"
#include "trace.h"

struct request {
  /* the names logged with the answer, copied (buf): a reload may free the
   * spec before Redis answers */
  const char *name, *stream, *group, *consumer;
  bool retry;   /* through the retry stream (a `new` subscription) */
  bool started; /* abandoned at the deadline, not read and never started */
  size_t asked; /* entries sent */
  handback_answered_fn *answered;
  void *data;
  char buf[];
};

/* The entries the script gave back: an integer (SCRIPT_HANDBACK_RETRY) or
 * one per key (SCRIPT_HANDBACK); -1 for any other reply. */
static long long given_of(const struct request *q, const bk_reply *r) {
  if (r && q->retry && r->type == BK_INTEGER) return r->integer;
  if (r == NULL || q->retry || r->type != BK_ARRAY) return -1;
  long long n = 0;
  for (size_t i = 0; i < r->elements; i++)
    if (r->element[i]->type == BK_INTEGER) n += r->element[i]->integer;
  return n;
}

/* Logged once Redis answered: what was given back, or that nothing was.
 * Those not given back were another consumer's by then, or deleted. */
static void answered(void *data, const bk_reply *r, const char *err) {
  struct request *q = data;
  const char *which = q->started ? "abandoned at the shutdown deadline" : "read but not started";
  char asked[24], given[24];
  snprintf(asked, sizeof asked, "%zu", q->asked);
  long long n = given_of(q, r);
  if (n >= 0) {
    snprintf(given, sizeof given, "%lld", n);
    log_line(LOG_INFO, q->name,
             q->started ? "entries abandoned at the shutdown deadline given back"
                        : "entries read but not started given back",
             "stream", q->stream, "group", q->group, "consumer", q->consumer, LOG_NUMBER "entries",
             given, LOG_NUMBER "asked", n == (long long)q->asked ? NULL : asked, NULL);
  } else {
    char why[256], msg[160];
    bk_reply_text(r, err, why, sizeof why);
    snprintf(msg, sizeof msg, "giving back entries %s failed: %s", which,
             q->retry ? "they stay pending for this consumer name" : "they wait min_idle");
    log_line(LOG_WARN, q->name, msg, "stream", q->stream, "group", q->group, "consumer",
             q->consumer, LOG_NUMBER "entries", asked, "error", why, NULL);
  }
  q->answered(q->data);
  free(q);
}

/* SCRIPT_HANDBACK's arguments: the ids of each key. */
static void claim_args(struct bk_args *a, const struct entry *list, bool started) {
  bk_args_str(a, started ? "1" : "0");
  for (unsigned char key = 0; key < 2; key++) {
    long long n = 0;
    for (const struct entry *e = list; e; e = e->next) n += e->key == key;
    bk_args_num(a, n);
    for (const struct entry *e = list; e; e = e->next)
      if (e->key == key) bk_args_str(a, e->id);
  }
}

/* The strings SCRIPT_HANDBACK_RETRY's arguments point into, per entry. */
struct copy_strings {
  char count[24];
  char nfields[24];
  char trace[TRACEPARENT_LEN + 1];
};

/* SCRIPT_HANDBACK_RETRY's arguments: each entry's key, id and copy. The
 * count is what policy_deliveries_before says the next run sees: the copy
 * read back from the retry stream then says the same (plus this delivery
 * when it ran). NULL when out of memory. */
static struct copy_strings *retry_args(struct bk_args *a, const struct entry *list, bool started) {
  size_t n = 0;
  for (const struct entry *e = list; e; e = e->next) n++;
  struct copy_strings *c = calloc(n ? n : 1, sizeof *c);
  if (c == NULL) return NULL;
  size_t i = 0;
  for (const struct entry *e = list; e; e = e->next, i++) {
    long long before =
        policy_deliveries_before(READ_NEW, e->deliveries, entry_carried_deliveries(e));
    snprintf(c[i].count, sizeof c[i].count, "%lld", before + (started ? 1 : 0));
    bk_args_str(a, e->key == 0 ? "1" : "2");
    bk_args_str(a, e->id);
    int at = a->argc;
    bk_args_add(a, "", 0); /* the number of fields, known once they are added */
    int nfields = outcome_retry_fields(a, e, c[i].count, entry_source_id(e), c[i].trace);
    snprintf(c[i].nfields, sizeof c[i].nfields, "%d", nfields);
    a->argv[at] = c[i].nfields;
    a->argvlen[at] = strlen(c[i].nfields);
  }
  return c;
}

bool handback_send(broker *b, bk_conn *cmd, const struct handler_spec *spec, const char *retry_key,
                   const struct entry *list, bool started, handback_answered_fn *on_answered,
                   void *data) {
  if (list == NULL || cmd == NULL) return false;
  const char *names[4] = {spec->name, spec->stream, spec->group, spec->consumer};
  size_t len[4], total = 0;
  for (int i = 0; i < 4; i++) {
    if (names[i] == NULL) names[i] = "";
    total += (len[i] = strlen(names[i])) + 1;
  }
  struct request *q = malloc(sizeof *q + total);
  if (q == NULL) return false;
  size_t n = 0;
  for (const struct entry *e = list; e; e = e->next) n++;
  *q = (struct request){.retry = spec->read == READ_NEW,
                        .started = started,
                        .asked = n,
                        .answered = on_answered,
                        .data = data};
  const char **to[4] = {&q->name, &q->stream, &q->group, &q->consumer};
  char *at = q->buf;
  for (int i = 0; i < 4; i++) {
    memcpy(at, names[i], len[i] + 1);
    *to[i] = at;
    at += len[i] + 1;
  }
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, q->retry ? SCRIPT_HANDBACK_RETRY : SCRIPT_HANDBACK);
  bk_args_str(&a, "2");
  bk_args_str(&a, spec->stream);
  bk_args_str(&a, retry_key);
  bk_args_str(&a, spec->group);
  bk_args_str(&a, spec->consumer);
  struct copy_strings *strings = NULL;
  bool built = true;
  if (q->retry)
    built = (strings = retry_args(&a, list, started)) != NULL;
  else
    claim_args(&a, list, started);
  bool sent = built && bk_command(b, cmd, a.argc, a.argv, a.argvlen, answered, q) == 0;
  free(strings);
  bk_args_free(&a);
  if (!sent) free(q);
  return sent;
}
