/* console_json: what the web console's C side writes and reads besides
 * HTTP: JSON text into a memory stream (open_memstream), values from Redis
 * shown as text, and the query strings and form bodies of requests. */
#ifndef LUASTREAM_CONSOLE_JSON_H
#define LUASTREAM_CONSOLE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* n bytes of s as a JSON string for display: valid UTF-8 passes through
 * (quotes, backslashes and control characters escaped as JSON wants), every
 * byte that is not valid UTF-8, and every control character but \n and \t,
 * becomes the four characters \xNN (a backslash of the value stays one:
 * text that was exact stays parseable). Returns whether anything was
 * written as \xNN: only then is what is shown not the bytes themselves. */
bool cj_text(FILE *out, const char *s, size_t n);
/* A 0-terminated string as cj_text does, or null for NULL. */
void cj_str(FILE *out, const char *s);
/* n, or null when it is negative (unknown). */
void cj_num(FILE *out, long long n);

/* The value of the first name=value of a query string or form body (both
 * application/x-www-form-urlencoded), decoded into a new string; NULL when
 * absent or when it decodes to bytes that hold a 0 byte. */
char *cj_param(const char *query, const char *name);
/* Every value of name, in order, into a new array of new strings (*n of
 * them, at most max); NULL and *n = 0 when none. */
char **cj_params(const char *query, const char *name, size_t max, size_t *n);
void cj_params_free(char **v, size_t n);

#endif
