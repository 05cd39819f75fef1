/* SPDX-License-Identifier: MIT */
/* access_log: see access_log.h. */
#define _GNU_SOURCE
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* syslog.h and log.h both name LOG_ERR, LOG_INFO and LOG_DEBUG */
enum { SYSLOG_INFO = LOG_INFO };
#undef LOG_ERR
#undef LOG_INFO
#undef LOG_DEBUG
#include "log.h"

#define CLOSE_WAIT_MS 1000 /* at exit, for queued lines to reach the sink */

enum { AL_OFF, AL_FD, AL_SYSLOG };

static int mode = AL_OFF;
static int fd = -1;          /* AL_FD: its number never changes while running */
static int owned;            /* fd is a file we opened (not stdout) */
static char path[256];
static void to_syslog(const char *line)
{
	syslog(SYSLOG_INFO, "%s", line);
}

static struct log_sink sink = { .name = "access", .line_fn = to_syslog, .mu = PTHREAD_MUTEX_INITIALIZER,
				.more = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER,
				.fd = -1 };

/* O_NONBLOCK so a FIFO without a reader fails (ENXIO) instead of blocking
 * start-up; then blocking again: only the writer thread writes to it. */
static int open_file(char *err, size_t errlen)
{
	int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0640);

	if (f < 0) {
		if (errno == ENXIO)
			snprintf(err, errlen, "access log %s: a FIFO with no reader (start the reader "
				 "first)", path);
		else if (errno == EACCES)
			snprintf(err, errlen, "access log %s: %s as uid %u (the file must be writable "
				 "for that user, or its directory to create it)", path, strerror(errno),
				 (unsigned)geteuid());
		else
			snprintf(err, errlen, "access log %s: %s", path, strerror(errno));
		return -1;
	}
	fcntl(f, F_SETFL, O_WRONLY | O_APPEND);
	return f;
}

static int start(char *err, size_t errlen)
{
	int r = log_sink_start(&sink, mode == AL_SYSLOG ? -1 : fd);

	if (r) {
		snprintf(err, errlen, "access log: writer thread: %s", strerror(-r));
		access_log_close();
		return -1;
	}
	return 0;
}

int access_log_open(const char *where, char *err, size_t errlen)
{
	access_log_close();
	if (!where[0] || !strcmp(where, "off"))
		return 0;
	if (!strcmp(where, "syslog")) {
		openlog("splicer", LOG_PID, LOG_DAEMON);
		mode = AL_SYSLOG;
		return start(err, errlen);
	}
	if (!strcmp(where, "-")) {
		fd = STDOUT_FILENO;
		owned = 0;
		mode = AL_FD;
		return start(err, errlen);
	}
	snprintf(path, sizeof(path), "%s", where);
	if ((fd = open_file(err, errlen)) < 0)
		return -1;
	owned = 1;
	mode = AL_FD;
	return start(err, errlen);
}

int access_log_reopen(char *err, size_t errlen)
{
	int f;

	if (mode != AL_FD || !owned)
		return 0;
	if ((f = open_file(err, errlen)) < 0)
		return -1;
	/* The writer may be writing right now: dup2 swaps the file under the
	 * same number atomically, so a write goes wholly to the old or the new. */
	if (dup2(f, fd) < 0) {
		snprintf(err, errlen, "access log %s: dup2: %s", path, strerror(errno));
		close(f);
		return -1;
	}
	close(f);
	return 1;
}

int access_log_enabled(void)
{
	return mode != AL_OFF;
}

/* " key=value" with the value escaped (access_log.h). */
static size_t field(char *buf, size_t len, const char *key, const char *val)
{
	size_t n = (size_t)snprintf(buf, len, " %s=", key);

	if (n >= len)
		return len;
	return n + log_escape(val, strlen(val), buf + n, len - n, 1);
}

void access_log_session(const struct access_entry *e)
{
	char line[LOG_LINE_MAX], ms[24];
	const size_t room = sizeof(line) - 1; /* the newline */
	struct timespec ts;
	struct tm tm;
	size_t n = 0;

	if (mode == AL_OFF)
		return;
	if (mode == AL_FD) {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(line, room, "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, room - n, ".%03ldZ", ts.tv_nsec / 1000000);
	}
	n += field(line + n, room - n, "route", e->route);
	n += field(line + n, room - n, "client", e->client);
	n += field(line + n, room - n, "backend", e->backend);
	if (n < room)
		n += (size_t)snprintf(line + n, room - n, " up=%llu down=%llu duration_ms=%llu",
				      (unsigned long long)e->up, (unsigned long long)e->down,
				      (unsigned long long)e->duration_ms);
	if (n < room)
		n += field(line + n, room - n, "reason", e->reason);
	/* appended fields (access_log.h): readers of the first ones still parse */
	if (n < room)
		n += field(line + n, room - n, "listener", e->listener);
	if (e->connect_ms < 0)
		snprintf(ms, sizeof(ms), "-");
	else
		snprintf(ms, sizeof(ms), "%lld", (long long)e->connect_ms);
	if (n < room)
		n += field(line + n, room - n, "connect_ms", ms);
	if (n < room)
		n += field(line + n, room - n, "error", log_errno_name(e->err));
	if (n < room)
		n += field(line + n, room - n, "ended_by", e->ended_by);
	if (n < room)
		n += field(line + n, room - n, "event", e->event ? e->event : "close");
	if (n < room)
		n += (size_t)snprintf(line + n, room - n, " session=%llx", (unsigned long long)e->id);
	if (n < room)
		n += field(line + n, room - n, "authority", e->authority ? e->authority : "-");
	if (n < room)
		n += field(line + n, room - n, "alpn", e->alpn ? e->alpn : "-");
	if (n < room)
		n += field(line + n, room - n, "unique_id", e->unique_id ? e->unique_id : "-");
	if (n < room)
		n += field(line + n, room - n, "pp_tlvs", e->pp_tlvs ? e->pp_tlvs : "-");
	if (n > room)
		n = room;
	/* the leading space of the first field, when there is no timestamp */
	if (mode == AL_SYSLOG) {
		memmove(line, line + 1, n - 1);
		n--;
	}
	line[n++] = '\n';
	log_sink_put(&sink, line, n);
}

uint64_t access_log_dropped(void)
{
	return log_sink_dropped(&sink);
}

void access_log_close(void)
{
	if (mode == AL_OFF)
		return;
	/* A writer stuck in write() keeps its descriptor: closing it under
	 * the thread could send its lines into whatever reuses the number. */
	if (log_sink_stop(&sink, CLOSE_WAIT_MS) == 0 && mode == AL_FD && owned)
		close(fd);
	if (mode == AL_SYSLOG)
		closelog();
	mode = AL_OFF;
	fd = -1;
	owned = 0;
}
