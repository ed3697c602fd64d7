/* run: `luastream run [options] DIR`, the long-running host.
 *
 * Builds the loop, clock and broker, hands them to the host and maps
 * signals: the first SIGTERM/SIGINT drains (within --shutdown-timeout), a
 * second one exits at once. With --http it also serves /healthz and /readyz
 * (health.h) from the host's readiness. Hot reload: a uv_fs_event on DIR
 * (unless --no-reload) asks the host to reload after 200 ms of quiet
 * (host_reload_soon), and a uv_fs_poll on DIR notices when the directory
 * itself goes or is replaced (a deploy), reloads and watches the new one;
 * SIGHUP reloads every handler file at once. The watchdog thread
 * (watchdog.h, --watchdog, always on and shorter than the consumer leases)
 * ends the process with status 70 when the loop stops turning, fed by a
 * timer of the loop and by every handler resume. The log is written by a
 * thread of its own (log_writer.h), so a stalled reader of stderr does not
 * stop the host. With --processes N above 1 this process is the supervisor
 * (supervisor.h) and each of its workers runs the host as above, with the
 * names, --http socket and signal handling the supervisor gives it. */
#ifndef LUASTREAM_RUN_H
#define LUASTREAM_RUN_H

/* argv: what follows "run". Returns the exit status: 0 after a clean stop,
 * 1 when the host could not start or failed, 2 on a usage error. */
int cmd_run(int argc, char **argv);

#endif
