/* options: the command line of every luastream command, as one table
 * (options.h). */
#include "options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "duration.h"
#include "health.h"
#include "lease.h"
#include "log.h"
#include "tls.h"
#include "trust.h"
#include "watchdog.h"

#ifndef LUASTREAM_VERSION
#define LUASTREAM_VERSION "0.0.0"
#endif

#define HELP_WIDTH 79  /* the help is wrapped to this many columns */
#define HELP_COLUMN 21 /* where an option's help text starts */

/* ---- the commands ---- */

struct cli_command_def {
  const char *name;   /* as typed after "luastream" */
  const char *args;   /* the positional arguments in the synopsis */
  int nargs;          /* how many are required */
  int max_args;       /* how many are allowed when more than nargs (CLI_ARGS_MAX at most) */
  const char *about;  /* the paragraph(s) between the synopsis and the options */
  const char *footer; /* after the options, or NULL */
};

static const struct cli_command_def commands[CLI_NCOMMANDS] = {
    [CLI_RUN] = {"run", "DIR", 1, 0,
                 "Runs every handler file (*.lua) of DIR as a subscription: creates missing\n"
                 "groups, reads, calls the handlers and applies their outcomes. Files whose\n"
                 "name starts with _ are modules the handlers may require, not handlers.\n"
                 "Edited, added and removed handler files are picked up while running (hot\n"
                 "reload: a file that fails to load keeps the running version); SIGHUP\n"
                 "reloads every handler file. SIGTERM or SIGINT stops reading, gives back\n"
                 "the entries read and not started (uncounted), lets running handlers\n"
                 "finish, flushes acks and exits 0; handlers still running at the shutdown\n"
                 "timeout are abandoned and their entries given back (counted) for another\n"
                 "host, and the exit is still 0. A second signal exits at once (status 1);\n"
                 "the same one again within 1 s (as GNU timeout sends) is the same stop.\n"
                 "With --processes N above 1 a supervisor runs N such hosts as worker\n"
                 "processes, starts a worker again when it dies and passes the signals on;\n"
                 "it exits 0 when every worker stopped cleanly (docs/operations.md).\n",
                 "Handler files are code: they run with this process's rights and\n"
                 "environment (docs/handlers.md says what is contained).\n"},
    [CLI_CHECK] = {"check", "DIR", 1, 0,
                   "Loads and validates every handler file of DIR without connecting to Redis.\n"
                   "Prints `file:line: message` for each problem and exits 1 if there is any;\n"
                   "warnings (`file: warning: ...`) leave the exit status at 0.\n"
                   "Loading runs each file's top-level code (with the rights of this process):\n"
                   "check only what you would run.\n",
                   NULL},
    [CLI_PUBLISH] =
        {"publish", "STREAM JSON", 2, 0,
         "Adds one entry to STREAM with JSON as its body (field `data`) and prints the\n"
         "new entry id.\n",
         NULL},
    [CLI_DL_LIST] = {"dead-letters list", "STREAM", 1, 0,
                     "Prints the dead letters of STREAM, oldest first: for each, its id, where it\n"
                     "came from (source stream, group, original id, handler), why (reason,\n"
                     "error), how often it was delivered, when it was dead-lettered (UTC), its\n"
                     "other headers and its body.\n",
                     NULL},
    [CLI_DL_REPLAY] =
        {"dead-letters replay", "DIR STREAM", 2, 0,
         "Puts dead letters of STREAM back for the group that dead-lettered them: on\n"
         "the retry stream SOURCE:retry:GROUP of the source stream and group luastream\n"
         "recorded in each (never on the source stream, so the stream's other groups\n"
         "never see them), as new entries with their body and headers but without the\n"
         "dead-letter-* fields, so their delivery count starts afresh. The handler\n"
         "files of DIR say what may be replayed: STREAM must be the dead_letter of one\n"
         "of them, and an entry whose dead-letter-stream and dead-letter-group are not\n"
         "the stream and group of such a handler, or whose dead-letter-id is not an\n"
         "entry id, is refused, named, with the field and what was expected (so is an\n"
         "entry without that provenance). Each entry is added there and deleted from\n"
         "STREAM in one server-side script, so it is never on both streams nor on\n"
         "neither. Prints `ID -> RETRY-STREAM NEW-ID` per entry and a count; exits 1\n"
         "when an entry was refused or left on STREAM.\n",
         "DIR is loaded as `luastream check` loads it: each file's top-level code runs\n"
         "with the rights of this process.\n"},
    [CLI_DL_DELETE] =
        {"dead-letters delete", "STREAM", 1, 0,
         "Deletes dead letters from STREAM: those given by id, those of one reason\n"
         "(dead-letter-reason), or all of them. Without --yes it only prints what it\n"
         "would delete (each id with its reason, and a count) and deletes nothing.\n"
         "Only entries with dead-letter provenance are deleted: an --id of another\n"
         "entry is refused (nothing is deleted), and --reason and --all leave such\n"
         "entries, naming them. --reason and --all take what STREAM holds when the\n"
         "command starts, 500 entries at a time. Prints each id deleted and a count.\n",
         NULL},
    [CLI_CONSOLE] =
        {"console", "DIR | STREAM...", 1, CLI_ARGS_MAX,
         "Serves the web console on --console ADDR:PORT for operators who run no\n"
         "handlers here: the streams and groups of DIR's handlers (or every group of\n"
         "each STREAM named) as `luastream status` sees them, refreshed every\n"
         "--console-interval while a page is open, their pending entries, any entry,\n"
         "and the dead letters of DIR's handlers, which it replays and deletes (each\n"
         "action previewed, then done on exactly the ids shown, and logged with the\n"
         "token's name). Every request needs a token of --console-tokens (the login\n"
         "page, or Authorization: Bearer TOKEN); SIGHUP reads that file again. Runs\n"
         "until SIGTERM or SIGINT.\n"
         "(`luastream run --console` serves the same console beside the handlers, with\n"
         "their metrics and a reload.) See docs/operations.md, \"The web console\".\n",
         "DIR is loaded as `luastream check` loads it: each file's top-level code runs\n"
         "with the rights of this process.\n"},
    [CLI_STATUS] = {"status", "DIR | STREAM...", 1, CLI_ARGS_MAX,
                    "Shows, for each stream and group the handlers of DIR read (or every group\n"
                    "of each STREAM named), the stream's length, the group's lag (entries not\n"
                    "yet delivered; ? when Redis cannot tell) and how long the oldest of them\n"
                    "has waited, its pending entries, how long ago the oldest was added and\n"
                    "how long it has been idle (ages by the server's clock, from the entries'\n"
                    "ids), its consumers with their pending entries, idle time and when their\n"
                    "host last renewed their lease, the group's retry stream\n"
                    "(STREAM:retry:GROUP), its delayed entries (STREAM:delayed:GROUP) and,\n"
                    "with DIR, the length of each handler's dead_letter stream. An\n"
                    "argument that is a directory is DIR (the handler files are loaded as\n"
                    "`luastream check` does, without connecting them); otherwise the\n"
                    "arguments are stream names.\n"
                    "\n"
                    "What needs attention is said under the table:\n"
                    "  - a consumer that holds pending entries and that no running host holds:\n"
                    "    its lease is gone, or was not renewed for 10s (a host renews it every\n"
                    "    5s);\n"
                    "  - entries waiting (lag above 0) while no consumer of the group has read\n"
                    "    for longer than the handler's min_idle (60s when no handler says: a\n"
                    "    stream named without DIR, a handler without min_idle), or the group\n"
                    "    has no consumer;\n"
                    "  - with DIR, entries pending for that long on a group whose handlers all\n"
                    "    read \"new\": nothing takes them again until their host restarts;\n"
                    "  - with --watch, a lag that grew at each of the last 3 refreshes;\n"
                    "  - dead letters on a handler's dead_letter stream; a stream or group a\n"
                    "    handler reads that does not exist; a key that cannot be read;\n"
                    "  - a group its breaker paused (open, or half-open while one entry probes).\n"
                    "A group paused by `luastream pause` is listed under \"paused:\" (who,\n"
                    "since when, until when, why) without needing attention; while paused its\n"
                    "lag is not judged.\n",
                    "Exit status: 0 when nothing needs attention, 1 when something does (or the\n"
                    "server cannot be reached or read, said on stderr), 2 on a usage error.\n"
                    "--watch ends at SIGINT with the status of its last refresh.\n"
                    "docs/operations.md describes the table and the --json document.\n"},
    [CLI_PAUSE] = {"pause", "STREAM GROUP", 2, 0,
                   "Pauses GROUP of STREAM on every host: no handler of the group starts more\n"
                   "than 1s after this command returns, handlers already running finish, and\n"
                   "entries read and not started are handed back uncounted. The pause is kept\n"
                   "in Redis (luastream:pause:{STREAM}:GROUP), so it holds across restarts,\n"
                   "until `luastream resume` or the end of --for. It replaces a breaker's\n"
                   "pause. For a partitioned handler name the base stream (without :{p}).\n"
                   "Prints what it did; `status`, /readyz, /metrics and the console show it.\n",
                   "Exit status: 0 when the group is paused, 1 when the server could not be\n"
                   "reached or refused it (nothing changed), 2 on a usage error.\n"
                   "docs/operations.md, \"Pause and resume\", says more.\n"},
    [CLI_RESUME] = {"resume", "STREAM GROUP", 2, 0,
                    "Ends the pause of GROUP of STREAM (an operator's or the breaker's) on every\n"
                    "host, and says whether it was paused and by whom. Hosts start handlers\n"
                    "again at their next look at the pause (within 0.4s while entries wait).\n",
                    "Exit status: 0 when the group runs (whether or not it was paused), 1 when\n"
                    "the server could not be reached or refused it, 2 on a usage error.\n"},
    [CLI_ASYNCAPI] =
        {"asyncapi", "DIR", 1, 0,
         "Writes to stdout an AsyncAPI 3.0.0 document (JSON, or YAML with --yaml) of\n"
         "the handlers of DIR: for each, its stream (a partitioned one as\n"
         "STREAM:{partition_tag}), its group's retry stream STREAM:retry:GROUP, its\n"
         "reply_to and dead_letter streams as channels; its reads, replies, retries\n"
         "and dead letters as operations; the entries as messages (the `data` field\n"
         "the payload, described by the handler's schema or reply_schema, the other\n"
         "fields the headers luastream reads and writes); the group, read mode,\n"
         "min_idle and the other fields as x-luastream-* extensions; the server of\n"
         "--redis without its password. The same handlers give the same text (keys\n"
         "sorted, handlers in file order): commit it and diff it. Does not connect.\n"
         "Files without a stream (scheduled handlers) are listed under\n"
         "x-luastream-scheduled. See docs/handlers.md, \"The contract\".\n",
         "DIR is loaded as `luastream check` loads it: each file's top-level code runs\n"
         "with the rights of this process. A file that does not load is named, as by\n"
         "check, and nothing is written (exit 1).\n"},
};

const char *cli_command_name(enum cli_command command) { return commands[command].name; }

long long cli_cores(void) {
  long long n = (long long)uv_available_parallelism();
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n;
}

/* ---- the options ---- */

enum { GROUP_NONE, GROUP_SERVER, GROUP_NAME, GROUP_WHICH, CLI_NGROUPS };

static const struct cli_group groups[CLI_NGROUPS] = {
    [GROUP_SERVER] = {false, "give --redis or --redis-file, not both"},
    [GROUP_NAME] = {false,
                    "--instance numbers generated consumer names; with --consumer NAME "
                    "give each process its own NAME instead"},
    [GROUP_WHICH] = {true,
                     "say which dead letters, one way: --id ID (repeatable) or --all (delete "
                     "also takes --reason REASON)"},
};

/* --load-timeout, --http-timeout: a limit of 0 would fail every file, every request. */
static int check_above_zero(const char *who, const struct cli_value *v, char *err, size_t errlen) {
  if (v->num > 0) return 0;
  snprintf(err, errlen, "%s needs a duration above 0 such as 5s or 500ms", who);
  return -1;
}

/* --watchdog: a stalled process must end before its consumer leases expire. */
static int check_watchdog(const char *who, const struct cli_value *v, char *err, size_t errlen) {
  if (v->num == 0) {
    snprintf(err, errlen,
             "%s cannot be off: a loop stalled for longer than the consumer lease's time to live "
             "(%ds) lets another process take this process's consumer names and run the same "
             "entries while this one still runs; give a limit of at most %ds",
             who, LEASE_TTL_MS / 1000, LEASE_STALL_MAX_MS / 1000);
    return -1;
  }
  if (v->num < WATCHDOG_MIN_MS) {
    snprintf(err, errlen,
             "%s must be at least %ds, got %s: the event loop can be busy for a moment without "
             "anything being stuck (loading handler files, a large entry), and a shorter limit "
             "would end a healthy process",
             who, WATCHDOG_MIN_MS / 1000, v->text);
    return -1;
  }
  if (v->num > LEASE_STALL_MAX_MS) {
    snprintf(err, errlen,
             "%s must be at most %ds, got %s: consumer names are leased for %ds and renewed every "
             "%ds, so a loop stalled for longer can outlive a lease, and another process can take "
             "the name and run the same entries while this one still runs",
             who, LEASE_STALL_MAX_MS / 1000, v->text, LEASE_TTL_MS / 1000, LEASE_RENEW_MS / 1000);
    return -1;
  }
  return 0;
}

/* --pg-once-table: spliced into SQL, so a plain (optionally schema-qualified)
 * identifier only. */
static int check_table_name(const char *who, const struct cli_value *v, char *err, size_t errlen) {
  const char *p = v->text;
  int parts = 0;
  for (;;) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')) break;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_')
      p++;
    parts++;
    if (*p == '.' && parts == 1) {
      p++;
      continue;
    }
    if (*p == '\0' && p - v->text <= 63 * 2 + 1) return 0;
    break;
  }
  snprintf(err, errlen,
           "%s must be a table name (letters, digits and _, optionally "
           "schema.table), got \"%s\"",
           who, v->text);
  return -1;
}

int cli_wait_parse(const char *text, long long *replicas, long long *timeout_ms, char *err,
                   size_t errlen) {
  size_t digits = strspn(text, "0123456789");
  long long n = digits > 0 && digits <= 6 ? atoll(text) : 0;
  if (n < 1 || (text[digits] != '\0' && text[digits] != ',')) {
    snprintf(err, errlen,
             "needs N[,TIMEOUT]: N replicas, at least 1, e.g. 1 or 2,500ms; got \"%s\"", text);
    return -1;
  }
  *replicas = n;
  *timeout_ms = PUBLISH_WAIT_DEFAULT_MS;
  if (text[digits] == '\0') return 0;
  const char *t = text + digits + 1;
  double ms;
  char why[256];
  if (duration_parse(t, strlen(t), &ms, why, sizeof why) != 0) {
    snprintf(err, errlen, "TIMEOUT \"%s\" %s (a duration with a unit, e.g. 1,500ms)", t, why);
    return -1;
  }
  if (ms < 1 || ms > PUBLISH_WAIT_MAX_MS) {
    snprintf(err, errlen, "TIMEOUT must be from 1ms to %ds, got %s", PUBLISH_WAIT_MAX_MS / 1000, t);
    return -1;
  }
  *timeout_ms = (long long)ms;
  return 0;
}

/* --wait N[,TIMEOUT]. */
static int check_wait(const char *who, const struct cli_value *v, char *err, size_t errlen) {
  long long n, ms;
  char why[512];
  if (cli_wait_parse(v->text, &n, &ms, why, sizeof why) == 0) return 0;
  snprintf(err, errlen, "%s %s", who, why);
  return -1;
}

/* The --tls-* options, in a command's synopsis. */
#define TLS_SYNOPSIS "[--tls-...]"

#define SERVER                                                                            \
  (CLI_IN(CLI_RUN) | CLI_IN(CLI_PUBLISH) | CLI_IN(CLI_DL_LIST) | CLI_IN(CLI_DL_REPLAY) |  \
   CLI_IN(CLI_DL_DELETE) | CLI_IN(CLI_STATUS) | CLI_IN(CLI_CONSOLE) | CLI_IN(CLI_PAUSE) | \
   CLI_IN(CLI_RESUME) | CLI_IN(CLI_ASYNCAPI))

/* The commands that serve the web console. */
#define CONSOLE (CLI_IN(CLI_RUN) | CLI_IN(CLI_CONSOLE))

const struct cli_option cli_option_table[OPT_NOPTIONS] = {
    [OPT_REDIS] = {.name = "redis",
                   .arg = "URL",
                   .kind = CLI_URL,
                   .commands = SERVER,
                   .group = GROUP_SERVER,
                   .env = "REDIS_URL",
                   .def = CLI_DEFAULT_URL,
                   .help = "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
                           "unix:///path/to/socket[?db=N], redis+sentinel://.../SERVICE or "
                           "rediss+sentinel://.../SERVICE (docs/operations.md); a password here "
                           "shows in ps: prefer --redis-file"},
    [OPT_REDIS_FILE] =
        {.name = "redis-file",
         .arg = "PATH",
         .kind = CLI_URL_FILE,
         .commands = SERVER,
         .group = GROUP_SERVER,
         .help = "read the URL from the first line of PATH (keep it readable by this user "
                 "only)"},
    [OPT_TLS_CA] = {.name = "tls-ca",
                    .arg = "PATH",
                    .kind = CLI_NAME,
                    .commands = SERVER,
                    .synopsis_as = TLS_SYNOPSIS,
                    .help = "rediss://: the CA file or directory that the servers' certificates "
                            "are checked against, instead of the system's store (URL: tls_ca=)"},
    [OPT_TLS_CERT] = {.name = "tls-cert",
                      .arg = "FILE",
                      .kind = CLI_NAME,
                      .commands = SERVER,
                      .synopsis_as = TLS_SYNOPSIS,
                      .help = "rediss://: the client certificate (PEM, with its chain) for "
                              "servers that ask for one (tls-auth-clients) (URL: tls_cert=)"},
    [OPT_TLS_KEY] = {.name = "tls-key",
                     .arg = "FILE",
                     .kind = CLI_NAME,
                     .commands = SERVER,
                     .synopsis_as = TLS_SYNOPSIS,
                     .help = "rediss://: the client certificate's key (PEM), readable by this "
                             "user only (URL: tls_key=)"},
    [OPT_TLS_KEY_PASSWORD_FILE] = {.name = "tls-key-password-file",
                                   .arg = "FILE",
                                   .kind = CLI_NAME,
                                   .commands = SERVER,
                                   .synopsis_as = TLS_SYNOPSIS,
                                   .help = "rediss://: the password of an encrypted --tls-key, "
                                           "the first line of FILE (URL: tls_key_password_file=)"},
    [OPT_TLS_SERVER_NAME] =
        {.name = "tls-server-name",
         .arg = "NAME",
         .kind = CLI_NAME,
         .commands = SERVER,
         .synopsis_as = TLS_SYNOPSIS,
         .help = "rediss://: the name sent (SNI) and checked against every server's "
                 "certificate, nodes and sentinels included, when it differs from the address "
                 "connected to (URL: tls_server_name=)"},
    [OPT_TLS_SKIP_VERIFY] = {.name = "tls-skip-verify",
                             .kind = CLI_FLAG,
                             .commands = SERVER,
                             .synopsis_as = TLS_SYNOPSIS,
                             .help = "rediss://: do not check the servers' certificates. For "
                                     "tests only: anyone on the path can then read and change "
                                     "the traffic (logged as a warning; there is no URL "
                                     "parameter for it)"},
    [OPT_INSTANCE] = {.name = "instance",
                      .arg = "N",
                      .kind = CLI_INT,
                      .commands = CLI_IN(CLI_RUN),
                      .group = GROUP_NAME,
                      .env = "LUASTREAM_INSTANCE",
                      .min = 0,
                      .max = 999999,
                      .help = "this process's number on this machine, for running several (one per "
                              "core): consumer names become HOSTNAME-HANDLER-N (without it "
                              "HOSTNAME-HANDLER, HANDLER being the file name without .lua, or, "
                              "when a live process here holds those, -1, -2, ...: the lowest "
                              "number free, logged)"},
    [OPT_CONSUMER] =
        {.name = "consumer",
         .arg = "NAME",
         .kind = CLI_NAME,
         .commands = CLI_IN(CLI_RUN),
         .group = GROUP_NAME,
         .help = "consumer name for handlers that do not set one (instead of the generated "
                 "names). A name is held by one live process at a time: a second process "
                 "with the same name in a group refuses to start (at once when the holder "
                 "is a live process of this machine)"},
    [OPT_PROCESSES] =
        {.name = "processes",
         .arg = "N",
         .kind = CLI_INT,
         .commands = CLI_IN(CLI_RUN),
         .def = "1",
         .min = 1,
         .max = 1024,
         .cores = true,
         .help = "run N worker processes, each a whole host, under one supervisor that "
                 "restarts a worker that dies, passes signals on and serves --http for all; "
                 "auto is one per core. Worker I's consumer names end in -I (with "
                 "--instance K: -(K*N+I); with --consumer NAME: NAME-I; beside another "
                 "supervisor here: the first free of I+N, I+2N, ...)"},
    [OPT_LOG_LEVEL] = {.name = "log-level",
                       .arg = "LEVEL",
                       .kind = CLI_LOG_LEVEL,
                       .commands = CLI_IN(CLI_RUN),
                       .def = "info",
                       .help = "debug, info, warn or error"},
    [OPT_LOG_FORMAT] = {.name = "log-format",
                        .arg = "FORMAT",
                        .kind = CLI_LOG_FORMAT,
                        .commands = CLI_IN(CLI_RUN),
                        .env = "LUASTREAM_LOG_FORMAT",
                        .def = "logfmt",
                        .help = "logfmt (key=value) or json (one object per line, the same fields, "
                                "numbers as numbers)"},
    [OPT_SHUTDOWN_TIMEOUT] =
        {.name = "shutdown-timeout",
         .arg = "DURATION",
         .kind = CLI_DURATION,
         .commands = CLI_IN(CLI_RUN),
         .def = "30s",
         .help = "how long running handlers may take to finish after the first signal, "
                 "with a unit: 500ms, 30s, 2m, 1h"},
    [OPT_HTTP] = {.name = "http",
                  .arg = "ADDR:PORT",
                  .kind = CLI_ADDR,
                  .commands = CLI_IN(CLI_RUN),
                  .help = "serve GET /healthz (200 while running), GET /readyz (200 when "
                          "connected and every subscription reads, at least one, else 503 and why) "
                          "and GET /metrics (Prometheus) on ADDR:PORT, e.g. 127.0.0.1:8080; port 0 "
                          "picks a free port (logged). Unauthenticated: bind to the pod's or a "
                          "loopback address"},
    [OPT_NO_RELOAD] = {.name = "no-reload",
                       .kind = CLI_FLAG,
                       .commands = CLI_IN(CLI_RUN),
                       .help = "do not watch DIR for changes (SIGHUP still reloads)"},
    [OPT_LOAD_TIMEOUT] = {.name = "load-timeout",
                          .arg = "DURATION",
                          .kind = CLI_DURATION,
                          .commands = CLI_IN(CLI_RUN) | CLI_IN(CLI_CHECK) | CLI_IN(CLI_STATUS) |
                                      CLI_IN(CLI_DL_REPLAY) | CLI_IN(CLI_CONSOLE) |
                                      CLI_IN(CLI_PUBLISH) | CLI_IN(CLI_ASYNCAPI),
                          .def = "5s",
                          .check = check_above_zero,
                          .help =
                              "how long a handler file's top-level code may run when the file is "
                              "loaded: longer is a load error naming the file"},
    [OPT_TRUST_OWNER] =
        {.name = "trust-owner",
         .arg = "USER",
         .kind = CLI_NAME,
         .commands = CLI_IN(CLI_RUN) | CLI_IN(CLI_CHECK) | CLI_IN(CLI_STATUS) |
                     CLI_IN(CLI_DL_REPLAY) | CLI_IN(CLI_CONSOLE) | CLI_IN(CLI_PUBLISH) |
                     CLI_IN(CLI_ASYNCAPI),
         .repeat = TRUST_OWNERS_MAX,
         .help = "a user (e.g. the deploy user) who may own DIR, its parent folders and the "
                 "handler files, beside root and the user luastream runs as; repeatable. "
                 "Code anyone else can change (owned by another user, group- or "
                 "world-writable) is not loaded"},
    [OPT_ALLOW_WRITABLE_DIR] =
        {.name = "allow-writable-dir",
         .kind = CLI_FLAG,
         .commands = CLI_IN(CLI_RUN) | CLI_IN(CLI_CHECK) | CLI_IN(CLI_STATUS) |
                     CLI_IN(CLI_DL_REPLAY) | CLI_IN(CLI_CONSOLE) | CLI_IN(CLI_PUBLISH) |
                     CLI_IN(CLI_ASYNCAPI),
         .help = "load handler code other users can change all the same, with a warning naming "
                 "each such file or folder: whoever can write it runs code as this user"},
    [OPT_WATCHDOG] =
        {.name = "watchdog",
         .arg = "DURATION",
         .kind = CLI_DURATION,
         .commands = CLI_IN(CLI_RUN),
         .def = "10s",
         .off = true,
         .check = check_watchdog,
         .help = "when the event loop has not turned for this long (a handler that never "
                 "yields), log which handler and entry were running and exit with status 70 "
                 "(at least 1s; at most 10s, so that a stalled process ends before its "
                 "consumer leases can expire; keep it above --load-timeout; it cannot be off)"},
    [OPT_CHECK_WATCHDOG] = {.name = "watchdog",
                            .arg = "DURATION",
                            .kind = CLI_DURATION,
                            .commands = CLI_IN(CLI_CHECK),
                            .def = "10s",
                            .off = true,
                            .check = check_watchdog,
                            .help = "the --watchdog `run` is given: a handler whose min_idle "
                                    "is below it plus min_idle / 3 is warned of (a handler that "
                                    "does not yield holds the heartbeat that long)"},
    [OPT_HTTP_TIMEOUT] = {.name = "http-timeout",
                          .arg = "DURATION",
                          .kind = CLI_DURATION,
                          .commands = CLI_IN(CLI_RUN),
                          .def = "10s",
                          .check = check_above_zero,
                          .help = "how long an ls.http request may take, queueing for a connection "
                                  "included, unless the request gives its own timeout"},
    [OPT_HTTP_MAX_BODY] =
        {.name = "http-max-body",
         .arg = "BYTES",
         .kind = CLI_INT,
         .commands = CLI_IN(CLI_RUN),
         .def = "16777216",
         .min = 1,
         .max = 1LL << 40,
         .help = "the largest ls.http response body; a longer one fails the request "
                 "(\"the response body is larger than ...\") unless the request gives its own "
                 "max_body"},
    [OPT_HTTP_PER_HOST] =
        {.name = "http-per-host",
         .arg = "N",
         .kind = CLI_INT,
         .commands = CLI_IN(CLI_RUN),
         .def = "32",
         .min = 1,
         .max = 100000,
         .help = "connections ls.http opens to one host at once, kept open for reuse; "
                 "more requests wait for one"},
    [OPT_HTTP_CA_FILE] = {.name = "http-ca-file",
                          .arg = "PATH",
                          .kind = CLI_NAME,
                          .commands = CLI_IN(CLI_RUN),
                          .help =
                              "check HTTPS servers' certificates against the CAs in this PEM file "
                              "instead of the system's CA store"},
    [OPT_POSTGRES] =
        {.name = "postgres",
         .arg = "CONNINFO",
         .kind = CLI_STRING,
         .commands = CLI_IN(CLI_RUN),
         .env = "LUASTREAM_POSTGRES",
         .help = "the PostgreSQL server of ls.pg and ctx:pg_once: a libpq connection string "
                 "(\"host=db dbname=app user=ls\") or a postgresql:// URL; without it "
                 "LUASTREAM_POSTGRES, else libpq's own PG* variables and service file when PGHOST, "
                 "PGSERVICE or PGDATABASE is set. A password given here shows in ps: give it in "
                 "LUASTREAM_POSTGRES, PGPASSWORD or a PGPASSFILE instead"},
    [OPT_PG_POOL] = {.name = "pg-pool",
                     .arg = "N",
                     .kind = CLI_INT,
                     .commands = CLI_IN(CLI_RUN),
                     .def = "8",
                     .min = 1,
                     .max = 1000,
                     .help =
                         "connections to PostgreSQL at most, made when queries need them and kept; "
                         "more queries wait for one"},
    [OPT_PG_TIMEOUT] =
        {.name = "pg-timeout",
         .arg = "DURATION",
         .kind = CLI_DURATION,
         .commands = CLI_IN(CLI_RUN),
         .def = "10s",
         .check = check_above_zero,
         .help = "how long an ls.pg query may take, waiting for a connection included: past "
                 "it the query fails and its connection is closed; the server's "
                 "statement_timeout is set a little below it"},
    [OPT_PG_ONCE_TABLE] =
        {.name = "pg-once-table",
         .arg = "NAME",
         .kind = CLI_NAME,
         .commands = CLI_IN(CLI_RUN),
         .def = "luastream_processed",
         .check = check_table_name,
         .help = "the table ctx:pg_once records handled entries in (made when missing)"},
    [OPT_PG_ONCE_KEEP] =
        {.name = "pg-once-keep",
         .arg = "DURATION",
         .kind = CLI_DURATION,
         .commands = CLI_IN(CLI_RUN),
         .def = "off",
         .off = true,
         .help = "delete ctx:pg_once's rows recorded longer ago than this (720h: 30 days), "
                 "every quarter of it (at least every hour); keep them longer than an entry can "
                 "be delivered again. off: never (prune them yourself)"},
    [OPT_KEY] = {.name = "key",
                 .arg = "K",
                 .kind = CLI_STRING,
                 .commands = CLI_IN(CLI_PUBLISH),
                 .help = "partition key (header partition-key)"},
    [OPT_MAXLEN] =
        {.name = "maxlen",
         .arg = "N",
         .kind = CLI_INT,
         .commands = CLI_IN(CLI_PUBLISH),
         .min = 1,
         .max = 1LL << 62,
         .help = "trim the stream to its newest N entries as the entry is added (XADD MAXLEN "
                 "N): older entries go whether or not every group has handled them"},
    [OPT_PARTITIONS] =
        {.name = "partitions",
         .arg = "N",
         .kind = CLI_INT,
         .commands = CLI_IN(CLI_PUBLISH),
         .min = 1,
         .max = 1024,
         .help = "STREAM is partitioned over N keys: add to STREAM:{p}, p = crc16(K) % N "
                 "for --key K (required)"},
    [OPT_HEADER] = {.name = "header",
                    .arg = "NAME=VALUE",
                    .kind = CLI_HEADER,
                    .commands = CLI_IN(CLI_PUBLISH),
                    .repeat = 64,
                    .help = "an extra header; repeatable"},
    [OPT_COUNT] = {.name = "count",
                   .arg = "N",
                   .kind = CLI_INT,
                   .commands = CLI_IN(CLI_DL_LIST),
                   .def = "100",
                   .min = 1,
                   .max = 1000000000,
                   .help = "show at most N entries"},
    [OPT_ID] = {.name = "id",
                .arg = "ID",
                .kind = CLI_ENTRY_ID,
                .commands = CLI_IN(CLI_DL_REPLAY) | CLI_IN(CLI_DL_DELETE),
                .group = GROUP_WHICH,
                .repeat = 1024,
                .help = "the dead letter with this id; repeatable. Nothing is done if one of "
                        "them is missing or is refused."},
    [OPT_ALL] = {.name = "all",
                 .kind = CLI_FLAG,
                 .commands = CLI_IN(CLI_DL_REPLAY) | CLI_IN(CLI_DL_DELETE),
                 .group = GROUP_WHICH,
                 .help = "every dead letter on STREAM when the command starts (in batches of 500; "
                         "entries that are not dead letters stay)"},
    [OPT_REASON] = {.name = "reason",
                    .arg = "REASON",
                    .kind = CLI_NAME,
                    .commands = CLI_IN(CLI_DL_DELETE),
                    .group = GROUP_WHICH,
                    .help = "every dead letter on STREAM with this dead-letter-reason: rejected, "
                            "max-deliveries, handler-error, bad-return, decode-error, too-large, "
                            "no-fields, ... (`luastream dead-letters list` shows each one's)"},
    [OPT_YES] = {.name = "yes",
                 .kind = CLI_FLAG,
                 .commands = CLI_IN(CLI_DL_DELETE),
                 .help = "delete; without it, only say what would be deleted"},
    [OPT_WAIT] = {.name = "wait",
                  .arg = "N[,TIMEOUT]",
                  .kind = CLI_STRING,
                  .commands = CLI_IN(CLI_PUBLISH),
                  .check = check_wait,
                  .help = "after adding the entry, wait (WAIT) until N replicas have it or "
                          "TIMEOUT passed (a duration, default 1s, at most 5s), and say on stderr "
                          "how many did; exit 3 (the id still printed: the entry was added) when "
                          "fewer than N did. It narrows, not closes, the window in which a "
                          "failover loses an acknowledged entry (docs/operations.md)"},
    [OPT_PUBLISH_CHECK] = {.name = "check",
                           .arg = "DIR",
                           .kind = CLI_NAME,
                           .commands = CLI_IN(CLI_PUBLISH),
                           .help = "load the handler files of DIR (as `luastream check` does) and "
                                   "check JSON against the schema of each one reading STREAM "
                                   "first: a body one of them refuses is not added (exit 1)"},
    [OPT_JSON] = {.name = "json",
                  .kind = CLI_FLAG,
                  .commands = CLI_IN(CLI_STATUS),
                  .help = "print one JSON document instead of the table (with --watch, one per "
                          "refresh, one per line)"},
    [OPT_WATCH] = {.name = "watch",
                   .kind = CLI_FLAG,
                   .commands = CLI_IN(CLI_STATUS),
                   .help =
                       "refresh every 2s until SIGINT: in place on a terminal, else block after "
                       "block"},
    [OPT_CLUSTER] =
        {.name = "cluster",
         .kind = CLI_FLAG,
         .commands = CLI_IN(CLI_CHECK),
         .help = "also check that each handler's keys (stream, retry stream, delay set, "
                 "reply_to, dead_letter) share a hash slot, as Redis Cluster needs, and say "
                 "how to name them when they do not"},
    [OPT_CONSOLE] = {.name = "console",
                     .arg = "ADDR:PORT",
                     .kind = CLI_ADDR,
                     .commands = CONSOLE,
                     .help = "serve the web console on ADDR:PORT, e.g. 127.0.0.1:8090 (port 0 "
                             "picks a free one, logged); needs --console-tokens. Bind to a "
                             "loopback or the pod's address, or put it behind your auth proxy "
                             "(docs/operations.md, \"The web console\")"},
    [OPT_CONSOLE_TOKENS] = {.name = "console-tokens",
                            .arg = "PATH",
                            .kind = CLI_NAME,
                            .commands = CONSOLE,
                            .help = "who may use the console: one `NAME TOKEN` a line, each token "
                                    "at least 128 bits (`openssl rand -hex 32`); a file its group "
                                    "or others can read is refused; SIGHUP reads it again"},
    [OPT_CONSOLE_ORIGIN] = {.name = "console-origin",
                            .arg = "ORIGIN",
                            .kind = CLI_NAME,
                            .commands = CONSOLE,
                            .help = "the console's address as browsers see it behind a proxy, "
                                    "e.g. https://streams.example.com: its POSTs carry this "
                                    "Origin, and its Host header may name it"},
    [OPT_CONSOLE_INTERVAL] = {.name = "console-interval",
                              .arg = "DURATION",
                              .kind = CLI_DURATION,
                              .commands = CONSOLE,
                              .def = "5s",
                              .check = check_above_zero,
                              .help = "how often open pages refresh the overview; one read of "
                                      "Redis per interval serves every page"},
    [OPT_FOR] = {.name = "for",
                 .arg = "DURATION",
                 .kind = CLI_DURATION,
                 .commands = CLI_IN(CLI_PAUSE),
                 .check = check_above_zero,
                 .help = "end the pause by itself after DURATION (30s, 15m, 2h); without it the "
                         "group stays paused until `luastream resume`"},
    [OPT_PAUSE_REASON] = {.name = "reason",
                          .arg = "TEXT",
                          .kind = CLI_STRING,
                          .commands = CLI_IN(CLI_PAUSE),
                          .help = "why, for whoever looks (status, /readyz, the log, the "
                                  "console); at most 200 bytes"},
    [OPT_YAML] = {.name = "yaml",
                  .kind = CLI_FLAG,
                  .commands = CLI_IN(CLI_ASYNCAPI),
                  .help = "write YAML instead of JSON (the same document)"},
    [OPT_TITLE] = {.name = "title",
                   .arg = "TEXT",
                   .kind = CLI_NAME,
                   .commands = CLI_IN(CLI_ASYNCAPI),
                   .help = "the document's info.title; without it \"luastream handlers in DIR\", "
                           "DIR's last folder name"},
    [OPT_API_VERSION] = {.name = "api-version",
                         .arg = "TEXT",
                         .kind = CLI_NAME,
                         .commands = CLI_IN(CLI_ASYNCAPI),
                         .def = "1.0.0",
                         .help = "the document's info.version: the version of the contract, "
                                 "yours to keep"}};

static bool takes(enum cli_command command, int id) {
  return (cli_option_table[id].commands & CLI_IN(command)) != 0;
}

/* ---- help ---- */

/* Writes text word by word from column *col, breaking before HELP_WIDTH and
 * going on at column indent. A word is what lies between spaces; a newline
 * in text starts a new line. */
static void wrap(FILE *out, const char *text, int *col, int indent) {
  const char *p = text;
  while (*p) {
    if (*p == '\n') {
      fputc('\n', out);
      *col = 0;
      p++;
      continue;
    }
    if (*p == ' ') {
      p++;
      continue;
    }
    size_t n = strcspn(p, " \n");
    bool first = *col <= indent;
    if (!first && *col + 1 + (int)n > HELP_WIDTH) {
      fprintf(out, "\n%*s", indent, "");
      *col = indent;
      first = true;
    } else if (*col < indent) {
      fprintf(out, "%*s", indent - *col, "");
      *col = indent;
    }
    if (!first) {
      fputc(' ', out);
      (*col)++;
    }
    fwrite(p, 1, n, out);
    *col += (int)n;
    p += n;
  }
}

/* The synopsis entry of option id and its group: "[--a X | --b]", "(--id ID... | --all)". */
static void synopsis_entry(enum cli_command command, int id, char *buf, size_t len) {
  const struct cli_option *opt = &cli_option_table[id];
  bool required = opt->group && groups[opt->group].required;
  size_t n = (size_t)snprintf(buf, len, "%c", required ? '(' : '[');
  bool any = false;
  for (int j = id; j < OPT_NOPTIONS; j++) {
    const struct cli_option *o = &cli_option_table[j];
    if (!takes(command, j) || (j != id && (!opt->group || o->group != opt->group))) continue;
    if (n < len)
      n += (size_t)snprintf(buf + n, len - n, "%s--%s%s%s%s", any ? " | " : "", o->name,
                            o->arg ? " " : "", o->arg ? o->arg : "",
                            o->repeat && required ? "..." : "");
    any = true;
  }
  if (n < len) n += (size_t)snprintf(buf + n, len - n, "%c", required ? ')' : ']');
  if (n < len && opt->repeat && !required) snprintf(buf + n, len - n, "...");
}

void cli_print_help(enum cli_command command, FILE *out) {
  const struct cli_command_def *c = &commands[command];
  char lead[64], entry[160];
  int indent = snprintf(lead, sizeof lead, "usage: luastream %s ", c->name);
  fputs(lead, out);
  int col = indent;
  for (int id = 0; id < OPT_NOPTIONS; id++) {
    const struct cli_option *opt = &cli_option_table[id];
    if (!takes(command, id)) continue;
    /* a group shows once, at its first member */
    bool shown = false;
    for (int j = 0; j < id && opt->group; j++)
      shown = shown || (takes(command, j) && cli_option_table[j].group == opt->group);
    for (int j = 0; j < id && opt->synopsis_as; j++)
      shown = shown || (takes(command, j) && cli_option_table[j].synopsis_as == opt->synopsis_as);
    if (shown) continue;
    if (opt->synopsis_as)
      snprintf(entry, sizeof entry, "%s", opt->synopsis_as);
    else
      synopsis_entry(command, id, entry, sizeof entry);
    /* an entry is one word for wrap: its spaces must not break it */
    for (char *s = entry; *s; s++)
      if (*s == ' ') *s = '\x01';
    char *line = entry;
    if (col + 1 + (int)strlen(line) > HELP_WIDTH && col > indent) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', out);
      col++;
    }
    for (char *s = line; *s; s++) fputc(*s == '\x01' ? ' ' : *s, out);
    col += (int)strlen(line);
  }
  if (col + 1 + (int)strlen(c->args) > HELP_WIDTH) {
    fprintf(out, "\n%*s", indent, "");
    col = indent;
  } else if (col > indent) {
    fputc(' ', out);
  }
  fprintf(out, "%s\n\n%s\n", c->args, c->about);
  for (int id = 0; id < OPT_NOPTIONS; id++) {
    const struct cli_option *opt = &cli_option_table[id];
    if (!takes(command, id)) continue;
    col = fprintf(out, "  --%s%s%s", opt->name, opt->arg ? " " : "", opt->arg ? opt->arg : "");
    if (col > HELP_COLUMN - 2) {
      fputc('\n', out);
      col = 0;
    }
    wrap(out, opt->help, &col, HELP_COLUMN);
    char dflt[160] = "";
    if (opt->env && opt->def)
      snprintf(dflt, sizeof dflt, "(default: $%s, else %s)", opt->env, opt->def);
    else if (opt->env)
      snprintf(dflt, sizeof dflt, "(default: $%s)", opt->env);
    else if (opt->def)
      snprintf(dflt, sizeof dflt, "(default: %s)", opt->def);
    wrap(out, dflt, &col, HELP_COLUMN);
    fputc('\n', out);
  }
  if (c->footer) fprintf(out, "\n%s", c->footer);
}

void cli_print_version(FILE *out) { fprintf(out, "luastream %s\n", LUASTREAM_VERSION); }

/* ---- values ---- */

/* A warning about the command line: said on err at once, or for `run`
 * kept in o->warnings for cli_log_warnings, so that it is a log line in the
 * log's format (--log-format json: JSON too). */
static void warn(struct cli_options *o, FILE *err, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (o->command != CLI_RUN) {
    fprintf(err, "luastream: warning: %s\n", line);
    return;
  }
  size_t used = strlen(o->warnings);
  snprintf(o->warnings + used, sizeof o->warnings - used, "%s\n", line);
}

void cli_log_warnings(const struct cli_options *o) { log_text(LOG_WARN, NULL, o->warnings); }

/* The first line of path, trailing blanks and line end stripped, into buf.
 * Returns 0, or -1 (reported). Warns when others may read the file. */
static int read_url_file(struct cli_options *o, const char *path, char *buf, size_t len,
                         FILE *err) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(err, "luastream: --redis-file %s: cannot read it: %s\n", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
    warn(o, err, "--redis-file %s can be read by %s (mode %03o): chmod 600 it", path,
         (st.st_mode & S_IROTH) ? "every user" : "its group", (unsigned)(st.st_mode & 0777));
  bool got = fgets(buf, (int)len, f) != NULL;
  bool error = ferror(f) != 0;
  fclose(f);
  if (error) {
    fprintf(err, "luastream: --redis-file %s: cannot read it\n", path);
    return -1;
  }
  size_t n = got ? strlen(buf) : 0;
  if (n == len - 1 && buf[n - 1] != '\n') {
    fprintf(err, "luastream: --redis-file %s: the first line is longer than %zu bytes\n", path,
            len - 2);
    return -1;
  }
  while (n > 0 && strchr(" \t\r\n", buf[n - 1])) buf[--n] = '\0';
  if (n == 0) {
    fprintf(err,
            "luastream: --redis-file %s: the first line is empty: write the URL there, "
            "e.g. redis://:PASSWORD@127.0.0.1:6379\n",
            path);
    return -1;
  }
  return 0;
}

/* The server's URL text from who (--redis, --redis-file PATH, REDIS_URL, the
 * default server) into o->url. An empty value is an error, never a silent
 * default. */
static int take_url(struct cli_options *o, const char *text, const char *who, bool from_env,
                    bool in_argv, FILE *err) {
  if (text[0] == '\0') {
    fprintf(err, "luastream: %s is empty: give a URL such as redis://127.0.0.1:6379%s\n", who,
            from_env ? ", or unset it for " CLI_DEFAULT_URL : "");
    return -1;
  }
  char why[512];
  if (url_parse(text, &o->url, why, sizeof why) != 0) {
    fprintf(err, "luastream: %s: %s\n", who, why);
    return -1;
  }
  if (in_argv && o->url.password[0])
    warn(o, err,
         "the password in %s can be seen by every user of this machine (ps): use "
         "--redis-file PATH or REDIS_URL instead",
         who);
  return 0;
}

/* "ms-seq", as XADD returns ids. */
/* An entry id as Redis writes it: MS-SEQ, without leading zeros, so that one
 * entry has one spelling (05-3 and 5-3 would name the same entry twice). */
static bool full_id(const char *s) {
  size_t ms = strspn(s, "0123456789");
  if (ms == 0 || ms > 20 || s[ms] != '-' || (s[0] == '0' && ms > 1)) return false;
  const char *q = s + ms + 1;
  size_t seq = strspn(q, "0123456789");
  return seq > 0 && seq <= 20 && q[seq] == '\0' && !(q[0] == '0' && seq > 1);
}

/* Reads text as opt's kind into v->num (or o->url); reports and returns -1
 * when it is not one. who names where text came from. */
static int take_value(struct cli_options *o, const struct cli_option *opt, struct cli_value *v,
                      const char *text, const char *who, FILE *err) {
  char why[1024];
  switch (opt->kind) {
    case CLI_FLAG: v->num = 1; return 0;
    case CLI_STRING: return 0;
    case CLI_NAME:
      if (text[0] != '\0') return 0;
      fprintf(err, "luastream: %s needs a non-empty name\n", who);
      return -1;
    case CLI_URL: return take_url(o, text, who, v->from_env, v->given && !v->from_env, err);
    case CLI_URL_FILE: {
      char line[URL_TEXT_MAX + 2], from[1100];
      if (read_url_file(o, text, line, sizeof line, err) != 0) return -1;
      snprintf(from, sizeof from, "%s %s", who, text);
      int rc = take_url(o, line, from, false, false, err);
      memset(line, 0, sizeof line); /* held a password, maybe */
      return rc;
    }
    case CLI_DURATION: {
      double ms;
      if (opt->off && !strcmp(text, "off")) {
        v->num = 0;
        return 0;
      }
      if (duration_parse(text, strlen(text), &ms, why, sizeof why) == 0) {
        v->num = (long long)ms;
        return 0;
      }
      size_t digits = strspn(text, "0123456789");
      if (digits > 0 && text[digits] == '\0' && strspn(text, "0") == digits) /* 0s: no example */
        fprintf(err, "luastream: %s %s: add a unit, e.g. 30s (or 500ms, 15m, 2h)\n", who, text);
      else if (digits > 0 && text[digits] == '\0')
        fprintf(err, "luastream: %s %s: add a unit, e.g. %ss (or %sms, %sm, %sh)\n", who, text,
                text, text, text, text);
      else
        fprintf(err, "luastream: %s \"%s\" %s\n", who, text, why);
      return -1;
    }
    case CLI_INT: {
      if (opt->cores && !strcmp(text, "auto")) {
        v->num = cli_cores();
        if (v->num > opt->max) v->num = opt->max;
        return 0;
      }
      size_t digits = strspn(text, "0123456789");
      long long n = digits > 0 && digits <= 18 && text[digits] == '\0' ? atoll(text) : -1;
      if (n >= opt->min && n <= opt->max) {
        v->num = n;
        return 0;
      }
      fprintf(err, "luastream: %s needs a number from %lld to %lld%s, got \"%s\"\n", who, opt->min,
              opt->max, opt->cores ? " or auto" : "", text);
      return -1;
    }
    case CLI_LOG_LEVEL: {
      int level = log_level_parse(text);
      if (level >= 0) {
        v->num = level;
        return 0;
      }
      fprintf(err, "luastream: %s must be debug, info, warn or error, got \"%s\"\n", who, text);
      return -1;
    }
    case CLI_LOG_FORMAT: {
      int format = log_format_parse(text);
      if (format >= 0) {
        v->num = format;
        return 0;
      }
      fprintf(err, "luastream: %s must be logfmt or json, got \"%s\"\n", who, text);
      return -1;
    }
    case CLI_ADDR: {
      char host[256];
      int port;
      if (health_parse_addr(text, host, sizeof host, &port, why, sizeof why) == 0) return 0;
      /* the parser's words are --http's: the option given is named */
      if (!strncmp(why, "--http", 6))
        fprintf(err, "luastream: %s%s\n", who, why + 6);
      else
        fprintf(err, "luastream: %s\n", why);
      return -1;
    }
    case CLI_HEADER: {
      const char *eq = strchr(text, '=');
      if (eq != NULL && eq != text) return 0;
      fprintf(err, "luastream: %s needs NAME=VALUE, got \"%s\"\n", who, text);
      return -1;
    }
    case CLI_ENTRY_ID:
      if (full_id(text)) return 0;
      fprintf(err,
              "luastream: %s needs an entry id as Redis writes it, such as 1700000000000-0 "
              "(digits, no leading zeros), got \"%s\"\n",
              who, text);
      return -1;
  }
  return -1;
}

/* Whether another option of group was given on the command line. */
static bool group_given(const struct cli_options *o, int group, int except) {
  for (int id = 0; group && id < OPT_NOPTIONS; id++)
    if (id != except && cli_option_table[id].group == group && o->v[id].given && !o->v[id].from_env)
      return true;
  return false;
}

/* Fills in env values and defaults, then checks every value of the command. */
static int take_values(struct cli_options *o, FILE *err) {
  for (int g = 1; g < CLI_NGROUPS; g++) {
    int given = 0;
    bool in_command = false;
    for (int id = 0; id < OPT_NOPTIONS; id++) {
      if (cli_option_table[id].group != g || !takes(o->command, id)) continue;
      in_command = true;
      given += o->v[id].given;
    }
    if (in_command && (given > 1 || (groups[g].required && given == 0))) {
      fprintf(err, "luastream: %s\n", groups[g].conflict);
      if (groups[g].required) {
        fputc('\n', err);
        cli_print_help(o->command, err);
      }
      return -1;
    }
  }
  for (int id = 0; id < OPT_NOPTIONS; id++) {
    const struct cli_option *opt = &cli_option_table[id];
    struct cli_value *v = &o->v[id];
    if (!takes(o->command, id)) continue;
    char who[64];
    snprintf(who, sizeof who, "--%s", opt->name);
    if (!v->given) {
      const char *env = opt->env ? getenv(opt->env) : NULL;
      if (group_given(o, opt->group, id)) continue;
      if (env) {
        v->text = env;
        v->given = v->from_env = true;
        snprintf(who, sizeof who, "%s", opt->env);
      } else if (opt->def) {
        v->text = opt->def;
        if (opt->kind == CLI_URL) snprintf(who, sizeof who, "the default server");
      } else {
        continue;
      }
    }
    for (int i = 0; i < (opt->repeat ? v->nitems : 1); i++) {
      const char *text = opt->repeat ? v->items[i] : v->text;
      if (take_value(o, opt, v, opt->kind == CLI_FLAG ? "" : text, who, err) != 0) return -1;
    }
    char why[1024];
    if (opt->check && opt->check(who, v, why, sizeof why) != 0) {
      fprintf(err, "luastream: %s\n", why);
      return -1;
    }
  }
  return 0;
}

/* The option named name that command takes, else the first so named (two
 * commands may each have their own option of one name: --watchdog). */
static int find_option(enum cli_command command, const char *name, size_t len) {
  int first = -1;
  for (int id = 0; id < OPT_NOPTIONS; id++)
    if (strlen(cli_option_table[id].name) == len &&
        !strncmp(cli_option_table[id].name, name, len)) {
      if (takes(command, id)) return id;
      if (first < 0) first = id;
    }
  return first;
}

/* The --tls-* options into the URL's TLS settings: each setting is given
 * once, in the URL or on the command line, and only for a rediss:// URL. */
static int take_tls(struct cli_options *o, FILE *err) {
  struct url_tls *t = &o->url.tls;
  const struct {
    enum cli_option_id id;
    char *field;
    size_t cap;
    const char *param;
  } map[] = {
      {OPT_TLS_CA, t->ca, sizeof t->ca, "tls_ca"},
      {OPT_TLS_CERT, t->cert, sizeof t->cert, "tls_cert"},
      {OPT_TLS_KEY, t->key, sizeof t->key, "tls_key"},
      {OPT_TLS_KEY_PASSWORD_FILE, t->key_password_file, sizeof t->key_password_file,
       "tls_key_password_file"},
      {OPT_TLS_SERVER_NAME, t->server_name, sizeof t->server_name, "tls_server_name"},
  };
  for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
    if (!cli_given(o, map[i].id)) continue;
    const char *name = cli_option_table[map[i].id].name;
    if (!t->on) {
      fprintf(err, "luastream: --%s needs a rediss:// URL (the server is %s)\n", name,
              o->url.redacted);
      return -1;
    }
    if (map[i].field[0]) {
      fprintf(err, "luastream: --%s and the URL's %s= both set it: give it once\n", name,
              map[i].param);
      return -1;
    }
    if (strlen(cli_text(o, map[i].id)) >= map[i].cap) {
      fprintf(err, "luastream: --%s is longer than %zu bytes\n", name, map[i].cap - 1);
      return -1;
    }
    snprintf(map[i].field, map[i].cap, "%s", cli_text(o, map[i].id));
  }
  if (cli_given(o, OPT_TLS_SKIP_VERIFY)) {
    if (!t->on) {
      fprintf(err, "luastream: --tls-skip-verify needs a rediss:// URL (the server is %s)\n",
              o->url.redacted);
      return -1;
    }
    t->skip_verify = 1;
    warn(o, err,
         "--tls-skip-verify: the servers' certificates are NOT checked, so anyone on the path "
         "can read and change the traffic; for tests only");
  }
  if (!t->on) return 0;
  /* The files are read now, so that a missing one or a key others can
   * read stops the command before it connects anywhere. */
  char why[600];
  struct tls_ctx *ctx = tls_ctx_get(t, why, sizeof why);
  if (ctx == NULL) {
    fprintf(err, "luastream: %s: %s\n", o->url.redacted, why);
    return -1;
  }
  tls_ctx_put(ctx);
  return 0;
}

int cli_parse(enum cli_command command, int argc, char **argv, struct cli_options *o, FILE *out,
              FILE *err) {
  const struct cli_command_def *c = &commands[command];
  memset(o, 0, sizeof *o);
  o->command = command;
  int items = 0;
  for (int id = 0; id < OPT_NOPTIONS; id++) {
    if (cli_option_table[id].repeat == 0) continue;
    o->v[id].items = o->items + items;
    items += cli_option_table[id].repeat;
  }
  if (items > CLI_ITEMS_MAX) abort(); /* the table asks for more than CLI_ITEMS_MAX */
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      cli_print_help(command, out);
      return CLI_DONE;
    }
    if (!strcmp(a, "--version")) {
      cli_print_version(out);
      return CLI_DONE;
    }
    if (a[0] != '-' || a[1] != '-') {
      if (o->npos == (c->max_args > c->nargs ? c->max_args : c->nargs)) {
        if (c->max_args > c->nargs)
          fprintf(err, "luastream: %s takes at most %d arguments; \"%s\" is one more\n\n", c->name,
                  c->max_args, a);
        else
          fprintf(err, "luastream: unexpected argument \"%s\"\n\n", a);
        cli_print_help(command, err);
        return CLI_USAGE;
      }
      o->pos[o->npos++] = a;
      continue;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
    int id = find_option(command, name, nlen);
    if (id < 0 || !takes(command, id)) {
      fprintf(err, "luastream: unknown option %.*s\n\n", (int)(nlen + 2), a);
      cli_print_help(command, err);
      return CLI_USAGE;
    }
    const struct cli_option *opt = &cli_option_table[id];
    struct cli_value *v = &o->v[id];
    if (opt->kind == CLI_FLAG) {
      if (eq) {
        fprintf(err, "luastream: option --%s takes no value\n", opt->name);
        return CLI_USAGE;
      }
      v->given = true;
      continue;
    }
    const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (value == NULL) {
      fprintf(err, "luastream: option --%s needs a value\n", opt->name);
      return CLI_USAGE;
    }
    if (opt->repeat) {
      if (v->nitems == opt->repeat) {
        fprintf(err, "luastream: too many --%s options (at most %d)\n", opt->name, opt->repeat);
        return CLI_USAGE;
      }
      v->items[v->nitems++] = value;
    }
    v->given = true;
    v->text = value;
  }
  if (o->npos < c->nargs) {
    fprintf(err, "luastream: missing arguments\n\n");
    cli_print_help(command, err);
    return CLI_USAGE;
  }
  if (take_values(o, err) != 0 || take_tls(o, err) != 0) return CLI_USAGE;
  return CLI_OK;
}

int cli_trust(const struct cli_options *o, struct trust *t, FILE *err) {
  *t = (struct trust){.allow_writable = cli_given(o, OPT_ALLOW_WRITABLE_DIR)};
  const struct cli_value *users = &o->v[OPT_TRUST_OWNER];
  for (int i = 0; i < users->nitems; i++) {
    char why[256];
    if (trust_add_owner(t, users->items[i], why, sizeof why) != 0) {
      fprintf(err, "luastream: %s\n", why);
      return -1;
    }
  }
  return 0;
}
