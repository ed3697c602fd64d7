/* console_auth: the tokens file and the sessions of the web console
 * (console_auth.h). */
#include "console_auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

struct console_token {
  char name[CONSOLE_NAME_MAX + 1];
  char token[CONSOLE_TOKEN_MAX + 1];
  size_t len;
};

struct console_auth {
  struct console_token *tokens;
  size_t ntokens;
  struct console_session *sessions; /* CONSOLE_SESSIONS_MAX slots; id[0] == 0: free */
};

bool console_equal(const char *a, const char *b, size_t n) {
  unsigned char diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

/* Bits a token of n characters carries at most: 4 a character when all are
 * hex digits, 6 when all are of the base64 alphabets (+/ or -_, '=' as
 * padding only); 0 when a character is of neither. */
static unsigned token_bits(const char *t, size_t n) {
  bool hex = true;
  size_t counted = 0;
  for (size_t i = 0; i < n; i++) {
    char c = t[i];
    bool is_hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    bool is_b64 = is_hex || (c >= 'g' && c <= 'z') || (c >= 'G' && c <= 'Z') || strchr("+/-_", c);
    if (c == '=' && i > 0) continue; /* padding carries nothing */
    if (!is_b64) return 0;
    hex = hex && is_hex;
    counted++;
  }
  return (unsigned)(counted * (hex ? 4 : 6));
}

/* One `NAME TOKEN` line into t. Returns NULL, or why it is refused. */
static const char *parse_line(char *line, struct console_token *t) {
  char *name = line + strspn(line, " \t");
  size_t nlen = strcspn(name, " \t");
  char *token = name + nlen;
  token += strspn(token, " \t");
  size_t tlen = strcspn(token, " \t");
  if (nlen == 0 || tlen == 0) return "want NAME TOKEN";
  if (token[tlen + strspn(token + tlen, " \t")] != '\0') return "want NAME TOKEN, found more";
  if (nlen > CONSOLE_NAME_MAX) return "the name is longer than 64 bytes";
  for (size_t i = 0; i < nlen; i++)
    if ((unsigned char)name[i] < 0x21 || name[i] == 0x7f || name[i] == '"' || name[i] == '\\')
      return "the name has a control character, a quote or a backslash";
  if (tlen > CONSOLE_TOKEN_MAX) return "the token is longer than 256 bytes";
  if (token_bits(token, tlen) == 0)
    return "the token has characters outside the hex and base64 alphabets";
  if (token_bits(token, tlen) < CONSOLE_TOKEN_MIN_BITS)
    return "the token is too short: it must carry 128 bits (32 hex digits or 22 base64 "
           "characters; `openssl rand -hex 32` makes one)";
  memcpy(t->name, name, nlen);
  t->name[nlen] = '\0';
  memcpy(t->token, token, tlen);
  t->token[tlen] = '\0';
  t->len = tlen;
  return NULL;
}

struct console_auth *console_auth_load(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "--console-tokens %s: cannot read it: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "--console-tokens %s: not a regular file", path);
    fclose(f);
    return NULL;
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    snprintf(err, errlen,
             "--console-tokens %s can be read or changed by %s (mode %03o): chmod 600 it; "
             "its tokens open the console",
             path, (st.st_mode & S_IRWXO) ? "every user" : "its group",
             (unsigned)(st.st_mode & 0777));
    fclose(f);
    return NULL;
  }
  struct console_auth *a = calloc(1, sizeof *a);
  if (a) a->tokens = calloc(CONSOLE_TOKENS_MAX, sizeof *a->tokens);
  if (a) a->sessions = calloc(CONSOLE_SESSIONS_MAX, sizeof *a->sessions);
  if (a == NULL || a->tokens == NULL || a->sessions == NULL) {
    snprintf(err, errlen, "--console-tokens %s: out of memory", path);
    fclose(f);
    console_auth_free(a);
    return NULL;
  }
  char line[CONSOLE_NAME_MAX + CONSOLE_TOKEN_MAX + 64];
  int lineno = 0;
  const char *why = NULL;
  while (why == NULL && fgets(line, sizeof line, f)) {
    lineno++;
    size_t n = strlen(line);
    if (n == sizeof line - 1 && line[n - 1] != '\n') {
      why = "the line is too long";
      break;
    }
    while (n > 0 && strchr(" \t\r\n", line[n - 1])) line[--n] = '\0';
    const char *first = line + strspn(line, " \t");
    if (*first == '\0' || *first == '#') continue;
    if (a->ntokens == CONSOLE_TOKENS_MAX) {
      why = "more than 256 tokens";
      break;
    }
    struct console_token *t = &a->tokens[a->ntokens];
    if ((why = parse_line(line, t)) != NULL) break;
    for (size_t i = 0; i < a->ntokens && why == NULL; i++) {
      if (!strcmp(a->tokens[i].name, t->name)) why = "a name given twice";
      if (a->tokens[i].len == t->len && !strcmp(a->tokens[i].token, t->token))
        why = "a token given twice (each name needs its own)";
    }
    if (why == NULL) a->ntokens++;
  }
  bool read_error = ferror(f) != 0;
  fclose(f);
  if (why)
    snprintf(err, errlen, "--console-tokens %s:%d: %s", path, lineno, why);
  else if (read_error)
    snprintf(err, errlen, "--console-tokens %s: cannot read it", path);
  else if (a->ntokens == 0)
    snprintf(err, errlen, "--console-tokens %s holds no token: write one `NAME TOKEN` a line",
             path);
  else
    return a;
  console_auth_free(a);
  return NULL;
}

void console_auth_free(struct console_auth *a) {
  if (a == NULL) return;
  if (a->tokens) memset(a->tokens, 0, CONSOLE_TOKENS_MAX * sizeof *a->tokens);
  free(a->tokens);
  free(a->sessions);
  free(a);
}

size_t console_auth_count(const struct console_auth *a) { return a->ntokens; }

/* The token of name in a, or NULL. */
static const struct console_token *token_of(const struct console_auth *a, const char *name) {
  for (size_t i = 0; i < a->ntokens; i++)
    if (!strcmp(a->tokens[i].name, name)) return &a->tokens[i];
  return NULL;
}

int console_auth_reload(struct console_auth *a, const char *path, char *err, size_t errlen) {
  struct console_auth *fresh = console_auth_load(path, err, errlen);
  if (fresh == NULL) return -1;
  for (size_t i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
    struct console_session *s = &a->sessions[i];
    if (!s->id[0]) continue;
    const struct console_token *was = token_of(a, s->name), *now = token_of(fresh, s->name);
    if (was == NULL || now == NULL || was->len != now->len ||
        memcmp(was->token, now->token, now->len) != 0)
      memset(s, 0, sizeof *s); /* its token is gone or changed: so is the session */
  }
  /* the sessions stay with a; the tokens come from fresh */
  struct console_token *old = a->tokens;
  a->tokens = fresh->tokens;
  a->ntokens = fresh->ntokens;
  fresh->tokens = old;
  console_auth_free(fresh);
  return 0;
}

const char *console_auth_check(const struct console_auth *a, const char *token, size_t n) {
  const char *found = NULL;
  for (size_t i = 0; i < a->ntokens; i++) {
    const struct console_token *t = &a->tokens[i];
    /* compare t->len bytes whatever n is, so that the time says nothing of
     * how much of the offered token matched */
    unsigned char diff = n != t->len;
    for (size_t j = 0; j < t->len; j++)
      diff |= (unsigned char)(t->token[j] ^ (j < n ? token[j] : 0));
    if (diff == 0) found = t->name;
  }
  return found;
}

static bool random_hex(char *out, size_t bytes) {
  unsigned char raw[CONSOLE_SESSION_HEX / 2];
  if (bytes > sizeof raw) return false;
  size_t got = 0;
  while (got < bytes) {
    ssize_t r = getrandom(raw + got, bytes - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  for (size_t i = 0; i < bytes; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
  return true;
}

static bool session_live(const struct console_session *s, uint64_t now_ms) {
  return s->id[0] && now_ms - s->seen_ms < CONSOLE_SESSION_IDLE_MS &&
         now_ms - s->created_ms < CONSOLE_SESSION_MAX_MS;
}

const struct console_session *console_session_open(struct console_auth *a, const char *name,
                                                   uint64_t now_ms) {
  struct console_session *slot = NULL;
  for (size_t i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
    struct console_session *s = &a->sessions[i];
    if (!session_live(s, now_ms)) {
      slot = s;
      break;
    }
    if (slot == NULL || s->seen_ms < slot->seen_ms) slot = s;
  }
  struct console_session s = {.created_ms = now_ms, .seen_ms = now_ms};
  if (!random_hex(s.id, CONSOLE_SESSION_HEX / 2) || !random_hex(s.csrf, CONSOLE_SESSION_HEX / 2))
    return NULL;
  snprintf(s.name, sizeof s.name, "%s", name);
  *slot = s;
  return slot;
}

static struct console_session *find(struct console_auth *a, const char *id, size_t n,
                                    uint64_t now_ms) {
  if (n != CONSOLE_SESSION_HEX) return NULL;
  struct console_session *found = NULL;
  for (size_t i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
    struct console_session *s = &a->sessions[i];
    if (s->id[0] && console_equal(s->id, id, n) && session_live(s, now_ms)) found = s;
  }
  return found;
}

const struct console_session *console_session_find(struct console_auth *a, const char *id, size_t n,
                                                   uint64_t now_ms) {
  struct console_session *s = find(a, id, n, now_ms);
  if (s) s->seen_ms = now_ms;
  return s;
}

void console_session_close(struct console_auth *a, const char *id, size_t n, uint64_t now_ms) {
  struct console_session *s = find(a, id, n, now_ms);
  if (s) memset(s, 0, sizeof *s);
}
