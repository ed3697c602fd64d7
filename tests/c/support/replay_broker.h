/* replay_broker: a broker (struct broker_ops) for tests that answers from a
 * script of recorded replies instead of a server.
 *
 * Every command is recorded as its argv joined with spaces, per connection
 * name. Each command is then answered by the first unused expectation whose
 * pattern matches it (an expectation answers once), else by the first matching
 * default (answers any number of times), else not at all: it stays pending
 * until its connection is closed, when its callback fires with reply NULL and
 * err "connection closed" (a blocking read nobody wrote to).
 *
 * Patterns are words separated by single spaces, matched against argv words:
 * `*` matches any one word, `**` (last) matches any number of remaining words,
 * any other word matches itself. Replies are raw RESP text ("+OK\r\n",
 * "*-1\r\n", ...), parsed with hiredis' reader when delivered; in a reply,
 * "%n" stands for the number of words `**` matched (":%n\r\n" answers XACK).
 *
 * Nothing is delivered from inside bk_command or bk_conn_open: connections
 * come up and replies arrive from a 0-ms timer on the clock, in the order the
 * commands were sent, and a pending command holds back the later ones on its
 * connection (a blocked Redis client answers nothing else). */
#ifndef LUASTREAM_REPLAY_BROKER_H
#define LUASTREAM_REPLAY_BROKER_H

#include <stddef.h>

#include "broker.h"
#include "clock.h"

typedef struct replay_broker replay_broker;

/* The clock is borrowed and must outlive the broker. Free with broker_free on
 * replay_base(rb) once every connection is closed. */
replay_broker *replay_new(lclock *clock);
broker *replay_base(replay_broker *rb);

void replay_expect(replay_broker *rb, const char *pattern, const char *resp);
void replay_default(replay_broker *rb, const char *pattern, const char *resp);
/* Records and matches an argv word equal to `word` as `name` (e.g. a script
 * body as "<claim>"). */
void replay_alias(replay_broker *rb, const char *word, const char *name);

/* Called after each reply callback returns (not for cancelled commands). */
typedef void replay_hook_fn(void *data, const char *conn, const char *command);
void replay_on_reply(replay_broker *rb, replay_hook_fn *fn, void *data);

/* Commands sent on connection `conn` (NULL: all, each as "conn: command"). */
size_t replay_nsent(replay_broker *rb, const char *conn);
/* The i-th of them, or NULL. Valid until the broker is freed. */
const char *replay_sent(replay_broker *rb, const char *conn, size_t i);
/* All of them, one per line with a trailing newline; valid until the broker is freed. */
const char *replay_log(replay_broker *rb, const char *conn);

size_t replay_unused(const replay_broker *rb);      /* expectations not yet used */
size_t replay_outstanding(const replay_broker *rb); /* sent, not yet answered or cancelled */

#endif
