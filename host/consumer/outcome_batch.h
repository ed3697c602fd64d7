/* outcome_batch: the arguments of one SCRIPT_OUTCOME call (scripts.h), the
 * outcomes of many entries of one key, and what the writer needs to read its
 * answer: each entry's id, what the outcome was, and where its commands are.
 *
 * Every argument is copied into one buffer, so that the batch outlives the
 * entries and handlers its outcomes came from and can go out again as it is
 * after a lost connection (the script writes nothing twice). A batch is
 * reused: once its buffers have grown, filling it allocates nothing. */
#ifndef LUASTREAM_OUTCOME_BATCH_H
#define LUASTREAM_OUTCOME_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "outcome.h"

#define OUTCOME_ID_MAX 48 /* "ms-seq" of two 64-bit numbers, NUL included */

/* One entry's outcome in a batch. */
struct outcome_item {
  char id[OUTCOME_ID_MAX];
  const char *what; /* "retry", "reply", "dead letter", ... (static) */
  bool ack;         /* written with the ack (else only while still pending) */
  size_t first_cmd; /* argument index of its first command's argc */
};

struct outcome_batch {
  struct outcome_batch *next; /* the owner's lists */
  void *owner;
  unsigned char key; /* the owner's name for the key */
  bool resent;       /* cut off once: a 0 may be this batch's own earlier write */
  bool delays;       /* an outcome of it adds to the delay set (txn.delays) */
  struct outcome_item *items;
  size_t nitems;
  /* the arguments after "EVAL script": numkeys key group consumer, then per entry */
  char *bytes; /* each NUL-terminated */
  size_t nbytes, bytes_cap;
  size_t *off, *len;
  size_t nargs, args_cap;
  size_t items_cap;
  const char **argv; /* built by outcome_batch_argv */
  size_t *argvlen;
  size_t argv_cap;
};

/* An empty batch, or NULL when out of memory. */
struct outcome_batch *outcome_batch_new(void);
void outcome_batch_free(struct outcome_batch *b);
/* Empties b for outcomes of key, read by consumer of group: -1 when out of
 * memory. */
int outcome_batch_start(struct outcome_batch *b, const char *key, const char *group,
                        const char *consumer);
/* Appends t's commands as the outcome `what` of entry id, written with its
 * ack (ack) or only while it is pending. -1 when out of memory: then b is
 * as it was. */
int outcome_batch_add(struct outcome_batch *b, const struct txn *t, const char *id,
                      const char *what, bool ack);
/* The whole command, EVAL SCRIPT_OUTCOME included, for bk_command: valid
 * until b changes. -1 when out of memory. */
int outcome_batch_argv(struct outcome_batch *b, int *argc, const char ***argv,
                       const size_t **argvlen);
/* The name and key (its first argument) of command c (from 1) of item it. */
void outcome_batch_cmd(const struct outcome_batch *b, const struct outcome_item *it, long c,
                       const char **name, const char **key);
/* The bytes b keeps allocated (to decide whether to keep it for reuse). */
size_t outcome_batch_capacity(const struct outcome_batch *b);

#endif
