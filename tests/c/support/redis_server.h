/* redis_server: a private, throwaway redis-server for integration tests.
 *
 * Each server listens on a free loopback port and on a unix socket inside its
 * own temporary directory, keeps nothing on disk (--save "" --appendonly no),
 * and logs to <dir>/redis.log. It is killed with its test: the child asks the
 * kernel for SIGKILL when the test process dies (a test that times out
 * included), and a test that fails an assertion (exit) removes the directory
 * on its way out. The struct must stay where it is while the server runs (a
 * static, or a local of the test function).
 *
 *   struct redis_server s = {0};
 *   ASSERT_OK(redis_server_start(&s, NULL));        // s.port, s.sock are set
 *   ...
 *   redis_server_kill(&s);                          // crash it; port and dir kept
 *   ASSERT_OK(redis_server_start(&s, NULL));        // same port again
 *   ...
 *   redis_server_stop(&s);                          // kill and remove the dir */
#ifndef LUASTREAM_TEST_REDIS_SERVER_H
#define LUASTREAM_TEST_REDIS_SERVER_H

#include <sys/types.h>

struct redis_server {
  pid_t pid;      /* 0 when not running */
  int port;       /* chosen by the first start, reused by later starts */
  char dir[64];   /* private temporary directory, "" before the first start */
  char sock[128]; /* unix socket path inside dir */
  char url[160];  /* "redis://127.0.0.1:<port>", or rediss:// with tls */
  /* Set before the first start: a directory holding ca.pem, server.pem and
   * server.key (tls_certs_make): the port speaks TLS only (tls-port; the
   * unix socket stays plaintext), clients' certificates optional. */
  char tls[96];
};

/* Starts redis-server and waits (up to 10 s) until it accepts connections.
 * `s` must be zeroed before its first start, which picks a free port (another
 * one if a parallel test takes it first); later starts reuse that port.
 * `extra` is NULL or a NULL-terminated list of more arguments, e.g.
 * {"--requirepass", "pw", NULL}. Returns 0, or -1 after printing why on
 * stderr (it exited, it did not answer in time). Without redis-server on PATH
 * it skips the test (TEST_SKIP in task.h), or returns -1 when the environment
 * sets LUASTREAM_REQUIRE_REDIS. */
int redis_server_start(struct redis_server *s, const char *const *extra);

/* SIGKILL and reap: the server vanishes the way a crash makes it vanish. The
 * port and directory are kept so redis_server_start brings it back. */
void redis_server_kill(struct redis_server *s);

/* Kills the server if it runs and removes its directory. Safe to call twice. */
void redis_server_stop(struct redis_server *s);

#endif
