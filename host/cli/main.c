/* luastream: the command line. main only picks the command; each lives in
 * a file of its own, and options.c reads every command's options.
 *
 *   luastream run [--redis URL | --redis-file PATH] [--instance N | --consumer NAME]
 *                 [--log-level LEVEL] [--shutdown-timeout DURATION] [--http ADDR:PORT]
 *                 [--no-reload] [--load-timeout DURATION] [--watchdog DURATION] DIR   (run.c)
 *   luastream check [--load-timeout DURATION] DIR                                     (check.c)
 *   luastream publish [--redis URL | --redis-file PATH] STREAM JSON [--key K]
 *                     [--header NAME=VALUE]...                                        (publish.c)
 *   luastream dead-letters list [--redis URL | --redis-file PATH] STREAM [--count N]
 *   luastream dead-letters replay [--redis URL | --redis-file PATH] STREAM
 *                                 (--id ID... | --all)                          (dead_letters.c)
 *
 * Exit status: 0 on success, 1 when the work failed, 2 on a usage error. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "dead_letters.h"
#include "options.h"
#include "publish.h"
#include "run.h"

static const char usage_main[] =
    "usage: luastream <command> [options]\n"
    "\n"
    "Runs Redis Streams consumer groups with handlers written in Lua.\n"
    "\n"
    "commands:\n"
    "  run            run the handlers of a directory\n"
    "  check          load and validate the handlers of a directory without\n"
    "                 connecting\n"
    "  publish        add one entry to a stream\n"
    "  dead-letters   list the dead letters of a stream (list), or hand them back\n"
    "                 to the group that gave up on them (replay)\n"
    "\n"
    "`luastream <command> --help` describes each command. The server comes from\n"
    "--redis URL, --redis-file PATH or REDIS_URL (" CLI_DEFAULT_URL " when none is\n"
    "given). A password in --redis is visible to every user of the machine (ps):\n"
    "put the URL in a file only you can read and pass --redis-file, or set\n"
    "REDIS_URL.\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_main, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(usage_main, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    cli_print_version(stdout);
    return 0;
  }
  if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(cmd, "check")) return cmd_check(argc - 2, argv + 2);
  if (!strcmp(cmd, "publish")) return cmd_publish(argc - 2, argv + 2);
  if (!strcmp(cmd, "dead-letters")) return cmd_dead_letters(argc - 2, argv + 2);
  fprintf(stderr, "luastream: unknown command \"%s\"\n\n%s", cmd, usage_main);
  return 2;
}
