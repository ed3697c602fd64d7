/* fuzz_duration: duration_parse on any text: never reads past the text, and
 * what it accepts is a finite, non-negative number of ms within the limit. */
#include <math.h>

#include "duration.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_copy(data, size);
  char why[128];
  double ms = -1;
  if (duration_parse(text, size, &ms, why, sizeof why) == 0) {
    FUZZ_CHECK(isfinite(ms) && ms >= 0 && ms <= DURATION_MAX_MS, "%.*s -> %g", (int)size, text, ms);
    FUZZ_CHECK(duration_check_ms(ms, why, sizeof why) == 0, "%.*s -> %g: %s", (int)size, text, ms,
               why);
  } else {
    FUZZ_CHECK(memchr(why, '\0', sizeof why) != NULL, "why not terminated");
  }
  free(text);
  return 0;
}
