/* SPDX-License-Identifier: MIT */
/* proxy_tlv: see proxy_tlv.h. */
#define _GNU_SOURCE
#include "proxy_tlv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *why, size_t len, const char *msg)
{
	snprintf(why, len, "%s", msg);
	return -1;
}

bool proxy_tlv_next(const uint8_t *tlv, size_t len, size_t *off, uint8_t *type,
		    const uint8_t **val, size_t *vlen)
{
	size_t o = *off, l;

	if (o + PP2_TLV_HEAD > len)
		return false;
	l = (size_t)tlv[o + 1] << 8 | tlv[o + 2];
	if (l > len - o - PP2_TLV_HEAD)
		return false;
	*type = tlv[o];
	*val = tlv + o + PP2_TLV_HEAD;
	*vlen = l;
	*off = o + PP2_TLV_HEAD + l;
	return true;
}

/* The walk of a block: every field inside it, none left over. Returns the
 * number of fields, or -1. */
static int walk(const uint8_t *tlv, size_t len)
{
	size_t off = 0, vlen;
	const uint8_t *val;
	uint8_t type;
	int n = 0;

	while (proxy_tlv_next(tlv, len, &off, &type, &val, &vlen))
		n++;
	return off == len ? n : -1;
}

/* The spec's 2.2.5: PP2_TYPE_SSL holds client (1 byte), verify (4 bytes),
 * then sub-fields of the same form. */
static int check_ssl(const uint8_t *val, size_t vlen, char *why, size_t whylen)
{
	if (vlen < 5)
		return fail(why, whylen, "v2 header: SSL TLV shorter than its 5 fixed bytes");
	if (walk(val + 5, vlen - 5) < 0)
		return fail(why, whylen, "v2 header: a field inside the SSL TLV overruns it");
	return 0;
}

int proxy_tlv_check(const uint8_t *hdr, size_t hdrlen, size_t off, char *why, size_t whylen)
{
	const uint8_t *tlv = hdr + off, *val, *crc_at = NULL;
	size_t len = hdrlen - off, at = 0, vlen;
	uint8_t type;

	if (off > hdrlen)
		return fail(why, whylen, "v2 header: TLVs start past its end");
	while (proxy_tlv_next(tlv, len, &at, &type, &val, &vlen)) {
		switch (type) {
		case PP2_TYPE_CRC32C:
			if (vlen != 4)
				return fail(why, whylen, "v2 header: CRC32C TLV is not 4 bytes");
			if (crc_at)
				return fail(why, whylen, "v2 header: two CRC32C TLVs");
			crc_at = val;
			break;
		case PP2_TYPE_AUTHORITY:
			if (vlen > PP2_AUTHORITY_MAX)
				return fail(why, whylen, "v2 header: AUTHORITY TLV longer than 255 bytes");
			break;
		case PP2_TYPE_UNIQUE_ID:
			if (vlen > PP2_UNIQUE_ID_MAX)
				return fail(why, whylen, "v2 header: UNIQUE_ID TLV longer than 128 bytes");
			break;
		case PP2_TYPE_SSL:
			if (check_ssl(val, vlen, why, whylen))
				return -1;
			break;
		}
	}
	if (at != len)
		return fail(why, whylen, len - at < PP2_TLV_HEAD
			    ? "v2 header: bytes after the last TLV do not make a TLV"
			    : "v2 header: a TLV overruns the header");
	if (crc_at) {
		/* the checksum of the header with the field's own value as zeros */
		static const uint8_t zero[4];
		size_t k = (size_t)(crc_at - hdr);
		uint32_t want = (uint32_t)crc_at[0] << 24 | (uint32_t)crc_at[1] << 16 |
				(uint32_t)crc_at[2] << 8 | crc_at[3];
		uint32_t crc = proxy_crc32c(0, hdr, k);
		crc = proxy_crc32c(crc, zero, 4);
		crc = proxy_crc32c(crc, hdr + k + 4, hdrlen - k - 4);
		if (crc != want)
			return fail(why, whylen, "v2 header: CRC32C does not match");
	}
	return 0;
}

size_t proxy_tlv_add(uint8_t *out, size_t n, size_t cap, uint8_t type, const void *val,
		     size_t vlen)
{
	size_t len = (size_t)out[14] << 8 | out[15];

	if (n + PP2_TLV_HEAD + vlen > cap || len + PP2_TLV_HEAD + vlen > 0xffff || vlen > 0xffff)
		return n;
	out[n] = type;
	out[n + 1] = (uint8_t)(vlen >> 8);
	out[n + 2] = (uint8_t)vlen;
	if (vlen)
		memcpy(out + n + PP2_TLV_HEAD, val, vlen);
	len += PP2_TLV_HEAD + vlen;
	out[14] = (uint8_t)(len >> 8);
	out[15] = (uint8_t)len;
	return n + PP2_TLV_HEAD + vlen;
}

/* Reflected Castagnoli polynomial, a nibble at a time: 16 words of table,
 * and the header is at most a few KB once per session. */
uint32_t proxy_crc32c(uint32_t crc, const uint8_t *buf, size_t n)
{
	static const uint32_t t[16] = {
		0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3,
		0x61c69362, 0x7198540d, 0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9,
		0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75,
	};

	crc = ~crc;
	for (size_t i = 0; i < n; i++) {
		crc ^= buf[i];
		crc = (crc >> 4) ^ t[crc & 15];
		crc = (crc >> 4) ^ t[crc & 15];
	}
	return ~crc;
}

size_t proxy_tlv_seal(uint8_t *out, size_t n, size_t cap)
{
	static const uint8_t zero[4];
	size_t m = proxy_tlv_add(out, n, cap, PP2_TYPE_CRC32C, zero, 4);
	uint32_t crc;

	if (m == n)
		return n;
	crc = proxy_crc32c(0, out, m);
	out[m - 4] = (uint8_t)(crc >> 24);
	out[m - 3] = (uint8_t)(crc >> 16);
	out[m - 2] = (uint8_t)(crc >> 8);
	out[m - 1] = (uint8_t)crc;
	return m;
}

static const struct {
	uint8_t type;
	const char *name;
} names[] = {
	{ PP2_TYPE_ALPN, "alpn" },         { PP2_TYPE_AUTHORITY, "authority" },
	{ PP2_TYPE_CRC32C, "crc32c" },     { PP2_TYPE_NOOP, "noop" },
	{ PP2_TYPE_UNIQUE_ID, "unique_id" }, { PP2_TYPE_SSL, "ssl" },
	{ PP2_TYPE_NETNS, "netns" },
};

const char *proxy_tlv_name(uint8_t type, char buf[8])
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].type == type)
			return names[i].name;
	snprintf(buf, 8, "0x%02x", type);
	return buf;
}

int proxy_tlv_type(const char *word)
{
	char *end;
	unsigned long v;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(word, names[i].name))
			return names[i].type;
	if (*word < '0' || *word > '9')
		return -1;
	errno = 0;
	v = strtoul(word, &end, 0);
	return *end || errno || v > 255 ? -1 : (int)v;
}
