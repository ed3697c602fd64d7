/* fuzz_url: url_parse on any text (redis://, unix://, redis+sentinel://):
 * every field it fills is terminated and within its bounds, and neither the
 * redacted text nor an error message shows the password. */
#include "fuzz.h"
#include "url.h"

#define TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

/* How many times s holds needle, overlaps counted. */
static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_strdup(data, size);
  struct redis_url *u = malloc(sizeof *u);
  if (u == NULL) abort();
  memset(u, 0x55, sizeof *u); /* no field left unwritten may pass for terminated */
  char err[URL_TEXT_MAX + 128];
  if (url_parse(text, u, err, sizeof err) == 0) {
    FUZZ_CHECK(TERMINATED(u->host) && TERMINATED(u->path) && TERMINATED(u->user) &&
                   TERMINATED(u->password) && TERMINATED(u->service) && TERMINATED(u->redacted) &&
                   TERMINATED(u->sentinel_user) && TERMINATED(u->sentinel_password),
               "a field is not terminated");
    FUZZ_CHECK(u->port >= 0 && u->port <= 65535 && u->db >= 0, "port %d db %d", u->port, u->db);
    FUZZ_CHECK(u->nsentinels >= 0 && u->nsentinels <= URL_SENTINELS_MAX, "%d sentinels",
               u->nsentinels);
    for (int i = 0; i < u->nsentinels; i++)
      FUZZ_CHECK(TERMINATED(u->sentinels[i].host) && u->sentinels[i].port > 0 &&
                     u->sentinels[i].port <= 65535,
                 "sentinel %d", i);
    /* the password is shown no more often than the text shows it elsewhere
     * (as part of a user or host name, say) */
    if (strlen(u->password) >= 8) {
      int in_text = count(text, u->password), shown = count(u->redacted, u->password);
      FUZZ_CHECK(shown <= (in_text > 0 ? in_text - 1 : 0), "redacted %s shows the password",
                 u->redacted);
    }
  } else {
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "err not terminated");
  }
  free(u);
  free(text);
  return 0;
}
