/* The C tests' private PostgreSQL server (support/pg_server.c): libpq's
 * blocking API reaches it over TCP with the test role's password, a wrong
 * password is refused, committed data survives a crash (every server process
 * SIGKILLed) and a restart on the same port, and stopping leaves no process
 * and no directory. */
#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>

#include "pg_server.h"
#include "task.h"

/* The one value of a one-row, one-column query, copied into out. */
static void query_value(const char *conninfo, const char *sql, char *out, size_t cap) {
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) TEST_FAIL_("connect: %s", PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) TEST_FAIL_("%s: %s", sql, PQresultErrorMessage(r));
  ASSERT_INT_EQ(PQntuples(r), 1);
  snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(c);
}

TEST_IMPL(pg_server_connect_restart_stop) {
  static struct pg_server s;
  char v[64];
  ASSERT_OK(pg_server_start(&s));
  ASSERT(s.port > 0);
  int port = s.port;

  query_value(s.conninfo, "SELECT 1", v, sizeof v);
  ASSERT_STR_EQ(v, "1");
  query_value(s.url, "SELECT current_user", v, sizeof v);
  ASSERT_STR_EQ(v, "luastream");

  char wrong[300];
  snprintf(wrong, sizeof wrong, "host=127.0.0.1 port=%d dbname=luastream user=luastream password=x",
           s.port);
  PGconn *c = PQconnectdb(wrong);
  ASSERT_INT_EQ(PQstatus(c), CONNECTION_BAD);
  ASSERT_CONTAINS(PQerrorMessage(c), "password authentication failed");
  PQfinish(c);

  ASSERT_OK(
      pg_server_exec(&s, "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1), (2)"));
  /* a session open: its backend is killed with the server */
  PGconn *session = PQconnectdb(s.conninfo);
  ASSERT_INT_EQ(PQstatus(session), CONNECTION_OK);
  int backend = PQbackendPID(session);
  ASSERT(backend > 0);
  pid_t postmaster = s.pid;
  pg_server_kill(&s);
  ASSERT_INT_EQ(s.pid, 0);
  ASSERT_INT_EQ(kill(postmaster, 0), -1); /* no process of the server is left */
  ASSERT_INT_EQ(kill(backend, 0), -1);
  ASSERT_INT_EQ(errno, ESRCH);
  PGresult *r = PQexec(session, "SELECT 1");
  ASSERT(PQresultStatus(r) != PGRES_TUPLES_OK);
  PQclear(r);
  PQfinish(session);
  c = PQconnectdb(s.conninfo);
  ASSERT_INT_EQ(PQstatus(c), CONNECTION_BAD);
  PQfinish(c);

  ASSERT_OK(pg_server_start(&s));
  ASSERT_INT_EQ(s.port, port);
  ASSERT_OK(pg_server_exec(&s, "INSERT INTO t VALUES (3)"));
  query_value(s.admin, "SELECT count(*) FROM t", v, sizeof v);
  ASSERT_STR_EQ(v, "3");

  char dir[64];
  snprintf(dir, sizeof dir, "%s", s.dir);
  postmaster = s.pid;
  pg_server_stop(&s);
  ASSERT_INT_EQ(kill(postmaster, 0), -1);
  struct stat st;
  ASSERT_INT_EQ(stat(dir, &st), -1);
  LEAK_CHECK();
}
