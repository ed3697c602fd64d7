/* port_probe: what a Redis port speaks, asked on a connection of its own
 * when a first connection failed in a way the wrong scheme would explain:
 * plaintext closed before any answer (a TLS port does that), or a TLS
 * handshake never answered (a plaintext Redis waits for the end of a line
 * that never comes). Only a server that answers the other way proves the
 * scheme wrong; a server that is merely gone or stalled proves nothing,
 * so its connection is retried as after any failure. */
#ifndef LUASTREAM_PORT_PROBE_H
#define LUASTREAM_PORT_PROBE_H

/* How long the probe waits for its answer. */
#define PORT_PROBE_TIMEOUT_MS 1000

struct uv_loop_s;
struct port_probe;

/* answered: the port answered a PING in the scheme asked. */
typedef void port_probe_cb(void *data, int answered);

/* Sends PING to ip:port over TLS (tls = 1; certificates not checked: this
 * asks only what the port speaks, and nothing else is sent) or plaintext.
 * cb runs once, never before this returns, unless cancelled. NULL when out
 * of memory. */
struct port_probe *port_probe_start(struct uv_loop_s *loop, const char *ip, int port, int tls,
                                    port_probe_cb *cb, void *data);
/* cb will not run. */
void port_probe_cancel(struct port_probe *p);

#endif
