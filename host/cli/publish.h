/* publish: `luastream publish [--redis URL | --redis-file PATH] STREAM JSON
 * [--key K [--partitions N]] [--header NAME=VALUE]...`, adds one entry to a
 * stream (to partition crc16(K) % N of a partitioned one, STREAM:{p}) and
 * prints its id. */
#ifndef LUASTREAM_PUBLISH_H
#define LUASTREAM_PUBLISH_H

/* argv: what follows "publish". Returns the exit status: 0 when the entry
 * was added, 1 when the server could not be used or refused it, 2 on a
 * usage error (bad JSON, a reserved header name). */
int cmd_publish(int argc, char **argv);

#endif
