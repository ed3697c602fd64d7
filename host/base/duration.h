/* duration: the one way luastream reads a length of time, for the command
 * line (--shutdown-timeout) and for handler files (min_idle, ls.retry_after,
 * ls.sleep, ls.backoff, the test harness's app:advance).
 *
 * The rule: a number given as a number (a Lua number) is milliseconds; a
 * duration written as text needs a unit: "500ms", "30s", "2m", "1h", with a
 * fraction allowed ("1.5s") and blanks around the parts ignored. Text
 * without a unit ("30") is refused: in text, whether 30 means seconds or
 * milliseconds is a guess, and a wrong guess is off by a factor of 1000. */
#ifndef LUASTREAM_DURATION_H
#define LUASTREAM_DURATION_H

#include <stddef.h>

/* The longest duration: the host keeps milliseconds in 64-bit integers and
 * adds them to the clock; 2^53 ms (285 000 years) is exact as a double too. */
#define DURATION_MAX_MS 9007199254740992.0

/* Parses len bytes of text into milliseconds (*ms, possibly fractional).
 * Returns 0, or -1 with *why set to a static phrase that completes "<what>
 * ...", e.g. "needs a unit: 30s, 30ms, 30m or 30h" (the number in the hint
 * is the one given, in hint, a buffer of hintlen bytes). */
int duration_parse(const char *text, size_t len, double *ms, char *why, size_t whylen);

/* A number of milliseconds as a Lua number gives it: finite, >= 0 and at most
 * DURATION_MAX_MS. Returns 0, or -1 with why filled as for duration_parse. */
int duration_check_ms(double ms, char *why, size_t whylen);

#endif
