/* SPDX-License-Identifier: MIT */
/* check_spec: what a route's `check =` says, parsed. The health checker
 * (src/ctl/health/health.c) runs it; `check` and start refuse a value this
 * parser refuses, with its sentence.
 *
 *   check = none | tcp                     no checks | a connect that succeeds
 *   check = redis                          PING, +PONG back
 *   check = redis-primary                  INFO replication, role:master in it
 *   check = pgsql                          an SSLRequest, S or N back (any server
 *                                          that speaks the protocol: no user needed)
 *   check = mysql                          the server's greeting (protocol 10)
 *   check = smtp                           a 220 greeting
 *   check = tls                            a ClientHello, a ServerHello back
 *   check = http[:[METHOD ]PATH[ STATUS]]  a request; STATUS a list of codes or
 *                                          classes (200,3xx), default 2xx:
 *                                          http:GET /health 2xx
 *   check = [send:"BYTES"] expect:"BYTES"  bytes sent after the connect (none: a
 *   check = [send:"BYTES"] expect-regex:"RE"   banner), and what the answer must
 *                                          hold (anywhere in its first
 *                                          CHECK_READ_MAX bytes) or match (a POSIX
 *                                          extended regex over those bytes)
 * Escapes inside "...": \r \n \t \0 \\ \" and \xHH (any byte).
 * The answer is read until it decides (a whole reply, a match, or a
 * mismatch that more bytes cannot mend), the peer closes, CHECK_READ_MAX
 * bytes came, or check_timeout. */
#ifndef SPLICER_CHECK_SPEC_H
#define SPLICER_CHECK_SPEC_H
#include <stddef.h>
#include <stdint.h>

enum check_kind {
	CHECK_NONE,
	CHECK_TCP,
	CHECK_SEND_EXPECT,
	CHECK_REDIS,
	CHECK_REDIS_PRIMARY,
	CHECK_PGSQL,
	CHECK_MYSQL,
	CHECK_SMTP,
	CHECK_TLS,
	CHECK_HTTP,
};

#define CHECK_SEND_MAX   512   /* bytes of send:"..." */
#define CHECK_EXPECT_MAX 256   /* bytes of expect:"..." or of a regex */
#define CHECK_READ_MAX   16384 /* bytes of an answer looked at */

struct check_spec {
	enum check_kind kind;
	uint8_t send[CHECK_SEND_MAX];     /* send/expect: sent once connected */
	size_t nsend;
	char expect[CHECK_EXPECT_MAX + 1]; /* the bytes to find, or the regex (NUL-ended) */
	size_t nexpect;
	uint8_t regex;                    /* expect is a regex */
	char method[16];                  /* http */
	char path[160];                   /* http: starts with '/' */
	uint8_t status[75];               /* http: bit per code 100..699 accepted */
};

/* The name of a kind as `check` writes it ("redis-primary"). */
const char *check_kind_name(enum check_kind k);

/* Parses a `check` value into *out. Returns 0, or -1 with a sentence in
 * why (without the key: "expects ...", "send: ..."). A regex is compiled
 * once to be checked, then freed: the prober compiles its own. */
int check_spec_parse(const char *text, struct check_spec *out, char *why, size_t len);

/* 1 when code is among an http check's accepted statuses. */
int check_status_ok(const struct check_spec *c, unsigned code);

#endif
