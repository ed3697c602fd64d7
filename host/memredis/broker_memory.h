/* broker_memory: the test harness's broker (a backend of broker.h). */
#ifndef LUASTREAM_BROKER_MEMORY_H
#define LUASTREAM_BROKER_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "broker.h"

/* The in-memory Redis streams server of the test harness (broker_memory.c
 * and the files behind it: commands.h, db.h), speaking the commands the host sends with
 * the replies and error texts of the server version it reports (INFO):
 * version is "x.y.z", NULL for "8.4.0"; "7.0.15" switches to 7.0 behaviour.
 * Nothing runs inside bk_command: commands run and callbacks fire from a
 * 0-ms timer on `clock` (borrowed; it must outlive the broker), so replies
 * arrive when the clock is settled or advanced. Connections are up at once
 * (state callback from the same timer). Returns NULL when out of memory. */
struct lclock;
broker *broker_memory_new(struct lclock *clock, const char *version);
/* Changes the reported version (and behaviour) from the next command on. */
void broker_memory_set_version(broker *b, const char *version);
/* Simulates an outage: while down, connections report down (their pending
 * commands fail with "connection lost: ..."), and bk_command returns -1;
 * when it ends they report up again. The data stays. */
void broker_memory_set_down(broker *b, bool down);
/* From the next command on, each `command` (any case, outside scripts and
 * MULTI) is answered ms of the clock's time late, and the connection's next
 * commands wait behind it, as behind a slow command on a server (NULL or 0:
 * none is). For tests of call timeouts. */
void broker_memory_set_slow(broker *b, const char *command, uint64_t ms);

#endif
