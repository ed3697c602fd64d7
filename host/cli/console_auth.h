/* console_auth: who may use the web console (console.h). The tokens file
 * names the people or scripts allowed, one `NAME TOKEN` pair a line (blank
 * lines and lines starting with '#' are skipped); a token carries at least
 * 128 bits: 32 hex digits, or 22 characters of the base64 alphabets. A
 * file its group or others can read is refused, as are duplicate names or
 * tokens. Tokens are compared in constant time (over the stored token's
 * length, whatever is offered).
 *
 * A correct token typed into the login page opens a session: a random
 * 256-bit id sent back as an HttpOnly, SameSite=Strict cookie, with its own
 * CSRF token for the POSTs of the page. Sessions live in memory (a restart
 * logs everyone out), end CONSOLE_SESSION_IDLE_MS after their last request
 * or CONSOLE_SESSION_MAX_MS after the login, and at most CONSOLE_SESSIONS_MAX
 * live at once (a new login then ends the oldest). SIGHUP reads the file
 * again: a token removed or changed there ends its sessions. */
#ifndef LUASTREAM_CONSOLE_AUTH_H
#define LUASTREAM_CONSOLE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONSOLE_TOKEN_MIN_BITS 128
#define CONSOLE_TOKEN_MAX 256            /* bytes of one token */
#define CONSOLE_NAME_MAX 64              /* bytes of one name */
#define CONSOLE_TOKENS_MAX 256           /* pairs in one file */
#define CONSOLE_SESSION_HEX 64           /* a session id or CSRF token: 32 random bytes in hex */
#define CONSOLE_SESSIONS_MAX 1024        /* live sessions */
#define CONSOLE_SESSION_IDLE_MS 43200000 /* 12 h without a request ends a session */
#define CONSOLE_SESSION_MAX_MS 604800000 /* 7 days after the login, at most */

struct console_auth;

/* Reads path. Returns the tokens, or NULL with one line naming the file
 * (and the line) in err. */
struct console_auth *console_auth_load(const char *path, char *err, size_t errlen);
void console_auth_free(struct console_auth *a);

/* Reads path again (SIGHUP): its tokens replace a's, and the sessions
 * opened with a token that is gone or changed end. Returns 0, or -1 with
 * why in err (a's tokens and sessions kept). */
int console_auth_reload(struct console_auth *a, const char *path, char *err, size_t errlen);
size_t console_auth_count(const struct console_auth *a);

/* The name of the token equal to the n bytes of token, or NULL. Every
 * stored token is compared, each in constant time. */
const char *console_auth_check(const struct console_auth *a, const char *token, size_t n);

/* A session: who logged in and the CSRF token its page sends with POSTs. */
struct console_session {
  char id[CONSOLE_SESSION_HEX + 1];
  char csrf[CONSOLE_SESSION_HEX + 1];
  char name[CONSOLE_NAME_MAX + 1];
  uint64_t created_ms, seen_ms;
};

/* Opens a session for name at now_ms (ending the oldest at the cap).
 * Returns it, or NULL when the system has no randomness to give. */
const struct console_session *console_session_open(struct console_auth *a, const char *name,
                                                   uint64_t now_ms);
/* The live session whose id is the n bytes of id (compared in constant
 * time), seen now; NULL when there is none or it has ended. */
const struct console_session *console_session_find(struct console_auth *a, const char *id, size_t n,
                                                   uint64_t now_ms);
void console_session_close(struct console_auth *a, const char *id, size_t n, uint64_t now_ms);

/* n bytes of a and b equal, in time that depends on n only. */
bool console_equal(const char *a, const char *b, size_t n);

#endif
