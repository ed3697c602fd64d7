/* group: the consumer groups of a stream of the in-memory server: groups
 * sorted by name, each with its consumers (sorted by name) and its PEL (an
 * array of NACKs sorted by ID; a consumer's own PEL is the NACKs it owns),
 * and the entries_read / lag bookkeeping. The commands that use them are in
 * cmd_group.c and cmd_read.c. */
#ifndef LUASTREAM_MEMREDIS_GROUP_H
#define LUASTREAM_MEMREDIS_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "stream.h"

struct ms_consumer {
  char *name;
  size_t len;
  uint64_t seen_time;  /* last read or claim attempt (7.0: last one served) */
  int64_t active_time; /* last read or claim that delivered something; -1 never */
};

struct ms_nack {
  msid id;
  struct ms_consumer *owner;
  uint64_t delivery_time; /* Unix ms */
  uint64_t delivery_count;
};

struct ms_group {
  char *name;
  size_t len;
  msid last_id;
  long long entries_read; /* -1: invalid (shown as nil) */
  struct ms_nack *pel;    /* sorted by id */
  size_t npel, pelcap;
  struct ms_consumer **cons; /* sorted by name */
  size_t ncons, conscap;
};

struct ms_group *ms_group_find(struct ms_stream *s, const char *name, size_t len);
/* NULL if the name is taken. */
struct ms_group *ms_group_add(struct ms_stream *s, const char *name, size_t len);
void ms_group_remove(struct ms_stream *s, struct ms_group *g);
/* Frees every group of s (before ms_stream_free). */
void ms_groups_free(struct ms_stream *s);

struct ms_consumer *ms_consumer_find(struct ms_group *g, const char *name, size_t len);
/* Finds or creates it (seen now, never active); *created (may be NULL) says which. */
struct ms_consumer *ms_consumer_get(struct ms_group *g, const char *name, size_t len, uint64_t now,
                                    int *created);
/* Deletes it and its pending entries; returns how many were pending, -1 if
 * there was no such consumer. */
long long ms_consumer_del(struct ms_group *g, const char *name, size_t len);
long long ms_consumer_pending(const struct ms_group *g, const struct ms_consumer *c);

/* Index of the first NACK whose id is >= id. */
size_t ms_pel_slot(const struct ms_group *g, msid id);
struct ms_nack *ms_nack_find(struct ms_group *g, msid id);
/* Zeroed, owner NULL. Pointers into the PEL are invalidated by the next add
 * or delete. */
struct ms_nack *ms_nack_add(struct ms_group *g, msid id);
void ms_nack_del(struct ms_group *g, struct ms_nack *n);

/* Advances the group's last_id and entries_read past a delivered id. */
void ms_group_delivered(struct ms_stream *s, struct ms_group *g, msid id);
/* XINFO GROUPS' lag; *valid false for nil. v80: the 8.0 rules. */
long long ms_group_lag(const struct ms_stream *s, const struct ms_group *g, bool v80, bool *valid);

#endif
