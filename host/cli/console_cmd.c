/* console_cmd: `luastream console` (console_cmd.h). */
#include "console_cmd.h"

#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <uv.h>

#include "console.h"
#include "log.h"
#include "loop.h"
#include "options.h"
#include "trust.h"

struct console_cmd {
  console *console;
  uv_signal_t sigterm, sigint, sighup;
};

static void on_hup(uv_signal_t *s, int signum) {
  (void)signum;
  struct console_cmd *cc = s->data;
  log_line(LOG_INFO, NULL, "signal received: reading the console tokens again", "signal", "SIGHUP",
           NULL);
  console_reload_tokens(cc->console);
}

static void on_stop(uv_signal_t *s, int signum) {
  struct console_cmd *cc = s->data;
  log_line(LOG_INFO, NULL, "signal received: closing the console", "signal",
           signum == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
  console_close(cc->console);
  cc->console = NULL;
  uv_close((uv_handle_t *)&cc->sigterm, NULL);
  uv_close((uv_handle_t *)&cc->sigint, NULL);
  uv_close((uv_handle_t *)&cc->sighup, NULL);
}

int console_options_check(const struct cli_options *o, bool required) {
  bool addr = cli_text(o, OPT_CONSOLE) != NULL, tokens = cli_text(o, OPT_CONSOLE_TOKENS) != NULL;
  if (addr == tokens && (addr || !required)) return 0;
  if (!addr && !tokens)
    fprintf(stderr, "luastream: give --console ADDR:PORT and --console-tokens PATH\n");
  else
    fprintf(stderr, "luastream: %s needs %s too\n", addr ? "--console" : "--console-tokens",
            addr ? "--console-tokens PATH (who may use the console)"
                 : "--console ADDR:PORT (where it listens)");
  return 2;
}

int cmd_console(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_CONSOLE, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  if (console_options_check(&o, true) != 0) return 2;
  struct stat sb;
  bool dir = stat(o.pos[0], &sb) == 0 && S_ISDIR(sb.st_mode);
  if (dir && o.npos > 1) {
    fprintf(stderr,
            "luastream: console takes one DIR or stream names, not both (%s is a "
            "directory)\n",
            o.pos[0]);
    return 2;
  }
  struct trust trust;
  if (dir && cli_trust(&o, &trust, stderr) != 0) return 2;
  struct console_config cfg = {
      .addr = cli_text(&o, OPT_CONSOLE),
      .tokens_path = cli_text(&o, OPT_CONSOLE_TOKENS),
      .origin = cli_text(&o, OPT_CONSOLE_ORIGIN),
      .url = &o.url,
      .dir = dir ? o.pos[0] : NULL,
      .streams = dir ? NULL : (const char *const *)o.pos,
      .nstreams = dir ? 0 : o.npos,
      .load_timeout_ms = (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT),
      .trust = dir ? &trust : NULL,
      .interval_ms = (uint64_t)cli_num(&o, OPT_CONSOLE_INTERVAL),
      .mode = "console",
  };
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) {
    fprintf(stderr, "luastream: cannot create the event loop\n");
    return 1;
  }
  struct console_cmd cc = {0};
  char err[512];
  rc = 0;
  if ((cc.console = console_start(&loop, &cfg, err, sizeof err)) == NULL) {
    fprintf(stderr, "luastream: %s\n", err);
    rc = 1;
  } else {
    uv_signal_init(&loop, &cc.sigterm);
    uv_signal_init(&loop, &cc.sigint);
    uv_signal_init(&loop, &cc.sighup);
    cc.sigterm.data = cc.sigint.data = cc.sighup.data = &cc;
    uv_signal_start(&cc.sigterm, on_stop, SIGTERM);
    uv_signal_start(&cc.sigint, on_stop, SIGINT);
    uv_signal_start(&cc.sighup, on_hup, SIGHUP);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  console_close(cc.console);
  if (loop_finish(&loop) != 0) rc = 1;
  return rc;
}
