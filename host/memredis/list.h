/* list: the list data structure of the in-memory server: an array of
 * elements, head first. Pushing at the head moves the rest: O(n) and simple
 * on purpose (the commands are in cmd_list.c). */
#ifndef LUASTREAM_MEMREDIS_LIST_H
#define LUASTREAM_MEMREDIS_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct ms_lelem {
  char *p; /* NUL-terminated copy, binary-safe with len */
  size_t len;
};

struct ms_list {
  struct ms_lelem *v; /* v[0] is the head (LPOP's end) */
  size_t n, cap;      /* n > 0: a list that empties is deleted */
};

struct ms_list *ms_list_new(void);
void ms_list_free(struct ms_list *l);
/* Adds a copy of p at the head or at the tail. */
void ms_list_push(struct ms_list *l, bool head, const char *p, size_t len);
/* Removes the head or the tail element and returns it (the caller owns .p);
 * l->n > 0. */
struct ms_lelem ms_list_pop(struct ms_list *l, bool head);

#endif
