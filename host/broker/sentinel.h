/* sentinel: asks Redis Sentinel where a service's master is, and hears when
 * it moves.
 *
 * A question (sentinel_ask) goes to the sentinels of a redis+sentinel:// URL
 * in turn, starting with the last one that answered: each gets its own short
 * connection, SENTINEL_ASK_TIMEOUT_MS to answer `SENTINEL
 * GET-MASTER-ADDR-BY-NAME service`, and the first address given is the
 * answer. While watching (sentinel_watch), one connection to one sentinel is
 * subscribed to +switch-master; a switch of the service is handed to the
 * switch callback, and a lost subscription moves on to the next sentinel.
 * Everything runs on the libuv loop; nothing blocks. broker_redis uses it
 * to find the master before every connection attempt. */
#ifndef LUASTREAM_SENTINEL_H
#define LUASTREAM_SENTINEL_H

/* How long one sentinel has to connect and answer a question. */
#define SENTINEL_ASK_TIMEOUT_MS 1000
/* The wait before the subscription tries the next sentinel. */
#define SENTINEL_WATCH_RETRY_MS 1000

struct uv_loop_s;
struct redis_url;
struct tls_ctx;
/* The answer to one question: the master's ip and port, or ip NULL and why
 * (naming each sentinel and what it said). denied: every sentinel refused
 * the sentinel credentials, which retrying cannot fix. */
typedef void sentinel_answer_cb(void *data, const char *ip, int port, const char *why, int denied);
/* A sentinel announced that the service's master is now ip:port. */
typedef void sentinel_switch_cb(void *data, const char *ip, int port);

struct sentinel;
struct sentinel_ask;

/* url must be a redis+sentinel:// URL (nsentinels > 0); it is copied. name:
 * what log lines call the server (the redacted URL). tls: the sentinels
 * are reached with it (rediss+sentinel://), NULL for plaintext; it must
 * outlive the sentinel. NULL when out of memory. */
struct sentinel *sentinel_new(struct uv_loop_s *loop, const struct redis_url *url, const char *name,
                              struct tls_ctx *tls, sentinel_switch_cb *on_switch, void *data);
/* Asks for the master. cb runs exactly once, never before this returns,
 * unless the question is cancelled first. NULL when out of memory. */
struct sentinel_ask *sentinel_ask(struct sentinel *s, sentinel_answer_cb *cb, void *data);
/* cb will not run. Not from inside the question's own cb. */
void sentinel_ask_cancel(struct sentinel_ask *q);
/* Starts (on = 1) or stops the +switch-master subscription. */
void sentinel_watch(struct sentinel *s, int on);
/* Questions must be answered or cancelled first. Memory still in use by
 * closing handles is freed by their close callbacks. */
void sentinel_free(struct sentinel *s);

#endif
