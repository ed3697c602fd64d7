/* Tests for metrics.c: series made once and updated through their pointer,
 * the text exposition format (HELP and TYPE lines, escaped label values,
 * cumulative histogram buckets, numbers that read back the same), info
 * families rebuilt by a collector. */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "task.h"

static char *page(void) {
  size_t len;
  char *p = metrics_page(&len);
  ASSERT_NOT_NULL(p);
  ASSERT_INT_EQ(strlen(p), len);
  return p;
}

TEST_IMPL(metrics_counters_and_labels) {
  static const char *const labels[] = {"handler", "outcome"};
  struct metric_family *f = metrics_family("t_deliveries_total", "Deliveries\nby outcome \\ kind",
                                           METRIC_COUNTER, 2, labels, NULL, 0);
  ASSERT_NOT_NULL(f);
  ASSERT(f == metrics_family("t_deliveries_total", "ignored", METRIC_COUNTER, 2, labels, NULL, 0));
  const char *ack[] = {"pay", "ack"}, *odd[] = {"we\"ird\\na\nme", "error"};
  struct metric *m = metrics_series(f, ack);
  ASSERT(m == metrics_series(f, ack));
  metric_add(m, 2);
  metric_add(m, 1);
  metric_add(metrics_series(f, odd), 0.5);
  metric_add(NULL, 1); /* a series that could not be made: nothing happens */
  char *p = page();
  ASSERT_CONTAINS(p,
                  "# HELP t_deliveries_total Deliveries\\nby outcome \\\\ kind\n"
                  "# TYPE t_deliveries_total counter\n"
                  "t_deliveries_total{handler=\"pay\",outcome=\"ack\"} 3\n"
                  "t_deliveries_total{handler=\"we\\\"ird\\\\na\\nme\",outcome=\"error\"} 0.5\n");
  free(p);
  metrics_reset();
}

TEST_IMPL(metrics_histogram_buckets_are_cumulative) {
  static const double bounds[] = {0.001, 0.1, 1};
  struct metric_family *f =
      metrics_family("t_seconds", "Durations", METRIC_HISTOGRAM, 0, NULL, bounds, 3);
  struct metric *m = metrics_series(f, NULL);
  metrics_observe(m, 0.0005);
  metrics_observe(m, 0.05);
  metrics_observe(m, 0.05);
  metrics_observe(m, 7);
  char *p = page();
  ASSERT_CONTAINS(p,
                  "# TYPE t_seconds histogram\n"
                  "t_seconds_bucket{le=\"0.001\"} 1\n"
                  "t_seconds_bucket{le=\"0.1\"} 3\n"
                  "t_seconds_bucket{le=\"1\"} 3\n"
                  "t_seconds_bucket{le=\"+Inf\"} 4\n"
                  "t_seconds_sum 7.1005\n"
                  "t_seconds_count 4\n");
  free(p);
  metrics_reset();
}

static int collected;

static void collect(void *data) {
  struct metric_family *f = data;
  metrics_clear(f);
  static const char *const v1[] = {"a"}, *const v2[] = {"b"};
  metric_set(metrics_series(f, collected++ ? v2 : v1), 1);
}

TEST_IMPL(metrics_collectors_rebuild_info_families) {
  static const char *const labels[] = {"version"};
  struct metric_family *f = metrics_family("t_info", "Versions", METRIC_GAUGE, 1, labels, NULL, 0);
  ASSERT_INT_EQ(metrics_add_collector(collect, f), 0);
  char *p = page();
  ASSERT_CONTAINS(p, "t_info{version=\"a\"} 1\n");
  free(p);
  p = page();
  ASSERT_CONTAINS(p, "t_info{version=\"b\"} 1\n");
  ASSERT_NULL(strstr(p, "version=\"a\""));
  free(p);
  metrics_remove_collector(collect, f);
  /* a family without series is left out */
  metrics_clear(f);
  p = page();
  ASSERT_NULL(strstr(p, "t_info"));
  free(p);
  metrics_reset();
}

TEST_IMPL(metrics_numbers_read_back) {
  struct metric_family *f = metrics_family("t_gauge", "A gauge", METRIC_GAUGE, 0, NULL, NULL, 0);
  struct metric *m = metrics_series(f, NULL);
  metric_set(m, 0.1);
  char *p = page();
  ASSERT_CONTAINS(p, "t_gauge 0.1\n");
  free(p);
  metric_set(m, 1796181250.0441449);
  p = page();
  ASSERT_CONTAINS(p, "t_gauge 1796181250.0441449\n");
  free(p);
  metric_set(m, 123456789012.0);
  p = page();
  ASSERT_CONTAINS(p, "t_gauge 123456789012\n");
  free(p);
  metrics_reset();
}
