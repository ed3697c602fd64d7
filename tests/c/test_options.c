/* Tests for options.c: the one table that parses, checks and documents the
 * options of every command, on literal argv arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "log.h"
#include "options.h"
#include "runtime.h"
#include "task.h"

static struct cli_options o;
static char *out_text, *err_text;

/* Parses the NULL-terminated argv for command; what it printed is in
 * out_text and err_text. The environment is cleared of the variables the
 * table reads unless a test sets them after calling clean_env. */
static int parse_argv(enum cli_command command, char **argv) {
  int argc = 0;
  while (argv[argc]) argc++;
  free(out_text);
  free(err_text);
  size_t outlen, errlen;
  FILE *out = open_memstream(&out_text, &outlen), *err = open_memstream(&err_text, &errlen);
  ASSERT_NOT_NULL(out);
  ASSERT_NOT_NULL(err);
  int rc = cli_parse(command, argc, argv, &o, out, err);
  fclose(out);
  fclose(err);
  return rc;
}

#define PARSE(command, ...) parse_argv(command, (char *[]){__VA_ARGS__, NULL})

static void clean_env(void) {
  unsetenv("REDIS_URL");
  unsetenv("LUASTREAM_INSTANCE");
  unsetenv("LUASTREAM_LOG_FORMAT");
}

/* The help text of command, malloc'd. Written to a temporary file and read
 * back: the text then never lives behind a pointer to a local. */
static char *help_of(enum cli_command command) {
  FILE *f = tmpfile();
  ASSERT_NOT_NULL(f);
  cli_print_help(command, f);
  long len = ftell(f);
  ASSERT(len >= 0);
  rewind(f);
  char *text = malloc((size_t)len + 1);
  ASSERT_NOT_NULL(text);
  ASSERT(fread(text, 1, (size_t)len, f) == (size_t)len);
  text[len] = '\0';
  fclose(f);
  return text;
}

TEST_IMPL(options_run_good_parse) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--redis", "redis://db.example:7000/2", "--instance", "3",
                      "--log-level", "debug", "--shutdown-timeout", "2m", "--http=127.0.0.1:0",
                      "handlers", "--no-reload", "--load-timeout=1500ms", "--watchdog", "5s"),
                CLI_OK);
  ASSERT_STR_EQ(err_text, "");
  ASSERT_INT_EQ(o.npos, 1);
  ASSERT_STR_EQ(o.pos[0], "handlers");
  ASSERT_STR_EQ(o.url.host, "db.example");
  ASSERT_INT_EQ(o.url.port, 7000);
  ASSERT_INT_EQ(o.url.db, 2);
  ASSERT_INT_EQ(cli_num(&o, OPT_INSTANCE), 3);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_LEVEL), LOG_DEBUG);
  ASSERT_INT_EQ(cli_num(&o, OPT_SHUTDOWN_TIMEOUT), 120000);
  ASSERT_STR_EQ(cli_text(&o, OPT_HTTP), "127.0.0.1:0");
  ASSERT(cli_given(&o, OPT_NO_RELOAD));
  ASSERT_INT_EQ(cli_num(&o, OPT_LOAD_TIMEOUT), 1500);
  ASSERT(cli_given(&o, OPT_LOAD_TIMEOUT));
  ASSERT_INT_EQ(cli_num(&o, OPT_WATCHDOG), 5000);
  ASSERT_NULL(cli_text(&o, OPT_CONSUMER));
}

TEST_IMPL(options_defaults_and_env) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_RUN, "dir"), CLI_OK);
  ASSERT_STR_EQ(o.url.host, "127.0.0.1");
  ASSERT_INT_EQ(o.url.port, 6379);
  ASSERT_INT_EQ(cli_num(&o, OPT_SHUTDOWN_TIMEOUT), 30000);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOAD_TIMEOUT), RT_LOAD_TIMEOUT_MS);
  ASSERT(!cli_given(&o, OPT_LOAD_TIMEOUT));
  ASSERT_INT_EQ(cli_num(&o, OPT_WATCHDOG), LEASE_STALL_MAX_MS);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_LEVEL), LOG_INFO);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_FORMAT), LOG_FORMAT_LOGFMT);
  ASSERT_INT_EQ(cli_num(&o, OPT_HTTP_TIMEOUT), RT_HTTP_TIMEOUT_MS);
  ASSERT_INT_EQ(cli_num(&o, OPT_HTTP_MAX_BODY), RT_HTTP_MAX_BODY);
  ASSERT_INT_EQ(cli_num(&o, OPT_HTTP_PER_HOST), 32);
  ASSERT_NULL(cli_text(&o, OPT_HTTP_CA_FILE));
  ASSERT(!cli_given(&o, OPT_NO_RELOAD));
  ASSERT_NULL(cli_text(&o, OPT_INSTANCE));
  ASSERT_INT_EQ(PARSE(CLI_DL_LIST, "dl"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_COUNT), 100);

  setenv("REDIS_URL", "redis://from-env:6380", 1);
  setenv("LUASTREAM_INSTANCE", "7", 1);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "dir"), CLI_OK);
  ASSERT_STR_EQ(o.url.host, "from-env");
  ASSERT_INT_EQ(cli_num(&o, OPT_INSTANCE), 7);
  /* an option of the same group wins over the variable */
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--redis", "redis://argv:1", "--consumer", "c1", "dir"), CLI_OK);
  ASSERT_STR_EQ(o.url.host, "argv");
  ASSERT_NULL(cli_text(&o, OPT_INSTANCE));
  ASSERT_STR_EQ(cli_text(&o, OPT_CONSUMER), "c1");
  /* a bad value names the variable */
  setenv("LUASTREAM_INSTANCE", "seven", 1);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: LUASTREAM_INSTANCE needs a number from 0 to 999999, got \"seven\"\n");
  setenv("REDIS_URL", "", 1);
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "REDIS_URL is empty");
}

TEST_IMPL(options_log_format) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--log-format", "json", "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_FORMAT), LOG_FORMAT_JSON);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--log-format=logfmt", "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_FORMAT), LOG_FORMAT_LOGFMT);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--log-format", "text", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: --log-format must be logfmt or json, got \"text\"\n");
  setenv("LUASTREAM_LOG_FORMAT", "JSON", 1);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_FORMAT), LOG_FORMAT_JSON);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--log-format", "logfmt", "dir"), CLI_OK); /* the option wins */
  ASSERT_INT_EQ(cli_num(&o, OPT_LOG_FORMAT), LOG_FORMAT_LOGFMT);
  setenv("LUASTREAM_LOG_FORMAT", "xml", 1);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: LUASTREAM_LOG_FORMAT must be logfmt or json, got \"xml\"\n");
  unsetenv("LUASTREAM_LOG_FORMAT");
  /* only run logs */
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "--log-format", "json", "s", "{}"), CLI_USAGE);
  char *help = help_of(CLI_RUN);
  ASSERT_CONTAINS(help, "--log-format FORMAT");
  ASSERT_CONTAINS(help, "$LUASTREAM_LOG_FORMAT, else logfmt)");
  free(help);
}

TEST_IMPL(options_repeatable_and_groups) {
  clean_env();
  ASSERT_INT_EQ(
      PARSE(CLI_PUBLISH, "payments", "{}", "--key", "acme", "--header", "a=1", "--header=b=2=3"),
      CLI_OK);
  ASSERT_STR_EQ(o.pos[0], "payments");
  ASSERT_STR_EQ(o.pos[1], "{}");
  ASSERT_STR_EQ(cli_text(&o, OPT_KEY), "acme");
  ASSERT_INT_EQ(o.v[OPT_HEADER].nitems, 2);
  ASSERT_STR_EQ(o.v[OPT_HEADER].items[0], "a=1");
  ASSERT_STR_EQ(o.v[OPT_HEADER].items[1], "b=2=3");
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl", "--id", "1-0", "--id", "2-5"), CLI_OK);
  ASSERT_STR_EQ(o.pos[0], "dir");
  ASSERT_STR_EQ(o.pos[1], "dl");
  ASSERT_INT_EQ(o.v[OPT_ID].nitems, 2);
  ASSERT_STR_EQ(o.v[OPT_ID].items[1], "2-5");
  ASSERT_INT_EQ(PARSE(CLI_DL_DELETE, "dl", "--reason", "rejected", "--yes"), CLI_OK);
  ASSERT_STR_EQ(cli_text(&o, OPT_REASON), "rejected");
  ASSERT(cli_given(&o, OPT_YES));

  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl", "--id", "1-0", "--all"), CLI_USAGE);
  ASSERT_CONTAINS(err_text,
                  "luastream: say which dead letters, one way: --id ID (repeatable) or "
                  "--all (delete also takes --reason REASON)\n");
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "say which dead letters");
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dl", "--all"), CLI_USAGE); /* DIR is required */
  ASSERT_CONTAINS(err_text, "missing arguments");
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl", "--reason", "rejected"), CLI_USAGE);
  ASSERT_INT_EQ(PARSE(CLI_DL_DELETE, "dl", "--reason", "rejected", "--all"), CLI_USAGE);
  ASSERT_INT_EQ(PARSE(CLI_DL_DELETE, "dl", "--yes"), CLI_USAGE);
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl", "--id", "17"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --id needs an entry id as Redis writes it, such as "
                "1700000000000-0 (digits, no leading zeros), got \"17\"\n");
  /* one spelling per entry: 05-3 and 5-03 would name 5-3 a second time */
  ASSERT_INT_EQ(PARSE(CLI_DL_DELETE, "dl", "--id", "5-3", "--id", "05-3"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "got \"05-3\"");
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl", "--id", "5-03"), CLI_USAGE);
  ASSERT_INT_EQ(PARSE(CLI_DL_REPLAY, "dir", "dl", "--id", "0-0", "--id", "10-20"), CLI_OK);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--redis", "redis://a", "--redis-file", "/f", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: give --redis or --redis-file, not both\n");
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}", "--header", "=v"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: --header needs NAME=VALUE, got \"=v\"\n");
}

TEST_IMPL(options_unknown_option) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--bogus", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: unknown option --bogus\n\nusage: luastream run ");
  /* an option of another command is unknown here, with or without =value */
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--key=k", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: unknown option --key\n");
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "--redis", "redis://x", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: unknown option --redis\n");
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "dir", "other"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: unexpected argument \"other\"\n");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--no-reload=yes", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: option --no-reload takes no value\n");
}

TEST_IMPL(options_missing_value) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}", "--key"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: option --key needs a value\n");
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: missing arguments\n\nusage: luastream publish ");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--consumer", "", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: --consumer needs a non-empty name\n");
}

TEST_IMPL(options_bad_duration) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--shutdown-timeout", "30", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --shutdown-timeout 30: add a unit, e.g. 30s (or 30ms, 30m, 30h)\n");
  ASSERT_INT_EQ(PARSE(CLI_PAUSE, "--for", "0", "s", "g"), CLI_USAGE); /* not "e.g. 0s" */
  ASSERT_STR_EQ(err_text, "luastream: --for 0: add a unit, e.g. 30s (or 500ms, 15m, 2h)\n");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--shutdown-timeout", "off", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: --shutdown-timeout \"off\" must be a duration");
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "--load-timeout", "0s", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --load-timeout needs a duration above 0 such as 5s or 500ms\n");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--http-timeout", "0ms", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --http-timeout needs a duration above 0 such as 5s or 500ms\n");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--http-per-host", "0", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --http-per-host needs a number from 1 to 100000, got \"0\"\n");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--watchdog", "off", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: --watchdog cannot be off: ");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--watchdog", "11s", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: --watchdog must be at most 10s, got 11s: ");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--watchdog", "999ms", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "luastream: --watchdog must be at least 1s, got 999ms: ");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--watchdog", "1s", "dir"), CLI_OK);
  ASSERT_INT_EQ(PARSE(CLI_DL_LIST, "--count", "+5", "dl"), CLI_USAGE);
  ASSERT_STR_EQ(err_text, "luastream: --count needs a number from 1 to 1000000000, got \"+5\"\n");
}

/* help has an entry that starts with want and ends there (--watch is not --watchdog). */
static bool has_entry(const char *help, const char *want) {
  for (const char *p = strstr(help, want); p; p = strstr(p + 1, want)) {
    char next = p[strlen(want)];
    if (next == ' ' || next == '\n') return true;
  }
  return false;
}

TEST_IMPL(options_help_lists_every_option) {
  clean_env();
  for (int c = 0; c < CLI_NCOMMANDS; c++) {
    char *help = help_of((enum cli_command)c);
    char want[64];
    snprintf(want, sizeof want, "usage: luastream %s ", cli_command_name((enum cli_command)c));
    ASSERT(strncmp(help, want, strlen(want)) == 0);
    for (int id = 0; id < OPT_NOPTIONS; id++) {
      const struct cli_option *opt = &cli_option_table[id];
      /* each option the command takes has an entry: "\n  --name ARG" */
      snprintf(want, sizeof want, "\n  --%s%s%s", opt->name, opt->arg ? " " : "",
               opt->arg ? opt->arg : "");
      /* another option of the same name may be the command's (--watchdog) */
      bool named = false;
      for (int other = 0; other < OPT_NOPTIONS; other++)
        named = named || ((cli_option_table[other].commands & CLI_IN(c)) &&
                          strcmp(cli_option_table[other].name, opt->name) == 0);
      if (opt->commands & CLI_IN(c))
        ASSERT_CONTAINS(help, want);
      else if (!named && has_entry(help, want))
        TEST_FAIL_("%s help lists --%s", cli_command_name(c), opt->name);
    }
    free(help);
  }
  char *help = help_of(CLI_RUN);
  ASSERT_CONTAINS(help, "[--redis URL | --redis-file PATH]");
  ASSERT_CONTAINS(help, "(default:");
  ASSERT_CONTAINS(help, "$REDIS_URL, else redis://127.0.0.1:6379)\n");
  free(help);
  help = help_of(CLI_DL_REPLAY);
  ASSERT_CONTAINS(help, "(--id ID... | --all) DIR STREAM");
  free(help);
  /* --help wins wherever it is, on stdout */
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "dir", "--help"), CLI_DONE);
  ASSERT_CONTAINS(out_text, "  --load-timeout DURATION");
  ASSERT_STR_EQ(err_text, "");
  free(out_text);
  free(err_text);
  out_text = err_text = NULL;
}

TEST_IMPL(options_help_fits_its_command) {
  clean_env();
  for (int c = 0; c < CLI_NCOMMANDS; c++) {
    char *help = help_of((enum cli_command)c);
    /* wrapped to 79 columns, the synopsis and the about text included */
    for (const char *line = help; *line;) {
      size_t n = strcspn(line, "\n");
      if (n > 79)
        TEST_FAIL_("%s help has a line of %zu columns: %.*s", cli_command_name((enum cli_command)c),
                   n, (int)n, line);
      line += n + (line[n] == '\n');
    }
    free(help);
  }
  /* an option both commands take says nothing that holds for one only; check
   * has a --watchdog of its own (the value run is given), not run's */
  char *help = help_of(CLI_CHECK);
  if (strstr(help, "status 70")) TEST_FAIL_("check help speaks of run's watchdog:\n%s", help);
  ASSERT_CONTAINS(help, "--watchdog DURATION");
  ASSERT_CONTAINS(help, "the --watchdog `run` is given");
  free(help);
  help = help_of(CLI_RUN);
  ASSERT_CONTAINS(help, "Files whose\nname starts with _ are modules");
  ASSERT_CONTAINS(help, "SIGTERM or SIGINT stops reading");
  free(help);
}

TEST_IMPL(options_processes) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_RUN, "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_PROCESSES), 1);
  ASSERT(!cli_given(&o, OPT_PROCESSES));
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes", "4", "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_PROCESSES), 4);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes=auto", "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_PROCESSES), cli_cores());
  ASSERT(cli_cores() >= 1);
  /* with --consumer or --instance: the supervisor derives each worker's names */
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes", "2", "--consumer", "c", "dir"), CLI_OK);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes", "2", "--instance", "3", "dir"), CLI_OK);
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes", "0", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --processes needs a number from 1 to 1024 or auto, got \"0\"\n");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes", "many", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "or auto, got \"many\"");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--processes", "1025", "dir"), CLI_USAGE);
  /* auto is only a word for --processes */
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--http-per-host", "auto", "dir"), CLI_USAGE);
  ASSERT_STR_EQ(err_text,
                "luastream: --http-per-host needs a number from 1 to 100000, got \"auto\"\n");
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "--processes", "2", "dir"), CLI_USAGE);
  char *help = help_of(CLI_RUN);
  ASSERT_CONTAINS(help, "[--processes N]");
  ASSERT_CONTAINS(help, "\n  --processes N ");
  ASSERT_CONTAINS(strstr(help, "\n  --processes N "), "auto");
  free(help);
}

TEST_IMPL(options_publish_wait) {
  clean_env();
  long long n, ms;
  char why[256];
  ASSERT_OK(cli_wait_parse("1", &n, &ms, why, sizeof why));
  ASSERT_INT_EQ(n, 1);
  ASSERT_INT_EQ(ms, PUBLISH_WAIT_DEFAULT_MS);
  ASSERT_OK(cli_wait_parse("2,250ms", &n, &ms, why, sizeof why));
  ASSERT_INT_EQ(n, 2);
  ASSERT_INT_EQ(ms, 250);
  ASSERT_OK(cli_wait_parse("3,5s", &n, &ms, why, sizeof why));
  ASSERT_INT_EQ(ms, 5000);
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}", "--wait", "1,2s"), CLI_OK);
  ASSERT_STR_EQ(cli_text(&o, OPT_WAIT), "1,2s");
  /* refused: no replica, not a number, no unit, past 5s, nothing after the comma */
  char *bad[] = {"0", "x", "1x", "-1", "1,5", "1,6s", "1,", ",1s", "1,0ms"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}", "--wait", bad[i]), CLI_USAGE);
    ASSERT_CONTAINS(err_text, "luastream: --wait ");
  }
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}", "--wait", "0"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "N replicas, at least 1");
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "s", "{}", "--wait", "1,6s"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "TIMEOUT must be from 1ms to 5s, got 6s");
  ASSERT_INT_EQ(PARSE(CLI_DL_LIST, "s", "--wait", "1"), CLI_USAGE); /* publish's only */
}

/* check's --watchdog is its own option of the same name: the value run is
 * given (its default, its limits), which run's does not see. */
TEST_IMPL(options_check_watchdog) {
  clean_env();
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_CHECK_WATCHDOG), LEASE_STALL_MAX_MS);
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "--watchdog", "2s", "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_CHECK_WATCHDOG), 2000);
  ASSERT(!cli_given(&o, OPT_WATCHDOG));
  ASSERT_INT_EQ(PARSE(CLI_CHECK, "--watchdog=30s", "dir"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "--watchdog must be at most 10s");
  ASSERT_INT_EQ(PARSE(CLI_RUN, "--watchdog", "3s", "dir"), CLI_OK);
  ASSERT_INT_EQ(cli_num(&o, OPT_WATCHDOG), 3000);
  ASSERT(!cli_given(&o, OPT_CHECK_WATCHDOG));
  ASSERT_INT_EQ(PARSE(CLI_PUBLISH, "--watchdog", "3s", "s", "{}"), CLI_USAGE);
  ASSERT_CONTAINS(err_text, "unknown option --watchdog");
}
