/* Tests for breaker: the breaker rule counts failures of one reason within
 * a window, by the first line of the reason; reasons count apart, also
 * after another reason tripped; a trip starts the count again. */
#include <stdbool.h>
#include <string.h>

#include "breaker.h"
#include "task.h"

static bool fail(struct breaker *b, const char *why, uint64_t at) {
  return breaker_failed(b, 3, 10000, why, strlen(why), at);
}

TEST_IMPL(breaker_trips_on_n_failures_within_the_window) {
  struct breaker b;
  breaker_init(&b);
  ASSERT(!fail(&b, "api 503", 0));
  ASSERT(!fail(&b, "api 503", 5000));
  ASSERT(fail(&b, "api 503", 10000));  /* the third within 10 s */
  ASSERT(!fail(&b, "api 503", 10001)); /* the count starts again */
  ASSERT(!fail(&b, "api 503", 10002));
  ASSERT(fail(&b, "api 503", 10003));
  breaker_free(&b);
}

TEST_IMPL(breaker_needs_them_within_the_window) {
  struct breaker b;
  breaker_init(&b);
  ASSERT(!fail(&b, "api 503", 0));
  ASSERT(!fail(&b, "api 503", 6000));
  ASSERT(!fail(&b, "api 503", 12000)); /* the first is 12 s old */
  ASSERT(fail(&b, "api 503", 13000));  /* 6, 12 and 13 s */
  breaker_free(&b);
}

TEST_IMPL(breaker_counts_reasons_apart_by_their_first_line) {
  struct breaker b;
  breaker_init(&b);
  ASSERT(!fail(&b, "api 503\ntraceback one", 0));
  ASSERT(!fail(&b, "db down", 1));
  ASSERT(!fail(&b, "api 503\ntraceback two", 2));
  ASSERT(!fail(&b, "db down", 3));
  ASSERT(fail(&b, "api 503", 4)); /* the third of "api 503" */
  /* "db down" keeps its two after "api 503" tripped and emptied its slot */
  ASSERT(fail(&b, "db down", 5));
  breaker_free(&b);
}

TEST_IMPL(breaker_without_a_rule_never_trips) {
  struct breaker b;
  breaker_init(&b);
  for (int i = 0; i < 100; i++) ASSERT(!breaker_failed(&b, 0, 10000, "x", 1, (uint64_t)i));
  breaker_free(&b);
}
