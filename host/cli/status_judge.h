/* status_judge: what needs attention in a group of a refresh
 * (status_query.h), by the rules of status_rules.h, with the words
 * `luastream status` and the web console show. */
#ifndef LUASTREAM_STATUS_JUDGE_H
#define LUASTREAM_STATUS_JUDGE_H

#include "status_query.h"

/* Adds to g's lags (its lag at the refreshes before, from q->prev, then
 * this one's), for the lag-growing rule. Call before status_judge. */
void status_carry_lags(const struct status_query *q, struct st_group *g);

/* Adds to g what needs attention (status_query_attention). */
void status_judge(const struct status_query *q, struct st_group *g);

/* A schedule's attention (its `attention`): its next tick overdue by more
 * than STATUS_TICK_LATE_MS on the server's clock while no host holds its
 * lease (no host runs it), or its last tick raised. True when it needs
 * attention. */
#define STATUS_TICK_LATE_MS 60000
bool status_judge_schedule(const struct status_query *q, struct st_schedule *s);

#endif
