/* duration: text and numbers to milliseconds, one rule for the command line
 * and handler files (see duration.h). */
#include "duration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  double ms;
} units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};

static int blank(char c) { return c == ' ' || c == '\t'; }

static int too_long(char *why, size_t whylen) {
  snprintf(why, whylen, "must be at most 2^53 milliseconds");
  return -1;
}

int duration_check_ms(double ms, char *why, size_t whylen) {
  if (ms != ms || ms < 0 || ms == HUGE_VAL) {
    snprintf(why, whylen, "must be a non-negative number of milliseconds");
    return -1;
  }
  return ms > DURATION_MAX_MS ? too_long(why, whylen) : 0;
}

int duration_parse(const char *text, size_t len, double *ms, char *why, size_t whylen) {
  size_t i = 0, end = len;
  while (i < end && blank(text[i])) i++;
  while (end > i && blank(text[end - 1])) end--;
  size_t num = i;
  while (i < end && text[i] >= '0' && text[i] <= '9') i++;
  size_t digits = i - num;
  if (digits > 0 && i < end && text[i] == '.') {
    i++;
    while (i < end && text[i] >= '0' && text[i] <= '9') i++;
  }
  size_t numlen = i - num;
  while (i < end && blank(text[i])) i++;
  size_t unitlen = end - i;
  if (digits == 0) goto malformed;
  /* Enough digits for any text that can be in range; the rest of a long
   * fraction cannot matter. */
  char number[48];
  size_t keep = numlen < sizeof number - 1 ? numlen : sizeof number - 1;
  memcpy(number, text + num, keep);
  number[keep] = '\0';
  if (unitlen == 0) {
    snprintf(why, whylen, "has no unit: add one, e.g. \"%sms\" or \"%ss\"", number, number);
    return -1;
  }
  for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
    if (strlen(units[u].name) == unitlen && memcmp(units[u].name, text + i, unitlen) == 0) {
      /* 17 integer digits are at least 10^16 ms, past 2^53 in any unit. */
      double v = digits > 16 ? HUGE_VAL : strtod(number, NULL) * units[u].ms;
      if (v > DURATION_MAX_MS) return too_long(why, whylen);
      *ms = v;
      return 0;
    }
  }
malformed:
  snprintf(why, whylen, "must be a duration such as \"500ms\", \"30s\", \"2m\" or \"1h\"");
  return -1;
}
