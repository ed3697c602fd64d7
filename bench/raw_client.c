/* raw_client: the hand-written consumer luastream is measured against.
 *
 *   raw_client --port P --stream S --group G [--consumer C] [--batch N] [--count N]
 *              [--read-ahead] [--hincrby KEY]
 *
 * What a careful C programmer would write for one consumer of a group, with
 * the same libraries and the same work per entry as luastream running
 * bench/handlers/ack_payment.lua:
 * - hiredis 0.14 async on libuv (the stock adapter), two connections as in
 *   luastream: one for the blocking reads, one for the acks, so an ack never
 *   waits behind a blocked read;
 * - XREADGROUP GROUP G C COUNT N BLOCK 2000 STREAMS S >, the next read sent as
 *   soon as a batch is done (luastream's handlers finish at once too, so its
 *   lanes are empty when it reads again: the same COUNT);
 * - each entry's `data` decoded as JSON into its fields (the small decoder
 *   below: objects, arrays, strings with escapes, numbers, literals), one
 *   field read (amount_cents), the entry acked after that work;
 * - acks coalesced per loop turn, as luastream does: ids collected while a
 *   reply is handled, one XACK for all of them from a 0-ms timer.
 * --read-ahead: the next read is sent, and written to the socket at once, before
 * the batch just read is handled, so Redis prepares it meanwhile (not what
 * luastream does at the time of writing; see bench/RESULTS.md).
 * --hincrby KEY: also HINCRBY KEY <account> <amount_cents> per entry on the
 * write connection, pipelined before its ack: the Redis work of
 * bench/handlers/write (ctx:write) without its guarantee (the write and the
 * ack are separate commands, so a crash between them or a second consumer
 * finishing the entry writes twice or not at all).
 * Runs until SIGTERM/SIGINT, or until --count entries are acked; prints
 * `handled=N acked=N checksum=N` on stderr. Exit status 0, or 1 on an error. */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define ID_MAX 48
#define BLOCK_MS "2000"
#define MAX_FIELDS 32

/* ---- a small JSON decoder ----
 *
 * decode() validates one JSON value and, for a top-level object, fills the
 * list of its members: the key (unescaped), the value's type, its text
 * (strings unescaped into the scratch buffer) and, for numbers, the value. */

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_OBJECT, J_ARRAY };

struct jfield {
  const char *key;
  size_t keylen;
  enum jtype type;
  const char *str; /* J_STRING: unescaped text */
  size_t len;
  double num; /* J_NUMBER */
};

struct jdoc {
  struct jfield field[MAX_FIELDS];
  int nfields;
  char scratch[1024]; /* unescaped strings */
  size_t used;
};

struct jparser {
  const char *p, *end;
  struct jdoc *doc;
  int depth;
};

static void skip_ws(struct jparser *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A string at j->p (the opening quote); its unescaped text into the scratch
 * buffer when out is not NULL. */
static bool parse_string(struct jparser *j, const char **out, size_t *outlen) {
  j->p++;
  const char *start = j->p;
  /* Fast path: no escapes, the text is used in place. */
  while (j->p < j->end && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20) j->p++;
  if (j->p < j->end && *j->p == '"') {
    if (out) *out = start, *outlen = (size_t)(j->p - start);
    j->p++;
    return true;
  }
  struct jdoc *d = j->doc;
  char *w = d->scratch + d->used, *wend = d->scratch + sizeof d->scratch;
  if ((size_t)(j->p - start) > (size_t)(wend - w)) return false;
  memcpy(w, start, (size_t)(j->p - start));
  char *begin = w;
  w += j->p - start;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p++;
    if (c < 0x20) return false;
    if (c != '\\') {
      if (w == wend) return false;
      *w++ = (char)c;
      continue;
    }
    if (j->p == j->end) return false;
    char e = *j->p++;
    char lit = e == '"'    ? '"'
               : e == '\\' ? '\\'
               : e == '/'  ? '/'
               : e == 'b'  ? '\b'
               : e == 'f'  ? '\f'
               : e == 'n'  ? '\n'
               : e == 'r'  ? '\r'
               : e == 't'  ? '\t'
                           : 0;
    if (lit) {
      if (w == wend) return false;
      *w++ = lit;
      continue;
    }
    if (e != 'u' || j->end - j->p < 4) return false;
    unsigned cp = 0;
    for (int i = 0; i < 4; i++) {
      int h = hexval(j->p[i]);
      if (h < 0) return false;
      cp = cp << 4 | (unsigned)h;
    }
    j->p += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
      if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') return false;
      unsigned lo = 0;
      for (int i = 2; i < 6; i++) {
        int h = hexval(j->p[i]);
        if (h < 0) return false;
        lo = lo << 4 | (unsigned)h;
      }
      if (lo < 0xDC00 || lo > 0xDFFF) return false;
      j->p += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      return false;
    }
    if (wend - w < 4) return false;
    if (cp < 0x80) {
      *w++ = (char)cp;
    } else if (cp < 0x800) {
      *w++ = (char)(0xC0 | cp >> 6);
      *w++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *w++ = (char)(0xE0 | cp >> 12);
      *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *w++ = (char)(0x80 | (cp & 0x3F));
    } else {
      *w++ = (char)(0xF0 | cp >> 18);
      *w++ = (char)(0x80 | (cp >> 12 & 0x3F));
      *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *w++ = (char)(0x80 | (cp & 0x3F));
    }
  }
  if (j->p == j->end) return false;
  j->p++;
  if (out) *out = begin, *outlen = (size_t)(w - begin);
  d->used = (size_t)(w - d->scratch);
  return true;
}

/* A number: JSON's grammar, the value from an integer fast path or strtod. */
static bool parse_number(struct jparser *j, double *out) {
  const char *s = j->p;
  bool neg = false, integral = true;
  if (j->p < j->end && *j->p == '-') neg = true, j->p++;
  if (j->p == j->end) return false;
  if (*j->p == '0') {
    j->p++;
  } else if (*j->p >= '1' && *j->p <= '9') {
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  } else {
    return false;
  }
  if (j->p < j->end && *j->p == '.') {
    integral = false;
    j->p++;
    const char *digits = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    if (j->p == digits) return false;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    integral = false;
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    const char *digits = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    if (j->p == digits) return false;
  }
  size_t n = (size_t)(j->p - s);
  if (integral && n - neg <= 15) {
    int64_t v = 0;
    for (const char *c = s + neg; c < j->p; c++) v = v * 10 + (*c - '0');
    *out = (double)(neg ? -v : v);
    return true;
  }
  char buf[64];
  if (n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  *out = strtod(buf, NULL);
  return true;
}

static bool parse_value(struct jparser *j, enum jtype *type, const char **str, size_t *len,
                        double *num);

/* An object or array; members of the top-level object go into the doc. */
static bool parse_container(struct jparser *j, bool object, bool top) {
  if (++j->depth > 64) return false;
  j->p++;
  skip_ws(j);
  if (j->p < j->end && *j->p == (object ? '}' : ']')) {
    j->p++;
    j->depth--;
    return true;
  }
  for (;;) {
    skip_ws(j);
    struct jfield f = {0};
    if (object) {
      if (j->p == j->end || *j->p != '"') return false;
      if (!parse_string(j, &f.key, &f.keylen)) return false;
      skip_ws(j);
      if (j->p == j->end || *j->p != ':') return false;
      j->p++;
      skip_ws(j);
    }
    if (!parse_value(j, &f.type, &f.str, &f.len, &f.num)) return false;
    if (top && object && j->doc->nfields < MAX_FIELDS) j->doc->field[j->doc->nfields++] = f;
    skip_ws(j);
    if (j->p == j->end) return false;
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p != (object ? '}' : ']')) return false;
    j->p++;
    j->depth--;
    return true;
  }
}

static bool literal(struct jparser *j, const char *word, size_t n) {
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return false;
  j->p += n;
  return true;
}

static bool parse_value(struct jparser *j, enum jtype *type, const char **str, size_t *len,
                        double *num) {
  if (j->p == j->end) return false;
  switch (*j->p) {
    case '{': *type = J_OBJECT; return parse_container(j, true, false);
    case '[': *type = J_ARRAY; return parse_container(j, false, false);
    case '"': *type = J_STRING; return parse_string(j, str, len);
    case 't': *type = J_TRUE; return literal(j, "true", 4);
    case 'f': *type = J_FALSE; return literal(j, "false", 5);
    case 'n': *type = J_NULL; return literal(j, "null", 4);
    default: *type = J_NUMBER; return parse_number(j, num);
  }
}

/* Decodes text into doc; false when it is not one JSON value. */
static bool decode(const char *text, size_t len, struct jdoc *doc) {
  struct jparser j = {text, text + len, doc, 0};
  doc->nfields = 0;
  doc->used = 0;
  skip_ws(&j);
  if (j.p == j.end) return false;
  bool ok;
  if (*j.p == '{') {
    ok = parse_container(&j, true, true);
  } else {
    enum jtype t;
    const char *s;
    size_t n;
    double v;
    ok = parse_value(&j, &t, &s, &n, &v);
  }
  skip_ws(&j);
  return ok && j.p == j.end;
}

static const struct jfield *doc_get(const struct jdoc *d, const char *key) {
  size_t n = strlen(key);
  for (int i = d->nfields - 1; i >= 0; i--) /* the last one wins, as in a Lua table */
    if (d->field[i].keylen == n && memcmp(d->field[i].key, key, n) == 0) return &d->field[i];
  return NULL;
}

/* ---- the consumer ---- */

static struct {
  uv_loop_t *loop;
  redisAsyncContext *rd, *wr;
  int up; /* connections up */
  const char *stream, *group, *consumer;
  char count_arg[24]; /* the COUNT of each read */
  long long want;     /* --count: stop once this many are acked; 0: never */
  long long handled, acked, bad;
  double checksum;      /* the field read from each payment */
  char (*acks)[ID_MAX]; /* ids handled, not yet in an XACK */
  size_t nacks, cap;
  const char **argv; /* the XACK being built */
  size_t *argvlen;
  uv_timer_t flush;
  bool flush_armed;
  uv_signal_t sigterm, sigint;
  bool stopping;
  bool read_ahead;     /* --read-ahead */
  const char *hincrby; /* --hincrby KEY, or NULL */
  int status;
  struct jdoc doc;
} C;

static void flush_acks(uv_timer_t *t);

/* Stops reading at once; acks already collected go out first, then the write
 * connection closes once its replies are in. */
static void stop(int status) {
  if (C.stopping) return;
  if (status) C.status = status;
  if (status == 0 && C.wr && C.nacks) flush_acks(NULL);
  C.stopping = true;
  uv_signal_stop(&C.sigterm);
  uv_signal_stop(&C.sigint);
  uv_timer_stop(&C.flush);
  if (C.rd) redisAsyncFree(C.rd); /* a blocked read is dropped */
  if (C.wr) redisAsyncDisconnect(C.wr);
}

static void read_next(void);

static void ack_done(redisAsyncContext *ac, void *r, void *priv) {
  (void)ac, (void)priv;
  redisReply *reply = r;
  if (reply == NULL) return; /* disconnecting */
  if (reply->type != REDIS_REPLY_INTEGER) {
    fprintf(stderr, "raw_client: XACK failed: %s\n",
            reply->type == REDIS_REPLY_ERROR ? reply->str : "?");
    stop(1);
    return;
  }
  C.acked += reply->integer;
  if (C.want && C.acked >= C.want) stop(0);
}

static void flush_acks(uv_timer_t *t) {
  (void)t;
  C.flush_armed = false;
  if (C.nacks == 0 || C.stopping) return;
  size_t argc = C.nacks + 3;
  C.argv[0] = "XACK";
  C.argvlen[0] = 4;
  C.argv[1] = C.stream;
  C.argvlen[1] = strlen(C.stream);
  C.argv[2] = C.group;
  C.argvlen[2] = strlen(C.group);
  for (size_t i = 0; i < C.nacks; i++) {
    C.argv[i + 3] = C.acks[i];
    C.argvlen[i + 3] = strlen(C.acks[i]);
  }
  /* hiredis formats the command now: the id buffer is free again at once. */
  if (redisAsyncCommandArgv(C.wr, ack_done, NULL, (int)argc, C.argv, C.argvlen) != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot send XACK\n");
    stop(1);
    return;
  }
  C.nacks = 0;
}

static void queue_ack(const char *id, size_t len) {
  if (C.nacks == C.cap) {
    size_t cap = C.cap ? C.cap * 2 : 1024;
    C.acks = realloc(C.acks, cap * sizeof *C.acks);
    C.argv = realloc(C.argv, (cap + 3) * sizeof *C.argv);
    C.argvlen = realloc(C.argvlen, (cap + 3) * sizeof *C.argvlen);
    if (!C.acks || !C.argv || !C.argvlen) {
      fprintf(stderr, "raw_client: out of memory\n");
      exit(1);
    }
    C.cap = cap;
  }
  if (len >= ID_MAX) len = ID_MAX - 1;
  memcpy(C.acks[C.nacks], id, len);
  C.acks[C.nacks][len] = '\0';
  C.nacks++;
  if (!C.flush_armed) {
    C.flush_armed = true;
    uv_timer_start(&C.flush, flush_acks, 0, 0);
  }
}

/* The work luastream's handler does: decode, read one field; then the ack. */
static void handle(const redisReply *id, const redisReply *fields) {
  const redisReply *data = NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const redisReply *k = fields->element[i];
    if (k->len == 4 && memcmp(k->str, "data", 4) == 0) data = fields->element[i + 1];
  }
  C.handled++;
  if (data == NULL || !decode(data->str, data->len, &C.doc)) {
    C.bad++; /* luastream leaves bad input pending; so does this */
    return;
  }
  const struct jfield *amount = doc_get(&C.doc, "amount_cents");
  if (amount && amount->type == J_NUMBER) C.checksum += amount->num;
  const struct jfield *account = doc_get(&C.doc, "account");
  if (C.hincrby && amount && amount->type == J_NUMBER && account && account->type == J_STRING &&
      redisAsyncCommand(C.wr, NULL, NULL, "HINCRBY %s %b %lld", C.hincrby, account->str,
                        account->len, (long long)amount->num) != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot send HINCRBY\n");
    stop(1);
    return;
  }
  queue_ack(id->str, id->len);
}

static void read_done(redisAsyncContext *ac, void *r, void *priv) {
  (void)ac, (void)priv;
  redisReply *reply = r;
  if (reply == NULL) return; /* disconnecting */
  if (reply->type == REDIS_REPLY_ERROR) {
    fprintf(stderr, "raw_client: XREADGROUP failed: %s\n", reply->str);
    stop(1);
    return;
  }
  if (C.read_ahead) {
    read_next();
    if (C.rd) redisAsyncHandleWrite(C.rd); /* on the wire now, not after this batch */
  }
  /* [[stream, [[id, [field, value, ...]], ...]]], or nil after BLOCK */
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t s = 0; s < reply->elements; s++) {
      const redisReply *entries = reply->element[s]->element[1];
      for (size_t e = 0; e < entries->elements; e++) {
        const redisReply *entry = entries->element[e];
        if (entry->element[1]->type == REDIS_REPLY_ARRAY)
          handle(entry->element[0], entry->element[1]);
      }
    }
  }
  if (!C.read_ahead) read_next();
}

static void read_next(void) {
  if (C.stopping) return;
  const char *argv[] = {"XREADGROUP", "GROUP",  C.group,   C.consumer, "COUNT", C.count_arg,
                        "BLOCK",      BLOCK_MS, "STREAMS", C.stream,   ">"};
  size_t len[11];
  for (int i = 0; i < 11; i++) len[i] = strlen(argv[i]);
  if (redisAsyncCommandArgv(C.rd, read_done, NULL, 11, argv, len) != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot send XREADGROUP\n");
    stop(1);
  }
}

static void connected(const redisAsyncContext *ac, int status) {
  if (status != REDIS_OK) {
    fprintf(stderr, "raw_client: cannot connect: %s\n", ac->errstr);
    if (ac == C.rd) C.rd = NULL;
    if (ac == C.wr) C.wr = NULL;
    stop(1);
    return;
  }
  if (++C.up == 2) read_next();
}

static void disconnected(const redisAsyncContext *ac, int status) {
  if (ac == C.rd) C.rd = NULL;
  if (ac == C.wr) C.wr = NULL;
  if (!C.stopping) {
    fprintf(stderr, "raw_client: connection lost: %s\n",
            status == REDIS_OK ? "closed" : ac->errstr);
    stop(1);
  }
}

static void on_signal(uv_signal_t *s, int sig) {
  (void)s, (void)sig;
  stop(0);
}

static redisAsyncContext *open_conn(int port) {
  redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
  if (ac == NULL || ac->err) {
    fprintf(stderr, "raw_client: cannot connect: %s\n", ac ? ac->errstr : "out of memory");
    exit(1);
  }
  redisLibuvAttach(ac, C.loop);
  redisAsyncSetConnectCallback(ac, connected);
  redisAsyncSetDisconnectCallback(ac, disconnected);
  return ac;
}

static void usage(void) {
  fprintf(stderr,
          "usage: raw_client --port P --stream S --group G [--consumer C] [--batch N] [--count N]\n"
          "                  [--read-ahead] [--hincrby KEY]\n");
  exit(2);
}

int main(int argc, char **argv) {
  int port = 0;
  long batch = 100;
  C.consumer = "raw-0";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--read-ahead")) {
      C.read_ahead = true;
      continue;
    }
    if (v == NULL) usage();
    if (!strcmp(a, "--port"))
      port = atoi(v);
    else if (!strcmp(a, "--stream"))
      C.stream = v;
    else if (!strcmp(a, "--group"))
      C.group = v;
    else if (!strcmp(a, "--consumer"))
      C.consumer = v;
    else if (!strcmp(a, "--batch"))
      batch = atol(v);
    else if (!strcmp(a, "--count"))
      C.want = atoll(v);
    else if (!strcmp(a, "--hincrby"))
      C.hincrby = v;
    else
      usage();
    i++;
  }
  if (port <= 0 || !C.stream || !C.group || batch < 1) usage();
  snprintf(C.count_arg, sizeof C.count_arg, "%ld", batch);
  C.loop = uv_default_loop();
  uv_timer_init(C.loop, &C.flush);
  uv_signal_init(C.loop, &C.sigterm);
  uv_signal_init(C.loop, &C.sigint);
  uv_signal_start(&C.sigterm, on_signal, SIGTERM);
  uv_signal_start(&C.sigint, on_signal, SIGINT);
  C.rd = open_conn(port);
  C.wr = open_conn(port);
  uv_run(C.loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&C.flush, NULL);
  uv_close((uv_handle_t *)&C.sigterm, NULL);
  uv_close((uv_handle_t *)&C.sigint, NULL);
  uv_run(C.loop, UV_RUN_DEFAULT);
  fprintf(stderr, "handled=%lld acked=%lld bad=%lld checksum=%.0f\n", C.handled, C.acked, C.bad,
          C.checksum);
  free(C.acks);
  free(C.argv);
  free(C.argvlen);
  return C.status;
}
