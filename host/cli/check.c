/* check: `luastream check` (check.h). */
#include "check.h"

#include <stdio.h>

#include "host.h"
#include "options.h"

int cmd_check(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_CHECK, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  const char *dir = o.pos[0];
  int problems = host_check(dir, (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT));
  if (problems) {
    fprintf(stderr, "%s: %d handler file%s with problems\n", dir, problems, problems == 1 ? "" : "s");
    return 1;
  }
  printf("%s: every handler file is valid\n", dir);
  return 0;
}
