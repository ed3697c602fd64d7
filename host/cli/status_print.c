/* status_print: `luastream status`'s output (status_print.h). */
#include "status_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

void status_print_table(const struct status_query *q, int every_s, bool needs) {
  char when[64];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  printf("%s at %s", q->c->b->name, when);
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
  table_print(&t);
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
  putchar('\n');
  if (!needs) {
    printf("nothing needs attention\n");
    return;
  }
  printf("needs attention:\n");
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

static void json_str(const char *s) {
  if (s == NULL) {
    fputs("null", stdout);
    return;
  }
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      printf("\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  putchar('"');
}

static void json_num(long long n) {
  if (n < 0)
    fputs("null", stdout);
  else
    printf("%lld", n);
}

static void json_key(const struct st_key *k, bool with_stream) {
  putchar('{');
  if (with_stream) {
    fputs("\"stream\":", stdout);
    json_str(k->key);
    putchar(',');
  }
  printf("\"exists\":%s,\"group_exists\":%s,\"length\":", k->exists ? "true" : "false",
         k->group_exists ? "true" : "false");
  json_num(k->exists ? k->length : -1);
  fputs(",\"lag\":", stdout);
  json_num(k->group_exists ? k->lag : -1);
  fputs(",\"pending\":", stdout);
  json_num(k->group_exists ? k->pending : -1);
  fputs(",\"oldest_pending_idle_ms\":", stdout);
  json_num(k->group_exists && k->pending ? k->oldest_idle_ms : -1);
  fputs(",\"lag_age_ms\":", stdout);
  json_num(k->lag_age_ms);
  fputs(",\"oldest_pending_age_ms\":", stdout);
  json_num(k->oldest_age_ms);
  fputs(",\"last_delivered_id\":", stdout);
  json_str(k->group_exists ? k->delivered : NULL);
  fputs(",\"error\":", stdout);
  json_str(k->error);
  putchar('}');
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

void status_print_json(const struct status_query *q, bool needs) {
  printf("{\"server\":");
  json_str(q->c->b->name);
  printf(",\"time_ms\":%llu,\"attention\":%s,\"groups\":[",
         (unsigned long long)clock_wall(q->c->clock), needs ? "true" : "false");
  for (size_t i = 0; i < q->ngroups; i++) {
    const struct st_group *g = &q->groups[i];
    printf("%s{\"stream\":", i ? "," : "");
    json_str(g->stream);
    fputs(",\"group\":", stdout);
    json_str(g->group);
    fputs(",\"handlers\":", stdout);
    json_str(g->handlers);
    fputs(",\"min_idle_ms\":", stdout);
    json_num(g->min_idle_ms);
    printf(",\"stall_after_ms\":%lld", status_stall_after(g->min_idle_ms));
    printf(",\"length\":");
    json_num(g->src.exists ? g->src.length : -1);
    /* over the stream and its retry stream, as the metrics have them */
    fputs(",\"lag_age_ms\":", stdout);
    json_num(group_age(&g->src, g->src.lag_age_ms, &g->retry, g->retry.lag_age_ms));
    fputs(",\"oldest_pending_age_ms\":", stdout);
    json_num(group_age(&g->src, g->src.oldest_age_ms, &g->retry, g->retry.oldest_age_ms));
    fputs(",\"source\":", stdout);
    json_key(&g->src, false);
    fputs(",\"retry\":", stdout);
    if (g->group)
      json_key(&g->retry, true);
    else
      fputs("null", stdout);
    fputs(",\"delayed\":", stdout);
    json_num(g->group && g->src.exists ? g->delayed : -1);
    fputs(",\"dead_letter\":", stdout);
    if (g->dead_letter) {
      fputs("{\"stream\":", stdout);
      json_str(g->dead_letter);
      fputs(",\"length\":", stdout);
      json_num(g->dead_letters);
      putchar('}');
    } else {
      fputs("null", stdout);
    }
    fputs(",\"consumers\":[", stdout);
    for (size_t j = 0; j < g->nconsumers; j++) {
      const struct st_consumer *c = &g->consumers[j];
      printf("%s{\"name\":", j ? "," : "");
      json_str(c->name);
      printf(",\"pending\":%lld,\"idle_ms\":", c->pending);
      json_num(c->idle_ms);
      fputs(",\"lease_renewed_ms_ago\":", stdout);
      json_num(c->lease_read ? status_lease_age(c->lease_ttl_ms) : -1);
      printf(
          ",\"stalled\":%s}",
          c->lease_read && status_consumer_stalled(c->pending, c->lease_ttl_ms) ? "true" : "false");
    }
    fputs("],\"attention\":[", stdout);
    for (size_t j = 0; j < g->natt; j++) {
      printf("%s{\"kind\":\"%s\",\"message\":", j ? "," : "", g->att[j].kind);
      json_str(g->att[j].text);
      putchar('}');
    }
    fputs("]}", stdout);
  }
  printf("]}\n");
}
