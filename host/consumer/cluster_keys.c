/* cluster_keys: one slot for a subscription's keys (cluster_keys.h). */
#include "cluster_keys.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyslot.h"
#include "lease.h"
#include "outcome.h"
#include "partition.h"

static unsigned slot_of(const char *key) { return keyslot_of(key, strlen(key)); }

/* The hash tag of name ("{payments}"), or "" when it has none. */
static void tag_of(const char *name, char *out, size_t len) {
  const char *open = strchr(name, '{');
  const char *close = open ? strchr(open + 1, '}') : NULL;
  if (close && close > open + 1)
    snprintf(out, len, "%.*s", (int)(close - open + 1), open);
  else
    out[0] = '\0';
}

int cluster_keys_check(const struct handler_spec *s, char *why, size_t len) {
  if (spec_scheduled(s)) return 0; /* one key, luastream:tick:{NAME} */
  if (s->partitions > 0) {         /* each partition's keys carry its tag {p} */
    struct handler_spec part;
    if (partition_spec(s, 0, &part) != 0) {
      snprintf(why, len, "out of memory");
      return -1;
    }
    part.partitions = 0; /* the one partition's names */
    int rc = cluster_keys_check(&part, why, len);
    partition_spec_free(&part);
    return rc;
  }
  char *retry = outcome_retry_key(s), *delay = outcome_delay_key(s);
  char *leases = lease_key(s->stream, s->group, ""); /* their common prefix */
  const char *what[] = {"stream",   "retry stream", "delay set",
                        "reply_to", "dead_letter",  "consumer leases"};
  const char *key[] = {s->stream, retry, delay, s->reply_to, s->dead_letter, leases};
  int rc = 0;
  if (retry == NULL || delay == NULL || leases == NULL) {
    snprintf(why, len, "out of memory");
    rc = -1;
    goto done;
  }
  unsigned slot = slot_of(s->stream);
  bool differ = false;
  for (size_t i = 1; i < sizeof key / sizeof key[0]; i++)
    if (key[i] && slot_of(key[i]) != slot) differ = true;
  if (!differ) goto done;
  rc = -1;
  size_t n = (size_t)snprintf(why, len,
                              "in Redis Cluster the keys an outcome writes in one "
                              "step must share a hash slot, and these do not:");
  /* the leases' name is luastream's: named only when it is the odd one */
  for (size_t i = 0; i < sizeof key / sizeof key[0] && n < len; i++)
    if (key[i] && (key[i] != leases || slot_of(leases) != slot))
      n += (size_t)snprintf(why + n, len - n, "%s %s \"%s\" (slot %u)", i ? "," : "", what[i],
                            key[i], slot_of(key[i]));
  char tag[128];
  tag_of(s->stream, tag, sizeof tag);
  if (n < len && tag[0]) {
    snprintf(why + n, len - n, "; put the stream's hash tag %s in every name", tag);
  } else if (n < len) {
    n += (size_t)snprintf(why + n, len - n, "; give the names one hash tag, e.g. stream = \"{%s}\"",
                          s->stream);
    const char *named[] = {"reply_to", "dead_letter"};
    const char *name[] = {s->reply_to, s->dead_letter};
    size_t sl = strlen(s->stream);
    for (size_t i = 0; i < 2 && n < len; i++) {
      if (name[i] == NULL) continue;
      if (strncmp(name[i], s->stream, sl) == 0) /* payments.posted -> {payments}.posted */
        n += (size_t)snprintf(why + n, len - n, ", %s = \"{%s}%s\"", named[i], s->stream,
                              name[i] + sl);
      else
        n += (size_t)snprintf(why + n, len - n, ", %s = \"{%s}:%s\"", named[i], s->stream, name[i]);
    }
    if (n < len)
      snprintf(why + n, len - n, " (the retry stream and delay set follow the stream's name)");
  }
done:
  free(retry);
  free(delay);
  free(leases);
  return rc;
}
