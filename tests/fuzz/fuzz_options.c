/* fuzz_options: cli_parse on any command line (the first byte picks the
 * command, then one argument per line): it accepts, prints help, or refuses
 * with a usage error, and what it accepts holds the options' values. */
#include "fuzz.h"
#include "options.h"

#define MAX_ARGS 32

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (devnull == NULL) {
    if ((devnull = fopen("/dev/null", "w")) == NULL) abort();
    unsetenv("REDIS_URL"); /* the command line alone decides */
    unsetenv("LUASTREAM_INSTANCE");
  }
  int argc;
  size_t *len;
  char **argv = fuzz_split(data + 1, size - 1, MAX_ARGS, &argc, &len);
  enum cli_command command = (enum cli_command)(data[0] % CLI_NCOMMANDS);
  struct cli_options *o = malloc(sizeof *o);
  if (o == NULL) abort();
  int rc = cli_parse(command, argc, argv, o, devnull, devnull);
  FUZZ_CHECK(rc == CLI_OK || rc == CLI_DONE || rc == CLI_USAGE, "rc %d", rc);
  if (rc == CLI_OK) {
    FUZZ_CHECK(o->npos >= 0 && o->npos <= CLI_ARGS_MAX && o->npos <= argc, "%d positional",
               o->npos);
    for (int id = 0; id < OPT_NOPTIONS; id++) {
      const struct cli_option *opt = &cli_option_table[id];
      const struct cli_value *v = &o->v[id];
      FUZZ_CHECK(v->nitems >= 0 && (v->nitems == 0 || opt->repeat > 0), "--%s: %d items", opt->name,
                 v->nitems);
      if (opt->kind == CLI_INT && v->text)
        FUZZ_CHECK(v->num >= opt->min && v->num <= opt->max, "--%s %lld", opt->name, v->num);
      if (opt->kind == CLI_DURATION && v->text)
        FUZZ_CHECK(v->num >= 0, "--%s %lld ms", opt->name, v->num);
    }
  }
  free(o);
  free(argv[0]);
  free(argv);
  free(len);
  return 0;
}
