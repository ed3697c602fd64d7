/* scrape: fetching the workers' health pages and merging their metrics
 * (scrape.h). */
#include "scrape.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "grow.h"

#define SCRAPE_BODY_MAX (64u << 20) /* a longer answer is a failure */

/* ---- a growing text ---- */

struct text {
  char *p;
  size_t len, cap;
  bool oom;
};

static void put(struct text *t, const char *s, size_t n) {
  if (t->oom) return;
  char *p = grow(t->p, &t->cap, t->len + n + 1, 1, 4096);
  if (p == NULL) {
    t->oom = true;
    return;
  }
  t->p = p;
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}

static void puts_(struct text *t, const char *s) { put(t, s, strlen(s)); }

/* ---- the merge ---- */

/* One family's lines in one page: HELP and TYPE lines, then its samples. */
struct block {
  const char *name;
  size_t nlen;
  const char *help, *type; /* whole lines with their newline, or NULL */
  size_t help_len, type_len;
  const char *samples; /* the sample lines, contiguous */
  size_t samples_len;
};

struct page {
  struct block *b;
  int n, cap;
};

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

static struct block *page_block(struct page *pg, const char *name, size_t nlen) {
  for (int i = 0; i < pg->n; i++)
    if (pg->b[i].nlen == nlen && !memcmp(pg->b[i].name, name, nlen)) return &pg->b[i];
  return NULL;
}

/* A new block at the end of pg; NULL when out of memory. */
static struct block *page_add(struct page *pg, const char *name, size_t nlen) {
  if (pg->n == pg->cap) {
    int cap = pg->cap ? pg->cap * 2 : 32;
    struct block *b = realloc(pg->b, (size_t)cap * sizeof *b);
    if (b == NULL) return NULL;
    pg->b = b;
    pg->cap = cap;
  }
  struct block *b = &pg->b[pg->n++];
  *b = (struct block){.name = name, .nlen = nlen};
  return b;
}

/* Splits text into its families' blocks: a HELP or TYPE line starts (or
 * names) the current family, samples belong to the current one (a
 * histogram's _bucket, _sum and _count too). -1 when out of memory. */
static int page_parse(struct page *pg, const char *text) {
  struct block *cur = NULL;
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    size_t llen = nl ? (size_t)(nl - line) + 1 : strlen(line);
    if (line[0] == '#') {
      bool help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
      if (help || type) {
        const char *name = line + 7;
        size_t nlen = 0;
        while (name_char(name[nlen])) nlen++;
        if (cur == NULL || cur->nlen != nlen || memcmp(cur->name, name, nlen)) {
          cur = page_block(pg, name, nlen);
          if (cur == NULL && (cur = page_add(pg, name, nlen)) == NULL) return -1;
        }
        if (help)
          cur->help = line, cur->help_len = llen;
        else
          cur->type = line, cur->type_len = llen;
      }
    } else if (llen > 1 || line[0] != '\n') {
      if (cur == NULL) { /* a sample without HELP or TYPE: its own family */
        size_t nlen = 0;
        while (name_char(line[nlen])) nlen++;
        if ((cur = page_add(pg, line, nlen)) == NULL) return -1;
      }
      if (cur->samples == NULL) cur->samples = line;
      cur->samples_len = (size_t)(line + llen - cur->samples);
    }
    line += llen;
  }
  return 0;
}

/* Each sample line of b with worker="index" as its first label. */
static void put_samples(struct text *t, const struct block *b, int index) {
  char label[32];
  int ll = snprintf(label, sizeof label, "worker=\"%d\"", index);
  const char *p = b->samples, *end = b->samples + b->samples_len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    size_t n = 0;
    while (p + n < le && name_char(p[n])) n++;
    if (p[0] == '#' || n == 0) { /* a comment inside the samples: kept as is */
      put(t, p, (size_t)(le - p));
    } else {
      put(t, p, n);
      put(t, "{", 1);
      put(t, label, (size_t)ll);
      const char *rest = p + n;
      if (rest < le && *rest == '{') {
        rest++;
        if (rest < le && *rest != '}') put(t, ",", 1);
      } else {
        put(t, "}", 1);
      }
      put(t, rest, (size_t)(le - rest));
    }
    put(t, "\n", 1);
    p = nl ? nl + 1 : end;
  }
}

char *scrape_merge(const char *const *pages, const unsigned *restarts, int n, size_t *len) {
  struct page *pg = calloc((size_t)(n > 0 ? n : 1), sizeof *pg);
  struct page order = {0}; /* every family once, in the order first seen */
  struct text t = {0};
  bool oom = pg == NULL;
  for (int i = 0; !oom && i < n; i++) {
    if (pages[i] == NULL) continue;
    if (page_parse(&pg[i], pages[i]) != 0) oom = true;
    for (int j = 0; !oom && j < pg[i].n; j++) {
      struct block *b = &pg[i].b[j];
      if (page_block(&order, b->name, b->nlen) == NULL &&
          page_add(&order, b->name, b->nlen) == NULL)
        oom = true;
    }
  }
  for (int f = 0; !oom && f < order.n; f++) {
    const struct block *first = NULL;
    for (int i = 0; i < n && first == NULL; i++) {
      const struct block *b =
          pages[i] ? page_block(&pg[i], order.b[f].name, order.b[f].nlen) : NULL;
      if (b && (b->help || b->type)) first = b;
    }
    if (first && first->help) put(&t, first->help, first->help_len);
    if (first && first->type) put(&t, first->type, first->type_len);
    for (int i = 0; i < n; i++) {
      const struct block *b =
          pages[i] ? page_block(&pg[i], order.b[f].name, order.b[f].nlen) : NULL;
      if (b && b->samples) put_samples(&t, b, i);
    }
  }
  if (!oom) {
    char line[128];
    puts_(&t,
          "# HELP luastream_workers Worker processes the supervisor runs (--processes).\n"
          "# TYPE luastream_workers gauge\n");
    snprintf(line, sizeof line, "luastream_workers %d\n", n);
    puts_(&t, line);
    puts_(&t,
          "# HELP luastream_worker_up Whether the worker answered this scrape (1) or not (0): "
          "a worker that did not is left out of the page.\n"
          "# TYPE luastream_worker_up gauge\n");
    for (int i = 0; i < n; i++) {
      snprintf(line, sizeof line, "luastream_worker_up{worker=\"%d\"} %d\n", i, pages[i] ? 1 : 0);
      puts_(&t, line);
    }
    puts_(&t,
          "# HELP luastream_worker_restarts_total Times the supervisor started the worker "
          "again after it exited.\n"
          "# TYPE luastream_worker_restarts_total counter\n");
    for (int i = 0; i < n; i++) {
      snprintf(line, sizeof line, "luastream_worker_restarts_total{worker=\"%d\"} %u\n", i,
               restarts[i]);
      puts_(&t, line);
    }
  }
  for (int i = 0; pg && i < n; i++) free(pg[i].b);
  free(pg);
  free(order.b);
  if (oom || t.oom) {
    free(t.p);
    return NULL;
  }
  *len = t.len;
  return t.p;
}

/* ---- the GET ---- */

struct scrape {
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_connect_t connect;
  uv_write_t write;
  int open_handles; /* the struct goes when both handles closed */
  bool finished;    /* done was called */
  scrape_done_fn *done;
  void *data;
  int index;
  char request[128];
  struct text in;
};

static void scrape_closed(uv_handle_t *h) {
  struct scrape *s = h->data;
  if (--s->open_handles > 0) return;
  free(s->in.p);
  free(s);
}

/* Reports once (status 0: failed) and closes both handles. */
static void finish(struct scrape *s, bool ok) {
  if (s->finished) return;
  s->finished = true;
  int status = 0;
  char *body = NULL;
  size_t blen = 0;
  const char *sep = ok && s->in.p ? strstr(s->in.p, "\r\n\r\n") : NULL;
  if (sep && sscanf(s->in.p, "HTTP/1.%*d %d", &status) == 1) {
    blen = s->in.len - (size_t)(sep + 4 - s->in.p);
    body = malloc(blen + 1);
    if (body) {
      memcpy(body, sep + 4, blen);
      body[blen] = '\0';
    } else {
      status = 0;
    }
  } else {
    status = 0;
  }
  uv_close((uv_handle_t *)&s->tcp, scrape_closed);
  uv_close((uv_handle_t *)&s->timer, scrape_closed);
  s->done(s->data, s->index, status, body, blen);
}

static void on_timeout(uv_timer_t *t) { finish(t->data, false); }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct scrape *s = h->data;
  char *p = grow(s->in.p, &s->in.cap, s->in.len + suggested + 1, 1, 16384);
  if (p == NULL) {
    *buf = uv_buf_init(NULL, 0); /* read fails with UV_ENOBUFS */
    return;
  }
  s->in.p = p;
  *buf = uv_buf_init(s->in.p + s->in.len, (unsigned)(s->in.cap - s->in.len - 1));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  struct scrape *s = st->data;
  if (nread == UV_EOF) return finish(s, true);
  if (nread < 0) return finish(s, false);
  s->in.len += (size_t)nread;
  s->in.p[s->in.len] = '\0';
  if (s->in.len > SCRAPE_BODY_MAX) finish(s, false);
}

static void on_written(uv_write_t *w, int status) {
  struct scrape *s = w->data;
  if (status != 0) finish(s, false);
}

static void on_connect(uv_connect_t *c, int status) {
  struct scrape *s = c->data;
  if (s->finished) return;
  if (status != 0) return finish(s, false);
  uv_buf_t b = uv_buf_init(s->request, (unsigned)strlen(s->request));
  s->write.data = s;
  if (uv_write(&s->write, (uv_stream_t *)&s->tcp, &b, 1, on_written) != 0 ||
      uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read) != 0)
    finish(s, false);
}

int scrape_get(struct uv_loop_s *loop, int port, const char *path, uint64_t timeout_ms,
               scrape_done_fn *done, void *data, int index) {
  struct scrape *s = calloc(1, sizeof *s);
  if (s == NULL) return -1;
  s->done = done;
  s->data = data;
  s->index = index;
  snprintf(s->request, sizeof s->request,
           "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
  uv_tcp_init(loop, &s->tcp);
  uv_timer_init(loop, &s->timer);
  s->tcp.data = s->timer.data = s->connect.data = s;
  s->open_handles = 2;
  uv_timer_start(&s->timer, on_timeout, timeout_ms, 0);
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", port, &addr);
  /* a refused connect still reports through on_connect, from the loop */
  if (uv_tcp_connect(&s->connect, &s->tcp, (const struct sockaddr *)&addr, on_connect) != 0)
    uv_timer_start(&s->timer, on_timeout, 0, 0); /* fails on the loop, not here */
  return 0;
}

/* ---- /readyz ---- */

void scrape_ready_notes(const char *const *bodies, int n, char *out, size_t len) {
  size_t used = 0;
  if (len) out[0] = '\0';
  for (int i = 0; i < n; i++) {
    for (const char *p = bodies[i]; p && *p;) {
      size_t line = strcspn(p, "\r\n");
      if (line > 6 && memcmp(p, "note: ", 6) == 0) {
        const char *text = p + 6;
        size_t tlen = line - 6;
        /* "subscription NAME", up to the first ':' */
        const char *colon = memchr(text, ':', tlen);
        size_t klen = colon ? (size_t)(colon - text) : tlen;
        bool seen = false;
        for (const char *q = out; !seen && q < out + used;) {
          size_t qlen = strcspn(q, "\n");
          seen = qlen > klen && memcmp(q, text, klen) == 0 && q[klen] == ':';
          q += qlen + (q[qlen] == '\n');
        }
        if (!seen && used < len) {
          int w = snprintf(out + used, len - used, "%s%.*s (worker %d)", used ? "\n" : "",
                           (int)tlen, text, i);
          if (w > 0 && used + (size_t)w < len)
            used += (size_t)w;
          else
            out[used] = '\0';
        }
      }
      p += line;
      p += strspn(p, "\r\n");
    }
  }
}
