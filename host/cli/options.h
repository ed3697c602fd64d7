/* options: the command line of every luastream command, as one table.
 *
 * Each option is declared once (options.c): its name, the kind of value it
 * takes, the commands that accept it, the options it excludes, the
 * environment variable it falls back to, its default and its help text. The
 * same table parses and validates argv and prints each command's --help, so
 * what is accepted and what is documented cannot drift apart.
 *
 * Parsing rules, for every command: `--name VALUE` or `--name=VALUE` (the
 * value may start with "--"); a flag takes no value; an option given twice
 * keeps the last value, unless it is repeatable (--header, --id); options and
 * arguments mix in any order; `--help`/`-h` prints the help and `--version`
 * the version, on stdout. A usage error names the option and the value. */
#ifndef LUASTREAM_OPTIONS_H
#define LUASTREAM_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "url.h"

/* The server when neither --redis, --redis-file nor REDIS_URL names one. */
#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"

enum cli_command {
  CLI_RUN,
  CLI_CHECK,
  CLI_PUBLISH,
  CLI_DL_LIST,
  CLI_DL_REPLAY,
  CLI_DL_DELETE,
  CLI_STATUS,
  CLI_CONSOLE,
  CLI_PAUSE,
  CLI_RESUME,
  CLI_ASYNCAPI,
  CLI_NCOMMANDS
};

enum cli_option_id {
  OPT_REDIS,
  OPT_REDIS_FILE,
  OPT_TLS_CA,
  OPT_TLS_CERT,
  OPT_TLS_KEY,
  OPT_TLS_KEY_PASSWORD_FILE,
  OPT_TLS_SERVER_NAME,
  OPT_TLS_SKIP_VERIFY,
  OPT_INSTANCE,
  OPT_CONSUMER,
  OPT_PROCESSES,
  OPT_LOG_LEVEL,
  OPT_LOG_FORMAT,
  OPT_SHUTDOWN_TIMEOUT,
  OPT_HTTP,
  OPT_NO_RELOAD,
  OPT_LOAD_TIMEOUT,
  OPT_TRUST_OWNER,
  OPT_ALLOW_WRITABLE_DIR,
  OPT_WATCHDOG,
  OPT_CHECK_WATCHDOG, /* check's --watchdog: what run is given, to judge min_idle by */
  OPT_HTTP_TIMEOUT,
  OPT_HTTP_MAX_BODY,
  OPT_HTTP_PER_HOST,
  OPT_HTTP_CA_FILE,
  OPT_POSTGRES,
  OPT_PG_POOL,
  OPT_PG_TIMEOUT,
  OPT_PG_ONCE_TABLE,
  OPT_PG_ONCE_KEEP,
  OPT_KEY,
  OPT_MAXLEN,
  OPT_PARTITIONS,
  OPT_HEADER,
  OPT_COUNT,
  OPT_ID,
  OPT_ALL,
  OPT_REASON,
  OPT_YES,
  OPT_WAIT,
  OPT_PUBLISH_CHECK, /* publish's --check DIR: the subscribers' schemas */
  OPT_JSON,
  OPT_WATCH,
  OPT_CLUSTER,
  OPT_CONSOLE,
  OPT_CONSOLE_TOKENS,
  OPT_CONSOLE_ORIGIN,
  OPT_CONSOLE_INTERVAL,
  OPT_FOR,
  OPT_PAUSE_REASON, /* pause's --reason: free text (dead-letters delete's picks entries) */
  OPT_YAML,
  OPT_TITLE,
  OPT_API_VERSION,
  OPT_NOPTIONS
};

/* What an option's value is, and so how it is checked. */
enum cli_kind {
  CLI_FLAG,       /* no value */
  CLI_STRING,     /* any text */
  CLI_NAME,       /* any text but the empty one */
  CLI_URL,        /* a Redis URL (url.h); the parsed form goes to cli_options.url */
  CLI_URL_FILE,   /* a file whose first line is a Redis URL, into cli_options.url */
  CLI_DURATION,   /* duration.h text with a unit, into num as ms */
  CLI_INT,        /* digits only, from min to max, into num */
  CLI_LOG_LEVEL,  /* debug, info, warn or error, into num as enum log_level */
  CLI_LOG_FORMAT, /* logfmt or json, into num as enum log_format */
  CLI_ADDR,       /* ADDR:PORT to listen on (health_parse_addr) */
  CLI_HEADER,     /* NAME=VALUE with a non-empty NAME */
  CLI_ENTRY_ID,   /* a full stream entry id, ms-seq */
};

struct cli_value;

struct cli_option {
  const char *name; /* without the leading "--" */
  const char *arg;  /* the value's placeholder in the help, e.g. "URL"; NULL for a flag */
  enum cli_kind kind;
  unsigned commands; /* CLI_IN(command) for each command that accepts it */
  int group;       /* options sharing a nonzero group exclude each other (groups[] in options.c) */
  const char *env; /* used when no option of its group is given; NULL for none */
  const char *def; /* default, as text of its kind, when neither it nor env is given */
  int repeat;      /* >0: repeatable up to this many times; 0: once, the last one counts */
  long long min, max; /* CLI_INT: the range allowed */
  bool off;           /* CLI_DURATION: the word "off" reads as 0 ms (for a clearer refusal) */
  bool cores;         /* CLI_INT: the word "auto" reads as the number of cores (cli_cores) */
  /* Rules beyond the kind's, for a value already read: returns 0, or -1
   * with one line (without the "luastream: " prefix) naming who, the option
   * or variable, in err. NULL when the kind says it all. */
  int (*check)(const char *who, const struct cli_value *v, char *err, size_t errlen);
  const char *help; /* wrapped when printed; the default is appended */
  /* The synopsis shows this text, once, for every option that has it, in
   * place of each one (a family of options); NULL: the option itself. */
  const char *synopsis_as;
};

#define CLI_IN(command) (1u << (command))

extern const struct cli_option cli_option_table[OPT_NOPTIONS];

/* A group of options that exclude each other. */
struct cli_group {
  bool required;        /* one of them must be given (the help shows (a | b)) */
  const char *conflict; /* said when two are given, or (required) none */
};

/* One option's value after parsing. */
struct cli_value {
  const char *text; /* the last value given, the env var's, or the default; NULL when none */
  long long num;    /* CLI_FLAG: 1 when given; CLI_DURATION: ms; CLI_INT; CLI_LOG_LEVEL, _FORMAT */
  bool given;       /* on the command line or in the environment (not a default) */
  bool from_env;    /* given by the option's environment variable */
  const char **items; /* a repeatable option's values, in order */
  int nitems;
};

/* The most positional arguments a command takes (status STREAM...). */
#define CLI_ARGS_MAX 1024

/* Items of all repeatable options together (--header 64, --id 1024,
 * --trust-owner 8). */
#define CLI_ITEMS_MAX 1096

struct cli_options {
  enum cli_command command;
  struct cli_value v[OPT_NOPTIONS];
  const char *pos[CLI_ARGS_MAX]; /* the positional arguments (DIR, STREAM, JSON) */
  int npos;
  struct redis_url url; /* the server, for commands that accept --redis */
  const char *items[CLI_ITEMS_MAX];
  char warnings[2048]; /* run: warnings about the command line, one a line (cli_log_warnings) */
};

enum { CLI_OK = 0, CLI_DONE = 1, CLI_USAGE = -1 };

/* Parses argv (what follows the command's name) for command into *o.
 * Returns CLI_OK; CLI_DONE when --help or --version was printed on out;
 * CLI_USAGE when the command line is wrong (said on err, with the help
 * when the shape of the command line is wrong). Reads REDIS_URL and
 * LUASTREAM_INSTANCE, and the --redis-file; puts the --tls-* options into
 * the URL's TLS settings. */
int cli_parse(enum cli_command command, int argc, char **argv, struct cli_options *o, FILE *out,
              FILE *err);

/* Logs the warnings cli_parse kept for `run` (the password in --redis, a
 * --redis-file others can read), each a log line at warn level: call once
 * the log's format is set. */
void cli_log_warnings(const struct cli_options *o);

struct trust;
/* Who may change the handler code (trust.h), from --trust-owner and
 * --allow-writable-dir, into *t. Returns 0, or -1 having said why on err. */
int cli_trust(const struct cli_options *o, struct trust *t, FILE *err);

/* The command's help: synopsis, description, one entry per option. */
void cli_print_help(enum cli_command command, FILE *out);
void cli_print_version(FILE *out);

/* The number of cores this process may run on (uv_available_parallelism,
 * else sysconf), at least 1. */
long long cli_cores(void);

/* The name as typed after "luastream", e.g. "dead-letters list". */
const char *cli_command_name(enum cli_command command);

/* publish --wait N[,TIMEOUT]: the replicas to wait for and how long (ms;
 * PUBLISH_WAIT_DEFAULT_MS when TIMEOUT is not given, at most
 * PUBLISH_WAIT_MAX_MS). Returns 0, or -1 with why in err. */
#define PUBLISH_WAIT_DEFAULT_MS 1000
#define PUBLISH_WAIT_MAX_MS 5000
int cli_wait_parse(const char *text, long long *replicas, long long *timeout_ms, char *err,
                   size_t errlen);

static inline const char *cli_text(const struct cli_options *o, enum cli_option_id id) {
  return o->v[id].text;
}
static inline long long cli_num(const struct cli_options *o, enum cli_option_id id) {
  return o->v[id].num;
}
static inline bool cli_given(const struct cli_options *o, enum cli_option_id id) {
  return o->v[id].given;
}

#endif
