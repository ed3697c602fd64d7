/* payment.h: the one payload generator of the benchmarks.
 *
 * Entry i of every run is the same bytes, for every client: a payment of about
 * 60 bytes of JSON in the `data` field and its account in `partition-key`
 * (64 accounts, round robin). loadgen publishes these; cost.c publishes the
 * same to the in-memory broker. With a body size (loadgen --body-bytes N) the
 * payment gains a "note" string of filler (lower-case letters, no escapes)
 * that makes the JSON exactly N bytes long, so that large bodies can be
 * measured with the same handler and the same decoding work in every client. */
#ifndef BENCH_PAYMENT_H
#define BENCH_PAYMENT_H

#include <stdio.h>
#include <string.h>

#define PAYMENT_ACCOUNTS 64
/* The capacity body needs for a payment without a body size. */
#define PAYMENT_SMALL 96

/* Writes payment i's JSON into body and its account into key; returns the
 * body's length, or -1 when body (bodycap bytes) cannot hold it. body_bytes 0
 * is the plain payment; a larger N pads it to N bytes with a "note" field
 * (a plain payment when N is too small for the field). key needs 16 bytes. */
static inline int payment_format_sized(long i, size_t body_bytes, char *body, size_t bodycap,
                                       char *key, size_t keycap, int *keylen) {
  long account = i % PAYMENT_ACCOUNTS;
  long cents = (i * 7919) % 2000000 + 1;
  *keylen = snprintf(key, keycap, "acct-%03ld", account);
  int n = snprintf(body, bodycap, "{\"id\":%ld,\"account\":\"acct-%03ld\",\"amount_cents\":%ld", i,
                   account, cents);
  if (n < 0 || (size_t)n + 2 > bodycap) return -1;
  static const char note[] = ",\"note\":\"";
  size_t len = (size_t)n, fixed = len + sizeof note - 1 + 2; /* the closing "} */
  if (body_bytes < fixed) {
    body[len++] = '}';
    body[len] = '\0';
    return (int)len;
  }
  if (body_bytes + 1 > bodycap) return -1;
  memcpy(body + len, note, sizeof note - 1);
  len += sizeof note - 1;
  for (size_t k = 0; k < body_bytes - fixed; k++) body[len++] = (char)('a' + (i + (long)k) % 26);
  body[len++] = '"';
  body[len++] = '}';
  body[len] = '\0';
  return (int)len;
}

/* Payment i without a body size; body needs PAYMENT_SMALL bytes, key 16. */
static inline int payment_format(long i, char *body, size_t bodycap, char *key, size_t keycap,
                                 int *keylen) {
  return payment_format_sized(i, 0, body, bodycap, key, keycap, keylen);
}

#endif
