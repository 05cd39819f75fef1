/* SPDX-License-Identifier: MIT */
/* Unit tests for src/proto/proxy_tlv.c: the TLVs of a PROXY v2 header, as
 * built (appended fields, the CRC32C seal) and as parsed by proxy_parse
 * (each rule of proxy_tlv.h's strict walk), byte by byte. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "proxy_proto.h"
#include "proxy_tlv.h"

static size_t v4_header(uint8_t *out)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(51514) };
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons(443) };

	inet_pton(AF_INET, "192.0.2.7", &a.sin_addr);
	inet_pton(AF_INET, "198.51.100.1", &b.sin_addr);
	return proxy_build(2, (struct sockaddr *)&a, sizeof(a), (struct sockaddr *)&b, sizeof(b), out);
}

static int parse(const uint8_t *buf, size_t n, char *why)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;

	return proxy_parse(buf, n, &ss, &len, why, 128);
}

Test(unit_proxy_tlv, crc32c_known_answer)
{
	/* RFC 3720 B.4 and the common check value */
	cr_assert_eq(proxy_crc32c(0, (const uint8_t *)"123456789", 9), 0xe3069283);
	uint8_t zeros[32] = { 0 };
	cr_assert_eq(proxy_crc32c(0, zeros, 32), 0x8a9136aa);
	/* continued in pieces: the same */
	cr_assert_eq(proxy_crc32c(proxy_crc32c(0, (const uint8_t *)"1234", 4),
				  (const uint8_t *)"56789", 5), 0xe3069283);
}

Test(unit_proxy_tlv, fields_are_appended_byte_by_byte_and_parse_back)
{
	uint8_t h[PROXY_HDR_MAX];
	char why[128] = "";
	size_t n = v4_header(h);

	cr_assert_eq(n, 28);
	n = proxy_tlv_add(h, n, sizeof(h), PP2_TYPE_AUTHORITY, "a.example.com", 13);
	n = proxy_tlv_add(h, n, sizeof(h), PP2_TYPE_ALPN, "h2", 2);
	n = proxy_tlv_add(h, n, sizeof(h), 0xe1, "", 0);
	cr_assert_eq(n, 28 + 16 + 5 + 3);
	/* length field: the addresses and the fields */
	cr_assert_eq(h[14] << 8 | h[15], 12 + 16 + 5 + 3);
	static const uint8_t want[] = { 0x02, 0x00, 0x0d, 'a', '.', 'e', 'x', 'a', 'm', 'p', 'l',
					'e', '.', 'c', 'o', 'm', 0x01, 0x00, 0x02, 'h', '2',
					0xe1, 0x00, 0x00 };
	cr_assert_arr_eq(h + 28, want, sizeof(want));
	cr_assert_eq(parse(h, n, why), (int)n, "%s", why);
	cr_assert_eq(proxy_tlv_offset(h, n), 28);
	size_t off = 0, vlen;
	const uint8_t *val;
	uint8_t type;
	cr_assert(proxy_tlv_next(h + 28, n - 28, &off, &type, &val, &vlen));
	cr_assert(type == PP2_TYPE_AUTHORITY && vlen == 13 && !memcmp(val, "a.example.com", 13));
	cr_assert(proxy_tlv_next(h + 28, n - 28, &off, &type, &val, &vlen));
	cr_assert(type == PP2_TYPE_ALPN && vlen == 2);
	cr_assert(proxy_tlv_next(h + 28, n - 28, &off, &type, &val, &vlen));
	cr_assert(type == 0xe1 && vlen == 0);
	cr_assert_not(proxy_tlv_next(h + 28, n - 28, &off, &type, &val, &vlen));
	/* every prefix is a beginning, never an error */
	for (size_t k = 0; k < n; k++)
		cr_assert_eq(parse(h, k, why), 0, "prefix %zu: %s", k, why);
	/* a field that does not fit is not added */
	cr_assert_eq(proxy_tlv_add(h, n, n + 4, 0xe2, "abcd", 4), n);
}

Test(unit_proxy_tlv, crc32c_seal_verifies_and_a_flipped_bit_is_refused)
{
	uint8_t h[PROXY_HDR_MAX];
	char why[128] = "";
	size_t n = v4_header(h);

	n = proxy_tlv_add(h, n, sizeof(h), PP2_TYPE_UNIQUE_ID, "0123456789abcdef", 16);
	n = proxy_tlv_seal(h, n, sizeof(h));
	cr_assert_eq(n, 28 + 19 + 7);
	cr_assert_eq(h[n - 7], PP2_TYPE_CRC32C);
	cr_assert_eq(parse(h, n, why), (int)n, "%s", why);
	for (size_t k = 0; k < n; k++) {
		h[k] ^= 0x10;
		int r = parse(h, n, why);
		h[k] ^= 0x10;
		/* the signature, version, family and length say their own (a
		 * family of 0, UNSPEC, has its TLVs unread) */
		if (k == n - 7) /* the CRC32C's type: no checksum then, as the spec has it */
			cr_assert(r == (int)n);
		else if (k >= 16)
			/* a TLV's head says "overruns", any other byte the checksum */
			cr_assert(r == -1 && (strstr(why, "CRC32C") || (k >= 28 && strstr(why, "TLV"))),
				  "byte %zu flipped: %d %s", k, r, why);
		else
			cr_assert(r <= 0 || k == 13, "byte %zu flipped but accepted", k);
	}
}

Test(unit_proxy_tlv, malformed_blocks_are_refused)
{
	uint8_t h[PROXY_HDR_MAX], big[300];
	char why[128] = "";
	size_t n0 = v4_header(h), n;

	memset(big, 'x', sizeof(big));
	/* a field whose length overruns the header */
	n = proxy_tlv_add(h, n0, sizeof(h), 0xe0, "abcd", 4);
	h[n - 5] = 9;
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "overruns"), "%s", why);
	/* two bytes after the last field */
	h[14] = 0, h[15] = 12;
	n = proxy_tlv_add(h, n0, sizeof(h), 0xe0, "abcd", 4);
	h[n] = 0xe1, h[n + 1] = 0;
	h[15] += 2;
	cr_assert_eq(parse(h, n + 2, why), -1);
	cr_assert(strstr(why, "do not make a TLV"), "%s", why);
	h[14] = 0, h[15] = 12;
	/* authority over 255, unique_id over 128 */
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_AUTHORITY, big, 256);
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "AUTHORITY"), "%s", why);
	h[14] = 0, h[15] = 12;
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_AUTHORITY, big, 255);
	cr_assert_eq(parse(h, n, why), (int)n, "%s", why);
	h[14] = 0, h[15] = 12;
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_UNIQUE_ID, big, 129);
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "UNIQUE_ID"), "%s", why);
	h[14] = 0, h[15] = 12;
	/* a CRC32C of 3 bytes; two of them */
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_CRC32C, "abc", 3);
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "not 4 bytes"), "%s", why);
	h[14] = 0, h[15] = 12;
	n = proxy_tlv_seal(h, n0, sizeof(h));
	n = proxy_tlv_seal(h, n, sizeof(h));
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "two CRC32C"), "%s", why);
	h[14] = 0, h[15] = 12;
	/* SSL: its 5 fixed bytes, then sub-fields that fill it */
	static const uint8_t ssl_ok[] = { 0x01, 0, 0, 0, 0, 0x21, 0, 3, 'T', 'L', 'S' };
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_SSL, ssl_ok, sizeof(ssl_ok));
	cr_assert_eq(parse(h, n, why), (int)n, "%s", why);
	h[14] = 0, h[15] = 12;
	static const uint8_t ssl_bad[] = { 0x01, 0, 0, 0, 0, 0x21, 0, 9, 'T', 'L', 'S' };
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_SSL, ssl_bad, sizeof(ssl_bad));
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "SSL"), "%s", why);
	h[14] = 0, h[15] = 12;
	n = proxy_tlv_add(h, n0, sizeof(h), PP2_TYPE_SSL, ssl_ok, 4);
	cr_assert_eq(parse(h, n, why), -1);
	cr_assert(strstr(why, "5 fixed bytes"), "%s", why);
}

Test(unit_proxy_tlv, local_and_v1_headers_have_no_tlvs_read)
{
	uint8_t h[PROXY_HDR_MAX];
	char why[128] = "";
	size_t n = v4_header(h);

	/* LOCAL: what follows the addresses is not read, as HAProxy */
	n = proxy_tlv_add(h, n, sizeof(h), 0xe0, "abcd", 4);
	h[n - 5] = 9; /* would overrun */
	h[12] = 0x20;
	cr_assert_eq(parse(h, n, why), (int)n, "%s", why);
	cr_assert_eq(proxy_tlv_offset(h, n), n);
	cr_assert_eq(proxy_tlv_offset((const uint8_t *)"PROXY UNKNOWN\r\n", 15), 15);
}

Test(unit_proxy_tlv, type_names_and_numbers)
{
	char b[8];

	cr_assert_eq(proxy_tlv_type("authority"), PP2_TYPE_AUTHORITY);
	cr_assert_eq(proxy_tlv_type("alpn"), PP2_TYPE_ALPN);
	cr_assert_eq(proxy_tlv_type("unique_id"), PP2_TYPE_UNIQUE_ID);
	cr_assert_eq(proxy_tlv_type("0xe0"), 0xe0);
	cr_assert_eq(proxy_tlv_type("32"), 0x20);
	cr_assert_eq(proxy_tlv_type("256"), -1);
	cr_assert_eq(proxy_tlv_type("0x"), -1);
	cr_assert_eq(proxy_tlv_type("bogus"), -1);
	cr_assert_str_eq(proxy_tlv_name(0xea, b), "0xea");
	cr_assert_str_eq(proxy_tlv_name(PP2_TYPE_SSL, b), "ssl");
}
