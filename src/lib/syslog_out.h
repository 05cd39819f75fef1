/* SPDX-License-Identifier: MIT */
/* syslog_out: the access log's lines as RFC 5424 syslog messages, one
 * datagram each, to a syslog server over UDP (RFC 5426) or to a local
 * daemon's Unix datagram socket:
 *   log = syslog:udp://HOST[:PORT]   (port 514 when left out; [v6]:port)
 *   log = syslog:unix:PATH           (/dev/log, rsyslog's or syslog-ng's
 *                                     socket; unix:@NAME: the abstract one)
 * A message:
 *   <PRI>1 2026-12-05T21:52:03.123Z HOST splicer PID access - MSG
 * PRI is facility * 8 + 6 (informational); the timestamp is the line's
 * (UTC, milliseconds), HOST gethostname()'s, MSG the line as log_format
 * writes it, without its own timestamp in the kv format (the header has
 * it) and without a trailing newline. (Plain `log = syslog` is syslog(3):
 * the local daemon through the C library, its own format; unchanged.)
 *
 * Never a wait for the receiver: the socket is non-blocking. A receiver
 * that stops reading (its queue full: EAGAIN) is given one short wait
 * (SYSLOG_STALL_WAIT_MS) for the first line that does not fit; after that
 * every line is dropped at once, with one failing send() and no wait,
 * until a send gets through again, so a receiver that never reads costs
 * one system call per line and nothing more. A Unix receiver that went
 * away (restarted: ECONNREFUSED, its socket file gone) is connected to
 * again, at most once per SYSLOG_RECONNECT_MS, lines meanwhile dropped.
 * The caller counts the drops (access_log.c: the sink's dropped lines). */
#ifndef SPLICER_SYSLOG_OUT_H
#define SPLICER_SYSLOG_OUT_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "addr.h"

#define SYSLOG_UDP_PORT      514
#define SYSLOG_STALL_WAIT_MS 20
#define SYSLOG_RECONNECT_MS  1000
#define SYSLOG_HEADER_MAX    340 /* "<191>1 " + timestamp + host (255) + the rest */

/* The facilities log_facility names, in the setting's order (config.c);
 * their RFC 5424 codes are syslog_facility_code(). */
extern const char *const syslog_facility_names[];
unsigned syslog_facility_code(unsigned index);

struct syslog_target {
	int udp;           /* 1: UDP, 0: Unix datagram */
	struct addr addr;  /* where to */
};

/* Whether where names a remote syslog target (it starts with "syslog:").
 * Plain "syslog" is not one: it is syslog(3). */
int syslog_target_is(const char *where);

/* Parses "syslog:udp://HOST[:PORT]" or "syslog:unix:PATH" (HOST a name is
 * resolved now, as a backend's). Returns 0, or -1 with a sentence in err. */
int syslog_target_parse(const char *where, struct syslog_target *t, char *err, size_t errlen);

struct syslog_out {
	int fd;                 /* -1: not connected (reconnect due at retry_ms) */
	struct syslog_target t;
	int stalled;            /* the receiver's queue was full: no wait until a send works */
	uint64_t retry_ms;      /* CLOCK_MONOTONIC: the next reconnect attempt */
	unsigned pri;           /* facility * 8 + severity */
	char host[256];         /* HOSTNAME, printable ASCII */
	int pid;
};

/* Opens the socket and connects it (before the sandbox: the system calls
 * stay allowed for reconnects). A Unix socket with nobody behind it is an
 * error, as a FIFO without a reader is: start the daemon first. Returns 0,
 * or -1 with the reason in err. */
int syslog_out_open(struct syslog_out *o, const struct syslog_target *t, unsigned facility_code,
		    char *err, size_t errlen);

/* The header of a message stamped ts, into buf (NUL-terminated). Returns its
 * length (at most SYSLOG_HEADER_MAX). */
size_t syslog_out_header(const struct syslog_out *o, const struct timespec *ts, char *buf,
			 size_t len);

/* Sends one whole message (header and line). Returns 0, or -1 when it was
 * dropped. Only the access log's writer thread calls it. */
int syslog_out_send(struct syslog_out *o, const char *msg, size_t n);

void syslog_out_close(struct syslog_out *o);

#endif
