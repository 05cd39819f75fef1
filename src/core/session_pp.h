/* SPDX-License-Identifier: MIT */
/* session_pp: a session's PROXY v2 TLVs (proxy_tlv.h). What it learned
 * for them (the client's server name and first ALPN protocol from its
 * ClientHello; the TLVs of the PROXY header the client sent), the fields
 * added to the header sent to its backend (the route's proxy_protocol_tlvs
 * and proxy_protocol_pass), and the access log's authority, alpn,
 * unique_id and pp_tlvs. Held in s->pp, allocated only when there is
 * something to hold. */
#ifndef SPLICER_SESSION_PP_H
#define SPLICER_SESSION_PP_H
#include <stddef.h>
#include <stdint.h>

#include "proxy_tlv.h"

struct session;
struct route;
struct tls_hello;

#define PP_UNIQUE_ID_LEN 32 /* hex digits: the process's nonce, then the session id */

struct session_pp {
	uint8_t authority_len;          /* 0: none */
	uint8_t alpn_len;
	char authority[PP2_AUTHORITY_MAX];
	char alpn[255];
	uint16_t rx_len;                /* the client's header's TLVs (0: none) */
	uint8_t *rx;
};

/* The client's PROXY header hdr[0..n) was accepted: keeps its TLVs.
 * Returns 0, or -1 out of memory. */
int session_pp_received(struct session *s, const uint8_t *hdr, size_t n);

/* Its ClientHello was read (DONE) and s->route chosen: keeps the server
 * name and the first ALPN protocol when its route r sends them or the access
 * log shows them. Returns 0, or -1 out of memory. */
int session_pp_hello(struct session *s, const struct route *r, const struct tls_hello *h);

/* Appends s's TLVs to the v2 header out[0..n) (proxy_build's): the
 * route's own (authority, alpn, unique_id: each when s has a value), then
 * the client's of the types the route passes, less those already sent,
 * then the CRC32C. A passed TLV that would take the header past cap is
 * left out (logged at -v). Returns the new length. */
size_t session_pp_build(struct session *s, uint8_t *out, size_t n, size_t cap);

/* s's unique id: PP_UNIQUE_ID_LEN hex digits and a NUL. The same for every
 * line of the session, and unique across processes: a nonce drawn at
 * start, then the session id. */
void session_pp_unique_id(const struct session *s, char out[PP_UNIQUE_ID_LEN + 1]);
/* Its two halves (nonce, id): what an upgrade hands over, so the session
 * keeps its id in the new process (session.h: uid). */
void session_pp_uid(const struct session *s, uint64_t out[2]);

/* The access log's values (access_log.h), "-" when none: authority and
 * alpn (the ClientHello's, else the client's PROXY header's), unique_id
 * (the one sent to the backend: splicer's, or the client's header's when
 * passed; else the client's header's) and pp_tlvs (the types of the
 * client's header's TLVs, comma-separated). Values are raw; the log
 * escapes them. */
struct session_pp_log {
	char authority[PP2_AUTHORITY_MAX + 1], alpn[256], unique_id[PP2_UNIQUE_ID_MAX + 1];
	char tlvs[256];
};
void session_pp_log(const struct session *s, struct session_pp_log *out);

void session_pp_free(struct session *s);

#endif
