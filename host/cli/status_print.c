/* status_print: `luastream status`'s output (status_print.h). */
#include "status_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console_json.h"
#include "grow.h"

/* Names come from the server: control characters are shown as '?' so that a
 * name cannot move the terminal's cursor. */
/* A heap copy of s for a cell. */
static char *copy(const char *s) { return status_query_text("%s", s); }

static char *cell(const char *s) {
  char *c = copy(s ? s : "-");
  for (char *p = c; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  return c;
}

static char *cell_num(long long n) { return n < 0 ? copy("?") : status_query_text("%lld", n); }

static char *cell_ms(long long ms) {
  char buf[32];
  return copy(ms < 0 ? "-" : status_format_ms(ms, buf, sizeof buf));
}

/* How long the oldest entry not yet delivered has waited: "-" when none
 * waits (or no group), "?" when it cannot be told. */
static char *cell_lag_age(const struct st_key *k) {
  if (!k->group_exists || (k->next_id[0] == '\0' && !k->next_unknown)) return copy("-");
  return k->lag_age_ms < 0 ? copy("?") : cell_ms(k->lag_age_ms);
}

/* The oldest pending entry: its age ("?" when it cannot be told), then how
 * long since it was last delivered or re-stamped ("40s (idle 2s)"); "-" when
 * nothing is pending. */
static char *cell_oldest(const struct st_key *k) {
  char age[32], idle[32];
  if (k->pending <= 0 || k->oldest_idle_ms < 0) return copy("-");
  return status_query_text(
      "%s (idle %s)",
      k->oldest_age_ms < 0 ? "?" : status_format_ms(k->oldest_age_ms, age, sizeof age),
      status_format_ms(k->oldest_idle_ms, idle, sizeof idle));
}

#define TABLE_COLS 9

struct table {
  int ncols;
  const char *head[TABLE_COLS];
  bool right[TABLE_COLS];
  char **cells; /* rows * ncols */
  size_t nrows, cap;
};

static void table_row(struct table *t, char **row) {
  size_t need = (t->nrows + 1) * (size_t)t->ncols;
  char **cells = grow(t->cells, &t->cap, need, sizeof *cells, 16 * (size_t)t->ncols);
  if (cells == NULL) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
  t->cells = cells;
  memcpy(t->cells + t->nrows * (size_t)t->ncols, row, (size_t)t->ncols * sizeof *row);
  t->nrows++;
}

static void table_print(struct table *t) {
  size_t width[TABLE_COLS];
  for (int j = 0; j < t->ncols; j++) {
    width[j] = strlen(t->head[j]);
    for (size_t i = 0; i < t->nrows; i++) {
      size_t w = strlen(t->cells[i * (size_t)t->ncols + (size_t)j]);
      if (w > width[j]) width[j] = w;
    }
  }
  for (size_t i = 0; i <= t->nrows; i++) {
    for (int j = 0; j < t->ncols; j++) {
      const char *s = i == 0 ? t->head[j] : t->cells[(i - 1) * (size_t)t->ncols + (size_t)j];
      bool last = j == t->ncols - 1;
      if (t->right[j])
        printf("%*s%s", (int)width[j], s, last ? "" : "  ");
      else if (last)
        printf("%s", s);
      else
        printf("%-*s  ", (int)width[j], s);
    }
    putchar('\n');
  }
  for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
}

/* A Unix ms time as UTC text, "-" for none. */
static char *cell_utc(long long ms) {
  char buf[64];
  return ms > 0 ? copy(status_format_utc(ms, buf, sizeof buf)) : copy("-");
}

/* The ticker's name without its lease identity ("<consumer> <token> <pid>
 * <machine>": the consumer). */
static char *cell_host(const char *owner) {
  if (owner == NULL) return copy("-");
  size_t n = strcspn(owner, " ");
  return status_query_text("%.*s", (int)n, owner);
}

static void print_schedules(const struct status_query *q) {
  if (q->nschedules == 0) return;
  struct table t = {7,
                    {"SCHEDULE", "HANDLERS", "WHEN", "LAST TICK", "OUTCOME", "RAN ON", "NEXT TICK"},
                    {false, false, false, false, false, false, false},
                    NULL,
                    0,
                    0};
  for (size_t i = 0; i < q->nschedules; i++) {
    const struct st_schedule *s = &q->schedules[i];
    char *row[7] = {cell(s->name),
                    cell(s->handlers),
                    cell(s->when),
                    !s->read ? copy("?") : cell_utc(s->last_tick),
                    s->error ? copy("?") : cell(s->last_outcome ? s->last_outcome : "-"),
                    cell_host(s->last_host),
                    cell_utc(s->next_tick)};
    table_row(&t, row);
  }
  if (q->ngroups) putchar('\n');
  table_print(&t);
  for (size_t i = 0; i < q->nschedules; i++) {
    const struct st_schedule *s = &q->schedules[i];
    char *name = cell(s->name);
    if (s->error) {
      char *text = cell(s->error);
      printf("  schedule %s: cannot read %s: %s\n", name, s->key, text);
      free(text);
    }
    free(name);
  }
}

void status_print_table(const struct status_query *q, int every_s, bool needs) {
  char when[64];
  printf("%s at %s", q->c->b->name,
         status_format_utc((long long)time(NULL) * 1000, when, sizeof when));
  if (every_s > 0) printf(" (every %ds; Ctrl-C stops)", every_s);
  printf("\n\n");
  struct table t = {9,
                    {"STREAM", "GROUP", "LENGTH", "LAG", "PENDING", "LAG AGE", "OLDEST PENDING",
                     "DELAYED", "DEAD LETTERS"},
                    {false, false, true, true, true, true, true, true, true},
                    NULL,
                    0,
                    0};
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct st_group *g = &q->groups[i];
    bool have = g->src.exists && g->src.group_exists;
    char *row[9] = {cell(g->stream),
                    cell(g->group),
                    g->src.exists ? cell_num(g->src.length) : copy(g->src.error ? "?" : "missing"),
                    have ? cell_num(g->src.lag) : copy("-"),
                    have ? cell_num(g->src.pending) : copy("-"),
                    have ? cell_lag_age(&g->src) : copy("-"),
                    have ? cell_oldest(&g->src) : copy("-"),
                    g->group && g->src.exists ? cell_num(g->delayed) : copy("-"),
                    g->dead_letters >= 0 ? cell_num(g->dead_letters) : copy("-")};
    table_row(&t, row);
    if (g->retry.exists && g->retry.group_exists) {
      char *retry[9] = {cell(g->retry.key),
                        cell(g->group),
                        cell_num(g->retry.length),
                        cell_num(g->retry.lag),
                        cell_num(g->retry.pending),
                        cell_lag_age(&g->retry),
                        cell_oldest(&g->retry),
                        copy(""),
                        copy("")};
      table_row(&t, retry);
    }
  }
  if (q->ngroups || !q->nschedules) /* a directory of schedules only: their table alone */
    table_print(&t);
  else
    free(t.cells);
  struct table ct = {6,
                     {"STREAM", "GROUP", "CONSUMER", "PENDING", "IDLE", "LEASE RENEWED"},
                     {false, false, false, true, true, true},
                     NULL,
                     0,
                     0};
  char buf[32];
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct st_group *g = &q->groups[i];
    for (size_t j = 0; j < g->nconsumers; j++) {
      const struct st_consumer *c = &g->consumers[j];
      long long age = c->lease_read ? status_lease_age(c->lease_ttl_ms) : -1;
      char *row[6] = {cell(g->stream),
                      cell(g->group),
                      cell(c->name),
                      cell_num(c->pending),
                      cell_ms(c->idle_ms),
                      !c->lease_read ? copy("?")
                      : age < 0
                          ? copy("none")
                          : status_query_text("%s ago", status_format_ms(age, buf, sizeof buf))};
      table_row(&ct, row);
    }
  }
  if (ct.nrows) {
    putchar('\n');
    table_print(&ct);
  } else {
    free(ct.cells);
  }
  print_schedules(q);
  putchar('\n');
  bool any_paused = false;
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct st_group *g = &q->groups[i];
    char *text = status_pause_text(&g->pause);
    if (text == NULL) continue;
    if (!any_paused) printf("paused:\n");
    any_paused = true;
    char *where = cell(g->stream), *group = cell(g->group), *shown = cell(text);
    printf("  %s %s: %s\n", where, group, shown);
    free(where), free(group), free(shown), free(text);
  }
  if (any_paused) putchar('\n');
  if (!needs) {
    printf("nothing needs attention\n");
    return;
  }
  printf("needs attention:\n");
  for (size_t i = 0; i < q->nschedules; i++) {
    if (q->schedules[i].attention == NULL) continue;
    char *text = cell(q->schedules[i].attention);
    printf("  %s\n", text);
    free(text);
  }
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct st_group *g = &q->groups[i];
    for (size_t j = 0; j < g->natt; j++) {
      char *where = cell(g->stream), *group = cell(g->group), *text = cell(g->att[j].text);
      if (g->group)
        printf("  %s %s: %s\n", where, group, text);
      else
        printf("  %s\n", text); /* a stream without group: the text names it */
      free(where);
      free(group);
      free(text);
    }
  }
}

/* Names come from Redis and may hold any bytes: the console's JSON text
 * (valid UTF-8 always, other bytes and control characters as the text \xNN,
 * no markup characters). */
static void json_num(FILE *out, long long n) {
  if (n < 0)
    fputs("null", out);
  else
    fprintf(out, "%lld", n);
}

static void json_key(FILE *out, const struct st_key *k, bool with_stream) {
  fputc('{', out);
  if (with_stream) {
    fputs("\"stream\":", out);
    cj_str(out, k->key);
    fputc(',', out);
  }
  fprintf(out, "\"exists\":%s,\"group_exists\":%s,\"length\":", k->exists ? "true" : "false",
          k->group_exists ? "true" : "false");
  json_num(out, k->exists ? k->length : -1);
  fputs(",\"lag\":", out);
  json_num(out, k->group_exists ? k->lag : -1);
  fputs(",\"pending\":", out);
  json_num(out, k->group_exists ? k->pending : -1);
  fputs(",\"oldest_pending_idle_ms\":", out);
  json_num(out, k->group_exists && k->pending ? k->oldest_idle_ms : -1);
  fputs(",\"lag_age_ms\":", out);
  json_num(out, k->lag_age_ms);
  fputs(",\"oldest_pending_age_ms\":", out);
  json_num(out, k->oldest_age_ms);
  fputs(",\"last_delivered_id\":", out);
  cj_str(out, k->group_exists ? k->delivered : NULL);
  fputs(",\"error\":", out);
  cj_str(out, k->error);
  fputc('}', out);
}

/* The larger of two ages, -1 (unknown) only when both are. */
/* The group's age of the two keys' (src, retry): the larger of those whose
 * group exists; -1 (unknown) when one of those is unknown. */
static long long group_age(const struct st_key *src, long long a, const struct st_key *retry,
                           long long b) {
  if ((src->group_exists && a < 0) || (retry->group_exists && b < 0)) return -1;
  if (!retry->group_exists) return src->group_exists ? a : -1;
  if (!src->group_exists) return b;
  return a > b ? a : b;
}

void status_print_json(FILE *out, const struct status_query *q, bool needs) {
  fprintf(out, "{\"server\":");
  cj_str(out, q->c->b->name);
  fprintf(out, ",\"time_ms\":%llu,\"attention\":%s,\"groups\":[",
          (unsigned long long)clock_wall(q->c->clock), needs ? "true" : "false");
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct st_group *g = &q->groups[i];
    fprintf(out, "%s{\"stream\":", i ? "," : "");
    cj_str(out, g->stream);
    fputs(",\"group\":", out);
    cj_str(out, g->group);
    fputs(",\"handlers\":", out);
    cj_str(out, g->handlers);
    fputs(",\"min_idle_ms\":", out);
    json_num(out, g->min_idle_ms);
    fprintf(out, ",\"stall_after_ms\":%lld", status_stall_after(g->min_idle_ms));
    fprintf(out, ",\"length\":");
    json_num(out, g->src.exists ? g->src.length : -1);
    /* over the stream and its retry stream, as the metrics have them */
    fputs(",\"lag_age_ms\":", out);
    json_num(out, group_age(&g->src, g->src.lag_age_ms, &g->retry, g->retry.lag_age_ms));
    fputs(",\"oldest_pending_age_ms\":", out);
    json_num(out, group_age(&g->src, g->src.oldest_age_ms, &g->retry, g->retry.oldest_age_ms));
    fputs(",\"source\":", out);
    json_key(out, &g->src, false);
    fputs(",\"retry\":", out);
    if (g->group)
      json_key(out, &g->retry, true);
    else
      fputs("null", out);
    fputs(",\"delayed\":", out);
    json_num(out, g->group && g->src.exists ? g->delayed : -1);
    fputs(",\"dead_letter\":", out);
    if (g->dead_letter) {
      fputs("{\"stream\":", out);
      cj_str(out, g->dead_letter);
      fputs(",\"length\":", out);
      json_num(out, g->dead_letters);
      fputc('}', out);
    } else {
      fputs("null", out);
    }
    fputs(",\"pause\":", out);
    status_pause_json(out, &g->pause);
    fputs(",\"consumers\":[", out);
    for (size_t j = 0; j < g->nconsumers; j++) {
      const struct st_consumer *c = &g->consumers[j];
      fprintf(out, "%s{\"name\":", j ? "," : "");
      cj_str(out, c->name);
      fprintf(out, ",\"pending\":%lld,\"idle_ms\":", c->pending);
      json_num(out, c->idle_ms);
      fputs(",\"lease_renewed_ms_ago\":", out);
      json_num(out, c->lease_read ? status_lease_age(c->lease_ttl_ms) : -1);
      fprintf(
          out, ",\"stalled\":%s}",
          c->lease_read && status_consumer_stalled(c->pending, c->lease_ttl_ms) ? "true" : "false");
    }
    fputs("],\"attention\":[", out);
    for (size_t j = 0; j < g->natt; j++) {
      fprintf(out, "%s{\"kind\":\"%s\",\"message\":", j ? "," : "", g->att[j].kind);
      cj_str(out, g->att[j].text);
      fputc('}', out);
    }
    fputs("]}", out);
  }
  fputs("],\"schedules\":[", out);
  for (size_t i = 0; i < q->nschedules; i++) {
    const struct st_schedule *s = &q->schedules[i];
    fprintf(out, "%s{\"name\":", i ? "," : "");
    cj_str(out, s->name);
    fputs(",\"key\":", out);
    cj_str(out, s->key);
    fputs(",\"handlers\":", out);
    cj_str(out, s->handlers);
    fputs(",\"when\":", out);
    cj_str(out, s->when);
    fputs(",\"last_tick_ms\":", out);
    json_num(out, s->last_tick);
    fputs(",\"last_run_at_ms\":", out);
    json_num(out, s->last_at);
    fputs(",\"last_outcome\":", out);
    cj_str(out, s->last_outcome);
    fputs(",\"last_host\":", out);
    cj_str(out, s->last_host);
    fputs(",\"last_error\":", out);
    cj_str(out, s->last_error);
    fputs(",\"next_tick_ms\":", out);
    json_num(out, s->next_tick);
    fputs(",\"runs\":", out);
    json_num(out, s->runs);
    fputs(",\"errors\":", out);
    json_num(out, s->errors);
    fputs(",\"error\":", out);
    cj_str(out, s->error);
    fputs(",\"attention\":", out);
    cj_str(out, s->attention);
    fputc('}', out);
  }
  fprintf(out, "]}\n");
}
