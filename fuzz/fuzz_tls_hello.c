/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: the ClientHello reader (src/proto/tls_hello.c) and the
 * SNI lookup (src/proto/sni_match.c). Checked on every input:
 *  - the answer is one of the five, and a DONE hello ends within the input
 *    and within max, with a valid lower-cased host name and a well-formed
 *    ALPN list;
 *  - fed in pieces (split points taken from the input) the incremental
 *    reader gives the one-shot answer: NEED_MORE on every prefix shorter
 *    than the hello, with a need that never exceeds the hello's length;
 *  - the SNI lookup returns a route of the table or -1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sni_match.h"
#include "tls_hello.h"

static void check_done(const struct tls_hello *h, size_t size, size_t max)
{
	if (h->consumed > size || h->consumed > max || h->consumed < 5 + 4 + 41)
		abort();
	if (h->has_sni) {
		if (h->sni_len != strlen(h->sni) || !tls_host_name_valid(h->sni, h->sni_len))
			abort();
		for (size_t i = 0; i < h->sni_len; i++)
			if (h->sni[i] >= 'A' && h->sni[i] <= 'Z')
				abort();
	} else if (h->sni_len || h->sni[0]) {
		abort();
	}
	size_t off = 0, kept = 0, len;
	const uint8_t *p;
	while (tls_hello_alpn_next(h, &off, &p, &len)) {
		if (!len || off > h->alpn_len)
			abort();
		kept++;
	}
	if (off != h->alpn_len || kept > h->alpn_count || (kept < h->alpn_count && !h->alpn_truncated))
		abort();
	if (!h->version || h->legacy_version >> 8 != 3)
		abort();
}

static void check_lookup(const struct tls_hello *h)
{
	static struct sni_table t;
	static int built;
	static const struct sni_rule r[] = {
		{ "a.example.com", 0, "a" }, { "*.example.com", 1, "b" }, { "*.b.example.com", 2, "c" },
		{ "frag.example.com", 3, "d" },
	};
	char err[128];

	if (!built && sni_table_build(&t, r, 4, err, sizeof err) == 0)
		built = 1;
	if (!built || !h->has_sni)
		return;
	int route = sni_lookup(&t, h->sni, h->sni_len);
	if (route < -1 || route > 3)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_hello one, inc;
	size_t max = TLS_HELLO_MAX_DEFAULT;

	/* a smaller max now and then, from the input's last byte */
	if (size && data[size - 1] < 16)
		max = 64 + (size_t)data[size - 1] * 128;
	tls_hello_init(&one);
	enum tls_hello_status st = tls_hello_parse(&one, data, size, max);
	if (st > TLS_HELLO_BAD)
		abort();
	if (st == TLS_HELLO_DONE) {
		check_done(&one, size, max);
		check_lookup(&one);
	}
	if (st == TLS_HELLO_NEED_MORE && one.need <= size)
		abort();

	/* the same bytes in pieces: prefixes at steps taken from the input */
	tls_hello_init(&inc);
	size_t k = 0, step = size ? 1 + data[0] % 97 : 1;
	enum tls_hello_status si = TLS_HELLO_NEED_MORE;
	while (k < size) {
		k = k + step < size ? k + step : size;
		si = tls_hello_parse(&inc, data, k, max);
		if (si == TLS_HELLO_NEED_MORE) {
			if (inc.need <= k)
				abort();
			if (st == TLS_HELLO_DONE && (k >= one.consumed || inc.need > one.consumed))
				abort();
		} else if (st == TLS_HELLO_DONE) {
			if (si != TLS_HELLO_DONE || k < one.consumed)
				abort();
		}
		step = step * 3 % 251 + 1;
	}
	if (size && si != st)
		abort();
	if (st == TLS_HELLO_DONE &&
	    (inc.consumed != one.consumed || strcmp(inc.sni, one.sni) || inc.alpn_len != one.alpn_len ||
	     memcmp(inc.alpn, one.alpn, one.alpn_len) || inc.version != one.version))
		abort();
	return 0;
}
