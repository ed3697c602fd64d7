/* pg_server: a private, throwaway PostgreSQL server for integration tests.
 *
 * Each server gets its own temporary directory (the data in <dir>/data, the
 * unix socket in <dir>, the log in <dir>/postgres.log) and listens on a free
 * loopback port. It is made for tests: fsync and full_page_writes are off. The
 * first start runs initdb and creates the role `luastream` (a random password,
 * scram-sha-256 over TCP) owning the database `luastream`; the superuser
 * `postgres` logs in through the socket only, without a password.
 *
 * PostgreSQL refuses to run as root: as root, initdb and the server run as
 * the `postgres` user the Debian package creates, which owns the directory.
 *
 * The server is killed with its test: the postmaster asks the kernel for
 * SIGKILL when the test process dies (its backends follow it), and a
 * test that fails an assertion (exit) stops it and removes the directory on
 * its way out. The struct must stay where it is while the server runs.
 *
 *   struct pg_server s = {0};
 *   ASSERT_OK(pg_server_start(&s));        // s.port, s.conninfo, s.url are set
 *   PGconn *c = PQconnectdb(s.conninfo);
 *   ...
 *   pg_server_kill(&s);                    // crash it; port and data kept
 *   ASSERT_OK(pg_server_start(&s));        // same port and data again
 *   ...
 *   pg_server_stop(&s);                    // stop it and remove the dir */
#ifndef LUASTREAM_TEST_PG_SERVER_H
#define LUASTREAM_TEST_PG_SERVER_H

#include <sys/types.h>

struct pg_server {
  pid_t pid;          /* the postmaster; 0 when not running */
  int port;           /* chosen by the first start, reused by later starts */
  char dir[64];       /* private temporary directory, "" before the first start */
  char password[33];  /* the role luastream's password (hex) */
  char conninfo[256]; /* "host=127.0.0.1 port=P dbname=luastream user=luastream password=..." */
  char url[256];      /* "postgresql://luastream:PASSWORD@127.0.0.1:P/luastream" */
  char admin[192];    /* the superuser through the socket, database postgres */
};

/* Starts PostgreSQL and waits (up to 30 s) until it accepts connections.
 * `s` must be zeroed before its first start, which runs initdb and picks a
 * free port (another one if a parallel test takes it first); later starts
 * reuse the data and the port. Returns 0, or -1 after printing why on stderr.
 * Without PostgreSQL's binaries (pg_config --bindir, /usr/lib/postgresql/x/bin)
 * it skips the test (TEST_SKIP in task.h), or returns -1 when the environment
 * sets LUASTREAM_REQUIRE_REDIS (./dev test, where every test must run). */
int pg_server_start(struct pg_server *s);

/* Runs SQL (one or more statements) as the superuser in the database
 * postgres (s->admin); 0, or -1 after
 * printing the error on stderr. */
int pg_server_exec(const struct pg_server *s, const char *sql);

/* SIGKILL to every process of the server: it vanishes the way a crash makes
 * it vanish. The port and data are kept so pg_server_start brings it back. */
void pg_server_kill(struct pg_server *s);

/* Fast shutdown (SIGINT) if it runs, every process killed if it is not down
 * within 10 s, then the directory removed. Safe to call twice. */
void pg_server_stop(struct pg_server *s);

#endif
