/* publish: `luastream publish` (publish.h). */
#include "publish.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "client.h"
#include "host.h"
#include "keyslot.h"
#include "options.h"
#include "partition.h"
#include "runtime.h"
#include "schema.h"
#include "trust.h"
#include "wire.h"

struct publish {
  struct bk_args xadd;
  long long replicas; /* --wait N, or 0 */
  long long wait_ms;  /* --wait's TIMEOUT */
  char id[64];        /* the new entry's */
};

static void waited(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct publish *p = c->data;
  if (c->finished) return;
  if (r == NULL || r->type != BK_INTEGER) {
    const char *why = client_error(r, err);
    fprintf(stderr,
            "luastream: WAIT on %s failed: %s (entry %s was added; how many replicas have it is "
            "unknown)\n",
            c->b->name, why ? why : "unexpected reply", p->id);
    client_done(c, PUBLISH_NOT_REPLICATED);
    return;
  }
  if (r->integer > p->replicas) { /* WAIT counts every replica that has it */
    fprintf(stderr, "luastream: %lld replicas acknowledged entry %s (%lld asked for)\n", r->integer,
            p->id, p->replicas);
    client_done(c, 0);
    return;
  }
  if (r->integer == p->replicas) {
    fprintf(stderr, "luastream: %lld of %lld replica%s acknowledged entry %s\n", r->integer,
            p->replicas, p->replicas == 1 ? "" : "s", p->id);
    client_done(c, 0);
    return;
  }
  fprintf(stderr,
          "luastream: %lld of %lld replica%s acknowledged entry %s within %lldms: it is on the "
          "master, and a failover before a replica has it loses it\n",
          r->integer, p->replicas, p->replicas == 1 ? "" : "s", p->id, p->wait_ms);
  client_done(c, PUBLISH_NOT_REPLICATED);
}

static void added(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct publish *p = c->data;
  if (c->finished) return;
  if (r && r->type == BK_STRING) {
    printf("%.*s\n", (int)r->len, r->str);
    fflush(stdout);
    snprintf(p->id, sizeof p->id, "%.*s", (int)r->len, r->str);
    if (p->replicas == 0) client_done(c, 0); /* else WAIT, sent behind it, answers */
    return;
  }
  const char *why = client_error(r, err);
  fprintf(stderr, "luastream: XADD %s on %s failed: %s\n", p->xadd.argv[1], c->b->name,
          why ? why : "unexpected reply");
  client_done(c, 1);
}

static void publish_start(struct client *c) {
  struct publish *p = c->data;
  if (p->replicas && bk_is_cluster(c->b)) {
    /* WAIT counts the replicas of the node it reaches, and a keyless
     * command does not go to the node of the stream's slot. */
    fprintf(stderr,
            "luastream: --wait is not supported on a Redis Cluster (%s): nothing was added\n",
            c->b->name);
    client_done(c, 2);
    return;
  }
  if (client_send(c, &p->xadd, added) != 0 || p->replicas == 0) return;
  /* On the same connection, behind the XADD: WAIT waits for the writes this
   * connection made, the XADD included. */
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "WAIT");
  bk_args_num(&a, p->replicas);
  bk_args_num(&a, p->wait_ms);
  client_send(c, &a, waited);
  bk_args_free(&a);
}

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

/* --check DIR: the body against the schema of each handler reading the
 * stream (its base name, for a partitioned one). */
struct schema_each {
  const char *stream, *json;
  size_t len;
  struct schema_scratch scratch;
  int readers, refused, failed;
};

/* Whether spec reads stream: its `stream` (the base name, for a partitioned
 * one published to with --partitions), or one of its partitions' keys,
 * "<stream>:{p}" for p below `partitions`, named as such. */
static bool reads_stream(const struct handler_spec *spec, const char *stream) {
  /* a scheduled handler reads no stream (its stream is NULL) */
  if (spec->stream == NULL) return false;
  if (strcmp(spec->stream, stream) == 0) return true;
  size_t n = strlen(spec->stream);
  if (strncmp(stream, spec->stream, n) != 0) return false;
  char tail[24];
  for (int p = 0; p < spec->partitions; p++) {
    partition_key_into("", p, tail, sizeof tail); /* ":{p}", as the keys are named */
    if (strcmp(stream + n, tail) == 0) return true;
  }
  return false;
}

static void check_schema(void *data, const struct handler_spec *spec) {
  struct schema_each *c = data;
  if (!reads_stream(spec, c->stream) || spec->schema == NULL) return;
  c->readers++;
  char why[300];
  int rc = schema_check_json(spec->schema, c->json, c->len, &c->scratch, why, sizeof why);
  if (rc == 1) return;
  if (rc == 0) {
    fprintf(stderr, "publish: refused: %s: %s\n", spec->path, why);
    c->refused++;
  } else {
    fprintf(stderr, "publish: %s: cannot check the body: %s\n", spec->path, why);
    c->failed++;
  }
}

/* The value of the last --header content-type=..., or NULL. */
static const char *content_type(const struct cli_options *o) {
  const struct cli_value *headers = &o->v[OPT_HEADER];
  const char *type = NULL;
  for (int i = 0; i < headers->nitems; i++) {
    const char *h = headers->items[i];
    size_t len = strcspn(h, "=");
    if (len == sizeof HDR_CONTENT_TYPE - 1 && memcmp(h, HDR_CONTENT_TYPE, len) == 0)
      type = h + len + 1;
  }
  return type;
}

/* Returns 0 when the body may be added, else the exit status. */
static int check_body(const struct cli_options *o, const char *stream, const char *json) {
  const char *dir = cli_text(o, OPT_PUBLISH_CHECK);
  /* As the host reads it (core.message): a body whose content-type does not
   * say json is handed over as text, unchecked. */
  const char *type = content_type(o);
  if (type && strstr(type, "json") == NULL) {
    fprintf(stderr,
            "publish: --check %s: content-type %s is not JSON: handlers get the body as text, "
            "without checking it against a schema\n",
            dir, type);
    return 0;
  }
  struct trust trust;
  if (cli_trust(o, &trust, stderr) != 0) return 2;
  struct schema_each each = {.stream = stream, .json = json, .len = strlen(json)};
  int problems =
      host_check_each(dir, (uint64_t)cli_num(o, OPT_LOAD_TIMEOUT), &trust, check_schema, &each);
  schema_scratch_free(&each.scratch);
  if (problems) {
    fprintf(stderr, "publish: --check %s: %d handler file%s with problems: nothing was added\n",
            dir, problems, problems == 1 ? "" : "s");
    return 2;
  }
  if (each.refused || each.failed) return 1;
  if (each.readers == 0)
    fprintf(stderr, "publish: --check %s: no handler file there reads %s with a schema\n", dir,
            stream);
  return 0;
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
  if (cli_given(&o, OPT_PUBLISH_CHECK) && (rc = check_body(&o, stream, json)) != 0) return rc;
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
  struct publish pub = {.replicas = 0};
  if (cli_given(&o, OPT_WAIT) &&
      cli_wait_parse(cli_text(&o, OPT_WAIT), &pub.replicas, &pub.wait_ms, err, sizeof err) != 0)
    return 2; /* options.c checked it */
  bk_args_init(&pub.xadd);
  bk_args_str(&pub.xadd, "XADD");
  bk_args_str(&pub.xadd, stream);
  if (cli_given(&o, OPT_MAXLEN)) { /* exact: the stream keeps the newest N */
    bk_args_str(&pub.xadd, "MAXLEN");
    bk_args_num(&pub.xadd, cli_num(&o, OPT_MAXLEN)); /* "010" is 10: Redis refuses leading zeros */
  }
  bk_args_str(&pub.xadd, "*");
  bk_args_str(&pub.xadd, HDR_DATA);
  bk_args_str(&pub.xadd, json);
  if (cli_text(&o, OPT_KEY)) {
    bk_args_str(&pub.xadd, HDR_PARTITION_KEY);
    bk_args_str(&pub.xadd, cli_text(&o, OPT_KEY));
  }
  for (int i = 0; i < headers->nitems; i++) {
    const char *h = headers->items[i], *eq = strchr(h, '=');
    bk_args_add(&pub.xadd, h, (size_t)(eq - h));
    bk_args_str(&pub.xadd, eq + 1);
  }
  int status = client_run(&o.url, "publish", publish_start, &pub);
  bk_args_free(&pub.xadd);
  return status;
}
