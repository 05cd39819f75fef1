/* SPDX-License-Identifier: MIT */
/* log: leveled lines on stderr, one line per record, so lines from several
 * workers never interleave. The level is checked in the macro, so a disabled
 * debug line costs one compare and no formatting.
 *
 * No thread that forwards bytes may ever wait for a log sink (a pipe whose
 * reader stopped, a full terminal, a FIFO, a hung syslog): once the proxy
 * runs, lines go into a bounded queue (struct log_sink) that one writer
 * thread per sink drains. A line that does not fit is dropped and counted
 * (splicer_log_lines_dropped_total), and "N lines dropped" is logged once
 * the sink takes lines again.
 *
 * Escaping: the message part of every line has each byte outside printable
 * ASCII (0x20-0x7e), and each backslash and double quote, written as \xHH,
 * so bytes from the network (a PROXY v2 Unix path, say) can never start a
 * line of their own or pass for a field. */
#ifndef SPLICER_LOG_H
#define SPLICER_LOG_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_VERBOSE, LOG_DEBUG };

extern int log_level; /* lines above this level are dropped; -v raises it */

void log_line(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_at(lvl, ...)                                                                  \
	do {                                                                              \
		if ((lvl) <= __atomic_load_n(&log_level, __ATOMIC_RELAXED))                \
			log_line((lvl), __VA_ARGS__);                                     \
	} while (0)
#define log_err(...)     log_at(LOG_ERR, __VA_ARGS__)
#define log_warn(...)    log_at(LOG_WARN, __VA_ARGS__)
#define log_info(...)    log_at(LOG_INFO, __VA_ARGS__)
#define log_verbose(...) log_at(LOG_VERBOSE, __VA_ARGS__)
#define log_debug(...)   log_at(LOG_DEBUG, __VA_ARGS__)

/* For states that cannot happen: logs (directly, bypassing the queue) and
 * aborts. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Writes in[0..n-1] into out (NUL-terminated, at most outlen - 1 bytes; an
 * escape is never cut in half) with every byte outside printable ASCII, and
 * backslash and double quote, as \xHH; with space too when also_space (for
 * key=value values). Returns the length written. */
size_t log_escape(const char *in, size_t n, char *out, size_t outlen, int also_space);

/* ts as UTC to the millisecond, "2026-12-03T08:30:00.123Z", into out (NUL-
 * terminated): the stamp of every line splicer writes. Returns its length. */
struct timespec;
size_t log_timestamp(const struct timespec *ts, char *out, size_t len);

/* The symbolic name of an errno value ("ECONNREFUSED"), for lines a program
 * reads; "-" for 0 and "EUNKNOWN" for a value libc has no name for. */
const char *log_errno_name(int err);

/* ---- the bounded queue in front of a sink ------------------------------ */

#define LOG_SINK_RING (128 * 1024) /* bytes of queued lines per sink */
#define LOG_LINE_MAX  2048         /* longest line, newline included */

struct log_sink {
	const char *name;          /* "error", "access": in the dropped-lines note */
	pthread_mutex_t mu;
	pthread_cond_t more, idle; /* writer: lines queued; flush: queue empty */
	char ring[LOG_SINK_RING];  /* records: 2-byte length, then the line */
	size_t head, used;
	int fd;                    /* where lines go; -1: to line_fn, one call per line */
	/* fd -1: e.g. syslog(3), a datagram socket; the line without its
	 * newline (NUL-terminated, n bytes); returns 0, or -1 when it was lost */
	int (*line_fn)(const char *line, size_t n);
	int started, stop, busy;   /* busy: the writer holds lines outside the ring */
	uint64_t dropped;          /* lines dropped over the sink's life (atomic reads) */
	uint64_t unreported;       /* dropped since the last note */
	pthread_t thread;
};

/* The error log (stderr). Lines are written directly until log_async_start,
 * so subcommands and start-up errors behave as plain stderr writes. */
extern struct log_sink log_err_sink;

/* Starts the writer thread of s, which writes to fd (-1: s->line_fn). Returns 0
 * or -errno (then lines keep going out synchronously). */
int log_sink_start(struct log_sink *s, int fd);

/* Queues one line (with its newline) without ever waiting for the sink. A
 * sink not started is written directly. Returns 0, or -1 when the line was
 * dropped (counted). */
int log_sink_put(struct log_sink *s, const char *line, size_t n);

/* Waits up to timeout_ms for the queue to drain and stops the writer. A
 * writer stuck in write() (its reader gone) is left behind rather than
 * waited for: the process is about to exit. Returns 0 when everything was
 * written. */
int log_sink_stop(struct log_sink *s, int timeout_ms);

static inline uint64_t log_sink_dropped(const struct log_sink *s)
{
	return __atomic_load_n(&s->dropped, __ATOMIC_RELAXED);
}

/* The error log through its queue from now on (the proxy, once running). */
int log_async_start(void);

#endif
