/* publish: `luastream publish [--redis URL | --redis-file PATH] STREAM JSON
 * [--key K [--partitions N]] [--header NAME=VALUE]... [--wait N[,TIMEOUT]]`,
 * adds one entry to a stream (to partition crc16(K) % N of a partitioned one,
 * STREAM:{p}) and prints its id; with --wait, then waits (WAIT) for N
 * replicas to have it and says how many did. */
#ifndef LUASTREAM_PUBLISH_H
#define LUASTREAM_PUBLISH_H

/* The exit status when the entry was added but fewer than --wait N replicas
 * acknowledged it (or WAIT failed). */
#define PUBLISH_NOT_REPLICATED 3

/* argv: what follows "publish". Returns the exit status: 0 when the entry
 * was added (and, with --wait, that many replicas have it), 1 when the
 * server could not be used or refused it, 2 on a usage error (bad JSON, a
 * reserved header name, --wait on a Redis Cluster), PUBLISH_NOT_REPLICATED. */
int cmd_publish(int argc, char **argv);

#endif
