/* redis_server: starts and stops a private redis-server for a test.
 *
 * A free port is found by binding port 0 on 127.0.0.1 and reading it back.
 * Tests run in parallel (ctest -j), so another test's server may take that
 * port before ours binds it: readiness is "a connect to our own unix socket
 * succeeds" (it lives in our private directory, so no other server answers
 * there), checked every 10 ms while watching for the child exiting; a first
 * start whose server exits (the port was taken) tries again on a new port.
 * A server that exits otherwise has its log printed.
 *
 * Without redis-server on PATH the test is skipped (TEST_SKIP), or fails when
 * LUASTREAM_REQUIRE_REDIS is set (./dev test, where it must run). */
#include "redis_server.h"
#include "task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define MAX_ARGS 48
#define READY_TIMEOUT_MS 10000
#define MAX_SERVERS 8
#define PORT_ATTEMPTS 5

/* Servers with a directory, stopped at exit: a failing assertion exits the
 * test without reaching its redis_server_stop. */
static struct redis_server *live[MAX_SERVERS];

static void stop_all(void) {
  for (int i = 0; i < MAX_SERVERS; i++)
    if (live[i]) redis_server_stop(live[i]);
}

static void track(struct redis_server *s, int on) {
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

static int in_path(const char *name) {
  const char *path = getenv("PATH");
  char buf[1024];
  if (path == NULL) return 0;
  while (*path) {
    size_t n = strcspn(path, ":");
    if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
      snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, name);
      if (access(buf, X_OK) == 0) return 1;
    }
    path += n;
    if (*path == ':') path++;
  }
  return 0;
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

static int accepts(const char *sock) {
  struct sockaddr_un sa;
  if (strlen(sock) >= sizeof sa.sun_path) return 0;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, sock, strlen(sock) + 1);
  int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void print_log(const struct redis_server *s) {
  char path[128], buf[4096];
  snprintf(path, sizeof path, "%s/redis.log", s->dir);
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  fprintf(stderr, "--- %s ---\n%s\n---\n", path, buf);
}

/* In the child: never returns. */
static void exec_server(const struct redis_server *s, const char *const *extra) {
  char port[16], logpath[128], cert[160], key[160], ca[160];
  const char *argv[MAX_ARGS];
  int argc = 0;
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the test, even on a timeout */
#endif
  snprintf(port, sizeof port, "%d", s->port);
  snprintf(logpath, sizeof logpath, "%s/redis.log", s->dir);
  int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  argv[argc++] = "redis-server";
  argv[argc++] = "--port";
  if (s->tls[0]) {
    snprintf(cert, sizeof cert, "%s/server.pem", s->tls);
    snprintf(key, sizeof key, "%s/server.key", s->tls);
    snprintf(ca, sizeof ca, "%s/ca.pem", s->tls);
    const char *tls[] = {"0",  "--tls-port",         port,      "--tls-cert-file",
                         cert, "--tls-key-file",     key,       "--tls-ca-cert-file",
                         ca,   "--tls-auth-clients", "optional"};
    for (size_t i = 0; i < sizeof tls / sizeof *tls; i++) argv[argc++] = tls[i];
  } else {
    argv[argc++] = port;
  }
  argv[argc++] = "--bind";
  argv[argc++] = "127.0.0.1";
  argv[argc++] = "--save";
  argv[argc++] = "";
  argv[argc++] = "--appendonly";
  argv[argc++] = "no";
  argv[argc++] = "--dir";
  argv[argc++] = s->dir;
  argv[argc++] = "--unixsocket";
  argv[argc++] = s->sock;
  argv[argc++] = "--unixsocketperm";
  argv[argc++] = "700";
  for (int i = 0; extra && extra[i] && argc < MAX_ARGS - 1; i++) argv[argc++] = extra[i];
  argv[argc] = NULL;
  execvp("redis-server", (char *const *)argv);
  fprintf(stderr, "exec redis-server: %s\n", strerror(errno));
  _exit(127);
}

static int required(void) {
  const char *v = getenv("LUASTREAM_REQUIRE_REDIS");
  return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* 0 when ready; 1 when the server exited before accepting connections (its
 * port may have been taken); -1 on any other failure. Says why on stderr. */
static int launch(struct redis_server *s, const char *const *extra) {
  fflush(NULL); /* the child must not flush our buffered output a second time */
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "redis_server_start: fork: %s\n", strerror(errno));
    return -1;
  }
  if (pid == 0) exec_server(s, extra);
  s->pid = pid;

  for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 10) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      fprintf(stderr, "redis-server on port %d exited before accepting connections (%s %d)\n",
              s->port, WIFEXITED(status) ? "exit status" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      print_log(s);
      return 1;
    }
    if (accepts(s->sock)) return 0;
    sleep_ms(10);
  }
  fprintf(stderr, "redis-server on port %d did not accept connections within %d ms\n", s->port,
          READY_TIMEOUT_MS);
  print_log(s);
  redis_server_kill(s);
  return -1;
}

int redis_server_start(struct redis_server *s, const char *const *extra) {
  if (s->pid) {
    fprintf(stderr, "redis_server_start: already running (pid %d)\n", (int)s->pid);
    return -1;
  }
  if (!in_path("redis-server")) {
    if (!required())
      TEST_SKIP(
          "redis-server is not on PATH: this test starts its own server "
          "(install it, e.g. apt-get install redis-server)");
    fprintf(stderr,
            "redis-server is not on PATH and LUASTREAM_REQUIRE_REDIS is set: this "
            "test starts its own server (install it, e.g. apt-get install redis-server)\n");
    return -1;
  }
  if (s->dir[0] == '\0') {
    snprintf(s->dir, sizeof s->dir, "/tmp/luastream-redis-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
      fprintf(stderr, "redis_server_start: mkdtemp: %s\n", strerror(errno));
      s->dir[0] = '\0';
      return -1;
    }
    snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
    track(s, 1);
  }
  /* A restart keeps its port: the test expects the server back where it was. */
  int attempts = s->port == 0 ? PORT_ATTEMPTS : 1;
  for (int i = 0; i < attempts; i++) {
    if (attempts > 1) {
      s->port = free_port();
      if (s->port <= 0) {
        fprintf(stderr, "redis_server_start: no free loopback port: %s\n", strerror(errno));
        s->port = 0;
        return -1;
      }
    }
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%d", s->tls[0] ? "rediss" : "redis", s->port);
    int r = launch(s, extra);
    if (r <= 0) {
      if (r < 0 && attempts > 1) s->port = 0;
      return r;
    }
  }
  if (attempts > 1) s->port = 0;
  return -1;
}

void redis_server_kill(struct redis_server *s) {
  if (s->pid == 0) return;
  kill(s->pid, SIGKILL);
  while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {}
  s->pid = 0;
}

void redis_server_stop(struct redis_server *s) {
  redis_server_kill(s);
  if (s->dir[0] == '\0') return;
  DIR *d = opendir(s->dir);
  if (d) {
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(path, sizeof path, "%s/%s", s->dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(s->dir);
  s->dir[0] = '\0';
  track(s, 0);
}
