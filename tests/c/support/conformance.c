/* conformance: scenario runner, the two sides and the normalised rendering
 * (see conformance.h). */
#include "conformance.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <uv.h>

#include "broker.h"
#include "broker_memory.h"
#include "clock.h"
#include "clock_virtual.h"
#include "memreply.h"
#include "scripts.h"
#include "task.h"
#include "url.h"

#define REPLY_WAIT_MS 3000 /* a real server answers a plain command well within this */
#define BLOCK_POLL_MS 3000 /* how long a send may take to reach the server and block */
#define MAX_IDS 8192       /* a long differential run names thousands */
#define ID_MAX_LEN 48      /* "ms-seq" of two 64-bit numbers, with room */
#define MAX_TIMES 4096     /* idle times in one reply */
#define LINE_MAX_LEN (1 << 16)

/* ---- small text buffer ---- */

struct buf {
  char *s;
  size_t n, cap;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->n + (size_t)w + 1 > b->cap) {
    b->cap = (b->n + (size_t)w + 1) * 2;
    b->s = mr_realloc(b->s, b->cap);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, (size_t)w + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)w;
}

/* Bytes as shown in a line: newlines and other control bytes escaped. */
static void put_text(struct buf *b, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n')
      put(b, "\\n");
    else if (c == '\r')
      put(b, "\\r");
    else if (c < 32 || c == 127)
      put(b, "\\x%02x", c);
    else
      put(b, "%c", c);
  }
}

static uint64_t real_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- sides ---- */

struct cf_slot {
  bool busy;       /* sent, no answer read yet */
  bool done;       /* answered */
  bk_reply *reply; /* copy; NULL when err */
  char err[128];
};

struct side_ops {
  void (*reset)(struct cf_side *s);  /* clean data, connections open */
  void (*finish)(struct cf_side *s); /* connections closed */
  void (*settle)(struct cf_side *s, struct cf_slot *slot, int wait_ms);
  void (*placed)(struct cf_side *s, struct cf_slot *slot); /* after CF_SEND */
  bool (*blocked)(struct cf_side *s, struct cf_slot *slot);
  void (*advance)(struct cf_side *s, long long ms);
  uint64_t (*wall_ms)(struct cf_side *s);
  void (*free)(struct cf_side *s);
};

struct cf_side {
  const struct side_ops *ops;
  char name[32];
  broker *b;
  bk_conn *conn[CF_NCONN];
  struct cf_slot slot[CF_NCONN];
  int outstanding; /* sent commands not yet answered, over all connections */
};

struct reply_ctx {
  struct cf_side *side; /* NULL for the redis side's own commands */
  struct cf_slot *slot;
};

static void on_reply(void *data, const bk_reply *r, const char *err) {
  struct reply_ctx *x = data;
  x->slot->done = true;
  x->slot->reply = r ? mr_copy(r) : NULL;
  snprintf(x->slot->err, sizeof x->slot->err, "%s", err ? err : "");
  if (x->side) x->side->outstanding--;
  free(x);
}

static int side_send(struct cf_side *s, int conn, int argc, const char **argv, const size_t *len) {
  struct cf_slot *slot = &s->slot[conn];
  mr_free(slot->reply);
  memset(slot, 0, sizeof *slot);
  struct reply_ctx *x = mr_alloc(sizeof *x);
  x->side = s;
  x->slot = slot;
  if (bk_command(s->b, s->conn[conn], argc, argv, len, on_reply, x) != 0) {
    free(x);
    return -1;
  }
  slot->busy = true;
  s->outstanding++;
  return 0;
}

static void slots_clear(struct cf_side *s) {
  for (int i = 0; i < CF_NCONN; i++) {
    mr_free(s->slot[i].reply);
    memset(&s->slot[i], 0, sizeof s->slot[i]);
  }
}

const char *cf_side_name(const struct cf_side *side) { return side->name; }

void cf_side_free(struct cf_side *side) {
  if (side == NULL) return;
  side->ops->finish(side);
  slots_clear(side);
  side->ops->free(side);
}

/* -- the in-memory broker on a virtual clock -- */

struct mem_side {
  struct cf_side base;
  char version[32];
  lclock *clk;
};

static void mem_finish(struct cf_side *s) {
  struct mem_side *m = (struct mem_side *)s;
  if (s->b == NULL) return;
  for (int i = 0; i < CF_NCONN; i++) bk_conn_close(s->b, s->conn[i]);
  broker_free(s->b);
  m->clk->ops->free(m->clk);
  s->b = NULL;
  m->clk = NULL;
}

static void mem_reset(struct cf_side *s) {
  struct mem_side *m = (struct mem_side *)s;
  mem_finish(s);
  m->clk = clock_virtual_new(real_wall_ms());
  ASSERT_NOT_NULL(m->clk);
  s->b = broker_memory_new(m->clk, m->version);
  ASSERT_NOT_NULL(s->b);
  for (int i = 0; i < CF_NCONN; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%d", i);
    s->conn[i] = bk_conn_open(s->b, name, NULL, NULL);
    ASSERT_NOT_NULL(s->conn[i]);
  }
  clock_virtual_settle(m->clk);
}

/* Nothing waits on a virtual clock: what is due now runs, the rest stays. */
static void mem_settle(struct cf_side *s, struct cf_slot *slot, int wait_ms) {
  (void)slot, (void)wait_ms;
  clock_virtual_settle(((struct mem_side *)s)->clk);
}

static void mem_placed(struct cf_side *s, struct cf_slot *slot) { mem_settle(s, slot, 0); }

static bool mem_blocked(struct cf_side *s, struct cf_slot *slot) {
  mem_settle(s, slot, 0);
  return !slot->done;
}

static void mem_advance(struct cf_side *s, long long ms) {
  clock_virtual_advance(((struct mem_side *)s)->clk, (uint64_t)ms);
}

static uint64_t mem_wall(struct cf_side *s) { return clock_wall(((struct mem_side *)s)->clk); }

static void mem_free(struct cf_side *s) { free(s); }

static const struct side_ops mem_ops = {mem_reset,   mem_finish,  mem_settle, mem_placed,
                                        mem_blocked, mem_advance, mem_wall,   mem_free};

struct cf_side *cf_memory(const char *version) {
  struct mem_side *m = mr_alloc(sizeof *m);
  m->base.ops = &mem_ops;
  snprintf(m->version, sizeof m->version, "%s", version);
  snprintf(m->base.name, sizeof m->base.name, "memory %s", version);
  return &m->base;
}

/* -- broker_redis against a real server -- */

struct redis_side {
  struct cf_side base;
  uv_loop_t loop;
  uv_timer_t deadline;
  bool timed_out;
  bk_conn *ctl; /* the runner's own connection: FLUSHALL, polling */
  int ups;      /* state callbacks saying up, all connections */
};

/* uv_stop, not only the flag: libuv 1.44's UV_RUN_ONCE runs due timers
 * before it polls, so a deadline already past when uv_run starts (a busy
 * machine) would fire there and the poll would still block until the next
 * event, seconds away. uv_stop makes that poll return at once. */
static void on_deadline(uv_timer_t *t) {
  struct redis_side *r = t->data;
  r->timed_out = true;
  uv_stop(&r->loop);
}

/* Runs the loop until *flag is set or ms pass. */
static void run_until(struct redis_side *r, const bool *flag, int ms) {
  r->timed_out = false;
  uv_timer_start(&r->deadline, on_deadline, (uint64_t)ms, 0);
  while (!(flag && *flag) && !r->timed_out) uv_run(&r->loop, UV_RUN_ONCE);
  uv_timer_stop(&r->deadline);
}

static void on_state(void *data, bk_conn *c, int up) {
  (void)c;
  struct redis_side *r = data;
  if (up) r->ups++;
}

static void wait_ups(struct redis_side *r, int want) {
  r->timed_out = false;
  uv_timer_start(&r->deadline, on_deadline, 5000, 0);
  while (r->ups < want && !r->timed_out) uv_run(&r->loop, UV_RUN_ONCE);
  uv_timer_stop(&r->deadline);
  if (r->ups < want) TEST_FAIL_("redis side: connections not up within 5 s");
}

/* A command on the control connection, waited for; the reply is a copy. */
static bk_reply *ctl_cmd(struct redis_side *r, const char *a0, const char *a1) {
  struct cf_slot slot = {0};
  struct reply_ctx *x = mr_alloc(sizeof *x);
  const char *argv[] = {a0, a1};
  size_t len[] = {strlen(a0), a1 ? strlen(a1) : 0};
  x->slot = &slot;
  if (bk_command(r->base.b, r->ctl, a1 ? 2 : 1, argv, len, on_reply, x) != 0)
    TEST_FAIL_("redis side: the control connection is down");
  run_until(r, &slot.done, REPLY_WAIT_MS);
  if (!slot.done) TEST_FAIL_("redis side: no answer to %s within %d ms", a0, REPLY_WAIT_MS);
  if (slot.reply == NULL) TEST_FAIL_("redis side: %s failed: %s", a0, slot.err);
  return slot.reply;
}

static void redis_open(struct redis_side *r) {
  char name[16];
  int want = r->ups + CF_NCONN;
  for (int i = 0; i < CF_NCONN; i++) {
    snprintf(name, sizeof name, "c%d", i);
    r->base.conn[i] = bk_conn_open(r->base.b, name, on_state, r);
    ASSERT_NOT_NULL(r->base.conn[i]);
  }
  wait_ups(r, want);
}

static void redis_finish(struct cf_side *s) {
  for (int i = 0; i < CF_NCONN; i++) {
    if (s->conn[i]) bk_conn_close(s->b, s->conn[i]);
    s->conn[i] = NULL;
  }
}

static long long info_field(const bk_reply *r, const char *field) {
  if (r == NULL || r->type != BK_STRING) return -1;
  const char *p = strstr(r->str, field);
  return p ? strtoll(p + strlen(field), NULL, 10) : -1;
}

static long long blocked_clients(struct redis_side *r) {
  bk_reply *info = ctl_cmd(r, "INFO", "clients");
  long long n = info_field(info, "blocked_clients:");
  mr_free(info);
  return n;
}

static void redis_reset(struct cf_side *s) {
  struct redis_side *r = (struct redis_side *)s;
  redis_finish(s);
  mr_free(ctl_cmd(r, "FLUSHALL", NULL));
  mr_free(ctl_cmd(r, "SCRIPT", "FLUSH"));
  s->outstanding = 0; /* the closed connections' callbacks have fired by now */
  slots_clear(s);
  /* A reader still blocked from the last scenario would fool redis_placed. */
  uint64_t start = uv_now(&r->loop);
  while (blocked_clients(r) != 0) {
    if (uv_now(&r->loop) - start > BLOCK_POLL_MS)
      TEST_FAIL_("redis side: clients of the last scenario are still blocked");
    run_until(r, NULL, 2);
  }
  redis_open(r);
}

static void redis_settle(struct cf_side *s, struct cf_slot *slot, int wait_ms) {
  run_until((struct redis_side *)s, &slot->done, wait_ms);
}

/* A send is in place when it was answered or when the server counts as
 * many blocked clients as there are unanswered sends: only then may the
 * next step (say an XADD on another connection) run. */
static void redis_placed(struct cf_side *s, struct cf_slot *slot) {
  struct redis_side *r = (struct redis_side *)s;
  uint64_t start = uv_now(&r->loop);
  for (;;) {
    run_until(r, &slot->done, 2);
    if (slot->done) return;
    if (blocked_clients(r) >= s->outstanding) return;
    if (uv_now(&r->loop) - start > BLOCK_POLL_MS) return;
  }
}

/* The server has finished whatever earlier commands caused once a PING on
 * the control connection comes back; a little more loop lets a reply that
 * is on its way arrive. */
static bool redis_blocked(struct cf_side *s, struct cf_slot *slot) {
  struct redis_side *r = (struct redis_side *)s;
  mr_free(ctl_cmd(r, "PING", NULL));
  run_until(r, &slot->done, 30);
  return !slot->done;
}

static void redis_advance(struct cf_side *s, long long ms) {
  run_until((struct redis_side *)s, NULL, (int)ms);
}

static uint64_t redis_wall(struct cf_side *s) {
  (void)s;
  return real_wall_ms();
}

static void redis_free(struct cf_side *s) {
  struct redis_side *r = (struct redis_side *)s;
  if (r->ctl) bk_conn_close(s->b, r->ctl);
  broker_free(s->b);
  uv_close((uv_handle_t *)&r->deadline, NULL);
  ASSERT_OK(uv_run(&r->loop, UV_RUN_DEFAULT)); /* close callbacks */
  ASSERT_OK(uv_loop_close(&r->loop));
  free(r);
}

static const struct side_ops redis_ops = {redis_reset,   redis_finish,  redis_settle, redis_placed,
                                          redis_blocked, redis_advance, redis_wall,   redis_free};

struct cf_side *cf_redis(const char *url) {
  struct redis_side *r = mr_alloc(sizeof *r);
  struct redis_url u;
  char err[256];
  r->base.ops = &redis_ops;
  snprintf(r->base.name, sizeof r->base.name, "redis-server");
  if (url_parse(url, &u, err, sizeof err) != 0) TEST_FAIL_("%s", err);
  ASSERT_OK(uv_loop_init(&r->loop));
  uv_timer_init(&r->loop, &r->deadline);
  r->deadline.data = r;
  r->base.b = broker_redis_new(&r->loop, &u);
  ASSERT_NOT_NULL(r->base.b);
  r->ctl = bk_conn_open(r->base.b, "ctl", on_state, r);
  ASSERT_NOT_NULL(r->ctl);
  wait_ups(r, 1);
  return &r->base;
}

/* ---- normalising ---- */

struct norm {
  char ids[MAX_IDS][ID_MAX_LEN]; /* <id1> is ids[0] */
  int nids;
  bool exact;
  bool mask_times;                  /* idle times as <t> */
  bool lenient;                     /* an unknown <idN> stays as written */
  const bk_reply *times[MAX_TIMES]; /* the integer nodes of a reply that are idle times */
  int ntimes;
  const bk_reply *approx; /* a radix-tree-nodes the memory broker only estimates */
};

/* A generated id: "ms-seq" with ms from a clock (>= 10^12), not 1-0. */
static bool generated_id(const char *s, size_t len) {
  size_t i = 0, digits = 0;
  while (i < len && s[i] >= '0' && s[i] <= '9') i++, digits++;
  if (digits < 13 || i == len || s[i] != '-') return false;
  if (++i == len) return false;
  for (; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return len < ID_MAX_LEN;
}

static int id_name(struct norm *n, const char *s, size_t len) {
  for (int i = 0; i < n->nids; i++)
    if (strlen(n->ids[i]) == len && memcmp(n->ids[i], s, len) == 0) return i + 1;
  if (n->nids == MAX_IDS) return 0; /* shown as <id0>: the same on both sides */
  memcpy(n->ids[n->nids], s, len);
  n->ids[n->nids][len] = '\0';
  return ++n->nids;
}

static void mark_time(struct norm *n, const bk_reply *r) {
  if (r == NULL || r->type != BK_INTEGER) return;
  if (n->ntimes == MAX_TIMES) TEST_FAIL_("conformance: more than %d idle times", MAX_TIMES);
  n->times[n->ntimes++] = r;
}

static bool is_time(const struct norm *n, const bk_reply *r) {
  for (int i = 0; i < n->ntimes; i++)
    if (n->times[i] == r) return true;
  return false;
}

static bool arg_is(const char *a, const char *word) { return a && strcasecmp(a, word) == 0; }

/* [[key, [[id, fields, idle, count], ...]], ...]: marks each idle. */
static void mark_stream_entries(struct norm *n, const bk_reply *streams) {
  if (streams == NULL || streams->type != BK_ARRAY) return;
  for (size_t i = 0; i < streams->elements; i++) {
    const bk_reply *pair = streams->element[i];
    if (pair->type != BK_ARRAY || pair->elements != 2 || pair->element[1]->type != BK_ARRAY)
      continue;
    const bk_reply *list = pair->element[1];
    for (size_t k = 0; k < list->elements; k++)
      if (list->element[k]->type == BK_ARRAY && list->element[k]->elements == 4)
        mark_time(n, list->element[k]->element[2]);
  }
}

/* Which integers of this command's reply are idle times. */
static void mark_times(struct norm *n, const char *const *argv, const bk_reply *r) {
  n->ntimes = 0;
  n->approx = NULL;
  if (r == NULL || r->type != BK_ARRAY) return;
  int argc = 0;
  while (argv[argc]) argc++;
  if (arg_is(argv[0], "EVAL") && argc > 3 && strcmp(argv[2], "0") == 0 && argv[1] != SCRIPT_CLAIM &&
      argv[1] != SCRIPT_RECLAIM && argv[1] != SCRIPT_OWN && argv[1] != SCRIPT_SWEEP) {
    mark_times(n, argv + 3, r); /* a command run through a script: EVAL s 0 cmd args... */
    return;
  }
  if (arg_is(argv[0], "XINFO") && arg_is(argv[1], "STREAM")) {
    /* radix-tree-nodes is modelled only up to one node (stream.h) */
    const bk_reply *nodes = NULL;
    long long keys = 0;
    for (size_t k = 0; k + 1 < r->elements; k += 2) {
      const bk_reply *f = r->element[k];
      if (f->type != BK_STRING) continue;
      if (strcmp(f->str, "radix-tree-keys") == 0) keys = r->element[k + 1]->integer;
      if (strcmp(f->str, "radix-tree-nodes") == 0) nodes = r->element[k + 1];
    }
    if (keys > 1) n->approx = nodes;
  }
  if (arg_is(argv[0], "XPENDING") && argc > 3) {
    for (size_t i = 0; i < r->elements; i++)
      if (r->element[i]->type == BK_ARRAY && r->element[i]->elements == 4)
        mark_time(n, r->element[i]->element[2]);
  } else if (arg_is(argv[0], "XINFO") && arg_is(argv[1], "CONSUMERS")) {
    for (size_t i = 0; i < r->elements; i++) {
      const bk_reply *c = r->element[i];
      for (size_t k = 0; c->type == BK_ARRAY && k + 1 < c->elements; k += 2) {
        const bk_reply *f = c->element[k];
        bool idle = f->type == BK_STRING && strcmp(f->str, "idle") == 0;
        if (idle || (f->type == BK_STRING && strcmp(f->str, "inactive") == 0))
          mark_time(n, c->element[k + 1]);
      }
    }
  } else if (arg_is(argv[0], "XREADGROUP")) {
    mark_stream_entries(n, r);
  } else if (arg_is(argv[0], "EVAL") &&
             (argv[1] == SCRIPT_CLAIM || argv[1] == SCRIPT_RECLAIM || argv[1] == SCRIPT_OWN)) {
    if (r->elements == 3) mark_stream_entries(n, r->element[1]);
  }
}

static void render(struct norm *n, struct buf *b, const bk_reply *r) {
  switch (r->type) {
    case BK_STRING:
      if (generated_id(r->str, r->len))
        put(b, "<id%d>", id_name(n, r->str, r->len));
      else
        put_text(b, r->str, r->len);
      break;
    case BK_STATUS:
      put(b, "+");
      put_text(b, r->str, r->len);
      break;
    case BK_ERROR: {
      /* An unknown command: the name only, as the memory broker's text goes
     * on to point at the real-server mode where Redis lists the arguments. */
      static const char unknown[] = "ERR unknown command '";
      size_t len = r->len, pre = sizeof unknown - 1;
      const char *q = len > pre && memcmp(r->str, unknown, pre) == 0
                          ? memchr(r->str + pre, '\'', len - pre)
                          : NULL;
      if (q) len = (size_t)(q - r->str) + 1;
      put(b, "-");
      put_text(b, r->str, len);
      if (q) put(b, " ...");
      break;
    }
    case BK_INTEGER:
      if (r == n->approx)
        put(b, "<approx>");
      else if (n->mask_times && r->integer >= 0 && is_time(n, r))
        put(b, "<t>");
      else if (!n->exact && r->integer >= 0 && is_time(n, r))
        put(b, "~%llds", r->integer / 1000);
      else
        put(b, ":%lld", r->integer);
      break;
    case BK_NIL: put(b, "nil"); break;
    case BK_ARRAY:
      put(b, "[");
      for (size_t i = 0; i < r->elements; i++) {
        if (i) put(b, ",");
        render(n, b, r->element[i]);
      }
      put(b, "]");
      break;
    default: put(b, "?%d", r->type);
  }
}

static void render_reply(struct norm *n, struct buf *b, const char *const *argv,
                         const struct cf_slot *s) {
  if (!s->done) {
    put(b, "(no reply)");
    return;
  }
  if (s->reply == NULL) {
    put(b, "(failed: %s)", s->err);
    return;
  }
  if (arg_is(argv[0], "INFO") && s->reply->type == BK_STRING) {
    char text[32];
    long v = bk_info_version(s->reply, text, sizeof text);
    if (v < 0)
      put(b, "<redis_version ?>");
    else
      put(b, "<redis_version %ld.%ld>", v / 10000, v / 100 % 100);
    return;
  }
  mark_times(n, argv, s->reply);
  render(n, b, s->reply);
}

/* The argument as sent: <idN> and <now-N> replaced. */
static void expand(struct norm *n, struct cf_side *side, const char *arg, struct buf *out) {
  const char *p = arg;
  while (*p) {
    int k;
    long long off;
    int used = 0;
    if (sscanf(p, "<id%d>%n", &k, &used) == 1 && used > 0) {
      if ((k < 1 || k > n->nids) && n->lenient) {
        put(out, "%.*s", used, p);
        p += used;
        continue;
      }
      if (k < 1 || k > n->nids) TEST_FAIL_("conformance: %s used before it was seen", p);
      put(out, "%s", n->ids[k - 1]);
      p += used;
    } else if (sscanf(p, "<now-%lld>%n", &off, &used) == 1 && used > 0) {
      put(out, "%lld", (long long)side->ops->wall_ms(side) - off);
      p += used;
    } else {
      put(out, "%c", *p++);
    }
  }
}

static void show_command(struct buf *b, const char *const *argv) {
  for (int i = 0; argv[i]; i++) {
    if (i) put(b, " ");
    if (argv[i] == SCRIPT_CLAIM)
      put(b, "<SCRIPT_CLAIM>");
    else if (argv[i] == SCRIPT_RECLAIM)
      put(b, "<SCRIPT_RECLAIM>");
    else if (argv[i] == SCRIPT_SWEEP)
      put(b, "<SCRIPT_SWEEP>");
    else if (argv[i] == SCRIPT_OWN)
      put(b, "<SCRIPT_OWN>");
    else
      put_text(b, argv[i], strlen(argv[i]));
  }
}

/* ---- running ---- */

char *cf_transcript(struct cf_side *side, const struct cf_step *steps, bool exact) {
  struct norm *n = mr_alloc(sizeof *n);
  struct buf out = {0};
  n->exact = exact;
  side->ops->reset(side);
  for (const struct cf_step *st = steps; st->op != CF_END; st++) {
    struct cf_slot *slot = &side->slot[st->conn];
    if (st->conn) put(&out, "[c%d] ", st->conn);
    if (st->op == CF_CMD || st->op == CF_SEND) {
      struct buf args[CF_MAXARGS] = {{0}};
      const char *argv[CF_MAXARGS];
      size_t len[CF_MAXARGS];
      int argc = 0;
      for (; st->argv[argc]; argc++) {
        expand(n, side, st->argv[argc], &args[argc]);
        put(&args[argc], "%s", ""); /* never NULL */
        argv[argc] = args[argc].s;
        len[argc] = args[argc].n;
      }
      show_command(&out, st->argv);
      if (slot->busy && !slot->done)
        TEST_FAIL_("conformance: step %d sends on c%d, which waits for a reply",
                   (int)(st - steps) + 1, st->conn);
      if (side_send(side, st->conn, argc, argv, len) != 0) {
        put(&out, " -> (refused)\n");
      } else if (st->op == CF_SEND) {
        side->ops->placed(side, slot);
        put(&out, " -> (sent)\n");
      } else {
        side->ops->settle(side, slot, REPLY_WAIT_MS);
        put(&out, " -> ");
        render_reply(n, &out, st->argv, slot);
        put(&out, "\n");
        slot->busy = false;
      }
      for (int i = 0; i < argc; i++) free(args[i].s);
    } else if (st->op == CF_WAIT || st->op == CF_BLOCKED) {
      /* The step whose reply this is: the connection's last send. */
      const struct cf_step *sent = NULL;
      for (const struct cf_step *q = steps; q < st; q++)
        if (q->op == CF_SEND && q->conn == st->conn) sent = q;
      if (sent == NULL)
        TEST_FAIL_("conformance: step %d waits on c%d, which sent nothing", (int)(st - steps) + 1,
                   st->conn);
      if (!slot->busy) { /* answered at an earlier CF_BLOCKED */
        put(&out, "(no reply pending)\n");
        continue;
      }
      if (st->op == CF_BLOCKED && side->ops->blocked(side, slot)) {
        put(&out, "(blocked)\n");
        continue;
      }
      if (st->op == CF_WAIT) side->ops->settle(side, slot, REPLY_WAIT_MS);
      put(&out, "reply -> ");
      render_reply(n, &out, sent->argv, slot);
      put(&out, "\n");
      if (slot->done) slot->busy = false;
    } else if (st->op == CF_ADVANCE) {
      side->ops->advance(side, st->ms);
      put(&out, "advance %lld ms\n", st->ms);
    }
  }
  side->ops->finish(side);
  slots_clear(side);
  free(n);
  put(&out, "%s", "");
  return out.s;
}

/* ---- one command at a time ---- */

struct cf_norm *cf_norm_new(bool mask_times) {
  struct norm *n = mr_alloc(sizeof *n);
  n->mask_times = mask_times;
  n->lenient = true; /* a shrunk command list may name an id it no longer makes */
  return (struct cf_norm *)n;
}

void cf_norm_free(struct cf_norm *n) { free(n); }

int cf_norm_ids(const struct cf_norm *n) { return ((const struct norm *)n)->nids; }

void cf_side_reset(struct cf_side *side) { side->ops->reset(side); }

void cf_side_finish(struct cf_side *side) {
  side->ops->finish(side);
  slots_clear(side);
}

char *cf_side_run(struct cf_side *side, struct cf_norm *cn, const char *const *argv) {
  struct norm *n = (struct norm *)cn;
  struct cf_slot *slot = &side->slot[0];
  struct buf args[CF_MAXARGS] = {{0}}, out = {0};
  const char *av[CF_MAXARGS];
  size_t len[CF_MAXARGS];
  int argc = 0;
  for (; argv[argc]; argc++) {
    if (argc == CF_MAXARGS) TEST_FAIL_("conformance: more than %d arguments", CF_MAXARGS);
    expand(n, side, argv[argc], &args[argc]);
    put(&args[argc], "%s", "");
    av[argc] = args[argc].s;
    len[argc] = args[argc].n;
  }
  if (side_send(side, 0, argc, av, len) != 0) {
    put(&out, "(refused)");
  } else {
    side->ops->settle(side, slot, REPLY_WAIT_MS);
    render_reply(n, &out, argv, slot);
    slot->busy = false;
  }
  for (int i = 0; i < argc; i++) free(args[i].s);
  put(&out, "%s", ""); /* an empty bulk renders as nothing: still a string */
  return out.s;
}

/* ---- comparing ---- */

/* The next line of *p (without its '\n') into line; false at the end. */
static bool next_line(const char **p, char *line, size_t cap) {
  if (*p == NULL || **p == '\0') return false;
  const char *nl = strchr(*p, '\n');
  size_t len = nl ? (size_t)(nl - *p) : strlen(*p);
  snprintf(line, cap, "%.*s", (int)len, *p);
  *p = nl ? nl + 1 : *p + len;
  return true;
}

/* A line as a failure message shows it: long ones cut (the whole
 * transcripts are on stderr above it). */
static const char *clip(const char *line) {
  static char out[2][640];
  static int k;
  char *o = out[k++ % 2];
  size_t len = strlen(line);
  if (len < 600) return line;
  snprintf(o, sizeof out[0], "%.560s... (%zu bytes)", line, len);
  return o;
}

static void dump(const char *scenario, const char *name, const char *text) {
  fprintf(stderr, "---- %s: %s ----\n%s", scenario, name, text);
}

void cf_expect_same(const char *scenario, const char *name_a, const char *a, const char *name_b,
                    const char *b) {
  static char la[LINE_MAX_LEN], lb[LINE_MAX_LEN];
  const char *pa = a, *pb = b;
  if (getenv("CF_DUMP")) {
    dump(scenario, name_a, a);
    dump(scenario, name_b, b);
  }
  for (int step = 1;; step++) {
    bool ha = next_line(&pa, la, sizeof la), hb = next_line(&pb, lb, sizeof lb);
    if (!ha && !hb) return;
    if (ha && hb && strcmp(la, lb) == 0) continue;
    if (!getenv("CF_DUMP")) {
      dump(scenario, name_a, a);
      dump(scenario, name_b, b);
    }
    TEST_FAIL_("scenario %s, step %d differs:\n  %-14s %s\n  %-14s %s", scenario, step, name_a,
               ha ? clip(la) : "(end)", name_b, hb ? clip(lb) : "(end)");
  }
}

void cf_expect_lines(const char *scenario, const char *name, const char *got,
                     const char *const *want) {
  static char line[LINE_MAX_LEN];
  const char *p = got;
  if (getenv("CF_DUMP")) dump(scenario, name, got);
  for (int step = 1;; step++) {
    bool have = next_line(&p, line, sizeof line);
    const char *w = want[step - 1];
    if (!have && w == NULL) return;
    if (have && w && strcmp(line, w) == 0) continue;
    size_t wl = w ? strlen(w) : 0;
    if (have && wl > 3 && strcmp(w + wl - 3, "...") == 0 && strncmp(line, w, wl - 3) == 0) continue;
    if (!getenv("CF_DUMP")) dump(scenario, name, got);
    TEST_FAIL_("scenario %s, step %d differs:\n  %-14s %s\n  %-14s %s", scenario, step, name,
               have ? clip(line) : "(end)", "expected", w ? clip(w) : "(end)");
  }
}
