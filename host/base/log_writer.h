/* log_writer: writes the log to stderr from a thread of its own.
 *
 * A reader of stderr that stops reading (a full pipe, a paused terminal, a
 * stuck log shipper) would otherwise block the event loop inside write().
 * A line that stderr can take at once is written at once; otherwise the
 * writer takes it into a bounded buffer and returns; its thread writes the
 * lines in order, each with one write() as the default sink does (so lines
 * up to PIPE_BUF stay whole on a shared pipe).
 * When the buffer is full a line is dropped and counted, and once there is
 * room again a warning says how many were lost. */
#ifndef LUASTREAM_LOG_WRITER_H
#define LUASTREAM_LOG_WRITER_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of log lines that may wait for stderr (twice this while the thread
 * writes one buffer and the loop fills the other). */
#define LOG_WRITER_CAPACITY (1024 * 1024)

/* Starts the thread and installs the writer as the log sink. Returns 0, or
 * -1 (the log stays synchronous) when the thread cannot start. */
int log_writer_start(void);
/* Writes what is buffered, waiting at most timeout_ms for stderr to take it
 * (what it does not take by then is lost), stops the thread and restores the
 * default sink. Does nothing when the writer is not running. */
void log_writer_stop(uint64_t timeout_ms);
/* Lines dropped so far because the buffer was full. */
uint64_t log_writer_dropped(void);

#endif
