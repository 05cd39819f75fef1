/* SPDX-License-Identifier: MIT */
/* proxy_tlv: the type-length-value fields after the addresses of a PROXY
 * v2 header (HAProxy's spec, 2.2): a type byte, a 16-bit big-endian length,
 * the value. What splicer sends (the client's server name, the first ALPN
 * protocol it offered, a per-session unique id), what it reads from a
 * client's header (checked here, logged and passed on by the session) and
 * the CRC32C that guards a header.
 *
 * The walk is strict, as HAProxy's: each field's 3-byte head and value lie
 * inside the TLV block, and the block ends exactly at the last field. A
 * CRC32C field holds 4 bytes, is there at most once, and must match the
 * header (computed with its own value as zeros); AUTHORITY holds at most
 * 255 bytes and UNIQUE_ID at most 128 (HAProxy refuses longer ones); SSL
 * holds its client byte, its 32-bit verify result and nested fields that
 * fill it exactly (they are not read further). Every other type, the
 * custom 0xE0-0xEF range included, is taken as opaque bytes. */
#ifndef SPLICER_PROXY_TLV_H
#define SPLICER_PROXY_TLV_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP2_TYPE_ALPN      0x01
#define PP2_TYPE_AUTHORITY 0x02
#define PP2_TYPE_CRC32C    0x03
#define PP2_TYPE_NOOP      0x04
#define PP2_TYPE_UNIQUE_ID 0x05
#define PP2_TYPE_SSL       0x20
#define PP2_TYPE_NETNS     0x30

#define PP2_AUTHORITY_MAX  255 /* HAProxy's PP2_AUTHORITY_MAX */
#define PP2_UNIQUE_ID_MAX  128 /* the spec: "up to 128 bytes" */
#define PP2_TLV_HEAD       3

/* The TLVs splicer sends itself (route_opts.pp_tlvs bits). */
#define PP_SEND_AUTHORITY  1
#define PP_SEND_ALPN       2
#define PP_SEND_UNIQUE_ID  4
#define PP_SEND_CRC32C     8

/* A set of TLV types (proxy_protocol_pass): bit t of bits[t / 64]. */
struct pp_types {
	uint64_t bits[4];
};

static inline bool pp_types_has(const struct pp_types *t, unsigned type)
{
	return (t->bits[(type & 0xff) >> 6] >> (type & 63)) & 1;
}

static inline void pp_types_add(struct pp_types *t, unsigned type)
{
	t->bits[(type & 0xff) >> 6] |= 1ULL << (type & 63);
}

/* Steps through tlv[0..len) (a block that proxy_tlv_check accepted):
 * start with *off = 0; each call sets *type, *val and *vlen to the next
 * field and returns true, false at the end (or at a field that overruns). */
bool proxy_tlv_next(const uint8_t *tlv, size_t len, size_t *off, uint8_t *type,
		    const uint8_t **val, size_t *vlen);

/* Checks the TLV block of a complete v2 header hdr[0..hdrlen), which starts
 * at hdr + off (the rules above). Returns 0, or -1 with the reason in why. */
int proxy_tlv_check(const uint8_t *hdr, size_t hdrlen, size_t off, char *why, size_t whylen);

/* Appends a field to the v2 header out[0..n) (proxy_build's output) and
 * raises its length field. Returns the new length, or n unchanged when the
 * header would grow past cap or a v2 header's 16-bit length. */
size_t proxy_tlv_add(uint8_t *out, size_t n, size_t cap, uint8_t type, const void *val,
		     size_t vlen);

/* CRC32C (Castagnoli) of buf[0..n), continuing from crc (0 to start). */
uint32_t proxy_crc32c(uint32_t crc, const uint8_t *buf, size_t n);

/* Sets the header's CRC32C field: appends one (4 bytes) and fills it with
 * the checksum of the whole header. Returns the new length, or n when it
 * does not fit in cap. */
size_t proxy_tlv_seal(uint8_t *out, size_t n, size_t cap);

/* The type's name for logs and config ("authority", "alpn", ...; "0xe3"
 * for the others, written into buf[8]). */
const char *proxy_tlv_name(uint8_t type, char buf[8]);

/* The type named by word: a name of proxy_tlv_name's, or a number (decimal
 * or 0x hex, 0-255). Returns it, or -1. */
int proxy_tlv_type(const char *word);

#endif
