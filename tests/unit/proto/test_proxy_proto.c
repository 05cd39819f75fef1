/* SPDX-License-Identifier: MIT */
/* Unit tests for src/proto/proxy_proto.c: v1 and v2 round trips through the
 * builder and the strict parser, byte-at-a-time arrival, and each class of
 * malformed header. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>

#include "proxy_proto.h"

static int parse(const void *buf, size_t n, struct sockaddr_storage *ss, char *why)
{
	socklen_t len = 0;
	return proxy_parse(buf, n, ss, &len, why, 128);
}

static struct sockaddr_in in4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static struct sockaddr_in6 in6(const char *ip, int port)
{
	struct sockaddr_in6 s = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	inet_pton(AF_INET6, ip, &s.sin6_addr);
	return s;
}

Test(unit_proxy_proto, v1_and_v2_round_trip_every_family)
{
	struct sockaddr_in a = in4("192.0.2.7", 51514), b = in4("198.51.100.1", 443);
	struct sockaddr_in6 c = in6("2001:db8::7", 40000), d = in6("2001:db8::1", 8443);
	struct sockaddr_un u = { .sun_family = AF_UNIX, .sun_path = "/run/client.sock" };
	struct sockaddr_un v = { .sun_family = AF_UNIX, .sun_path = "/run/splicer.sock" };
	socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(u.sun_path) + 1);
	uint8_t hdr[PROXY_HDR_MAX];
	struct sockaddr_storage got;
	char why[128];
	size_t n;

	for (int ver = 1; ver <= 2; ver++) {
		n = proxy_build(ver, (void *)&a, sizeof(a), (void *)&b, sizeof(b), hdr);
		cr_assert_eq(parse(hdr, n, &got, why), (int)n, "v%d TCP4: %s", ver, why);
		cr_assert_eq(got.ss_family, AF_INET);
		cr_assert(!memcmp(&((struct sockaddr_in *)&got)->sin_addr, &a.sin_addr, 4));
		cr_assert_eq(((struct sockaddr_in *)&got)->sin_port, a.sin_port);
		n = proxy_build(ver, (void *)&c, sizeof(c), (void *)&d, sizeof(d), hdr);
		cr_assert_eq(parse(hdr, n, &got, why), (int)n, "v%d TCP6: %s", ver, why);
		cr_assert_eq(got.ss_family, AF_INET6);
		cr_assert(!memcmp(&((struct sockaddr_in6 *)&got)->sin6_addr, &c.sin6_addr, 16));
		cr_assert_eq(((struct sockaddr_in6 *)&got)->sin6_port, c.sin6_port);
	}
	n = proxy_build(1, (void *)&a, sizeof(a), (void *)&b, sizeof(b), hdr);
	cr_assert_eq(n, strlen("PROXY TCP4 192.0.2.7 198.51.100.1 51514 443\r\n"));
	cr_assert(!memcmp(hdr, "PROXY TCP4 192.0.2.7 198.51.100.1 51514 443\r\n", n));
	n = proxy_build(2, (void *)&u, ulen, (void *)&v, sizeof(v), hdr);
	cr_assert_eq(n, 16 + 216);
	cr_assert_eq(parse(hdr, n, &got, why), (int)n, "v2 UNIX: %s", why);
	cr_assert_eq(got.ss_family, AF_UNIX);
	cr_assert_str_eq(((struct sockaddr_un *)&got)->sun_path, "/run/client.sock");
	n = proxy_build(1, (void *)&u, ulen, (void *)&v, sizeof(v), hdr);
	cr_assert(!memcmp(hdr, "PROXY UNKNOWN\r\n", n), "v1 has no Unix family");
	cr_assert_eq(parse(hdr, n, &got, why), (int)n);
	cr_assert_eq(got.ss_family, AF_UNSPEC);
}

Test(unit_proxy_proto, byte_at_a_time_needs_more_until_complete)
{
	struct sockaddr_in a = in4("10.1.2.3", 1000), b = in4("10.3.2.1", 80);
	uint8_t hdr[PROXY_HDR_MAX + 8];
	struct sockaddr_storage got;
	char why[128];

	for (int ver = 1; ver <= 2; ver++) {
		size_t n = proxy_build(ver, (void *)&a, sizeof(a), (void *)&b, sizeof(b), hdr);
		memcpy(hdr + n, "GET /", 5); /* the stream behind the header is not consumed */
		for (size_t k = 0; k < n; k++)
			cr_assert_eq(parse(hdr, k, &got, why), 0, "v%d: %zu of %zu bytes: %s", ver, k, n, why);
		cr_assert_eq(parse(hdr, n + 5, &got, why), (int)n);
	}
}

Test(unit_proxy_proto, v2_local_keeps_the_connection_address)
{
	uint8_t hdr[16] = { 0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
			    0x20, 0x00, 0x00, 0x00 };
	struct sockaddr_storage got;
	char why[128];

	cr_assert_eq(parse(hdr, 16, &got, why), 16);
	cr_assert_eq(got.ss_family, AF_UNSPEC);
}

static void bad(const void *buf, size_t n, const char *frag)
{
	struct sockaddr_storage got;
	char why[128] = "";

	cr_assert_eq(parse(buf, n, &got, why), -1, "accepted a bad header (%s)", frag);
	cr_assert(strstr(why, frag), "reason '%s' lacks '%s'", why, frag);
}

Test(unit_proxy_proto, malformed_headers_are_rejected)
{
	char longline[200];
	uint8_t v2[PROXY_V2_MAX + 64] = { 0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A };

	bad("GET / HTTP/1.1\r\n", 16, "wrong signature");
	bad("PROXX TCP4", 10, "wrong signature");
	bad("\r\n\r\n\0\r\nQUIX", 12, "wrong signature");
	memset(longline, 'x', sizeof(longline));
	memcpy(longline, "PROXY TCP4 ", 11);
	bad(longline, sizeof(longline), "longer than 107");
	bad("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", 31, "control character");
	bad("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", 32, "protocol");
	bad("PROXY TCP4 1.2.3.999 5.6.7.8 1 2\r\n", 34, "IPv4");
	bad("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", 32, "IPv6");
	bad("PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", 36, "port");
	bad("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", 33, "port");
	bad("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", 33, "single spaces");
	bad("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", 30, "expected");
	v2[12] = 0x11; /* version 1 in a v2 header */
	bad(v2, 16, "version");
	v2[12] = 0x23; /* command 3 */
	bad(v2, 16, "command");
	v2[12] = 0x21;
	v2[13] = 0x11;
	v2[14] = 0x07; /* length 2032 + 16 = 2048: allowed */
	v2[15] = 0xf0;
	/* the addresses (12 bytes), then one NOOP TLV of 2017 bytes: padding */
	v2[28] = 0x04;
	v2[29] = 0x07;
	v2[30] = 0xe1;
	struct sockaddr_storage got;
	char why[128];
	cr_assert_eq(parse(v2, 2048, &got, why), 2048, "a 2048-byte v2 header with TLV padding: %s",
		     why);
	v2[15] = 0xf1; /* 2049 */
	bad(v2, 2049, "longer than 2048");
	memset(v2 + 28, 0, 3);
	v2[14] = 0;
	v2[15] = 4; /* IPv4 needs 12 */
	bad(v2, 20, "too short");
	v2[13] = 0x12; /* DGRAM */
	v2[15] = 12;
	bad(v2, 28, "STREAM");
}

/* Found by fuzz/fuzz_proxy_proto: NULs inside a v1 line were cut off by the
 * string parsing and the rest accepted. */
Test(unit_proxy_proto, v1_nul_inside_the_line_is_rejected)
{
	static const char hdr[] = "PROXY TCP6 2001:d::7 20::1 40001 844\0\0\0003\r\n";
	bad(hdr, sizeof(hdr) - 1, "control character");
}

/* Issue 12, defect 9: an IPv4 client announced to an IPv6 listener (or the
 * reverse, or to a Unix listener) went out as v1 UNKNOWN / v2 LOCAL, and the
 * backend lost the client's address. Both versions now keep it. */
Test(unit_proxy_proto, mixed_families_keep_the_client_address)
{
	struct sockaddr_in c4 = in4("192.0.2.7", 51514), l4 = in4("198.51.100.1", 443);
	struct sockaddr_in6 l6 = in6("2001:db8::1", 8443), c6 = in6("2001:db8::7", 40000);
	struct sockaddr_in6 lmapped = in6("::ffff:198.51.100.1", 443);
	struct sockaddr_un u = { .sun_family = AF_UNIX, .sun_path = "/run/splicer.sock" };
	uint8_t hdr[PROXY_HDR_MAX + 1];
	struct sockaddr_storage got;
	char why[128];
	size_t n;

	/* IPv4 client, IPv6 listener: the client becomes ::ffff:192.0.2.7 */
	n = proxy_build(1, (void *)&c4, sizeof(c4), (void *)&l6, sizeof(l6), hdr);
	hdr[n] = '\0';
	cr_assert_str_eq((char *)hdr, "PROXY TCP6 ::ffff:192.0.2.7 2001:db8::1 51514 8443\r\n");
	n = proxy_build(2, (void *)&c4, sizeof(c4), (void *)&l6, sizeof(l6), hdr);
	cr_assert_eq(n, 16 + 36);
	cr_assert_eq(hdr[12], 0x21, "v2 PROXY, not LOCAL");
	cr_assert_eq(parse(hdr, n, &got, why), (int)n, "%s", why);
	cr_assert_eq(got.ss_family, AF_INET6);
	struct sockaddr_in6 mapped = in6("::ffff:192.0.2.7", 0);
	cr_assert(!memcmp(&((struct sockaddr_in6 *)&got)->sin6_addr, &mapped.sin6_addr, 16));
	cr_assert_eq(((struct sockaddr_in6 *)&got)->sin6_port, c4.sin_port);

	/* a v4-mapped IPv6 listener address is unmapped instead: TCP4 */
	for (int ver = 1; ver <= 2; ver++) {
		n = proxy_build(ver, (void *)&c4, sizeof(c4), (void *)&lmapped, sizeof(lmapped), hdr);
		if (ver == 1) {
			hdr[n] = '\0';
			cr_assert_str_eq((char *)hdr, "PROXY TCP4 192.0.2.7 198.51.100.1 51514 443\r\n");
		}
		cr_assert_eq(parse(hdr, n, &got, why), (int)n, "v%d: %s", ver, why);
		cr_assert_eq(got.ss_family, AF_INET, "v%d", ver);
		cr_assert(!memcmp(&((struct sockaddr_in *)&got)->sin_addr, &c4.sin_addr, 4));
	}

	/* an IPv6 client on an IPv4 listener: the listener is mapped */
	n = proxy_build(1, (void *)&c6, sizeof(c6), (void *)&l4, sizeof(l4), hdr);
	hdr[n] = '\0';
	cr_assert_str_eq((char *)hdr, "PROXY TCP6 2001:db8::7 ::ffff:198.51.100.1 40000 443\r\n");

	/* an IP client on a Unix listener: the destination is unspecified */
	n = proxy_build(1, (void *)&c4, sizeof(c4), (void *)&u, sizeof(u), hdr);
	hdr[n] = '\0';
	cr_assert_str_eq((char *)hdr, "PROXY TCP4 192.0.2.7 0.0.0.0 51514 0\r\n");
	n = proxy_build(2, (void *)&c6, sizeof(c6), (void *)&u, sizeof(u), hdr);
	cr_assert_eq(parse(hdr, n, &got, why), (int)n, "%s", why);
	cr_assert_eq(got.ss_family, AF_INET6);
	cr_assert(!memcmp(&((struct sockaddr_in6 *)&got)->sin6_addr, &c6.sin6_addr, 16));

	/* a Unix client (from a v2 header) on a TCP listener: v2 keeps its path */
	socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(u.sun_path) + 1);
	n = proxy_build(2, (void *)&u, ulen, (void *)&l4, sizeof(l4), hdr);
	cr_assert_eq(parse(hdr, n, &got, why), (int)n, "%s", why);
	cr_assert_eq(got.ss_family, AF_UNIX);
	cr_assert_str_eq(((struct sockaddr_un *)&got)->sun_path, "/run/splicer.sock");
}
