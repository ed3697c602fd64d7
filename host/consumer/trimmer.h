/* trimmer: the `trim = true` and `trim_max_len` of a handler file: its
 * stream is trimmed up to what every group reading it has finished with
 * (trim: an entry some group has not been handed yet, or still has pending,
 * is never trimmed), and to its newest trim_max_len entries (a loss), by
 * SCRIPT_TRIM (scripts.h), no more often than every TRIM_MS and only after
 * this subscription's outcomes were written (trimmer_soon): an idle
 * subscription sends nothing for it. */
#ifndef LUASTREAM_TRIMMER_H
#define LUASTREAM_TRIMMER_H

#include "broker.h"
#include "clock.h"
#include "runtime.h"

#define TRIM_MS 1000

typedef struct trimmer trimmer;

/* For spec's stream (spec borrowed: trimmer_set_spec replaces it), on cmd. */
trimmer *trimmer_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec);
void trimmer_set_spec(trimmer *t, const struct handler_spec *spec);
/* Outcomes were written: trim within TRIM_MS (once, however many come). */
void trimmer_soon(trimmer *t);
/* A reply on its way is dropped. */
void trimmer_free(trimmer *t);

#endif
