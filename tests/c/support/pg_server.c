/* pg_server: starts and stops a private PostgreSQL server for a test.
 *
 * The postmaster is started directly (not through pg_ctl) so that it is our
 * child: its exit is seen with waitpid and it gets PR_SET_PDEATHSIG (its
 * backends exit when it dies). A crash is SIGKILL to the postmaster, stopped
 * first so that it forks nothing more, and to each of its children (found by
 * parent in /proc: each leads a process group of its own). The test process
 * is a child subreaper, so those children are reparented to it and reaped
 * before the next start (a new postmaster refuses to start while an old
 * backend holds the shared memory).
 *
 * Readiness is PQping through the unix socket in our private directory (no
 * other server answers there), checked every 10 ms while watching for the
 * postmaster exiting; a first start whose server exits (the port was taken)
 * tries again on a new port. */
#define _DEFAULT_SOURCE /* setgroups */
#include "pg_server.h"
#include "task.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define READY_TIMEOUT_MS 30000
#define STOP_GRACE_MS 10000
#define MAX_SERVERS 8
#define PORT_ATTEMPTS 5
#define SUPERUSER "postgres"

static struct pg_server *live[MAX_SERVERS];

static void stop_all(void) {
  for (int i = 0; i < MAX_SERVERS; i++)
    if (live[i]) pg_server_stop(live[i]);
}

static void track(struct pg_server *s, int on) {
  static int registered;
  if (!registered) registered = atexit(stop_all) == 0;
  for (int i = 0; i < MAX_SERVERS; i++) {
    if (on && live[i] == NULL) {
      live[i] = s;
      return;
    }
    if (!on && live[i] == s) {
      live[i] = NULL;
      return;
    }
  }
}

static int required(void) {
  const char *v = getenv("LUASTREAM_REQUIRE_REDIS");
  return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

static int has_binaries(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/initdb", dir);
  if (access(path, X_OK) != 0) return 0;
  snprintf(path, sizeof path, "%s/postgres", dir);
  return access(path, X_OK) == 0;
}

/* The folder of initdb and postgres: pg_config's, else the newest
 * /usr/lib/postgresql/<version>/bin. 0, or -1 when there is none. */
static int find_bindir(char *out, size_t cap) {
  FILE *p = popen("pg_config --bindir 2>/dev/null", "r");
  if (p) {
    char line[256] = "";
    if (fgets(line, sizeof line, p) == NULL) line[0] = '\0';
    pclose(p);
    line[strcspn(line, "\n")] = '\0';
    if (line[0] && has_binaries(line)) {
      snprintf(out, cap, "%s", line);
      return 0;
    }
  }
  glob_t g;
  int found = -1;
  if (glob("/usr/lib/postgresql/*/bin", 0, NULL, &g) == 0) {
    for (size_t i = g.gl_pathc; i-- > 0 && found < 0;) {
      if (has_binaries(g.gl_pathv[i])) {
        snprintf(out, cap, "%s", g.gl_pathv[i]);
        found = 0;
      }
    }
    globfree(&g);
  }
  return found;
}

/* As root: the postgres user's ids (0, or -1 without one). Otherwise our own:
 * the server runs as whoever runs the tests. */
static int server_user(uid_t *uid, gid_t *gid) {
  if (geteuid() != 0) {
    *uid = geteuid();
    *gid = getegid();
    return 0;
  }
  struct passwd *pw = getpwnam(SUPERUSER);
  if (pw == NULL) return -1;
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return 0;
}

/* In a child: becomes the server's user (uid, gid looked up before the fork:
 * getpwnam is not safe after it), then asks to die with the test (a change of
 * user clears PR_SET_PDEATHSIG, so it comes last). */
static void become_server_user(uid_t uid, gid_t gid) {
  if (geteuid() == 0) {
    if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
      fprintf(stderr, "cannot become the %s user: %s\n", SUPERUSER, strerror(errno));
      _exit(127);
    }
  }
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int free_port(void) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int port = -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

static void print_log(const struct pg_server *s, const char *name) {
  char path[128], buf[4096];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  /* the end of the file: the reason a start failed comes last */
  if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)sizeof buf - 1)
    fseek(f, -(long)(sizeof buf - 1), SEEK_END);
  else
    rewind(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  fprintf(stderr, "--- %s ---\n%s\n---\n", path, buf);
}

/* In the child: output to <dir>/<log>. */
static void redirect(const struct pg_server *s, const char *log) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", s->dir, log);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
}

static int run_initdb(struct pg_server *s, const char *bindir, uid_t uid, gid_t gid) {
  char prog[512], data[96];
  snprintf(prog, sizeof prog, "%s/initdb", bindir);
  snprintf(data, sizeof data, "%s/data", s->dir);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    redirect(s, "initdb.log");
    become_server_user(uid, gid);
    execl(prog, "initdb", "-D", data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C",
          "--no-sync", (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", prog, strerror(errno));
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  fprintf(stderr, "initdb failed\n");
  print_log(s, "initdb.log");
  return -1;
}

/* The superuser through the socket; the test role over TCP with its password. */
static int write_hba(const struct pg_server *s, uid_t uid, gid_t gid) {
  char path[128];
  snprintf(path, sizeof path, "%s/data/pg_hba.conf", s->dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fprintf(f, "local all " SUPERUSER
             " trust\n"
             "local all all scram-sha-256\n"
             "host all all 127.0.0.1/32 scram-sha-256\n");
  if (fclose(f) != 0) return -1;
  return chown(path, uid, gid);
}

static void set_urls(struct pg_server *s) {
  snprintf(s->conninfo, sizeof s->conninfo,
           "host=127.0.0.1 port=%d dbname=luastream user=luastream password=%s", s->port,
           s->password);
  snprintf(s->url, sizeof s->url, "postgresql://luastream:%s@127.0.0.1:%d/luastream", s->password,
           s->port);
  snprintf(s->admin, sizeof s->admin,
           "host=%s port=%d dbname=postgres user=" SUPERUSER " connect_timeout=5", s->dir, s->port);
}

/* In the child: never returns. */
static void exec_server(const struct pg_server *s, const char *bindir, uid_t uid, gid_t gid) {
  char prog[512], data[96], port[16];
  snprintf(prog, sizeof prog, "%s/postgres", bindir);
  snprintf(data, sizeof data, "%s/data", s->dir);
  snprintf(port, sizeof port, "%d", s->port);
  redirect(s, "postgres.log");
  become_server_user(uid, gid);
  execl(prog, "postgres", "-D", data, "-p", port, "-k", s->dir, "-c", "listen_addresses=127.0.0.1",
        "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200", "-c",
        "logging_collector=off", (char *)NULL);
  fprintf(stderr, "exec %s: %s\n", prog, strerror(errno));
  _exit(127);
}

#define MAX_CHILDREN 256

/* The pids whose parent is pid, at most cap of them; how many. */
static int children_of(pid_t pid, pid_t *out, int cap) {
  DIR *d = opendir("/proc");
  int n = 0;
  if (d == NULL) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < cap) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *close_paren = strrchr(buf, ')'); /* the name may hold spaces */
    int ppid;
    char state;
    if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == pid)
      out[n++] = (pid_t)atoi(e->d_name);
  }
  closedir(d);
  return n;
}

/* Waits until pid is gone: reaped when it is our child (a subreaper gets the
 * orphans), else until it no longer exists (10 s at most). */
static void wait_gone(pid_t pid) {
  for (int waited = 0; waited < STOP_GRACE_MS; waited += 10) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid) return;
    if (r < 0 && errno == ECHILD && kill(pid, 0) != 0) return;
    sleep_ms(10);
  }
  fprintf(stderr, "pg_server: process %d of the server still runs\n", (int)pid);
}

/* 0 when ready; 1 when the server exited before accepting connections (its
 * port may have been taken); -1 on any other failure. Says why on stderr. */
static int launch(struct pg_server *s, const char *bindir) {
  uid_t uid;
  gid_t gid;
  if (server_user(&uid, &gid) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "pg_server_start: fork: %s\n", strerror(errno));
    return -1;
  }
  if (pid == 0) exec_server(s, bindir, uid, gid);
  s->pid = pid;
  for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 10) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      fprintf(stderr, "postgres on port %d exited before accepting connections (%s %d)\n", s->port,
              WIFEXITED(status) ? "exit status" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      print_log(s, "postgres.log");
      return 1;
    }
    if (PQping(s->admin) == PQPING_OK) return 0;
    sleep_ms(10);
  }
  fprintf(stderr, "postgres on port %d did not accept connections within %d ms\n", s->port,
          READY_TIMEOUT_MS);
  print_log(s, "postgres.log");
  pg_server_kill(s);
  return -1;
}

static int random_password(char *out, size_t cap) {
  unsigned char b[16];
  FILE *f = fopen("/dev/urandom", "rb");
  if (f == NULL) return -1;
  size_t n = fread(b, 1, sizeof b, f);
  fclose(f);
  if (n != sizeof b || cap < 2 * sizeof b + 1) return -1;
  for (size_t i = 0; i < sizeof b; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}

int pg_server_exec(const struct pg_server *s, const char *sql) {
  PGconn *c = PQconnectdb(s->admin);
  int rc = -1;
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "pg_server_exec: %s", PQerrorMessage(c));
  } else {
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
      rc = 0;
    else
      fprintf(stderr, "pg_server_exec: %s", PQresultErrorMessage(r));
    PQclear(r);
  }
  PQfinish(c);
  return rc;
}

/* The first start: the directory, initdb, the role and the database. */
static int create(struct pg_server *s, const char *bindir) {
  uid_t uid;
  gid_t gid;
  if (server_user(&uid, &gid) != 0) {
    fprintf(stderr,
            "pg_server_start: running as root and there is no %s user to run "
            "PostgreSQL as (the postgresql package creates it)\n",
            SUPERUSER);
    return -1;
  }
  snprintf(s->dir, sizeof s->dir, "/tmp/luastream-pg-XXXXXX");
  if (mkdtemp(s->dir) == NULL) {
    fprintf(stderr, "pg_server_start: mkdtemp: %s\n", strerror(errno));
    s->dir[0] = '\0';
    return -1;
  }
  track(s, 1);
  if (chown(s->dir, uid, gid) != 0) {
    fprintf(stderr, "pg_server_start: chown %s: %s\n", s->dir, strerror(errno));
    return -1;
  }
  if (random_password(s->password, sizeof s->password) != 0) {
    fprintf(stderr, "pg_server_start: cannot read /dev/urandom\n");
    return -1;
  }
  if (run_initdb(s, bindir, uid, gid) != 0) return -1;
  if (write_hba(s, uid, gid) != 0) {
    fprintf(stderr, "pg_server_start: cannot write pg_hba.conf: %s\n", strerror(errno));
    return -1;
  }
  return 0;
}

int pg_server_start(struct pg_server *s) {
  char bindir[256];
  if (s->pid) {
    fprintf(stderr, "pg_server_start: already running (pid %d)\n", (int)s->pid);
    return -1;
  }
  if (find_bindir(bindir, sizeof bindir) != 0) {
    static const char why[] =
        "PostgreSQL's initdb and postgres were not found (pg_config --bindir, "
        "/usr/lib/postgresql/*/bin): this test starts its own server (install "
        "it, e.g. apt-get install postgresql)";
    if (!required()) TEST_SKIP("%s", why);
    fprintf(stderr, "%s and LUASTREAM_REQUIRE_REDIS is set\n", why);
    return -1;
  }
#ifdef __linux__
  prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  int first = s->dir[0] == '\0';
  if (first && create(s, bindir) != 0) return -1;
  /* A restart keeps its port: the test expects the server back where it was. */
  int attempts = s->port == 0 ? PORT_ATTEMPTS : 1;
  for (int i = 0; i < attempts; i++) {
    if (attempts > 1) {
      s->port = free_port();
      if (s->port <= 0) {
        fprintf(stderr, "pg_server_start: no free loopback port: %s\n", strerror(errno));
        s->port = 0;
        return -1;
      }
    }
    set_urls(s);
    int r = launch(s, bindir);
    if (r < 0) return -1;
    if (r == 0) {
      if (!first) return 0;
      char sql[256];
      snprintf(sql, sizeof sql, "CREATE ROLE luastream LOGIN PASSWORD '%s'; ", s->password);
      if (pg_server_exec(s, sql) != 0) return -1;
      return pg_server_exec(s, "CREATE DATABASE luastream OWNER luastream");
    }
  }
  if (attempts > 1) s->port = 0;
  return -1;
}

void pg_server_kill(struct pg_server *s) {
  if (s->pid == 0) return;
  pid_t kids[MAX_CHILDREN];
  kill(s->pid, SIGSTOP); /* no new backend between the listing and the kill */
  int n = children_of(s->pid, kids, MAX_CHILDREN);
  for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
  kill(s->pid, SIGKILL);
  while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {}
  for (int i = 0; i < n; i++) wait_gone(kids[i]);
  s->pid = 0;
}

void pg_server_stop(struct pg_server *s) {
  if (s->pid) {
    kill(s->pid, SIGINT); /* fast shutdown: sessions are ended, a checkpoint written */
    for (int waited = 0; waited < STOP_GRACE_MS; waited += 10) {
      if (waitpid(s->pid, NULL, WNOHANG) == s->pid) { /* after its children */
        s->pid = 0;
        break;
      }
      sleep_ms(10);
    }
    pg_server_kill(s);
  }
  if (s->dir[0] == '\0') return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execlp("rm", "rm", "-rf", s->dir, (char *)NULL);
    _exit(127);
  }
  if (pid > 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
  s->dir[0] = '\0';
  track(s, 0);
}
