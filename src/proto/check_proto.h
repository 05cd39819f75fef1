/* SPDX-License-Identifier: MIT */
/* check_proto: the bytes a health check sends (check_spec.h) and what it
 * makes of the answer. Pure functions over buffers, no I/O: the checker
 * (src/ctl/health/health.c) connects, sends check_request()'s bytes, reads
 * into one buffer and asks check_verdict() after each read.
 *
 *   redis          *1 $4 PING                   +PONG
 *   redis-primary  *2 $4 INFO $11 replication   a bulk reply holding role:master
 *                                               (role:slave, a replica, fails)
 *   pgsql          SSLRequest (8 bytes)         'S' or 'N' (one byte); 'E' fails
 *   mysql          (nothing: the server speaks) a packet of sequence 0 starting
 *                                               with protocol 10; an ERR packet
 *                                               (0xff: host blocked, too many
 *                                               connections) fails with its text
 *   smtp           (nothing)                    220 (4xx/5xx fail with the line)
 *   tls            a TLS 1.3/1.2 ClientHello    a handshake record holding a
 *                                               ServerHello; an alert fails
 *   http           METHOD PATH HTTP/1.0 + Host  a status line whose code is listed
 *   send/expect    the send bytes               the expect bytes, or a regex match */
#ifndef SPLICER_CHECK_PROTO_H
#define SPLICER_CHECK_PROTO_H
#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "check_spec.h"

#define CHECK_REQUEST_MAX 1024 /* the largest request (send:, an http request, a hello) */

/* The request for c into out (cap >= CHECK_REQUEST_MAX): host is the
 * backend's address for http's Host header ("127.0.0.1:8080"). Returns its
 * length (0: the check sends nothing, it reads the server's greeting). */
size_t check_request(const struct check_spec *c, const char *host, uint8_t *out, size_t cap);

enum check_result { CHECK_MORE = 0, CHECK_OK = 1, CHECK_BAD = -1 };

/* The verdict on the answer so far: buf[0..n) from its first byte; eof
 * once the peer closed (or CHECK_READ_MAX bytes came). re: c's compiled
 * regex for expect-regex, else NULL. CHECK_MORE needs more bytes (never
 * returned with eof); CHECK_BAD writes why, with the answer's start in it
 * ("status 503", "role:slave", "no '+PONG' in 12 bytes: -LOADING ..."). */
enum check_result check_verdict(const struct check_spec *c, const regex_t *re, const uint8_t *buf,
				size_t n, int eof, char *why, size_t len);

#endif
