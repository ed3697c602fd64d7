/* group_stats: what Redis knows of each group the host reads, as metrics
 * (metrics.h), shared by every subscription of that stream and group: the
 * group's lag and pending count (XINFO GROUPS), the idle time of its oldest
 * pending entry (XPENDING ... IDLE 0 - + 1), how long its oldest entries
 * not yet delivered and still pending have waited, on the stream or its
 * retry stream (SCRIPT_LAG, one call for both), the entries in its delay set
 * (ZCARD) and the length of the dead-letter stream (XLEN).
 *
 * Asked on the host's command connection only when someone reads the
 * metrics: building the page (a scrape) asks again when the last answers
 * are older than GROUP_STATS_MS, and the page shows the answers of the
 * asking before. A host nobody scrapes sends nothing for them. */
#ifndef LUASTREAM_GROUP_STATS_H
#define LUASTREAM_GROUP_STATS_H

#include <stddef.h>

#include "broker.h"
#include "clock.h"
#include "runtime.h"

#define GROUP_STATS_MS 1000

typedef struct group_stats group_stats;

/* The handler specs whose groups to poll now, into out (at most max);
 * returns how many. Called at each poll. */
typedef size_t group_stats_list_fn(void *data, const struct handler_spec **out, size_t max);

/* Asks on cmd (borrowed) when the metrics page is built. NULL when out of
 * memory. */
group_stats *group_stats_new(broker *b, bk_conn *cmd, lclock *clock, group_stats_list_fn *list,
                             void *data);
/* Stops asking; the last values stay. Replies still on their way are
 * dropped. */
void group_stats_free(group_stats *g);

#endif
