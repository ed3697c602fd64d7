/* payment.h: the one payload generator of the benchmarks.
 *
 * Entry i of every run is the same bytes, for every client: a payment of about
 * 60 bytes of JSON in the `data` field and its account in `partition-key`
 * (64 accounts, round robin). loadgen publishes these; cost.c publishes the
 * same to the in-memory broker. */
#ifndef BENCH_PAYMENT_H
#define BENCH_PAYMENT_H

#include <stdio.h>

#define PAYMENT_ACCOUNTS 64

/* Writes payment i's JSON into body and its account into key; returns the
 * body's length. body needs 96 bytes, key 16. */
static inline int payment_format(long i, char *body, size_t bodycap, char *key, size_t keycap,
                                 int *keylen) {
  long account = i % PAYMENT_ACCOUNTS;
  long cents = (i * 7919) % 2000000 + 1;
  *keylen = snprintf(key, keycap, "acct-%03ld", account);
  return snprintf(body, bodycap, "{\"id\":%ld,\"account\":\"acct-%03ld\",\"amount_cents\":%ld}", i,
                  account, cents);
}

#endif
