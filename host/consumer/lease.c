/* lease: a consumer name held by one live process (see lease.h). */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flow_keys.h"
#include "grow.h"
#include "keyslot.h"
#include "scripts.h"

enum lease_state { L_IDLE, L_TAKING, L_WAITING, L_HELD, L_LOST, L_RELEASED };

struct renew_call;

struct lease_keepalive {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  char identity[LEASE_IDENTITY_MAX];
  ltimer *timer;     /* at the next renewal or rider due, while it has leases */
  uint64_t renew_ms; /* the next renewal of every lease is due then */
  lease **v;         /* its leases */
  size_t n, cap;
  struct lease_rider **riders; /* riding its leases */
  size_t nr, rcap;
  struct bk_args args; /* the call being built */
};

/* One script call renewing several leases and carrying the sections of
 * several riders; an entry is NULL once its lease was released or freed (or
 * its rider freed). */
struct renew_call {
  lease_keepalive *ka;
  size_t n, nr;
  lease **v;
  struct lease_rider **r;
};

struct lease {
  lease_keepalive *ka;
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  struct renew_call *call; /* the keepalive's call this lease is in, or NULL */
  size_t call_index;
  lease_fn *fn;
  void *data;
  char *key;
  char identity[LEASE_IDENTITY_MAX];
  enum lease_state state;
  ltimer *timer;         /* the next try while taking, waiting or confirming */
  uint64_t wait_until;   /* waiting: refused if still held then */
  bool in_flight;        /* a script call is outstanding */
  uint64_t sent_ms;      /* when the outstanding call was sent */
  uint64_t confirmed_ms; /* when the last successful take or renewal was sent */
  bool wanted;           /* lease_confirm: someone waits for LEASE_CONFIRMED */
  void (*done)(void *);  /* lease_release's callback */
  void *done_data;
};

/* ---- identity ---- */

/* This machine and pid namespace: the boot id and the namespace's inode, so
 * a pid is compared only where it means the same process. */
static void machine_id(char *out, size_t len) {
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (fgets(boot, sizeof boot, f) == NULL) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  struct stat st;
  unsigned long long ns = stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
  snprintf(out, len, "%s/%llu", boot[0] ? boot : "unknown", ns);
}

int lease_identity(const char *machine, const char *hostname, char *out, size_t len) {
  unsigned char r[16];
  size_t got = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, r, sizeof r);
    got = n > 0 ? (size_t)n : 0;
    close(fd);
  }
  if (got < sizeof r) { /* no urandom: time and pid still differ between processes */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long v = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20) ^
                           ((unsigned long long)getpid() << 40);
    for (size_t i = 0; i < sizeof r; i++)
      r[i] = (unsigned char)(v >> ((i % 8) * 8)) ^ (unsigned char)i;
  }
  char token[33], here[128];
  for (size_t i = 0; i < sizeof r; i++) snprintf(token + 2 * i, 3, "%02x", r[i]);
  machine_id(here, sizeof here);
  int n =
      snprintf(out, len, "%s %ld %s %s", token, (long)getpid(), machine ? machine : here, hostname);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Splits a lease value; false when it is not one of ours. */
static bool parse_value(const char *v, long *pid, char *machine, size_t mlen, const char **host) {
  const char *p = strchr(v, ' ');
  if (p == NULL) return false;
  char *end;
  *pid = strtol(p + 1, &end, 10);
  if (end == p + 1 || *end != ' ') return false;
  const char *m = end + 1, *h = strchr(m, ' ');
  if (h == NULL || (size_t)(h - m) >= mlen) return false;
  memcpy(machine, m, (size_t)(h - m));
  machine[h - m] = '\0';
  *host = h + 1;
  return true;
}

void lease_holder_text(const char *value, char *out, size_t len) {
  long pid;
  char machine[128];
  const char *host;
  if (parse_value(value, &pid, machine, sizeof machine, &host))
    snprintf(out, len, "%s pid %ld", host, pid);
  else
    snprintf(out, len, "\"%.200s\" (not written by luastream)", value);
}

/* The pid of the holder when it is another process of this machine (known
 * by its boot and pid namespace), else 0. Not this process: a holder of ours
 * is a host of it that is gone. */
static pid_t other_process_here(const char *value, const char *mine) {
  long pid, my_pid;
  char machine[128], my_machine[128];
  const char *host, *my_host;
  if (!parse_value(value, &pid, machine, sizeof machine, &host)) return 0;
  if (!parse_value(mine, &my_pid, my_machine, sizeof my_machine, &my_host)) return 0;
  if (strcmp(machine, my_machine) != 0 || strncmp(machine, "unknown/", 8) == 0) return 0;
  return pid <= 0 || pid == my_pid ? 0 : (pid_t)pid;
}

/* The holder is a process of this machine that no longer exists. */
static bool holder_gone(const char *value, const char *mine) {
  pid_t pid = other_process_here(value, mine);
  return pid && kill(pid, 0) != 0 && errno == ESRCH;
}

int lease_holder_alive_here(const char *value, const char *mine) {
  pid_t pid = other_process_here(value, mine);
  return pid && (kill(pid, 0) == 0 || errno == EPERM);
}

char *lease_key(const char *stream, const char *group, const char *consumer) {
  /* In the stream's slot (Redis Cluster): the prune script reads it beside
   * the stream. */
  return flow_key("consumer", stream, group, consumer);
}

/* ---- the script calls ---- */

static void fire(ltimer *t, void *data);

/* take, steal or drop: one key. */
static int call(lease *l, const char *op, const char *old, bk_reply_cb *cb) {
  char ttl[24];
  snprintf(ttl, sizeof ttl, "%d", LEASE_TTL_MS);
  const char *argv[] = {"EVAL", SCRIPT_LEASE, "1", l->key, op, l->identity, ttl, old};
  int argc = old ? 8 : 7;
  size_t len[8];
  for (int i = 0; i < argc; i++) len[i] = strlen(argv[i]);
  /* Before sending, and the loop's cached time (never later than the real
   * one): the key's time to live starts no earlier than this. */
  uint64_t sent = clock_now(l->clock);
  if (bk_command(l->b, l->cmd, argc, argv, len, cb, l) != 0) return -1;
  l->in_flight = true;
  l->sent_ms = sent;
  return 0;
}

/* The answer to a take or steal: {1}: done; {0, holder, pttl}: held by
 * holder. -1: not an answer. */
static int answer(const bk_reply *r, const char **holder, long long *pttl) {
  if (r == NULL || r->type != BK_ARRAY || r->elements < 1 || r->element[0]->type != BK_INTEGER)
    return -1;
  long long code = r->element[0]->integer;
  /* not (int)code: a code of 2^32 would read as 0, "held", with no holder */
  if (code != 0) return code == 1 ? 1 : -1;
  if (r->elements < 3 || r->element[1]->type != BK_STRING || r->element[2]->type != BK_INTEGER)
    return -1;
  *holder = r->element[1]->str;
  *pttl = r->element[2]->integer;
  return 0;
}

static void report(lease *l, enum lease_event ev, const char *value, long long wait_ms) {
  char holder[300] = "";
  if (value) lease_holder_text(value, holder, sizeof holder);
  l->fn(l->data, ev, value ? holder : NULL, wait_ms);
}

/* An error reply (not a lost connection): the caller logs it. */
static void failed(lease *l, const bk_reply *r) {
  if (r && r->type == BK_ERROR) l->fn(l->data, LEASE_FAILED, r->str, 0);
}

static void taken(lease *l) {
  l->state = L_HELD;
  l->confirmed_ms = l->sent_ms;
  report(l, LEASE_TAKEN, NULL, 0); /* renewed by its keepalive from here on */
}

static void take_done(void *data, const bk_reply *r, const char *err) {
  (void)err;
  lease *l = data;
  l->in_flight = false;
  if (l->state != L_TAKING && l->state != L_WAITING) return;
  const char *holder = NULL;
  long long pttl = 0;
  int code = answer(r, &holder, &pttl);
  if (code > 0) return taken(l);
  if (code < 0) { /* no answer (connection down, an error): try again */
    failed(l, r);
    if (l->state != L_TAKING && l->state != L_WAITING) return; /* stopped from the callback */
    timer_start(l->timer, LEASE_POLL_MS);
    return;
  }
  if (holder_gone(holder, l->identity)) {           /* its process is gone: take it over now */
    if (call(l, "steal", holder, take_done) == 0) { /* the argv is copied */
      report(l, LEASE_TAKEOVER, holder, 0);
      return;
    }
  }
  uint64_t now = clock_now(l->clock);
  if (lease_holder_alive_here(holder, l->identity)) { /* alive: no use waiting */
    l->state = L_IDLE;
    return report(l, LEASE_REFUSED, holder, 0);
  }
  if (l->state == L_TAKING) {
    if (pttl < 0) { /* never expires: nobody will give it back */
      l->state = L_IDLE;
      return report(l, LEASE_REFUSED, holder, 0);
    }
    l->state = L_WAITING;
    l->wait_until = now + (uint64_t)pttl + LEASE_MARGIN_MS;
    report(l, LEASE_WAITING, holder, pttl + LEASE_MARGIN_MS);
  } else if (now >= l->wait_until) { /* still held after its time to live: renewed */
    l->state = L_IDLE;
    return report(l, LEASE_REFUSED, holder, 0);
  }
  uint64_t left = l->wait_until - now;
  timer_start(l->timer, left < LEASE_POLL_MS ? left : LEASE_POLL_MS);
}

static void renew_done(void *data, const bk_reply *r, const char *err);

/* A renewal of l only (lease_confirm): SCRIPT_KEEPALIVE with no rider. */
static int renew_one(lease *l) {
  char ttl[24];
  snprintf(ttl, sizeof ttl, "%d", LEASE_TTL_MS);
  const char *argv[] = {"EVAL", SCRIPT_KEEPALIVE, "1", l->key, l->identity, ttl, "1", "0"};
  size_t len[8];
  for (int i = 0; i < 8; i++) len[i] = strlen(argv[i]);
  uint64_t sent = clock_now(l->clock); /* as in call() */
  if (bk_command(l->b, l->cmd, 8, argv, len, renew_done, l) != 0) return -1;
  l->in_flight = true;
  l->sent_ms = sent;
  return 0;
}

/* The answer to a renewal of l: 1 renewed, 2 taken again, 0 held by holder,
 * -1 none (r: the reply, for its error). */
static void renewed(lease *l, int code, const char *holder, const bk_reply *r) {
  l->in_flight = false;
  if (l->state != L_HELD) return;
  if (code == 0) {
    l->state = L_LOST;
    timer_stop(l->timer);
    return report(l, LEASE_LOST, holder, 0);
  }
  if (code < 0) { /* no answer (connection down, an error): the next renewal tries again */
    failed(l, r);
    if (l->state == L_HELD && l->wanted) timer_start(l->timer, LEASE_POLL_MS);
    return;
  }
  l->confirmed_ms = l->sent_ms;
  report(l, code == 2 ? LEASE_RETAKEN : LEASE_RENEWED, NULL, 0);
  if (l->state != L_HELD || !l->wanted) return; /* released from the callback */
  if (!lease_valid(l)) {                        /* sent before a pause that has ended since */
    if (renew_one(l) != 0) timer_start(l->timer, LEASE_POLL_MS);
    return;
  }
  l->wanted = false;
  report(l, LEASE_CONFIRMED, NULL, 0);
}

/* The renewals of a SCRIPT_KEEPALIVE reply for n leases and nr riders
 * ({renewals, riders}), or NULL when it is not one. */
static const bk_reply *renewals_of(const bk_reply *r, size_t n, size_t nr) {
  if (r == NULL || r->type != BK_ARRAY || r->elements != 2) return NULL;
  const bk_reply *v = r->element[0], *riders = r->element[1];
  if (v->type != BK_ARRAY || v->elements != n) return NULL;
  if (riders->type != BK_ARRAY || riders->elements != nr) return NULL;
  return v;
}

/* Element i of the renewals: its code, and the holder for 0. */
static int renew_answer(const bk_reply *r, size_t i, const char **holder) {
  if (r == NULL || i >= r->elements) return -1;
  const bk_reply *e = r->element[i];
  if (e->type == BK_STRING) {
    *holder = e->str;
    return 0;
  }
  if (e->type == BK_INTEGER && (e->integer == 1 || e->integer == 2)) return (int)e->integer;
  return -1;
}

static void renew_done(void *data, const bk_reply *r, const char *err) {
  (void)err;
  lease *l = data;
  const char *holder = NULL;
  int code = renew_answer(renewals_of(r, 1, 0), 0, &holder);
  renewed(l, code, holder, r);
}

static void fire(ltimer *t, void *data) {
  (void)t;
  lease *l = data;
  if (l->in_flight) return timer_start(l->timer, LEASE_POLL_MS);
  if (l->state == L_HELD) {
    if (l->wanted && renew_one(l) != 0) timer_start(l->timer, LEASE_POLL_MS);
  } else if (l->state == L_TAKING || l->state == L_WAITING) {
    if (call(l, "take", NULL, take_done) != 0) timer_start(l->timer, LEASE_POLL_MS);
  }
}

/* ---- life cycle ---- */

static int keepalive_add(lease_keepalive *ka, lease *l);

lease *lease_new(lease_keepalive *ka, const char *stream, const char *group, const char *consumer,
                 lease_fn *fn, void *data) {
  lease *l = calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->b = ka->b;
  l->cmd = ka->cmd;
  l->clock = ka->clock;
  l->fn = fn;
  l->data = data;
  snprintf(l->identity, sizeof l->identity, "%s", ka->identity);
  l->key = lease_key(stream, group, consumer);
  l->timer = timer_new(ka->clock, fire, l);
  if (l->key == NULL || l->timer == NULL || keepalive_add(ka, l) != 0) {
    lease_free(l);
    return NULL;
  }
  return l;
}

void lease_take(lease *l) {
  l->state = L_TAKING;
  fire(l->timer, l);
}

static void drop_done(void *data, const bk_reply *r, const char *err) {
  (void)r;
  (void)err;
  lease *l = data;
  l->in_flight = false;
  void (*done)(void *) = l->done;
  l->done = NULL;
  if (done) done(l->done_data);
}

static void keepalive_remove(lease_keepalive *ka, lease *l);

/* l leaves the keepalive's call it is in: its answer no longer concerns l. */
static void leave_call(lease *l) {
  if (l->call) l->call->v[l->call_index] = NULL;
  l->call = NULL;
}

void lease_release(lease *l, void (*done)(void *data), void *data) {
  bool held = l->state == L_HELD;
  l->state = L_RELEASED;
  timer_stop(l->timer);
  leave_call(l); /* its renewal went first on the same connection: the drop follows it */
  if (l->ka) keepalive_remove(l->ka, l); /* its timer must not keep a stopped loop running */
  l->ka = NULL;
  /* A renewal or take still outstanding may have set the key: drop it too
   * (the script deletes only this process's value). */
  if ((held || l->in_flight) && call(l, "drop", NULL, drop_done) == 0) {
    l->done = done;
    l->done_data = data;
    return;
  }
  done(data);
}

int lease_held(const lease *l) { return l->state == L_HELD; }

int lease_valid(const lease *l) {
  return l->state == L_HELD && clock_fresh(l->clock) < l->confirmed_ms + LEASE_VALID_MS;
}

void lease_confirm(lease *l) {
  if (l->state != L_HELD || l->wanted) return;
  l->wanted = true;
  if (l->in_flight) return; /* its answer renews again if it is too old */
  timer_stop(l->timer);
  if (renew_one(l) != 0) timer_start(l->timer, LEASE_POLL_MS);
}
const char *lease_key_of(const lease *l) { return l->key; }

void lease_free(lease *l) {
  if (l == NULL) return;
  leave_call(l);
  if (l->ka) keepalive_remove(l->ka, l);
  if (l->timer) timer_free(l->timer);
  free(l->key);
  free(l);
}

/* ---- the keepalive: every held lease renewed together, riders with them ---- */

static void keepalive_fire(ltimer *t, void *data);

lease_keepalive *lease_keepalive_new(broker *b, bk_conn *cmd, lclock *clock, const char *identity) {
  lease_keepalive *ka = calloc(1, sizeof *ka);
  if (ka == NULL) return NULL;
  ka->b = b;
  ka->cmd = cmd;
  ka->clock = clock;
  snprintf(ka->identity, sizeof ka->identity, "%s", identity);
  bk_args_init(&ka->args);
  ka->timer = timer_new(clock, keepalive_fire, ka);
  if (ka->timer == NULL) {
    free(ka);
    return NULL;
  }
  return ka;
}

const char *lease_keepalive_identity(const lease_keepalive *ka) { return ka->identity; }

void lease_keepalive_free(lease_keepalive *ka) {
  if (ka == NULL) return;
  for (size_t i = 0; i < ka->n; i++) ka->v[i]->ka = NULL; /* leases freed later leave alone */
  for (size_t i = 0; i < ka->nr; i++) ka->riders[i]->lease = NULL;
  timer_free(ka->timer);
  bk_args_free(&ka->args);
  free(ka->riders);
  free(ka->v);
  free(ka);
}

/* Arms the timer for the first of the next renewal and the riders' next
 * sections. */
static void keepalive_arm(lease_keepalive *ka) {
  if (ka->n == 0) return timer_stop(ka->timer);
  uint64_t next = ka->renew_ms, now = clock_now(ka->clock);
  for (size_t i = 0; i < ka->nr; i++)
    if (ka->riders[i]->next_ms < next) next = ka->riders[i]->next_ms;
  timer_start(ka->timer, next > now ? next - now : 0);
}

static int keepalive_add(lease_keepalive *ka, lease *l) {
  lease **v = grow(ka->v, &ka->cap, ka->n + 1, sizeof *v, 8);
  if (v == NULL) return -1;
  ka->v = v;
  ka->v[ka->n++] = l;
  l->ka = ka;
  if (ka->n == 1) {
    ka->renew_ms = clock_now(ka->clock) + LEASE_RENEW_MS;
    keepalive_arm(ka);
  }
  return 0;
}

static void rider_remove(lease_keepalive *ka, struct lease_rider *r) {
  for (size_t i = 0; i < ka->nr; i++) {
    if (ka->riders[i] != r) continue;
    ka->riders[i] = ka->riders[--ka->nr];
    break;
  }
  r->lease = NULL;
}

/* l leaves: its riders with it. */
static void keepalive_remove(lease_keepalive *ka, lease *l) {
  for (size_t i = 0; i < ka->n; i++) {
    if (ka->v[i] != l) continue;
    ka->v[i] = ka->v[--ka->n];
    break;
  }
  for (size_t i = ka->nr; i-- > 0;)
    if (ka->riders[i]->lease == l) rider_remove(ka, ka->riders[i]);
  if (ka->n == 0) timer_stop(ka->timer);
}

void lease_rider_init(struct lease_rider *r) {
  bk_args_init(&r->keys);
  bk_args_init(&r->args);
  r->section = "1";
  r->slot_key = NULL;
  r->with_renewals = r->renewal = false;
  r->lease = NULL;
  r->pending = 0;
  r->call = NULL;
}

void lease_ride(lease *l, struct lease_rider *r) {
  lease_keepalive *ka = l->ka;
  if (r->lease == l || ka == NULL) return; /* riding already, or released */
  lease_unride(r);
  struct lease_rider **v = grow(ka->riders, &ka->rcap, ka->nr + 1, sizeof *v, 8);
  if (v == NULL) return; /* no heartbeat: its entries may be taken after min_idle */
  ka->riders = v;
  ka->riders[ka->nr++] = r;
  r->lease = l;
  r->next_ms = clock_now(ka->clock) + r->every_ms;
  keepalive_arm(ka);
}

void lease_rider_soon(struct lease_rider *r) {
  if (r->lease == NULL || r->lease->ka == NULL || r->pending) return;
  r->next_ms = clock_now(r->lease->ka->clock);
  keepalive_arm(r->lease->ka);
}

void lease_unride(struct lease_rider *r) {
  if (r->lease && r->lease->ka) rider_remove(r->lease->ka, r);
  r->lease = NULL;
}

void lease_rider_free(struct lease_rider *r) {
  lease_unride(r);
  if (r->call) r->call->r[r->call_index] = NULL;
  r->call = NULL;
  r->pending = 0;
  bk_args_free(&r->keys);
  bk_args_free(&r->args);
}

static bool keepalive_send(lease_keepalive *ka, lease **v, size_t n, struct lease_rider **rv,
                           size_t nr);

/* A call refused whole (Redis checks every key against the ACL before the
 * script runs: one subscription's stream no longer allowed would cost every
 * lease and heartbeat of the slot their turn, each turn): its renewals go
 * again at once on their own, and each section in a call of its own, so
 * only the refused one fails. A lease whose call cannot go is renewed at the
 * next turn. */
static void send_apart(struct renew_call *c, const bk_reply *r, const char *err) {
  size_t m = 0;
  for (size_t i = 0; i < c->n; i++) {
    lease *l = c->v[i];
    if (l == NULL) continue;
    l->call = NULL;
    l->in_flight = false;
    if (l->state == L_HELD) c->v[m++] = l;
  }
  if (m) keepalive_send(c->ka, c->v, m, NULL, 0);
  for (size_t j = 0; j < c->nr; j++) {
    struct lease_rider *rd = c->r[j]; /* re-read: an answer may free another */
    if (rd == NULL) continue;
    rd->call = NULL;
    rd->pending--;
    if (rd->lease && rd->lease->state == L_HELD && keepalive_send(c->ka, NULL, 0, &rd, 1)) continue;
    rd->answered(rd->data, r, err);
  }
  free(c);
}

static void keepalive_done(void *data, const bk_reply *r, const char *err) {
  struct renew_call *c = data;
  if (r && r->type == BK_ERROR && c->nr > 0 && c->n + c->nr > 1) return send_apart(c, r, err);
  const bk_reply *renewals = renewals_of(r, c->n, c->nr);
  for (size_t i = 0; i < c->n; i++) {
    lease *l = c->v[i];
    if (l == NULL) continue;
    l->call = NULL;
    const char *holder = NULL;
    int code = renew_answer(renewals, i, &holder);
    renewed(l, code, holder, r);
  }
  /* a reply of another shape: no answer (as a lost connection) */
  const bk_reply *error = r && r->type == BK_ERROR ? r : NULL;
  for (size_t i = 0; i < c->nr; i++) {
    struct lease_rider *rd = c->r[i]; /* re-read: an answer may free another */
    if (rd == NULL) continue;
    rd->call = NULL;
    rd->pending--;
    rd->answered(rd->data, renewals ? r->element[1]->element[i] : error, err);
  }
  free(c);
}

/* Renews the n leases v and carries the sections of the nr riders rv (one
 * slot, their add already made) in one script call. Whether it went out. */
static bool keepalive_send(lease_keepalive *ka, lease **v, size_t n, struct lease_rider **rv,
                           size_t nr) {
  struct renew_call *c = malloc(sizeof *c + n * sizeof *c->v + nr * sizeof *c->r);
  if (c == NULL) return false; /* tried again at the next turn */
  c->ka = ka;
  c->v = (lease **)(c + 1);
  c->r = (struct lease_rider **)(c->v + n);
  struct bk_args *a = &ka->args;
  long long numkeys = (long long)n;
  for (size_t j = 0; j < nr; j++) numkeys += (rv[j]->slot_key ? 0 : 1) + rv[j]->keys.argc;
  bk_args_reset(a);
  bk_args_str(a, "EVAL");
  bk_args_str(a, SCRIPT_KEEPALIVE);
  bk_args_num(a, numkeys);
  for (size_t i = 0; i < n; i++) bk_args_str(a, v[i]->key);
  for (size_t j = 0; j < nr; j++) {
    if (rv[j]->slot_key == NULL) bk_args_str(a, rv[j]->lease->key);
    for (int k = 0; k < rv[j]->keys.argc; k++)
      bk_args_add(a, rv[j]->keys.argv[k], rv[j]->keys.argvlen[k]);
  }
  bk_args_str(a, ka->identity);
  bk_args_num(a, LEASE_TTL_MS);
  bk_args_num(a, (long long)n);
  bk_args_num(a, (long long)nr);
  for (size_t j = 0; j < nr; j++) {
    bk_args_str(a, rv[j]->section);
    for (int k = 0; k < rv[j]->args.argc; k++)
      bk_args_add(a, rv[j]->args.argv[k], rv[j]->args.argvlen[k]);
  }
  uint64_t sent = clock_now(ka->clock); /* as in call() */
  if (bk_command(ka->b, ka->cmd, a->argc, a->argv, a->argvlen, keepalive_done, c) != 0) {
    free(c);
    return false;
  }
  c->n = n;
  c->nr = nr;
  for (size_t i = 0; i < n; i++) {
    c->v[i] = v[i];
    v[i]->call = c;
    v[i]->call_index = i;
    v[i]->in_flight = true;
    v[i]->sent_ms = sent;
  }
  for (size_t j = 0; j < nr; j++) {
    c->r[j] = rv[j];
    rv[j]->call = c;
    rv[j]->call_index = j;
    rv[j]->pending++;
  }
  return true;
}

/* Whether rider r's section goes now (a quarter of its interval early, so
 * that riders due close together share a call), and then it has one. */
static bool rider_due(struct lease_rider *r, uint64_t now) {
  if (r->next_ms > now + r->every_ms / 4) return false;
  r->next_ms = now + r->every_ms;
  /* the last one still out (as its next would be), or its lease not held */
  if (r->pending || r->lease->state != L_HELD) return false;
  return r->add(r->data, r);
}

/* At a renewal, whether rider r (with_renewals) has a section for its call
 * anyway. */
static bool rider_renewing(struct lease_rider *r) {
  if (!r->with_renewals || r->pending || r->lease->state != L_HELD) return false;
  r->renewal = true;
  bool has = r->add(r->data, r);
  r->renewal = false;
  return has;
}

/* One call per Redis Cluster slot (a script's keys must share one; one for
 * all on a single server) that has riders due, or every slot's when the
 * renewal is due: each renews the slot's held leases not being renewed
 * already and carries its due riders' sections. */
static void keepalive_fire(ltimer *t, void *data) {
  (void)t;
  lease_keepalive *ka = data;
  uint64_t now = clock_now(ka->clock);
  bool renew = now >= ka->renew_ms;
  if (renew) ka->renew_ms = now + LEASE_RENEW_MS;
  size_t total = ka->n + ka->nr; /* each + 1 below: never malloc(0), which may give NULL */
  lease **due = malloc(ka->n * sizeof *due + 1);
  struct lease_rider **riding = malloc(ka->nr * sizeof *riding + 1);
  unsigned *slot = malloc(total * sizeof *slot + 1); /* leases' then riders' */
  bool *sent = calloc(total + 1, sizeof *sent);
  lease **batch = malloc(ka->n * sizeof *batch + 1);
  struct lease_rider **rbatch = malloc(ka->nr * sizeof *rbatch + 1);
  if (!due || !riding || !slot || !sent || !batch || !rbatch) goto out;
  bool cluster = bk_is_cluster(ka->b);
  size_t n = 0, nr = 0;
  for (size_t i = 0; i < ka->n; i++) {
    lease *l = ka->v[i];
    if (l->state != L_HELD || l->in_flight || l->wanted) continue;
    slot[n] = cluster ? keyslot_of(l->key, strlen(l->key)) : 0;
    due[n++] = l;
  }
  /* add may do anything its owner does, but not unride (it is not told it
   * is in a list) */
  for (size_t i = 0; i < ka->nr; i++) {
    struct lease_rider *r = ka->riders[i];
    if (rider_due(r, now) || (renew && rider_renewing(r))) riding[nr++] = r;
  }
  for (size_t j = 0; j < nr; j++) {
    const char *k = riding[j]->slot_key ? riding[j]->slot_key : riding[j]->lease->key;
    slot[n + j] = cluster ? keyslot_of(k, strlen(k)) : 0;
  }
  /* a slot gets a call for its riders, and for its leases when renewing */
  for (size_t i = 0; i < n + nr; i++) {
    if (sent[i] || (i < n && !renew)) continue;
    size_t m = 0, mr = 0;
    for (size_t j = 0; j < n + nr; j++) {
      if (sent[j] || slot[j] != slot[i]) continue;
      sent[j] = true;
      if (j < n)
        batch[m++] = due[j];
      else
        rbatch[mr++] = riding[j - n];
    }
    keepalive_send(ka, batch, m, rbatch, mr);
  }
out:
  free(due);
  free(riding);
  free(slot);
  free(sent);
  free(batch);
  free(rbatch);
  keepalive_arm(ka);
}
