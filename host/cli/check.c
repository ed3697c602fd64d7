/* check: `luastream check` (check.h). */
#include "check.h"

#include <stdio.h>

#include "cluster_keys.h"
#include "host.h"
#include "options.h"
#include "trust.h"

/* host_spec_fn for --cluster: says which handlers' keys would not share a
 * slot on Redis Cluster. */
static void check_slots(void *data, const struct handler_spec *spec) {
  int *problems = data;
  char why[1024];
  if (cluster_keys_check(spec, why, sizeof why) == 0) return;
  fprintf(stderr, "%s: %s\n", spec->path, why);
  ++*problems;
}

int cmd_check(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_CHECK, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  const char *dir = o.pos[0];
  struct trust trust;
  if (cli_trust(&o, &trust, stderr) != 0) return 2;
  int slot_problems = 0;
  int problems = host_check_each(dir, (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT), &trust,
                                 cli_given(&o, OPT_CLUSTER) ? check_slots : NULL, &slot_problems);
  problems += slot_problems;
  if (problems) {
    fprintf(stderr, "%s: %d handler file%s with problems\n", dir, problems,
            problems == 1 ? "" : "s");
    return 1;
  }
  printf("%s: every handler file is valid%s\n", dir,
         cli_given(&o, OPT_CLUSTER) ? ", and each one's keys share a hash slot" : "");
  return 0;
}
