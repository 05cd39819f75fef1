/* SPDX-License-Identifier: MIT */
/* proxy_proto: see proxy_proto.h. */
#define _GNU_SOURCE
#include "proxy_proto.h"
#include "proxy_tlv.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

static const uint8_t v2_sig[12] = { 0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
				    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A };

static int fail(char *why, size_t len, const char *msg)
{
	snprintf(why, len, "%s", msg);
	return -1;
}

/* A port: 1-5 digits, no leading zero (but "0"), at most 65535. */
static int parse_port(const char *s, uint16_t *out)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (!n || n > 5 || (n > 1 && s[0] == '0') || strspn(s, "0123456789") != n)
		return -1;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

static int parse_v1(const uint8_t *buf, size_t n, struct sockaddr_storage *src, socklen_t *srclen,
		    char *why, size_t whylen)
{
	char line[PROXY_V1_MAX + 1], *f[7], *save = NULL;
	const uint8_t *crlf = NULL;
	int nf = 0;

	for (size_t i = 0; i + 1 < n && i + 1 < PROXY_V1_MAX; i++)
		if (buf[i] == '\r' && buf[i + 1] == '\n') {
			crlf = buf + i;
			break;
		}
	if (!crlf) {
		for (size_t i = 0; i < n && i < PROXY_V1_MAX; i++)
			if (buf[i] == '\n' || buf[i] == '\0' || (buf[i] == '\r' && i + 1 < n))
				return fail(why, whylen, "v1 header: stray control character");
		return n >= PROXY_V1_MAX ? fail(why, whylen, "v1 header longer than 107 bytes") : 0;
	}
	for (const uint8_t *c = buf; c < crlf; c++)
		if (*c < 0x20 || *c > 0x7e) /* a NUL would cut the line short below */
			return fail(why, whylen, "v1 header: stray control character");
	memcpy(line, buf, (size_t)(crlf - buf));
	line[crlf - buf] = '\0';
	/* single spaces only: strtok would accept runs of them */
	if (strstr(line, "  ") || line[strlen(line) - 1] == ' ')
		return fail(why, whylen, "v1 header: fields must be separated by single spaces");
	for (char *t = strtok_r(line, " ", &save); t && nf < 7; t = strtok_r(NULL, " ", &save))
		f[nf++] = t;
	if (nf < 2 || strcmp(f[0], "PROXY"))
		return fail(why, whylen, "v1 header: does not start with 'PROXY '");
	if (!strcmp(f[1], "UNKNOWN")) {
		src->ss_family = AF_UNSPEC;
		*srclen = 0;
		return (int)(crlf - buf) + 2;
	}
	if (nf != 6)
		return fail(why, whylen, "v1 header: expected PROXY TCP4|TCP6 SRC DST SPORT DPORT");
	uint16_t sport, dport;
	if (parse_port(f[4], &sport) || parse_port(f[5], &dport))
		return fail(why, whylen, "v1 header: bad port");
	memset(src, 0, sizeof(*src));
	if (!strcmp(f[1], "TCP4")) {
		struct sockaddr_in *sin = (struct sockaddr_in *)src, dst;
		if (inet_pton(AF_INET, f[2], &sin->sin_addr) != 1 ||
		    inet_pton(AF_INET, f[3], &dst.sin_addr) != 1)
			return fail(why, whylen, "v1 header: bad IPv4 address");
		sin->sin_family = AF_INET;
		sin->sin_port = htons(sport);
		*srclen = sizeof(*sin);
	} else if (!strcmp(f[1], "TCP6")) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)src, dst;
		if (inet_pton(AF_INET6, f[2], &sin6->sin6_addr) != 1 ||
		    inet_pton(AF_INET6, f[3], &dst.sin6_addr) != 1)
			return fail(why, whylen, "v1 header: bad IPv6 address");
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(sport);
		*srclen = sizeof(*sin6);
	} else {
		return fail(why, whylen, "v1 header: protocol is not TCP4, TCP6 or UNKNOWN");
	}
	return (int)(crlf - buf) + 2;
}

/* The bytes of addresses a v2 family takes. */
static size_t addr_block(uint8_t fam)
{
	return fam == 1 ? 12 : fam == 2 ? 36 : fam == 3 ? 216 : 0;
}

static int parse_v2(const uint8_t *buf, size_t n, struct sockaddr_storage *src, socklen_t *srclen,
		    char *why, size_t whylen)
{
	size_t len, total;
	uint8_t cmd, fam, proto;

	if (n < 16)
		return 0;
	if ((buf[12] >> 4) != 2)
		return fail(why, whylen, "v2 header: version is not 2");
	cmd = buf[12] & 0x0f;
	fam = buf[13] >> 4;
	proto = buf[13] & 0x0f;
	len = (size_t)buf[14] << 8 | buf[15];
	total = 16 + len;
	if (cmd > 1)
		return fail(why, whylen, "v2 header: command is neither LOCAL nor PROXY");
	if (total > PROXY_V2_MAX)
		return fail(why, whylen, "v2 header longer than 2048 bytes");
	if (n < total)
		return 0;
	memset(src, 0, sizeof(*src));
	src->ss_family = AF_UNSPEC;
	*srclen = 0;
	/* LOCAL (health checks) or UNSPEC: keep the real address; TLVs are
	 * not read (the address block's size is unknown), as HAProxy */
	if (cmd == 0 || fam == 0)
		return (int)total;
	if (proto != 1)
		return fail(why, whylen, "v2 header: transport is not STREAM");
	if (fam == 1) {
		struct sockaddr_in *sin = (struct sockaddr_in *)src;
		if (len < addr_block(fam))
			return fail(why, whylen, "v2 header: too short for IPv4 addresses");
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, buf + 16, 4);
		memcpy(&sin->sin_port, buf + 24, 2);
		*srclen = sizeof(*sin);
	} else if (fam == 2) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)src;
		if (len < addr_block(fam))
			return fail(why, whylen, "v2 header: too short for IPv6 addresses");
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, buf + 16, 16);
		memcpy(&sin6->sin6_port, buf + 48, 2);
		*srclen = sizeof(*sin6);
	} else if (fam == 3) {
		struct sockaddr_un *sun = (struct sockaddr_un *)src;
		size_t plen;
		if (len < addr_block(fam))
			return fail(why, whylen, "v2 header: too short for Unix addresses");
		sun->sun_family = AF_UNIX;
		memcpy(sun->sun_path, buf + 16, 108);
		plen = sun->sun_path[0] ? strnlen(sun->sun_path, 108) : 108;
		if (!sun->sun_path[0]) /* abstract: trailing NULs are padding */
			while (plen > 1 && !sun->sun_path[plen - 1])
				plen--;
		*srclen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
	} else {
		return fail(why, whylen, "v2 header: unknown address family");
	}
	if (proxy_tlv_check(buf, total, proxy_tlv_offset(buf, total), why, whylen))
		return -1;
	return (int)total;
}

size_t proxy_tlv_offset(const uint8_t *hdr, size_t len)
{
	size_t off;

	if (len < 16 || hdr[0] != v2_sig[0] || (hdr[12] & 0x0f) != 1 || !addr_block(hdr[13] >> 4))
		return len; /* v1, LOCAL, UNSPEC: no TLVs read */
	off = 16 + addr_block(hdr[13] >> 4);
	return off < len ? off : len;
}

int proxy_parse(const uint8_t *buf, size_t n, struct sockaddr_storage *src, socklen_t *srclen,
		char *why, size_t whylen)
{
	if (!n)
		return 0;
	if (buf[0] == 'P') {
		if (memcmp(buf, "PROXY ", n < 6 ? n : 6))
			return fail(why, whylen, "no PROXY header (wrong signature)");
		return n < 6 ? 0 : parse_v1(buf, n, src, srclen, why, whylen);
	}
	if (memcmp(buf, v2_sig, n < 12 ? n : 12))
		return fail(why, whylen, "no PROXY header (wrong signature)");
	return n < 12 ? 0 : parse_v2(buf, n, src, srclen, why, whylen);
}

static int is_inet(int fam)
{
	return fam == AF_INET || fam == AF_INET6;
}

static void map_v4(const struct sockaddr_in *in, struct sockaddr_in6 *out)
{
	memset(out, 0, sizeof(*out));
	out->sin6_family = AF_INET6;
	out->sin6_port = in->sin_port;
	out->sin6_addr.s6_addr[10] = 0xff;
	out->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&out->sin6_addr.s6_addr[12], &in->sin_addr, 4);
}

static void unmap_v4(const struct sockaddr_in6 *in6, struct sockaddr_in *out)
{
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = in6->sin6_port;
	memcpy(&out->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
}

/* A header names one family for both addresses, but the client's address
 * (from an accepted PROXY header) and the listener's may differ: an IPv4
 * client announced by a front proxy arrives on an IPv6 listener, or on a
 * Unix one. The client's address is what a backend wants, so it is never
 * dropped: as HAProxy does, a v4-mapped address is unmapped, else the IPv4
 * side is mapped into IPv6 (::ffff:a.b.c.d); a destination of no common
 * family (a Unix listener for an IP client, or the reverse) is replaced by
 * the client family's unspecified address with port 0, or an empty path.
 * The pair used is written to *s and *d. */
static int common_family(const struct sockaddr **src, socklen_t *srclen,
			 const struct sockaddr **dst, socklen_t *dstlen,
			 struct sockaddr_storage *s, struct sockaddr_storage *d)
{
	int sf = (*src)->sa_family, df = (*dst)->sa_family;

	if (sf == df)
		return sf;
	if (is_inet(sf) && is_inet(df)) {
		const struct sockaddr_in6 *v6 = (const void *)(sf == AF_INET6 ? *src : *dst);
		const struct sockaddr_in *v4 = (const void *)(sf == AF_INET ? *src : *dst);
		struct sockaddr_storage *six = sf == AF_INET6 ? s : d, *four = sf == AF_INET ? s : d;

		if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
			unmap_v4(v6, (struct sockaddr_in *)six);
			memcpy(four, v4, sizeof(*v4));
			sf = AF_INET;
		} else {
			map_v4(v4, (struct sockaddr_in6 *)four);
			memcpy(six, v6, sizeof(*v6));
			sf = AF_INET6;
		}
	} else if (is_inet(sf) || sf == AF_UNIX) {
		memcpy(s, *src, *srclen < sizeof(*s) ? *srclen : sizeof(*s));
		memset(d, 0, sizeof(*d));
		d->ss_family = (sa_family_t)sf;
		*dstlen = offsetof(struct sockaddr_un, sun_path); /* read for AF_UNIX only */
	} else {
		return AF_UNSPEC;
	}
	*src = (const struct sockaddr *)s;
	*dst = (const struct sockaddr *)d;
	return sf;
}

size_t proxy_build(int version, const struct sockaddr *src, socklen_t srclen,
		   const struct sockaddr *dst, socklen_t dstlen, uint8_t *out)
{
	struct sockaddr_storage src_common, dst_common;
	int fam = common_family(&src, &srclen, &dst, &dstlen, &src_common, &dst_common);

	if (version == 1) {
		char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
		if (fam == AF_INET) {
			const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
			inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
			inet_ntop(AF_INET, &d->sin_addr, b, sizeof(b));
			return (size_t)snprintf((char *)out, PROXY_V1_MAX + 1, "PROXY TCP4 %s %s %u %u\r\n",
						a, b, ntohs(s->sin_port), ntohs(d->sin_port));
		}
		if (fam == AF_INET6) {
			const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
			inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
			inet_ntop(AF_INET6, &d->sin6_addr, b, sizeof(b));
			return (size_t)snprintf((char *)out, PROXY_V1_MAX + 1, "PROXY TCP6 %s %s %u %u\r\n",
						a, b, ntohs(s->sin6_port), ntohs(d->sin6_port));
		}
		memcpy(out, "PROXY UNKNOWN\r\n", 15);
		return 15;
	}
	memcpy(out, v2_sig, 12);
	out[12] = 0x21; /* version 2, PROXY */
	size_t len = 0;
	if (fam == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
		out[13] = 0x11;
		memcpy(out + 16, &s->sin_addr, 4);
		memcpy(out + 20, &d->sin_addr, 4);
		memcpy(out + 24, &s->sin_port, 2);
		memcpy(out + 26, &d->sin_port, 2);
		len = 12;
	} else if (fam == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
		out[13] = 0x21;
		memcpy(out + 16, &s->sin6_addr, 16);
		memcpy(out + 32, &d->sin6_addr, 16);
		memcpy(out + 48, &s->sin6_port, 2);
		memcpy(out + 50, &d->sin6_port, 2);
		len = 36;
	} else if (fam == AF_UNIX) {
		size_t off = offsetof(struct sockaddr_un, sun_path);
		out[13] = 0x31;
		memset(out + 16, 0, 216);
		if (srclen > off)
			memcpy(out + 16, ((const struct sockaddr_un *)src)->sun_path, srclen - off);
		if (dstlen > off)
			memcpy(out + 16 + 108, ((const struct sockaddr_un *)dst)->sun_path, dstlen - off);
		len = 216;
	} else {
		out[12] = 0x20; /* LOCAL: no addresses */
		out[13] = 0x00;
	}
	out[14] = (uint8_t)(len >> 8);
	out[15] = (uint8_t)len;
	return 16 + len;
}
