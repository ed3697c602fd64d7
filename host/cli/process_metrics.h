/* process_metrics: the standard process_* series of Prometheus clients
 * (resident memory, CPU seconds, open and maximum fds, start time), read
 * from /proc/self when the metrics page is built. Linux only. */
#ifndef LUASTREAM_PROCESS_METRICS_H
#define LUASTREAM_PROCESS_METRICS_H

/* Registers the collector, noting now as the start time; 0, or -1 when out
 * of memory. process_metrics_stop removes it. */
int process_metrics_start(void);
void process_metrics_stop(void);

#endif
