/* check: `luastream check` (check.h). */
#include "check.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster_keys.h"
#include "host.h"
#include "min_idle_margin.h"
#include "options.h"
#include "trust.h"

struct check_each {
  bool cluster;         /* --cluster: each handler's keys must share a slot */
  uint64_t watchdog_ms; /* --watchdog, as `run` would have it */
  int problems;
};

/* host_spec_fn: with --cluster, says which handlers' keys would not share
 * a slot on Redis Cluster; warns (not a problem) of a min_idle too short
 * for --watchdog (min_idle_margin.h). */
static void check_spec(void *data, const struct handler_spec *spec) {
  struct check_each *c = data;
  char why[1024];
  if (min_idle_margin_short(spec, c->watchdog_ms)) {
    min_idle_margin_advice(c->watchdog_ms, why, sizeof why);
    fprintf(stderr, "%s: warning: %s (min_idle %lldms, --watchdog %llums); %s\n", spec->path,
            MIN_IDLE_MARGIN_MSG, (long long)spec->min_idle_ms, (unsigned long long)c->watchdog_ms,
            why);
  }
  if (!c->cluster || cluster_keys_check(spec, why, sizeof why) == 0) return;
  fprintf(stderr, "%s: %s\n", spec->path, why);
  c->problems++;
}

int cmd_check(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_CHECK, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  const char *dir = o.pos[0];
  struct trust trust;
  if (cli_trust(&o, &trust, stderr) != 0) return 2;
  struct check_each each = {.cluster = cli_given(&o, OPT_CLUSTER),
                            .watchdog_ms = (uint64_t)cli_num(&o, OPT_CHECK_WATCHDOG)};
  int problems =
      host_check_each(dir, (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT), &trust, check_spec, &each);
  problems += each.problems;
  if (problems) {
    fprintf(stderr, "%s: %d handler file%s with problems\n", dir, problems,
            problems == 1 ? "" : "s");
    return 1;
  }
  printf("%s: every handler file is valid%s\n", dir,
         cli_given(&o, OPT_CLUSTER) ? ", and each one's keys share a hash slot" : "");
  return 0;
}
