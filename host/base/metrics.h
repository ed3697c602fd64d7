/* metrics: the host's counters, gauges and histograms, and their page in the
 * Prometheus text exposition format (0.0.4), served on GET /metrics.
 *
 * A family has a name, help text, a type and label names; a series is one
 * set of label values of a family, made once (metrics_series) and then
 * updated through its pointer, so what a message costs is an add, not a
 * lookup. Values that are cheaper to read than to keep current (lanes in
 * use, memory) are set by the collectors just before the page is written.
 * The page is built from these values alone: a scrape sends nothing to
 * Redis. Process-wide and not locked, like the log: the loop thread only. */
#ifndef LUASTREAM_METRICS_H
#define LUASTREAM_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

#define METRIC_LABELS_MAX 4
#define METRIC_BUCKETS_MAX 16

struct metric {
  struct metric_family *family;
  double value;                        /* counter, gauge; histogram: the sum of what was observed */
  uint64_t count;                      /* histogram: observations */
  uint64_t bucket[METRIC_BUCKETS_MAX]; /* histogram: observations <= each bound (not cumulative) */
};

struct metric_family;

/* The family name (once: a second call with the same name returns the
 * first family, which must have the same shape). labels: nlabels names;
 * bounds: a histogram's ascending upper bounds (+Inf is implied). NULL when
 * out of memory: every update through a NULL series is a no-op. */
struct metric_family *metrics_family(const char *name, const char *help, enum metric_type type,
                                     int nlabels, const char *const *labels, const double *bounds,
                                     int nbounds);
/* The series of f with these label values (copied), made on first use;
 * NULL when f is NULL or out of memory. The pointer stays valid until
 * metrics_reset. */
struct metric *metrics_series(struct metric_family *f, const char *const *values);

static inline void metric_add(struct metric *m, double v) {
  if (m) m->value += v;
}
static inline void metric_set(struct metric *m, double v) {
  if (m) m->value = v;
}
void metrics_observe(struct metric *m, double v);

/* Called before each page is written, to set gauges from the state they
 * describe (in no set order). -1 when out of memory; remove with the same
 * fn and data. */
typedef void metrics_collect_fn(void *data);
int metrics_add_collector(metrics_collect_fn *fn, void *data);
void metrics_remove_collector(metrics_collect_fn *fn, void *data);

/* The page: every family with at least one series, in the order they were
 * made. Returns a malloc'd NUL-terminated text (its length in *len), NULL
 * when out of memory. */
char *metrics_page(size_t *len);

/* Forgets the series of f (an info family rebuilt by its collector on each
 * page); no pointer to them may be kept. */
void metrics_clear(struct metric_family *f);

/* Forgets every family and series (at exit). */
void metrics_reset(void);
/* Changes at each metrics_reset: a series pointer kept in a static is
 * fetched again when it differs from the one it was fetched under. */
unsigned metrics_generation(void);

#endif
