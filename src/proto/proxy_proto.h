/* SPDX-License-Identifier: MIT */
/* proxy_proto: the PROXY protocol (HAProxy's spec, versions 1 and 2), which
 * passes the client's addresses to a backend ahead of the stream.
 *   v1: "PROXY TCP4 192.0.2.7 198.51.100.1 51514 443\r\n", at most 107 bytes
 *   v2: a 12-byte signature, version/command, family, length, addresses
 *       and TLVs (proxy_tlv.h: checked, and kept by the caller), at most
 *       2048 bytes here (the spec's 536 without TLVs; HAProxy accepts a
 *       buffer's worth)
 * The parser is strict: anything the spec does not allow is an error, so a
 * client cannot smuggle bytes or addresses past it. */
#ifndef SPLICER_PROXY_PROTO_H
#define SPLICER_PROXY_PROTO_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PROXY_V1_MAX 107
#define PROXY_V2_MAX 2048
#define PROXY_HDR_MAX PROXY_V2_MAX

/* Parses a header at the start of buf[0..n). Returns its length when
 * complete, with *src set to the client's address (ss_family AF_UNSPEC for
 * v1 UNKNOWN and v2 LOCAL/UNSPEC: keep the connection's own address); 0 when
 * the bytes so far are a valid beginning and more are needed; -1 when it is
 * malformed, with the reason in why. */
int proxy_parse(const uint8_t *buf, size_t n, struct sockaddr_storage *src, socklen_t *srclen,
		char *why, size_t whylen);

/* Writes a header for a connection from src to dst into out[PROXY_HDR_MAX].
 * Returns its length. Families that differ are brought to one without
 * losing src: IPv4 beside IPv6 becomes IPv6 with a v4-mapped address (or
 * IPv4, when the IPv6 side is itself v4-mapped), as HAProxy does; a dst of
 * another kind (an IP client on a Unix listener) is sent as the unspecified
 * address, port 0 (or an empty path). v1 has no Unix family ("UNKNOWN"),
 * and a src that is neither IP nor Unix gives v1 "UNKNOWN" / v2 LOCAL. */
/* Where the TLVs of a header that proxy_parse accepted begin: past a v2
 * PROXY header's addresses. Returns len (no TLVs) for v1 and for LOCAL,
 * whose TLVs are not read (as HAProxy). */
size_t proxy_tlv_offset(const uint8_t *hdr, size_t len);

size_t proxy_build(int version, const struct sockaddr *src, socklen_t srclen,
		   const struct sockaddr *dst, socklen_t dstlen, uint8_t *out);

#endif
