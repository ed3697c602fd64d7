/* fuzz_url: url_parse on any text (redis://, unix://, redis+sentinel://):
 * every field it fills is terminated and within its bounds, and neither the
 * redacted text nor an error message shows the password. */
#include "fuzz.h"
#include "url.h"

#define TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

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
    /* a password of a few characters may appear elsewhere in the URL by chance */
    if (strlen(u->password) >= 8)
      FUZZ_CHECK(strstr(u->redacted, u->password) == NULL || strstr(u->host, u->password) ||
                     strstr(u->path, u->password) || strstr(u->user, u->password) ||
                     strstr(u->service, u->password),
                 "redacted %s shows the password", u->redacted);
  } else {
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "err not terminated");
  }
  free(u);
  free(text);
  return 0;
}
