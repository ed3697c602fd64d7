/* grow: growing an array or a byte buffer that is appended to: the
 * capacity doubles, so n appends cost O(n) copying. New code uses it; a few
 * older arrays still double by hand (and http/ and pg/, which use nothing of
 * ours, keep their own). */
#ifndef LUASTREAM_GROW_H
#define LUASTREAM_GROW_H

#include <stddef.h>

/* Makes room for at least need items of size bytes in the array p of *cap
 * items: when p is NULL or *cap < need, reallocates it to the smallest
 * doubling of *cap (of first when *cap is 0) that holds need, and sets *cap.
 * Returns the array (p itself when it had room), or NULL when out of memory,
 * with p and *cap untouched. Typical use:
 *   struct x *v = grow(s->v, &s->cap, s->n + 1, sizeof *v, 8);
 *   if (v == NULL) return -1;
 *   s->v = v; */
void *grow(void *p, size_t *cap, size_t need, size_t size, size_t first);

#endif
