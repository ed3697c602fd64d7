/* handler_dir: the handler files of a directory, and the rule that two of
 * them must not split one group's entries. Used at start-up, by `luastream
 * check` and by every hot reload. */
#ifndef LUASTREAM_HANDLER_DIR_H
#define LUASTREAM_HANDLER_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime.h"
#include "trust.h"

/* `*.lua` directly inside dir, not starting with `_` or `.`, sorted by name:
 * the count and a NULL-terminated array in *paths (free with
 * handler_dir_free). An empty directory is an error only when !allow_empty.
 * Returns -1 with err on failure, -2 (with err) when dir does not exist, -3
 * (with err) when dir or a parent folder is one that users other than
 * trust's can change (trust_check_dir; trust NULL: not checked). */
int handler_dir_list(const char *dir, const struct trust *trust, bool allow_empty, char ***paths,
                     char *err, size_t errlen);
void handler_dir_free(char **paths);
/* Two handler files reading one stream as one group split its entries
 * between them, unless they are the new + reclaim pair (one reads new
 * entries, the other only recovers idle pending ones). A partitioned file
 * reads each of its partitions' keys (partition.h), so it shares a stream
 * with a file naming one of them. True, with why, when a and b would. */
bool handler_dir_split_group(const struct handler_spec *a, const struct handler_spec *b, char *why,
                             size_t len);

#endif
