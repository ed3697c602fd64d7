/* luastream: the command line. main only picks the command; each lives in
 * a file of its own, and options.c reads every command's options.
 *
 *   luastream run [--redis URL | --redis-file PATH] [--instance N | --consumer NAME]
 *                 [--processes N|auto] [--log-level LEVEL] [--shutdown-timeout DURATION] [--http ADDR:PORT]
 *                 [--no-reload] [--load-timeout DURATION] [--watchdog DURATION] DIR   (run.c)
 *   luastream check [--load-timeout DURATION] [--watchdog DURATION] DIR               (check.c)
 *   luastream publish [--redis URL | --redis-file PATH] STREAM JSON [--key K]
 *                     [--header NAME=VALUE]... [--wait N[,TIMEOUT]]                   (publish.c)
 *   luastream dead-letters list [--redis URL | --redis-file PATH] STREAM [--count N]
 *                                                                               (dead_letters.c)
 *   luastream dead-letters replay [--redis URL | --redis-file PATH] DIR STREAM
 *                                 (--id ID... | --all)                   (dead_letters_replay.c)
 *   luastream dead-letters delete [--redis URL | --redis-file PATH] STREAM
 *                                 (--id ID... | --reason REASON | --all) [--yes]
 *                                                                        (dead_letters_delete.c)
 *   luastream status [--redis URL | --redis-file PATH] [--load-timeout DURATION]
 *                    [--json] [--watch] DIR | STREAM...                            (status.c)
 *   luastream console [--redis URL | --redis-file PATH] --console ADDR:PORT
 *                     --console-tokens PATH DIR | STREAM...                   (console_cmd.c)
 *   luastream pause [--redis URL | --redis-file PATH] [--for DURATION] [--reason TEXT]
 *                   STREAM GROUP                                             (pause_cmd.c)
 *   luastream resume [--redis URL | --redis-file PATH] STREAM GROUP          (pause_cmd.c)
 *   luastream asyncapi [--yaml] [--redis URL | --redis-file PATH] DIR     (asyncapi_cmd.c)
 *   luastream help [COMMAND]    the commands, or COMMAND's --help
 *   luastream --version
 *
 * Exit status: 0 on success, 1 when the work failed (status: when something
 * needs attention), 2 on a usage error. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "asyncapi_cmd.h"
#include "check.h"
#include "dead_letters.h"
#include "options.h"
#include "pause_cmd.h"
#include "publish.h"
#include "run.h"
#include "console_cmd.h"
#include "status.h"

static const char usage_main[] =
    "usage: luastream <command> [options]\n"
    "       luastream help [<command>]\n"
    "       luastream --version\n"
    "\n"
    "Runs Redis Streams consumer groups with handlers written in Lua.\n"
    "\n"
    "commands:\n"
    "  run            run the handlers of a directory\n"
    "  check          load and validate the handlers of a directory without\n"
    "                 connecting\n"
    "  publish        add one entry to a stream\n"
    "  dead-letters   list the dead letters of a stream (list), hand them back\n"
    "                 to the group that gave up on them (replay), or delete them\n"
    "                 (delete)\n"
    "  status         each stream and group of a directory's handlers (or of the\n"
    "                 streams named): lag, pending, consumers, dead letters, and\n"
    "                 what needs attention\n"
    "  console        the web console for operators, without running handlers\n"
    "                 (`run --console` serves it beside them)\n"
    "  pause          pause a group on every host (until resumed, or --for)\n"
    "  resume         end a group's pause\n"
    "  asyncapi       the AsyncAPI document of a directory's handlers: streams,\n"
    "                 groups, replies, retries, dead letters, headers, schemas\n"
    "  help           this text; `luastream help <command>` is that command's\n"
    "                 --help\n"
    "\n"
    "options:\n"
    "  --help, -h     this text\n"
    "  --version      print luastream's version (every command takes it too)\n"
    "\n"
    "`luastream <command> --help` describes each command. The server comes from\n"
    "--redis URL, --redis-file PATH or REDIS_URL (" CLI_DEFAULT_URL
    "\n"
    "when none is given). A password in --redis is visible to every user of the\n"
    "machine (ps): put the URL in a file only you can read and pass\n"
    "--redis-file, or set REDIS_URL.\n";

/* Runs command cmd with its arguments; -1 when there is no such command. */
static int dispatch(const char *cmd, int argc, char **argv) {
  if (!strcmp(cmd, "run")) return cmd_run(argc, argv);
  if (!strcmp(cmd, "check")) return cmd_check(argc, argv);
  if (!strcmp(cmd, "publish")) return cmd_publish(argc, argv);
  if (!strcmp(cmd, "dead-letters")) return cmd_dead_letters(argc, argv);
  if (!strcmp(cmd, "status")) return cmd_status(argc, argv);
  if (!strcmp(cmd, "console")) return cmd_console(argc, argv);
  if (!strcmp(cmd, "pause")) return cmd_pause(argc, argv);
  if (!strcmp(cmd, "resume")) return cmd_resume(argc, argv);
  if (!strcmp(cmd, "asyncapi")) return cmd_asyncapi(argc, argv);
  return -1;
}

/* glibc returns the free top of the heap to the system once it exceeds the
 * trim threshold, and serves blocks above the mmap threshold with mmap. Both
 * start at 128 KB and only move when an mmapped block is freed, which the
 * host's blocks of 1-100 KB (entry bodies, their Lua strings, a read's
 * reply) never are: so each read of large entries grew the heap (brk, then a
 * page fault per 4 KB) and the frees after it shrank it again. Fixed values
 * stop that: a read of 100 entries of 100 KB, about 30 MB in all (a 10 MB
 * reply, Lua strings, decoded fields), is reused from the heap, and a host
 * keeps at most 64 MB of free heap after a burst of large entries. The mmap
 * threshold stays at 16 MB, below glibc's own ceiling of 32 MB: a read
 * buffer growing to hold one huge entry (by 1 MB at a time) then moves out
 * of the heap early, instead of leaving up to 32 MB of holes in it, which
 * a peak of twice the entry would otherwise top (read_plan.h). */
static void tune_malloc(void) {
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

int main(int argc, char **argv) {
  tune_malloc();
  /* A peer that goes away mid-write (a Redis server, an HTTP client of
   * --http) is an EPIPE to handle, never a signal that ends the process. */
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    fputs(usage_main, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") && argc > 2) {
    /* `luastream help run` is `luastream run --help`; `luastream help
     * dead-letters replay` is `luastream dead-letters replay --help` */
    static char help_flag[] = "--help";
    char *args[2];
    int n = 0;
    if (argc > 3) args[n++] = argv[3]; /* dead-letters' list, replay or delete */
    args[n++] = help_flag;
    cmd = argv[2];
    int rc = dispatch(cmd, n, args);
    if (rc >= 0) return rc;
  } else if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(usage_main, stdout);
    return 0;
  } else if (!strcmp(cmd, "--version")) {
    cli_print_version(stdout);
    return 0;
  } else {
    int rc = dispatch(cmd, argc - 2, argv + 2);
    if (rc >= 0) return rc;
  }
  fprintf(stderr, "luastream: unknown command \"%s\"\n\n%s", cmd, usage_main);
  return 2;
}
