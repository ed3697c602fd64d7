/* read_reply: the parsers that turn XREADGROUP / claim-script reply trees
 * into entries (entry.h). They do no I/O and are tested on literal replies. */
#ifndef LUASTREAM_READ_REPLY_H
#define LUASTREAM_READ_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "entry.h"

/* Parses the reply of `XREADGROUP ... STREAMS key id` for one stream into a
 * list linked through `next`, in reply order. A nil reply is an empty list.
 * Entries whose fields are nil (deleted but pending) are skipped and counted in
 * *deleted. Four-element entries (CLAIM) fill idle_ms and deliveries, from
 * integers or strings (a negative idle, from a server clock step, reads as 0).
 * Returns 0, or -1 with a reason in err when the shape is not a stream read
 * reply ("entry N" counts from 0) or on OOM ("out of memory"); on -1 *out is
 * NULL, the counts are 0 and nothing is leaked. count, deleted and err may be
 * NULL. */
int read_reply_parse_read(const bk_reply *r, struct entry **out, size_t *count, size_t *deleted,
                          char *err, size_t errlen);

/* Parses the reply of `XREADGROUP ... STREAMS k1 k2 ... id1 id2 ...` read
 * from the nkeys keys in keys: one [key, entries] pair per stream served, in
 * any order, each key at most once. Every entry's `key` is the index in keys
 * of the stream it came from; the list holds the streams one after the
 * other, each in reply order. A key not in keys is a reply of the wrong
 * shape. An entry over the limits of max_body (entry_over in entry.h;
 * UINT64_MAX: none) is built cut, with its sizes (entry.body_size,
 * entry_size), as is one a script sent cut: `[id, fields, [body bytes,
 * entry bytes]]`, or with idle and deliveries before the sizes. Otherwise
 * as read_reply_parse_read (which takes every entry whole). */
int read_reply_parse_streams(const bk_reply *r, const char *const *keys, size_t nkeys,
                             uint64_t max_body, struct entry **out, size_t *count, size_t *deleted,
                             char *err, size_t errlen);

/* Parses the reply of a claim script (scripts.h) over the nkeys keys in keys:
 *   [[cursor per key], [[key, entries], ...], [[key, deleted id], ...]]
 * entries as for read_reply_parse_streams (4 elements each). Cursor i goes to
 * cursor + i * cursorlen (cursorlen bytes with the NUL); *deleted points at
 * the pairs of key and id the server dropped from the pending list (part of
 * r: valid while r is; each element an array of two strings).
 * Returns 0, or -1 with a reason in err; on -1 *out is NULL. */
int read_reply_parse_claimed(const bk_reply *r, const char *const *keys, size_t nkeys,
                             uint64_t max_body, char *cursor, size_t cursorlen, struct entry **out,
                             size_t *count, const bk_reply **deleted, char *err, size_t errlen);

#endif
