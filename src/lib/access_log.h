/* SPDX-License-Identifier: MIT */
/* access_log: one line per session, for operators and log pipelines:
 *   2026-12-03T08:30:00.123Z route=web client=192.0.2.7:51514 backend=10.0.0.1:80
 *   up=1043 down=88211 duration_ms=35 reason=done listener=0.0.0.0:8080
 *   connect_ms=1 error=- ended_by=client event=close session=100000000000002a
 * (one line; key=value, values without spaces). The fields, always all of
 * them and in this order (new fields are only ever appended):
 *   time         UTC, milliseconds (not with syslog, which stamps its own)
 *   route        the route's name
 *   client       the client's address (after a PROXY header: the one it names)
 *   backend      the last backend tried, "-" when none was
 *   up, down     bytes written to the backend, to the client
 *   duration_ms  from accept to close
 *   reason       why it closed: done, client-reset, backend-reset, idle-timeout,
 *                no-backend, all-backends-down, ... (session.c)
 *   listener     the listen address the client came in on, as bound
 *   connect_ms   from the first connect attempt to the backend connection
 *                being up (retries on other backends included); "-" when no
 *                backend connection came up
 *   error        the errno name of the error that ended the session
 *                (ECONNRESET, ETIMEDOUT, ECONNREFUSED for a backend that
 *                refused every attempt, ...); "-" when none did
 *   ended_by     which side ended the session first: client (its FIN, reset
 *                or error, or a bad PROXY header), backend (its FIN, reset
 *                or error, or every connect refused), timeout (idle,
 *                half-close, connect or PROXY header deadline) or proxy
 *                (this process: drain deadline, every backend marked down,
 *                a connection loop, out of memory)
 *   event        which line of the session this is: close (the last, the one
 *                every session has), connect (log_connect = yes: its backend
 *                connection is up; reason=connect) or interim (every
 *                log_interval while it is open; reason=interim). A connect
 *                or interim line has the fields of the session so far:
 *                up, down and duration_ms until now, error=- and ended_by=-.
 *                Readers that know only the fields before it tell them by
 *                their reason, which no close line has
 *   session      the session's id (hex; the same in each of its lines and in
 *                the -v log's "session ID" lines)
 *   authority    the server name the client asked for: its ClientHello's SNI
 *                (listeners that read it: sni routes, proxy_protocol_tlvs
 *                authority or alpn, with the access log on), else the
 *                AUTHORITY TLV of the PROXY v2 header it sent; "-" when none
 *   alpn         the first ALPN protocol its ClientHello offers, else the
 *                ALPN TLV of its PROXY v2 header; "-"
 *   unique_id    the UNIQUE_ID TLV the backend gets from splicer
 *                (proxy_protocol_tlvs unique_id: 32 hex digits), else the
 *                one of the client's PROXY v2 header; "-"
 *   pp_tlvs      the types of the TLVs in the client's PROXY v2 header, in
 *                order, comma-separated (alpn, authority, unique_id, ssl,
 *                netns, crc32c, noop, or 0xHH); "-" when none
 *   engine       the engines that moved each direction's bytes, up/down,
 *                "+" between two (auto: copy+splice once it switched);
 *                none for a direction that moved nothing
 *   engine_reason why each direction is on its engine, up/down:
 *                configured (its route's engine), not-a-stream (auto,
 *                still on copy: request/response or too short), stream
 *                (auto: reads of half the buffer in a row), one-way (auto:
 *                1 MiB one way with nothing coming back), fallback (no
 *                pipe, or a socket that cannot splice) or kernel (sockmap)
 *
 * log_format = json writes the same fields as one JSON object per line,
 * in the same order, with the same names: numbers as JSON numbers (up,
 * down, duration_ms, connect_ms), session as its hex string (a JSON number
 * is exact only to 2^53), and null where the key=value line says "-"
 * (backend, connect_ms, error, ended_by of a connect or interim line,
 * authority, alpn, unique_id, pp_tlvs). "time" is there in every target,
 * syslog too. Strings are escaped as json_text.h says: the line is
 * printable ASCII and valid JSON whatever bytes came from the network.
 * A line longer than LOG_LINE_MAX is cut in the key=value format; in JSON
 * a long string is shortened instead, so the line stays one whole object.
 *
 * Targets (log =): FILE, "-" (stdout), "syslog" (syslog(3): the local
 * daemon, its own format), "syslog:udp://HOST[:PORT]" and
 * "syslog:unix:PATH" (RFC 5424 datagrams: syslog_out.h), "off".
 * Lines go through a bounded
 * queue to a writer thread of their own (log.h: struct log_sink), so a disk,
 * pipe, FIFO or syslog that stalls drops lines (counted in
 * splicer_log_lines_dropped_total{log="access"}) and never stalls a worker.
 * The descriptor is O_APPEND, so a line is never split; SIGUSR1 reopens the
 * file in place (dup2 over the same descriptor number), so logrotate can
 * move it without a lost or split line.
 *
 * Escaping: every value is written with each byte outside printable ASCII
 * (0x20-0x7e), and each space, backslash and double quote, as \xHH (two
 * lowercase hex digits). Client addresses come from the network (a PROXY v2
 * AF_UNIX source path may hold any byte, newlines included): escaped, a
 * forged "\n route=x" stays inside its own field of its own line. */
#ifndef SPLICER_ACCESS_LOG_H
#define SPLICER_ACCESS_LOG_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum access_log_format { ACCESS_LOG_KV, ACCESS_LOG_JSON };

/* log_format's names, in enum access_log_format's order (config.c). */
extern const char *const access_log_formats[];

/* Whether where is a valid `log =` value (a syslog: target parses, its host
 * resolves); 0, or -1 with a sentence in why. A file's own checks are the
 * caller's (privs_check_append). */
int access_log_target_valid(const char *where, char *why, size_t len);

/* Whether where names a file (not off, stdout or a syslog target). */
int access_log_is_file(const char *where);

/* Starts logging to where ("FILE", "-" for stdout, "syslog", "syslog:..."
 * targets; "off" or "" logs nothing), lines in format (enum
 * access_log_format), syslog messages with facility (an index of
 * syslog_facility_names, syslog_out.h). A FIFO without a reader is an error, not a wait: the open
 * never blocks. With `user =` the caller is the user already (or has its
 * file-system identity, privs.h): the file is opened as the user would,
 * never by root, and is never chowned. Returns 0, or -1 with the reason in err. */
int access_log_open(const char *where, unsigned format, unsigned facility, char *err,
		    size_t errlen);

/* Reopens the file (SIGUSR1). Returns 1 when a file was reopened, 0 when
 * there is nothing to reopen (stdout, syslog, off), or -1 with the reason
 * in err (the old file stays in use). */
int access_log_reopen(char *err, size_t errlen);

/* 1 when a line would go somewhere. */
int access_log_enabled(void);

/* One session, as the fields above. */
struct access_entry {
	const char *route, *client, *backend, *reason, *listener, *ended_by;
	uint64_t up, down, duration_ms;
	int64_t connect_ms; /* -1: no backend connection came up */
	int err;            /* 0: none */
	const char *event;  /* "close", "connect", "interim" */
	uint64_t id;        /* the session's */
	/* PROXY v2 TLVs (session_pp.h); NULL: "-" */
	const char *authority, *alpn, *unique_id, *pp_tlvs;
	/* engines used and why, "up/down" (session.h: dir_why_name); NULL: "-" */
	const char *engine, *engine_reason;
};

void access_log_session(const struct access_entry *e);

/* Lines dropped because the sink could not keep up. */
uint64_t access_log_dropped(void);

/* Writes what is queued (waiting at most timeout_ms) and closes. */
void access_log_close(void);

#endif
