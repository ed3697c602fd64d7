/* metrics: the registry and the exposition; see metrics.h. */
#include "metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

struct series {
  struct metric m;
  char *values[METRIC_LABELS_MAX];
  struct series *next;
};

struct metric_family {
  char *name, *help;
  enum metric_type type;
  int nlabels;
  char *labels[METRIC_LABELS_MAX];
  double bounds[METRIC_BUCKETS_MAX];
  int nbounds;
  struct series *series, **tail; /* in the order they were made */
  struct metric_family *next;
};

static struct metric_family *families, **families_tail = &families;
static unsigned generation;
static struct collector {
  metrics_collect_fn *fn;
  void *data;
} * collectors;
static size_t ncollectors, collectors_cap;

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void metrics_clear(struct metric_family *f) {
  if (f == NULL) return;
  while (f->series) {
    struct series *s = f->series;
    f->series = s->next;
    for (int i = 0; i < f->nlabels; i++) free(s->values[i]);
    free(s);
  }
  f->tail = &f->series;
}

static void family_free(struct metric_family *f) {
  metrics_clear(f);
  for (int i = 0; i < f->nlabels; i++) free(f->labels[i]);
  free(f->name);
  free(f->help);
  free(f);
}

struct metric_family *metrics_family(const char *name, const char *help, enum metric_type type,
                                     int nlabels, const char *const *labels, const double *bounds,
                                     int nbounds) {
  for (struct metric_family *f = families; f; f = f->next)
    if (strcmp(f->name, name) == 0) return f;
  if (nlabels > METRIC_LABELS_MAX || nbounds > METRIC_BUCKETS_MAX) return NULL;
  struct metric_family *f = calloc(1, sizeof *f);
  if (f == NULL) return NULL;
  f->type = type;
  f->nlabels = nlabels;
  f->nbounds = type == METRIC_HISTOGRAM ? nbounds : 0;
  f->tail = &f->series;
  bool ok = (f->name = dup(name)) != NULL && (f->help = dup(help)) != NULL;
  for (int i = 0; ok && i < nlabels; i++) ok = (f->labels[i] = dup(labels[i])) != NULL;
  if (!ok) {
    family_free(f);
    return NULL;
  }
  for (int i = 0; i < f->nbounds; i++) f->bounds[i] = bounds[i];
  *families_tail = f;
  families_tail = &f->next;
  return f;
}

struct metric *metrics_series(struct metric_family *f, const char *const *values) {
  if (f == NULL) return NULL;
  for (struct series *s = f->series; s; s = s->next) {
    int i = 0;
    while (i < f->nlabels && strcmp(s->values[i], values[i]) == 0) i++;
    if (i == f->nlabels) return &s->m;
  }
  struct series *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  for (int i = 0; i < f->nlabels; i++)
    if ((s->values[i] = dup(values[i])) == NULL) {
      for (int k = 0; k < i; k++) free(s->values[k]);
      free(s);
      return NULL;
    }
  s->m.family = f;
  *f->tail = s;
  f->tail = &s->next;
  return &s->m;
}

void metrics_observe(struct metric *m, double v) {
  if (m == NULL) return;
  const struct metric_family *f = m->family;
  m->value += v;
  m->count++;
  for (int i = 0; i < f->nbounds; i++)
    if (v <= f->bounds[i]) {
      m->bucket[i]++;
      return;
    }
}

int metrics_add_collector(metrics_collect_fn *fn, void *data) {
  struct collector *v = grow(collectors, &collectors_cap, ncollectors + 1, sizeof *v, 8);
  if (v == NULL) return -1;
  collectors = v;
  collectors[ncollectors++] = (struct collector){fn, data};
  return 0;
}

void metrics_remove_collector(metrics_collect_fn *fn, void *data) {
  for (size_t i = 0; i < ncollectors; i++)
    if (collectors[i].fn == fn && collectors[i].data == data) {
      collectors[i] = collectors[--ncollectors];
      break;
    }
  if (ncollectors == 0) { /* nothing kept for a registry no one uses */
    free(collectors);
    collectors = NULL;
    collectors_cap = 0;
  }
}

void metrics_reset(void) {
  while (families) {
    struct metric_family *f = families;
    families = f->next;
    family_free(f);
  }
  families_tail = &families;
  generation++;
}

unsigned metrics_generation(void) { return generation; }

/* ---- the page ---- */

struct page {
  char *buf;
  size_t len, cap;
  bool failed;
};

static void put(struct page *p, const char *s, size_t n) {
  if (p->failed) return;
  char *b = grow(p->buf, &p->cap, p->len + n + 1, 1, 8192);
  if (b == NULL) {
    p->failed = true;
    return;
  }
  p->buf = b;
  memcpy(p->buf + p->len, s, n);
  p->len += n;
  p->buf[p->len] = '\0';
}

static void puts_(struct page *p, const char *s) { put(p, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void putf(struct page *p, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(p, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A value as Prometheus reads it: integers without a fraction, others with
 * the fewest digits that read back the same, +Inf, -Inf, NaN. */
static void number_text(double v, char *out, size_t n) {
  if (isnan(v)) {
    snprintf(out, n, "NaN");
  } else if (isinf(v)) {
    snprintf(out, n, "%s", v > 0 ? "+Inf" : "-Inf");
  } else if (v == floor(v) && fabs(v) < 1e15) {
    snprintf(out, n, "%.0f", v);
  } else {
    for (int digits = 15; digits <= 17; digits++) {
      snprintf(out, n, "%.*g", digits, v);
      if (strtod(out, NULL) == v) break;
    }
  }
}

static void put_number(struct page *p, double v) {
  char tmp[32];
  number_text(v, tmp, sizeof tmp);
  puts_(p, tmp);
}

/* A help text: backslash and newline escaped. */
static void put_help(struct page *p, const char *s) {
  for (; *s; s++) {
    if (*s == '\\')
      puts_(p, "\\\\");
    else if (*s == '\n')
      puts_(p, "\\n");
    else
      put(p, s, 1);
  }
}

/* A label value: backslash, double quote and newline escaped. */
static void put_label_value(struct page *p, const char *s) {
  for (; *s; s++) {
    if (*s == '\\')
      puts_(p, "\\\\");
    else if (*s == '"')
      puts_(p, "\\\"");
    else if (*s == '\n')
      puts_(p, "\\n");
    else
      put(p, s, 1);
  }
}

/* name{labels[,extra="value"]} */
static void put_name(struct page *p, const struct metric_family *f, const char *suffix,
                     const struct series *s, const char *extra, const char *extra_value) {
  puts_(p, f->name);
  puts_(p, suffix);
  if (f->nlabels == 0 && extra == NULL) return;
  puts_(p, "{");
  for (int i = 0; i < f->nlabels; i++) {
    if (i) puts_(p, ",");
    puts_(p, f->labels[i]);
    puts_(p, "=\"");
    put_label_value(p, s->values[i]);
    puts_(p, "\"");
  }
  if (extra) {
    if (f->nlabels) puts_(p, ",");
    puts_(p, extra);
    puts_(p, "=\"");
    puts_(p, extra_value);
    puts_(p, "\"");
  }
  puts_(p, "}");
}

static void put_series(struct page *p, const struct metric_family *f, const struct series *s) {
  if (f->type != METRIC_HISTOGRAM) {
    put_name(p, f, "", s, NULL, NULL);
    puts_(p, " ");
    put_number(p, s->m.value);
    puts_(p, "\n");
    return;
  }
  uint64_t cumulative = 0;
  for (int i = 0; i < f->nbounds; i++) {
    char le[32];
    cumulative += s->m.bucket[i];
    number_text(f->bounds[i], le, sizeof le);
    put_name(p, f, "_bucket", s, "le", le);
    putf(p, " %llu\n", (unsigned long long)cumulative);
  }
  put_name(p, f, "_bucket", s, "le", "+Inf");
  putf(p, " %llu\n", (unsigned long long)s->m.count);
  put_name(p, f, "_sum", s, NULL, NULL);
  puts_(p, " ");
  put_number(p, s->m.value);
  puts_(p, "\n");
  put_name(p, f, "_count", s, NULL, NULL);
  putf(p, " %llu\n", (unsigned long long)s->m.count);
}

char *metrics_page(size_t *len) {
  for (size_t i = 0; i < ncollectors; i++) collectors[i].fn(collectors[i].data);
  static const char *const types[] = {"counter", "gauge", "histogram"};
  struct page p = {0};
  for (const struct metric_family *f = families; f; f = f->next) {
    if (f->series == NULL) continue;
    puts_(&p, "# HELP ");
    puts_(&p, f->name);
    puts_(&p, " ");
    put_help(&p, f->help);
    puts_(&p, "\n# TYPE ");
    puts_(&p, f->name);
    puts_(&p, " ");
    puts_(&p, types[f->type]);
    puts_(&p, "\n");
    for (const struct series *s = f->series; s; s = s->next) put_series(&p, f, s);
  }
  put(&p, "", 0);
  if (p.failed) {
    free(p.buf);
    return NULL;
  }
  *len = p.len;
  return p.buf;
}
