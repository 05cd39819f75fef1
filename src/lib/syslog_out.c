/* SPDX-License-Identifier: MIT */
/* syslog_out: see syslog_out.h. */
#define _GNU_SOURCE
#include "syslog_out.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

#define SEVERITY_INFO 6

/* RFC 5424 6.2.1, without kern (0: the kernel's own) */
const char *const syslog_facility_names[] = { "user",   "mail",   "daemon", "auth",   "syslog",
					      "lpr",    "news",   "uucp",   "cron",   "authpriv",
					      "ftp",    "local0", "local1", "local2", "local3",
					      "local4", "local5", "local6", "local7", NULL };
static const unsigned char facility_codes[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9, 10,
						11, 16, 17, 18, 19, 20, 21, 22, 23 };

unsigned syslog_facility_code(unsigned index)
{
	return index < sizeof(facility_codes) ? facility_codes[index] : 3;
}

int syslog_target_is(const char *where)
{
	return !strncmp(where, "syslog:", 7);
}

int syslog_target_parse(const char *where, struct syslog_target *t, char *err, size_t errlen)
{
	const char *rest;
	char host[sizeof(t->addr.text) + 8], why[200];

	memset(t, 0, sizeof(*t));
	if (!strncmp(where, "syslog:udp://", 13)) {
		rest = where + 13;
		/* "HOST" and "[v6]" take the syslog port; addr_parse wants one */
		const char *close = strrchr(rest, ']'), *colon = strrchr(rest, ':');
		int has_port = colon && (!close || colon > close);
		if (rest[0] != '[' && colon && strchr(rest, ':') != colon) {
			snprintf(err, errlen, "%s: an IPv6 address goes in brackets: "
				 "syslog:udp://[ADDR]:PORT", where);
			return -1;
		}
		if ((size_t)snprintf(host, sizeof(host), has_port ? "%s" : "%s:%d", rest,
				     SYSLOG_UDP_PORT) >= sizeof(host)) {
			snprintf(err, errlen, "%s: address too long", where);
			return -1;
		}
		if (!rest[0] || (has_port && colon == rest)) {
			snprintf(err, errlen, "%s: no host (syslog:udp://HOST[:PORT])", where);
			return -1;
		}
		if (addr_parse(host, ADDR_CONNECT, &t->addr, why, sizeof(why))) {
			snprintf(err, errlen, "%s: %s", where, why);
			return -1;
		}
		t->udp = 1;
		return 0;
	}
	if (!strncmp(where, "syslog:unix:", 12)) {
		rest = where + 12;
		if (rest[0] != '/' && rest[0] != '@') {
			snprintf(err, errlen, "%s: a socket path starts with / (or @ for the abstract "
				 "namespace): syslog:unix:/dev/log", where);
			return -1;
		}
		snprintf(host, sizeof(host), "unix:%.*s", (int)sizeof(t->addr.text), rest);
		if (addr_parse(host, ADDR_CONNECT, &t->addr, why, sizeof(why))) {
			snprintf(err, errlen, "%s: %s", where, why);
			return -1;
		}
		return 0;
	}
	snprintf(err, errlen, "%s: unknown syslog target (syslog, syslog:udp://HOST[:PORT] or "
		 "syslog:unix:PATH)", where);
	return -1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* socket() and connect() for o->t; the error in errno. */
static int connect_to(struct syslog_out *o)
{
	int fd = socket(o->t.addr.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&o->t.addr.ss, o->t.addr.len)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int syslog_out_open(struct syslog_out *o, const struct syslog_target *t, unsigned facility_code,
		    char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->t = *t;
	o->pri = facility_code * 8 + SEVERITY_INFO;
	o->pid = (int)getpid();
	if (gethostname(o->host, sizeof(o->host) - 1) || !o->host[0])
		snprintf(o->host, sizeof(o->host), "-");
	/* HOSTNAME is 1*255PRINTUSASCII: nothing else may split the header */
	for (char *c = o->host; *c; c++)
		if (*c < 33 || *c > 126)
			*c = '_';
	if ((o->fd = connect_to(o)) >= 0)
		return 0;
	if (errno == EPROTOTYPE)
		snprintf(err, errlen, "access log syslog %s: a stream socket; splicer sends datagrams "
			 "(rsyslog's imuxsock, syslog-ng's unix-dgram(), journald's /dev/log)",
			 t->addr.text);
	else if (!t->udp && (errno == ENOENT || errno == ECONNREFUSED))
		snprintf(err, errlen, "access log syslog %s: %s (no syslog daemon there: start it "
			 "first)", t->addr.text, strerror(errno));
	else
		snprintf(err, errlen, "access log syslog %s: %s", t->addr.text, strerror(errno));
	return -1;
}

size_t syslog_out_header(const struct syslog_out *o, const struct timespec *ts, char *buf,
			 size_t len)
{
	size_t n;
	int m;

	m = snprintf(buf, len, "<%u>1 ", o->pri);
	n = m < 0 ? 0 : (size_t)m < len ? (size_t)m : len - 1;
	n += log_timestamp(ts, buf + n, len - n);
	m = snprintf(buf + n, len - n, " %s splicer %d access - ", o->host, o->pid);
	n += m < 0 ? 0 : (size_t)m < len - n ? (size_t)m : len - n - 1;
	return n;
}

/* The receiver went away (a Unix one restarted, or its file is gone): a
 * new socket, at most once per SYSLOG_RECONNECT_MS. Returns 0 when
 * connected. */
static int reconnect(struct syslog_out *o)
{
	uint64_t now = now_ms();

	if (o->fd >= 0) {
		close(o->fd);
		o->fd = -1;
	}
	if (now < o->retry_ms)
		return -1;
	o->retry_ms = now + SYSLOG_RECONNECT_MS;
	o->stalled = 0;
	return (o->fd = connect_to(o)) >= 0 ? 0 : -1;
}

int syslog_out_send(struct syslog_out *o, const char *msg, size_t n)
{
	int waited = 0, again = 0;

	if (o->fd < 0 && reconnect(o))
		return -1;
	for (;;) {
		if (send(o->fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
			o->stalled = 0;
			return 0;
		}
		switch (errno) {
		case EINTR:
			continue;
		case EAGAIN:
		case ENOBUFS: {
			/* full: one short wait per stall, never one per line */
			struct pollfd p = { .fd = o->fd, .events = POLLOUT };
			if (o->stalled || waited) {
				o->stalled = 1;
				return -1;
			}
			poll(&p, 1, SYSLOG_STALL_WAIT_MS);
			waited = 1;
			continue;
		}
		case ECONNREFUSED:
			/* UDP: an earlier datagram met "port unreachable"; the
			 * error is reported (and cleared) by this send, which
			 * sent nothing: once more. Unix: the receiver closed */
			if (!again++ && (o->t.udp || !reconnect(o)))
				continue;
			return -1;
		case ENOTCONN:
		case ECONNRESET:
		case EPIPE:
			if (!o->t.udp && !again++ && !reconnect(o))
				continue;
			return -1;
		default:
			return -1; /* EMSGSIZE, a route gone (ENETUNREACH): this line */
		}
	}
}

void syslog_out_close(struct syslog_out *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
}
