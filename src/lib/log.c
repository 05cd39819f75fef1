/* SPDX-License-Identifier: MIT */
/* log: see log.h. Format: "2026-12-02T18:30:00.123Z splicer[PID] LEVEL: message".
 *
 * Why a writer thread behind a bounded ring and not O_NONBLOCK on stderr:
 * stderr is inherited, and O_NONBLOCK is a flag of the open file
 * description, which the shell, the terminal or systemd's journal pipe
 * share with us; setting it would make *their* writes fail with EAGAIN. A
 * thread of our own may block in write() as long as the sink likes, and
 * while it does, workers only find the ring full and drop their line. The
 * same thread design serves the access log (a file, stdout, a FIFO or
 * syslog(3), which blocks too when the journal stalls). */
#define _GNU_SOURCE
#include "log.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int log_level = LOG_INFO;

struct log_sink log_err_sink = { .name = "error", .mu = PTHREAD_MUTEX_INITIALIZER,
				 .more = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER,
				 .fd = STDERR_FILENO };

static const char *const level_names[] = { "error", "warning", "info", "verbose", "debug" };

size_t log_escape(const char *in, size_t n, char *out, size_t outlen, int also_space)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!outlen)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c >= 0x20 && c <= 0x7e && c != '\\' && c != '"' && !(also_space && c == ' ')) {
			if (o + 1 >= outlen)
				break;
			out[o++] = (char)c;
			continue;
		}
		if (o + 4 >= outlen)
			break;
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	out[o] = '\0';
	return o;
}

const char *log_errno_name(int err)
{
	const char *n;

	if (!err)
		return "-";
	n = strerrorname_np(err);
	return n ? n : "EUNKNOWN";
}

/* ---- the queue ------------------------------------------------------------ */

static void ring_copy_in(struct log_sink *s, size_t at, const void *src, size_t n)
{
	size_t first = LOG_SINK_RING - at < n ? LOG_SINK_RING - at : n;

	memcpy(s->ring + at, src, first);
	memcpy(s->ring, (const char *)src + first, n - first);
}

static void ring_copy_out(struct log_sink *s, size_t at, void *dst, size_t n)
{
	size_t first = LOG_SINK_RING - at < n ? LOG_SINK_RING - at : n;

	memcpy(dst, s->ring + at, first);
	memcpy((char *)dst + first, s->ring, n - first);
}

/* Writes all of buf to fd, waiting as long as it takes (only the sink's own
 * thread, or a caller before the proxy runs, gets here). Returns the bytes
 * written: less than n on an error (EPIPE, ENOSPC, EBADF). */
static size_t write_all(int fd, const char *buf, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t k = write(fd, buf + off, n - off);
		if (k > 0) {
			off += (size_t)k;
		} else if (k < 0 && errno == EINTR) {
			continue;
		} else if (k < 0 && errno == EAGAIN) {
			/* an inherited descriptor someone made non-blocking */
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				break;
		} else {
			break;
		}
	}
	return off;
}

static unsigned count_lines(const char *buf, size_t n)
{
	unsigned k = 0;

	for (size_t i = 0; i < n; i++)
		k += buf[i] == '\n';
	return k;
}

/* Delivers a batch of whole lines. Returns how many were lost. */
static unsigned sink_deliver(const struct log_sink *s, char *buf, size_t n)
{
	size_t done;

	if (s->fd >= 0) {
		done = write_all(s->fd, buf, n);
		return count_lines(buf + done, n - done);
	}
	done = 0;
	for (char *p = buf, *nl; p < buf + n; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(buf + n - p));
		*nl = '\0';
		done += s->line_fn(p, (size_t)(nl - p)) < 0;
	}
	return (unsigned)done;
}

static void drop_add(struct log_sink *s, uint64_t k)
{
	__atomic_store_n(&s->dropped, s->dropped + k, __ATOMIC_RELAXED);
	s->unreported += k;
}

static void *sink_main(void *arg)
{
	struct log_sink *s = arg;
	char batch[32 * 1024]; /* on this thread's stack: whole lines only */

	pthread_mutex_lock(&s->mu);
	for (;;) {
		size_t n = 0;
		unsigned lost;
		uint64_t note;

		while (!s->used && !s->stop) {
			s->busy = 0;
			pthread_cond_broadcast(&s->idle);
			pthread_cond_wait(&s->more, &s->mu);
		}
		if (!s->used)
			break;
		/* whole records only, as many as the batch holds */
		while (s->used) {
			unsigned char h[2];
			size_t len;
			ring_copy_out(s, s->head, h, 2);
			len = (size_t)h[0] << 8 | h[1];
			if (n + len > sizeof(batch))
				break;
			ring_copy_out(s, (s->head + 2) % LOG_SINK_RING, batch + n, len);
			s->head = (s->head + 2 + len) % LOG_SINK_RING;
			s->used -= 2 + len;
			n += len;
		}
		s->busy = 1;
		pthread_mutex_unlock(&s->mu);
		lost = sink_deliver(s, batch, n);
		pthread_mutex_lock(&s->mu);
		if (lost) {
			drop_add(s, lost);
			continue;
		}
		if (!(note = s->unreported))
			continue;
		/* the sink takes lines again: say what it missed */
		s->unreported = 0;
		pthread_mutex_unlock(&s->mu);
		log_warn("%s log: %llu line%s dropped (the log could not keep up; counted in "
			 "splicer_log_lines_dropped_total)", s->name, (unsigned long long)note,
			 note == 1 ? "" : "s");
		pthread_mutex_lock(&s->mu);
	}
	s->busy = 0;
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int log_sink_start(struct log_sink *s, int fd)
{
	int r;

	if (__atomic_load_n(&s->started, __ATOMIC_ACQUIRE))
		return 0;
	s->fd = fd;
	s->stop = 0;
	if ((r = pthread_create(&s->thread, NULL, sink_main, s)))
		return -r;
	__atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
	return 0;
}

int log_sink_put(struct log_sink *s, const char *line, size_t n)
{
	unsigned char h[2];
	size_t tail;

	if (n > LOG_LINE_MAX)
		n = LOG_LINE_MAX;
	if (!__atomic_load_n(&s->started, __ATOMIC_ACQUIRE)) {
		char copy[LOG_LINE_MAX];
		memcpy(copy, line, n);
		return sink_deliver(s, copy, n) ? -1 : 0;
	}
	pthread_mutex_lock(&s->mu);
	if (s->used + 2 + n > LOG_SINK_RING) {
		drop_add(s, 1);
		pthread_mutex_unlock(&s->mu);
		return -1;
	}
	h[0] = (unsigned char)(n >> 8);
	h[1] = (unsigned char)n;
	tail = (s->head + s->used) % LOG_SINK_RING;
	ring_copy_in(s, tail, h, 2);
	ring_copy_in(s, (tail + 2) % LOG_SINK_RING, line, n);
	s->used += 2 + n;
	pthread_cond_signal(&s->more);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int log_sink_stop(struct log_sink *s, int timeout_ms)
{
	struct timespec dl;
	int drained;

	if (!__atomic_load_n(&s->started, __ATOMIC_ACQUIRE))
		return 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->more);
	while ((s->used || s->busy) && pthread_cond_timedwait(&s->idle, &s->mu, &dl) == 0)
		;
	drained = !s->used && !s->busy;
	pthread_mutex_unlock(&s->mu);
	if (!drained)
		return -1; /* stuck in write(): left to the process's exit */
	pthread_join(s->thread, NULL);
	__atomic_store_n(&s->started, 0, __ATOMIC_RELEASE);
	return 0;
}

int log_async_start(void)
{
	return log_sink_start(&log_err_sink, STDERR_FILENO);
}

/* ---- lines ----------------------------------------------------------------- */

size_t log_timestamp(const struct timespec *ts, char *out, size_t len)
{
	struct tm tm;
	size_t n;
	int m;

	gmtime_r(&ts->tv_sec, &tm);
	n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	m = snprintf(out + n, len - n, ".%03ldZ", ts->tv_nsec / 1000000);
	return n + (m < 0 ? 0 : (size_t)m < len - n ? (size_t)m : len - n - 1);
}

/* Formats one line: prefix, then the message escaped (log.h). */
static size_t format_line(char *line, size_t len, enum log_level lvl, const char *fmt, va_list ap)
{
	char msg[1024];
	struct timespec ts;
	size_t n;
	int m;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = log_timestamp(&ts, line, len);
	n += (size_t)snprintf(line + n, len - n, " splicer[%d] %s: ", (int)getpid(), level_names[lvl]);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (m < 0)
		m = 0;
	n += log_escape(msg, (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1, line + n,
			len - n - 1, 0);
	line[n++] = '\n';
	return n;
}

void log_line(enum log_level lvl, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = format_line(line, sizeof(line), lvl, fmt, ap);
	va_end(ap);
	log_sink_put(&log_err_sink, line, n);
}

void die(const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = format_line(line, sizeof(line), LOG_ERR, fmt, ap);
	va_end(ap);
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to report it */
	}
	abort();
}
