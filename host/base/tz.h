/* tz: a time zone of the system's tzdata, read from its TZif file under
 * /usr/share/zoneinfo (RFC 8536; no library, no TZ environment, no libc
 * state), for the schedules of `cron` handlers (cron.h).
 *
 * A zone is its transitions (UTC instants where the offset changes) and,
 * past the last one, the file's POSIX TZ footer ("CET-1CEST,M3.5.0,M10.5.0/3"),
 * so that times after the table (2037 in a "fat" file, much earlier in a
 * "slim" one) follow the same rule. Times are Unix seconds. */
#ifndef LUASTREAM_TZ_H
#define LUASTREAM_TZ_H

#include <stddef.h>
#include <stdint.h>

struct tz;

/* Where zones are read from; tz_load_from takes another folder (tests). */
#define TZ_DIR "/usr/share/zoneinfo"

/* The zone called name ("Europe/Berlin", "UTC"): 0 with *out (free with
 * tz_free), or -1 with why in err ("unknown time zone ..."). A name that is
 * absolute, holds "..", or is not made of letters, digits and "/_+-" is
 * refused before any file is opened; so is a file with leap seconds (the
 * right/ zones). "UTC" needs no file. */
int tz_load(const char *name, struct tz **out, char *err, size_t errlen);
int tz_load_from(const char *dir, const char *name, struct tz **out, char *err, size_t errlen);
/* The zone of a TZif file's bytes (tests, fuzzing). */
int tz_parse(const unsigned char *buf, size_t len, struct tz **out, char *err, size_t errlen);
void tz_free(struct tz *z);

/* Seconds east of UTC in force at instant t. */
int32_t tz_offset(const struct tz *z, int64_t t);
/* The first instant after t at which the offset changes, or INT64_MAX when
 * it never does again. */
int64_t tz_next_change(const struct tz *z, int64_t t);

/* The proleptic Gregorian calendar (Howard Hinnant's algorithms): days since
 * 1970-01-01 of a date (month 1-12), and back. */
int64_t tz_days_from_civil(int64_t y, int m, int d);
void tz_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
/* The days of month m (1-12) of year y. */
int tz_days_in_month(int64_t y, int m);

#endif
