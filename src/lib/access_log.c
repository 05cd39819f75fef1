/* SPDX-License-Identifier: MIT */
/* access_log: see access_log.h. */
#define _GNU_SOURCE
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
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
#include "json_text.h"
#include "log.h"
#include "syslog_out.h"

#define CLOSE_WAIT_MS 1000 /* at exit, for queued lines to reach the sink */

/* AL_SYSLOG: syslog(3); AL_REMOTE: RFC 5424 datagrams (syslog_out.h) */
enum { AL_OFF, AL_FD, AL_SYSLOG, AL_REMOTE };

const char *const access_log_formats[] = { "kv", "json", NULL };

static int mode = AL_OFF;
static unsigned format = ACCESS_LOG_KV;
static int fd = -1;          /* AL_FD: its number never changes while running */
static int owned;            /* fd is a file we opened (not stdout) */
static char path[256];
static struct syslog_out remote; /* AL_REMOTE: only the writer thread sends */

static int to_syslog(const char *line, size_t n)
{
	(void)n;
	syslog(SYSLOG_INFO, "%s", line);
	return 0;
}

static int to_remote(const char *line, size_t n)
{
	return syslog_out_send(&remote, line, n);
}

static struct log_sink sink = { .name = "access", .line_fn = to_syslog, .mu = PTHREAD_MUTEX_INITIALIZER,
				.more = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER,
				.fd = -1 };

int access_log_is_file(const char *where)
{
	return where[0] && strcmp(where, "off") && strcmp(where, "-") && strcmp(where, "syslog") &&
	       !syslog_target_is(where);
}

int access_log_target_valid(const char *where, char *why, size_t len)
{
	struct syslog_target t;

	return syslog_target_is(where) ? syslog_target_parse(where, &t, why, len) : 0;
}

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
	int r;

	sink.line_fn = mode == AL_REMOTE ? to_remote : to_syslog;
	r = log_sink_start(&sink, mode == AL_FD ? fd : -1);

	if (r) {
		snprintf(err, errlen, "access log: writer thread: %s", strerror(-r));
		access_log_close();
		return -1;
	}
	return 0;
}

int access_log_open(const char *where, unsigned fmt, unsigned facility, char *err, size_t errlen)
{
	struct syslog_target t;

	access_log_close();
	format = fmt;
	if (!where[0] || !strcmp(where, "off"))
		return 0;
	if (!strcmp(where, "syslog")) {
		openlog("splicer", LOG_PID, (int)syslog_facility_code(facility) << 3);
		mode = AL_SYSLOG;
		return start(err, errlen);
	}
	if (syslog_target_is(where)) {
		if (syslog_target_parse(where, &t, err, errlen) ||
		    syslog_out_open(&remote, &t, syslog_facility_code(facility), err, errlen))
			return -1;
		mode = AL_REMOTE;
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

/* The key=value line (access_log.h) into line[0..room); ts NULL: without
 * the leading time (syslog stamps its own). Returns its length. */
static size_t format_kv(char *line, size_t room, const struct access_entry *e,
			const struct timespec *ts)
{
	char ms[24];
	size_t n = ts ? log_timestamp(ts, line, room) : 0, start = n;

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
	if (n < room)
		n += field(line + n, room - n, "engine", e->engine ? e->engine : "-");
	if (n < room)
		n += field(line + n, room - n, "engine_reason",
			   e->engine_reason ? e->engine_reason : "-");
	if (n > room)
		n = room;
	/* the leading space of the first field, when there is no timestamp */
	if (!ts && n > start) {
		memmove(line, line + 1, n - 1);
		n--;
	}
	return n;
}

/* ---- log_format = json ------------------------------------------------------ */

/* Room kept free while a string is written: every key, number and closing
 * token after it fits in this (the whole object without its strings is
 * about 340 bytes), so a long string is shortened and the object always
 * closes. */
#define JSON_TAIL 480

struct jw {
	char *b;
	size_t n, cap; /* b[0..cap): the line's room */
	int over;      /* something did not fit (cannot happen: JSON_TAIL) */
};

static void jw_raw(struct jw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jw_raw(struct jw *w, const char *fmt, ...)
{
	va_list ap;
	int m;

	va_start(ap, fmt);
	m = vsnprintf(w->b + w->n, w->cap - w->n, fmt, ap);
	va_end(ap);
	if (m < 0 || (size_t)m >= w->cap - w->n)
		w->over = 1;
	else
		w->n += (size_t)m;
}

/* The room a string may take now. */
static size_t jw_room(const struct jw *w)
{
	return w->cap - w->n > JSON_TAIL ? w->cap - w->n - JSON_TAIL : 1;
}

static void jw_str(struct jw *w, const char *key, const char *s, size_t len)
{
	jw_raw(w, ",\"%s\":\"", key);
	if (w->over)
		return;
	w->n += json_escape(s, len, w->b + w->n, jw_room(w));
	jw_raw(w, "\"");
}

/* A string, or null for the key=value line's "-" (nothing there). */
static void jw_str_or_null(struct jw *w, const char *key, const char *s)
{
	if (!s || !strcmp(s, "-"))
		jw_raw(w, ",\"%s\":null", key);
	else
		jw_str(w, key, s, strlen(s));
}

static size_t format_json(char *line, size_t room, const struct access_entry *e,
			  const struct timespec *ts)
{
	struct jw w = { .b = line, .cap = room };
	char t[32];

	log_timestamp(ts, t, sizeof(t));
	jw_raw(&w, "{\"time\":\"%s\"", t);
	jw_str_or_null(&w, "route", e->route);
	jw_str(&w, "client", e->client, strlen(e->client));
	jw_str_or_null(&w, "backend", e->backend);
	jw_raw(&w, ",\"up\":%llu,\"down\":%llu,\"duration_ms\":%llu", (unsigned long long)e->up,
	       (unsigned long long)e->down, (unsigned long long)e->duration_ms);
	jw_str(&w, "reason", e->reason, strlen(e->reason));
	jw_str_or_null(&w, "listener", e->listener);
	if (e->connect_ms < 0)
		jw_raw(&w, ",\"connect_ms\":null");
	else
		jw_raw(&w, ",\"connect_ms\":%lld", (long long)e->connect_ms);
	jw_str_or_null(&w, "error", e->err ? log_errno_name(e->err) : NULL);
	jw_str_or_null(&w, "ended_by", e->ended_by);
	jw_str_or_null(&w, "event", e->event ? e->event : "close");
	jw_raw(&w, ",\"session\":\"%llx\"", (unsigned long long)e->id);
	jw_str_or_null(&w, "authority", e->authority);
	jw_str_or_null(&w, "alpn", e->alpn);
	jw_str_or_null(&w, "unique_id", e->unique_id);
	jw_str_or_null(&w, "pp_tlvs", e->pp_tlvs);
	jw_str_or_null(&w, "engine", e->engine);
	jw_str_or_null(&w, "engine_reason", e->engine_reason);
	jw_raw(&w, "}");
	if (w.over) /* never (JSON_TAIL); still one whole object if it were */
		w.n = (size_t)snprintf(line, room, "{\"time\":\"%s\",\"session\":\"%llx\","
				       "\"truncated\":true}", t, (unsigned long long)e->id);
	return w.n;
}

void access_log_session(const struct access_entry *e)
{
	char line[LOG_LINE_MAX];
	const size_t room = sizeof(line) - 1; /* the newline */
	struct timespec ts;
	size_t n = 0;

	if (mode == AL_OFF)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (mode == AL_REMOTE)
		n = syslog_out_header(&remote, &ts, line, room);
	if (format == ACCESS_LOG_JSON)
		n += format_json(line + n, room - n, e, &ts);
	else
		n += format_kv(line + n, room - n, e, mode == AL_FD ? &ts : NULL);
	line[n++] = '\n';
	log_sink_put(&sink, line, n);
}

uint64_t access_log_dropped(void)
{
	return log_sink_dropped(&sink);
}

void access_log_close(void)
{
	int stopped;

	if (mode == AL_OFF)
		return;
	/* A writer stuck in write() keeps its descriptor: closing it under
	 * the thread could send its lines into whatever reuses the number. */
	stopped = log_sink_stop(&sink, CLOSE_WAIT_MS) == 0;

	if (stopped && mode == AL_FD && owned)
		close(fd);
	if (mode == AL_SYSLOG)
		closelog();
	if (stopped && mode == AL_REMOTE)
		syslog_out_close(&remote);
	mode = AL_OFF;
	fd = -1;
	owned = 0;
}
