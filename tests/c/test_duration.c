/* Tests for duration.c: the one rule for durations on the command line and
 * in handler files (a number is ms; text needs a unit). */
#include <string.h>

#include "duration.h"
#include "task.h"

static double ms;
static char why[160];

static int parse(const char *text) {
  why[0] = '\0';
  return duration_parse(text, strlen(text), &ms, why, sizeof why);
}

TEST_IMPL(duration_units) {
  static const struct {
    const char *text;
    double ms;
  } ok[] = {{"500ms", 500},    {"30s", 30000},         {"2m", 120000},    {"1h", 3600000},
            {"0s", 0},         {"1.5s", 1500},         {" 30 s ", 30000}, {"\t10ms", 10},
            {"2.5h", 9000000}, {"2000000000h", 7.2e15}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    if (parse(ok[i].text) != 0) TEST_FAIL_("\"%s\" refused: %s", ok[i].text, why);
    if (ms != ok[i].ms) TEST_FAIL_("\"%s\" gave %f ms, want %f", ok[i].text, ms, ok[i].ms);
  }
}

TEST_IMPL(duration_text_needs_a_unit) {
  ASSERT_INT_EQ(parse("30"), -1);
  ASSERT_STR_EQ(why, "has no unit: add one, e.g. \"30ms\" or \"30s\"");
  ASSERT_INT_EQ(parse(" 1.5 "), -1);
  ASSERT_STR_EQ(why, "has no unit: add one, e.g. \"1.5ms\" or \"1.5s\"");
  static const char *const bad[] = {"",     " ",   "s",   "30x",   "30 sec", "-1s",
                                    "1e3s", ".5s", "30S", "30s30", "0x10s",  "3 0s"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (parse(bad[i]) == 0) TEST_FAIL_("\"%s\" accepted as %f ms", bad[i], ms);
    ASSERT_STR_EQ(why, "must be a duration such as \"500ms\", \"30s\", \"2m\" or \"1h\"");
  }
  ASSERT_INT_EQ(parse("3000000000000h"), -1);
  ASSERT_STR_EQ(why, "must be at most 2^53 milliseconds");
}

TEST_IMPL(duration_numbers_are_ms) {
  ASSERT_OK(duration_check_ms(0, why, sizeof why));
  ASSERT_OK(duration_check_ms(30000, why, sizeof why));
  ASSERT_OK(duration_check_ms(DURATION_MAX_MS, why, sizeof why));
  ASSERT_INT_EQ(duration_check_ms(-1, why, sizeof why), -1);
  ASSERT_STR_EQ(why, "must be a non-negative number of milliseconds");
  ASSERT_INT_EQ(duration_check_ms(DURATION_MAX_MS * 2, why, sizeof why), -1);
  ASSERT_STR_EQ(why, "must be at most 2^53 milliseconds");
}
