/* resp_conn: the Redis protocol on one transport (transport.h): commands
 * formatted in RESP straight into the output queue, replies parsed by
 * hiredis' reader (its only part this host uses) into a reply arena, and
 * each reply handed to its command's callback in send order. What hiredis'
 * async context was, with rules of its own:
 *
 * - every command sent gets its callback exactly once: its reply, or reply
 *   NULL and why the connection ended first;
 * - resp_conn_close or _drop inside a reply callback takes effect when that
 *   callback returns (the commands behind it then fail, in order); elsewhere
 *   at once;
 * - the down callback runs once when the connection ends by itself or by
 *   resp_conn_drop (after the pending callbacks), never after
 *   resp_conn_close, and the connection is gone when it returns.
 *
 * Reply limits (resp_conn_limit) refuse a reply while it arrives once a
 * string in it, or the reply as a whole, is over the limit: the connection
 * ends with BK_ERR_TOO_LARGE, so a huge entry never is in memory whole. */
#ifndef LUASTREAM_RESP_CONN_H
#define LUASTREAM_RESP_CONN_H

#include <stddef.h>

#include <hiredis/hiredis.h>

struct uv_loop_s;
struct transport_target;
struct resp_conn;

/* reply: valid during the call only; NULL when the connection ended first,
 * with err saying why. */
typedef void resp_reply_fn(void *data, redisReply *reply, const char *err);
typedef void resp_down_fn(void *data, const char *why, int denied);

/* label: what refusals name the server as (the redacted URL). NULL when
 * the connection failed at once, with why in err. */
struct resp_conn *resp_conn_open(struct uv_loop_s *loop, const struct transport_target *to,
                                 const char *label, resp_down_fn *down, void *data, char *err,
                                 size_t errlen);
/* Queues a command (sent before the loop next waits). -1 when out of memory
 * or the connection is ending: fn will not run. */
int resp_conn_send(struct resp_conn *rc, int argc, const char **argv, const size_t *argvlen,
                   resp_reply_fn *fn, void *data);
/* Replies no command waits for (a subscription's messages) go to fn; without
 * one they end the connection as a protocol error. */
void resp_conn_on_push(struct resp_conn *rc, resp_reply_fn *fn, void *data);
/* Writes what is queued now. */
void resp_conn_flush(struct resp_conn *rc);
/* A bulk string over bulk_max bytes, or a reply taking over reply_max, ends
 * the connection; 0: no limit. */
void resp_conn_limit(struct resp_conn *rc, size_t bulk_max, size_t reply_max);
/* Connected, a TLS handshake sent, and not a byte back yet. */
int resp_conn_tls_unanswered(const struct resp_conn *rc);
/* Ends the connection: unanswered commands fail with why. */
void resp_conn_close(struct resp_conn *rc, const char *why);
/* Ends it as a failure would: the commands fail with why, then down runs. */
void resp_conn_drop(struct resp_conn *rc, const char *why);

#endif
