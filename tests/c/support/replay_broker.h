/* replay_broker: a broker (struct broker_ops) for tests that answers from a
 * script of recorded replies instead of a server.
 *
 * Every command is recorded as its argv joined with spaces, per connection
 * name. Each command is then answered by the first unused expectation whose
 * pattern matches it (an expectation answers once), else by the responder
 * function when one is set and it answers, else by the first matching
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
 * connection (a blocked Redis client answers nothing else). A command's
 * callback may be NULL (nothing is called for its reply).
 *
 * Faults: replay_hold stops every delivery of a broker until replay_release
 * (several brokers on one loop then answer in an order the test chooses);
 * replay_drop loses every connection as a server going away would, until
 * replay_restore. */
#ifndef LUASTREAM_REPLAY_BROKER_H
#define LUASTREAM_REPLAY_BROKER_H

#include <stdbool.h>
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

/* Answers a command no expectation matched: RESP text in a malloc'd string,
 * which the broker frees, or NULL to leave it to the defaults. conn is the
 * connection's name, words the argv as recorded (aliases applied). Called
 * when the command is sent, so it sees the commands in the order they were
 * sent on this broker. */
typedef char *replay_respond_fn(void *data, const char *conn, int argc, char **words);
void replay_respond(replay_broker *rb, replay_respond_fn *fn, void *data);

/* Delivers nothing (no reply, no connection coming up) until replay_release. */
void replay_hold(replay_broker *rb);
void replay_release(replay_broker *rb);
/* Every open connection goes down now, as when the server dies: its queued
 * commands fail with reply NULL and err "connection lost: why" (why itself
 * when it starts BK_ERR_TOO_LARGE: a reply refused for its size), in the order
 * they were sent, then its state callback fires with up = 0 (the order of
 * hiredis), then its fault callback (bk_conn_on_fault) with BK_FAULT_DOWN and
 * why, which bk_conn_fault also says while it is down. Until replay_restore,
 * bk_command is refused and no connection comes up; after it, they all come
 * up again at the next turn. */
void replay_drop(replay_broker *rb, const char *why);
void replay_restore(replay_broker *rb);
/* The last reply limits (bk_conn_reply_limit) given to the open connection
 * named conn; false when there is none. */
bool replay_reply_limit(replay_broker *rb, const char *conn, size_t *bulk_max, size_t *reply_max);

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
