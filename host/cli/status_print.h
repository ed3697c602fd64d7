/* status_print: `luastream status`'s output, from what a refresh learned
 * (status_query.h) and what needs attention: a table for a person (names
 * from the server with their control characters shown as '?') or one JSON
 * document per refresh (--json; docs/operations.md, "status"). */
#ifndef LUASTREAM_STATUS_PRINT_H
#define LUASTREAM_STATUS_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "status_query.h"

/* The tables of streams and groups and of consumers, then what needs
 * attention (needs: anything does). every_s > 0: --watch refreshes every
 * every_s seconds, said in the title. */
void status_print_table(const struct status_query *q, int every_s, bool needs);

/* One line of JSON. */
void status_print_json(FILE *out, const struct status_query *q, bool needs);

#endif
