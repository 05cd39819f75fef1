/* SPDX-License-Identifier: MIT */
/* http_req: the request head parser of the stats endpoint, kept apart from
 * its sockets so it can be unit-tested and fuzzed. Strict: one request line
 * of exactly "METHOD SP /path SP HTTP/1.x", a method of 1-15 capital
 * letters, a path of 1-255 visible characters; headers are not read. */
#ifndef SPLICER_HTTP_REQ_H
#define SPLICER_HTTP_REQ_H
#include <stddef.h>

#define HTTP_REQ_MAX 4096 /* bytes of request head accepted */
#define HTTP_REQ_MORE 0   /* the head is not complete yet */
#define HTTP_REQ_OK   1   /* method and path filled (query string removed) */

/* Parses buf[0..n). Returns HTTP_REQ_MORE, HTTP_REQ_OK, or the HTTP status
 * to answer with: 400 (malformed, NUL bytes, not HTTP/1.x) or 431 (no end
 * of head within HTTP_REQ_MAX bytes). */
int http_req_parse(const char *buf, size_t n, char method[16], char path[256]);

#endif
