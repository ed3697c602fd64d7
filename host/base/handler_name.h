/* handler_name: what a handler file is called, from its path: the file name
 * (in dead letters' headers and messages to the user) and the name without
 * ".lua" (the `handler=` of log lines, metrics' labels). */
#ifndef LUASTREAM_HANDLER_NAME_H
#define LUASTREAM_HANDLER_NAME_H

#include <stddef.h>

/* What follows the last '/' of path: "dir/orders.lua" -> "orders.lua". */
const char *handler_name_file(const char *path);

/* The file name without ".lua", as a pointer into path and its length in
 * *len: "dir/orders.lua" -> "orders", 6. A name that is just ".lua", or does
 * not end in it, is kept whole. */
const char *handler_name_of(const char *path, size_t *len);

#endif
