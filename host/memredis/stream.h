/* stream: the data structure of one stream of the in-memory server: its
 * entries, the nodes Redis would keep them in, and trimming. No command
 * parsing here (cmd_stream.c), no consumer groups (group.h: a stream holds
 * them, group.c manages and frees them).
 *
 * Entries are an array sorted by ID: everything is O(n) and simple on
 * purpose, this serves tests, not traffic.
 *
 * Nodes: a Redis stream is a radix tree of listpacks, and what a client can
 * see of that (XINFO STREAM's radix-tree-keys, which entries `~` trimming
 * removes, and that exact trimming leaves an emptied node behind) depends on
 * where one listpack ends and the next begins. So each node here keeps what
 * Redis 7.0's streamAppendItem decides with: its live and deleted entry
 * counts and the byte size its listpack would have (the listpack encoding of
 * every element appended, integers as integers). XADD opens a new node when
 * the last one holds MS_NODE_MAX_ENTRIES entries, deleted ones included
 * (stream-node-max-entries), or when its bytes plus the new entry's field
 * and value bytes reach MS_NODE_MAX_BYTES (stream-node-max-bytes); XDEL
 * drops a node when its last live entry goes; trimming follows streamTrim.
 * What is not modelled: XINFO STREAM's radix-tree-nodes, the count of the
 * radix tree's internal nodes, which is exact only up to one node here and
 * an approximation (nodes + 1) beyond. */
#ifndef LUASTREAM_MEMREDIS_STREAM_H
#define LUASTREAM_MEMREDIS_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "broker.h"

#define MS_NODE_MAX_ENTRIES 100 /* stream-node-max-entries' default */
#define MS_NODE_MAX_BYTES 4096  /* stream-node-max-bytes' default */
/* What `~` without LIMIT may remove: 100 x stream-node-max-entries. */
#define MS_TRIM_DEFAULT_LIMIT (100 * MS_NODE_MAX_ENTRIES)

struct ms_entry {
  msid id;
  uint64_t node; /* ms_node.no of the node it was appended to */
  size_t nvals;  /* field, value, field, value ...: always even */
  char **val;    /* NUL-terminated copies */
  size_t *vlen;
};

struct ms_node {
  uint64_t no; /* ms_entry.node of its entries */
  msid master; /* the first id appended to it (its radix tree key) */
  msid last;   /* the last id appended to it, deleted or not */
  size_t live, deleted;
  size_t bytes;   /* its listpack's size */
  size_t nfields; /* the master entry's field names */
  char **field;
  size_t *flen;
};

struct ms_group;

struct ms_stream {
  struct ms_entry **e; /* sorted by id */
  size_t n, cap;
  struct ms_node *nodes; /* oldest first */
  size_t nnodes, nodecap;
  uint64_t node_seq; /* the last node number given out */
  msid last_id;      /* highest id ever generated */
  msid max_deleted;  /* highest id removed by XDEL (not by trimming) */
  uint64_t entries_added;
  struct ms_group **groups; /* sorted by name (group.h) */
  size_t ngroups, gcap;
};

/* A trimming request (XADD's and XTRIM's options). */
struct ms_trim {
  int strategy; /* 0 none, 1 MAXLEN, 2 MINID */
  bool approx;  /* ~ */
  long long maxlen;
  msid minid;
  long long limit; /* entries; 0 no limit */
};

struct ms_stream *ms_stream_new(void);
/* Frees entries and nodes; the groups must have been freed (group.h). */
void ms_stream_free(struct ms_stream *s);

/* Index of the first entry whose id is >= id (s->n if none). */
size_t ms_lower_bound(const struct ms_stream *s, msid id);
struct ms_entry *ms_find_entry(const struct ms_stream *s, msid id);
msid ms_first_id(const struct ms_stream *s);      /* 0-0 when empty */
msid ms_last_valid_id(const struct ms_stream *s); /* 0-0 when empty */

/* Appends an entry with id (above last_id) and nvals field/value strings. */
void ms_stream_append(struct ms_stream *s, msid id, int nvals, const char **vals,
                      const size_t *lens);
/* XDEL of one id: true if it was there. */
bool ms_stream_delete(struct ms_stream *s, msid id);
/* Trims as Redis' streamTrim does; returns the number of entries removed. */
long long ms_stream_trim(struct ms_stream *s, const struct ms_trim *t);

bk_reply *ms_reply_fields(const struct ms_entry *e);
bk_reply *ms_reply_entry(const struct ms_entry *e); /* [id, [f, v, ...]] */

#endif
