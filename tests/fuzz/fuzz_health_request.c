/* fuzz_health_request: health_parse_request on any bytes a client sends,
 * cut at every length (as reads arrive), and health_parse_addr on any
 * --http value: no read past the bytes, and once a request is complete a
 * longer read of it routes the same. */
#include "fuzz.h"
#include "health.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > HEALTH_REQUEST_MAX) return 0;
  char *buf = fuzz_copy(data, size);
  enum health_route whole = health_parse_request(buf, size);
  FUZZ_CHECK(whole >= HEALTH_INCOMPLETE && whole <= HEALTH_METRICS, "route %d", (int)whole);
  /* every prefix, each in a buffer of its own size */
  enum health_route first = HEALTH_INCOMPLETE;
  for (size_t n = 0; n <= size && size <= 512; n++) {
    char *part = fuzz_copy(data, n);
    enum health_route r = health_parse_request(part, n);
    free(part);
    if (first == HEALTH_INCOMPLETE) first = r;
  }
  if (size <= 512)
    FUZZ_CHECK(first == HEALTH_INCOMPLETE || first == whole,
               "a shorter read routed %d, the whole %d", (int)first, (int)whole);
  free(buf);

  char *text = fuzz_strdup(data, size);
  char host[256], err[256];
  int port = -1;
  if (health_parse_addr(text, host, sizeof host, &port, err, sizeof err) == 0)
    FUZZ_CHECK(port >= 0 && port <= 65535 && memchr(host, '\0', sizeof host), "port %d", port);
  free(text);
  return 0;
}
