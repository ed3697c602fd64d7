/* publish: `luastream publish` (publish.h). */
#include "publish.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "client.h"
#include "keyslot.h"
#include "options.h"
#include "partition.h"
#include "runtime.h"
#include "wire.h"

static void publish_done(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  if (c->finished) return;
  if (r && r->type == BK_STRING) {
    printf("%.*s\n", (int)r->len, r->str);
    client_done(c, 0);
    return;
  }
  const char *why = client_error(r, err);
  const struct bk_args *a = c->data; /* XADD stream ... */
  fprintf(stderr, "luastream: XADD %s on %s failed: %s\n", a->argv[1], c->b->name,
          why ? why : "unexpected reply");
  client_done(c, 1);
}

static void publish_start(struct client *c) { client_send(c, c->data, publish_done); }

/* A header luastream writes itself, or the body: a producer who sets one
 * would forge what luastream records (a delivery count, a dead letter's
 * origin) or lose the body. NULL when name is free to use, else why not. */
static const char *reserved_header(const char *name, size_t len) {
  static const char *const own[] = {HDR_DATA,        HDR_DELIVERY_COUNT, HDR_IDLE_MS,
                                    HDR_RETRY_GROUP, HDR_ORIGINAL_ID,    "handler-version"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (strlen(own[i]) == len && strncasecmp(name, own[i], len) == 0)
      return i == 0 ? "the body's field: the JSON argument is the body"
                    : "luastream writes it itself";
  if (strlen(HDR_PARTITION_KEY) == len && strncasecmp(name, HDR_PARTITION_KEY, len) == 0)
    return "set it with --key";
  if (len >= 12 && strncasecmp(name, "dead-letter-", 12) == 0)
    return "luastream writes the dead-letter-* headers itself";
  return NULL;
}

int cmd_publish(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_PUBLISH, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  const char *stream = o.pos[0], *json = o.pos[1];
  char err[256];
  if (!rt_json_valid(json, strlen(json), err, sizeof err)) {
    fprintf(stderr, "luastream: the message is not valid JSON: %s\n", err);
    return 2;
  }
  const struct cli_value *headers = &o.v[OPT_HEADER];
  for (int i = 0; i < headers->nitems; i++) {
    const char *h = headers->items[i];
    size_t len = strcspn(h, "="); /* options.c checked that there is a NAME= */
    const char *why = reserved_header(h, len);
    if (why) {
      fprintf(stderr, "luastream: --header %.*s: a reserved header name (%s)\n", (int)len, h, why);
      return 2;
    }
  }
  /* A partitioned stream: the partition is the key's, as every producer
   * computes it (partition.h), so without a key there is none to pick. */
  char part[1100];
  if (cli_given(&o, OPT_PARTITIONS)) {
    const char *key = cli_text(&o, OPT_KEY);
    if (key == NULL) {
      fprintf(stderr,
              "luastream: --partitions needs --key: the partition is crc16(key) %% N, "
              "so an entry without a partition key has none\n");
      return 2;
    }
    int p = (int)keyslot_partition(key, strlen(key), (unsigned)cli_num(&o, OPT_PARTITIONS));
    if (partition_key_into(stream, p, part, sizeof part) < 0) {
      fprintf(stderr, "luastream: the stream name is too long\n");
      return 2;
    }
    stream = part;
  }
  struct bk_args args;
  bk_args_init(&args);
  bk_args_str(&args, "XADD");
  bk_args_str(&args, stream);
  if (cli_given(&o, OPT_MAXLEN)) { /* exact: the stream keeps the newest N */
    bk_args_str(&args, "MAXLEN");
    bk_args_num(&args, cli_num(&o, OPT_MAXLEN)); /* "010" is 10: Redis refuses leading zeros */
  }
  bk_args_str(&args, "*");
  bk_args_str(&args, HDR_DATA);
  bk_args_str(&args, json);
  if (cli_text(&o, OPT_KEY)) {
    bk_args_str(&args, HDR_PARTITION_KEY);
    bk_args_str(&args, cli_text(&o, OPT_KEY));
  }
  for (int i = 0; i < headers->nitems; i++) {
    const char *h = headers->items[i], *eq = strchr(h, '=');
    bk_args_add(&args, h, (size_t)(eq - h));
    bk_args_str(&args, eq + 1);
  }
  int status = client_run(&o.url, "publish", publish_start, &args);
  bk_args_free(&args);
  return status;
}
