/* SPDX-License-Identifier: MIT */
/* Unit tests for src/proto/tls_hello.c: real ClientHellos captured from
 * OpenSSL, curl and Python (tests/data/tls/README), fed whole, at every
 * split point and re-cut into records; synthetic hellos for GREASE and for
 * a wrong length at each level. Run from the repository root (the data
 * files are read from tests/data/tls/). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_hello.h"

#define BIG 70000

static size_t load(const char *name, uint8_t *buf)
{
	char path[256];
	snprintf(path, sizeof path, "tests/data/tls/%s", name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s (run the tests from the repository root)", path);
	size_t n = fread(buf, 1, BIG, f);
	fclose(f);
	cr_assert_gt(n, 0, "%s is empty", path);
	return n;
}

static enum tls_hello_status parse(struct tls_hello *h, const uint8_t *b, size_t n, size_t max)
{
	tls_hello_init(h);
	return tls_hello_parse(h, b, n, max);
}

static void expect_bad(const uint8_t *b, size_t n, const char *what)
{
	struct tls_hello h;
	enum tls_hello_status st = parse(&h, b, n, TLS_HELLO_MAX_DEFAULT);
	cr_assert_eq(st, TLS_HELLO_BAD, "%s: %s, not bad", what, tls_hello_status_name(st));
}

/* ---- a builder for synthetic hellos ---- */

struct hb {
	uint8_t b[BIG];
	size_t n;
};

static size_t put(struct hb *x, const void *p, size_t len)
{
	size_t at = x->n;
	memcpy(x->b + x->n, p, len);
	x->n += len;
	return at;
}

static size_t put8(struct hb *x, unsigned v)
{
	uint8_t b = (uint8_t)v;
	return put(x, &b, 1);
}

static size_t put16(struct hb *x, unsigned v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	return put(x, b, 2);
}

static void set16(struct hb *x, size_t at, size_t v)
{
	x->b[at] = (uint8_t)(v >> 8);
	x->b[at + 1] = (uint8_t)v;
}

/* Where the length fields of a hello made by build() are. */
struct offs {
	size_t rec, hs, sid, cs, comp, exts, sni_ext, sni_list, sni_name, alpn_ext, alpn_list,
		alpn_proto, ver_ext, ver_list;
};

/* One record holding a ClientHello with SNI `name`, ALPN h2 + http/1.1,
 * supported_versions and the extra extensions (already in wire form). */
static void build(struct hb *x, struct offs *o, const char *name, const void *extra, size_t elen)
{
	static const uint8_t random[32] = { 1, 2, 3 };
	size_t at;

	x->n = 0;
	put(x, "\x16\x03\x01", 3);
	o->rec = put16(x, 0);
	put8(x, 1);
	o->hs = put(x, "\0\0\0", 3);
	put16(x, 0x0303);
	put(x, random, 32);
	o->sid = put8(x, 32);
	put(x, random, 32);
	o->cs = put16(x, 6);
	put(x, "\x13\x01\x13\x02\xc0\x2f", 6);
	o->comp = put8(x, 1);
	put8(x, 0);
	o->exts = put16(x, 0);
	/* server_name */
	put16(x, 0);
	o->sni_ext = put16(x, 2 + 3 + strlen(name));
	o->sni_list = put16(x, 3 + strlen(name));
	put8(x, 0);
	o->sni_name = put16(x, strlen(name));
	put(x, name, strlen(name));
	/* ALPN */
	put16(x, 16);
	o->alpn_ext = put16(x, 2 + 3 + 9);
	o->alpn_list = put16(x, 3 + 9);
	o->alpn_proto = put8(x, 2);
	put(x, "h2", 2);
	put8(x, 8);
	put(x, "http/1.1", 8);
	/* supported_versions */
	put16(x, 43);
	o->ver_ext = put16(x, 5);
	o->ver_list = put8(x, 4);
	put16(x, 0x0304);
	put16(x, 0x0303);
	put(x, extra, elen);
	at = x->n;
	set16(x, o->exts, at - o->exts - 2);
	set16(x, o->rec, at - 5);
	x->b[o->hs] = 0;
	set16(x, o->hs + 1, at - 9);
}

static void check_real(const char *file, const char *sni, unsigned nalpn, const char *alpn0,
		       uint16_t version)
{
	static uint8_t b[BIG];
	struct tls_hello h;
	size_t n = load(file, b);

	cr_assert_eq(parse(&h, b, n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s: %s", file,
		     h.why ? h.why : "");
	cr_assert_eq(h.consumed, n, "%s: the whole capture is the hello", file);
	cr_assert_eq(h.has_sni, sni != NULL, "%s", file);
	if (sni) {
		cr_assert_str_eq(h.sni, sni, "%s", file);
		cr_assert_eq(h.sni_len, strlen(sni));
	}
	cr_assert_eq(h.alpn_count, nalpn, "%s: %u protocols", file, h.alpn_count);
	if (alpn0)
		cr_assert(tls_hello_offers_alpn(&h, alpn0, strlen(alpn0)), "%s offers %s", file, alpn0);
	cr_assert_eq(h.version, version, "%s: version %04x", file, h.version);
	cr_assert_eq(h.record_version, 0x0301);
	cr_assert_eq(h.legacy_version, 0x0303);
}

Test(unit_tls_hello, real_hellos_from_openssl_curl_and_python)
{
	check_real("openssl_sni_alpn.bin", "a.example.com", 2, "h2", 0x0304);
	check_real("openssl_nosni.bin", NULL, 0, NULL, 0x0304);
	check_real("openssl_tls12.bin", "b.example.com", 0, NULL, 0x0303); /* sent B.Example.COM */
	check_real("curl.bin", "www.a.example.com", 2, "http/1.1", 0x0304);
	check_real("python_big.bin", "big.example.com", 24, "h2", 0x0304);
	check_real("openssl_records512.bin", "frag.example.com", 22, NULL, 0x0304);
}

static const char *const real[] = { "openssl_sni_alpn.bin", "openssl_nosni.bin", "openssl_tls12.bin",
				    "curl.bin", "python_big.bin", "openssl_records512.bin" };

/* Each prefix alone (a fresh reader) and the same reader fed one more byte
 * each time: NEED_MORE with a need past the prefix and within the hello,
 * then DONE with the one-shot answer; never BAD. */
Test(unit_tls_hello, every_split_point_needs_more_then_done)
{
	static uint8_t b[BIG];
	struct tls_hello whole, h, inc;

	for (size_t f = 0; f < sizeof real / sizeof real[0]; f++) {
		size_t n = load(real[f], b);
		cr_assert_eq(parse(&whole, b, n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE);
		tls_hello_init(&inc);
		for (size_t k = 0; k < n; k++) {
			enum tls_hello_status st = parse(&h, b, k, TLS_HELLO_MAX_DEFAULT);
			cr_assert_eq(st, TLS_HELLO_NEED_MORE, "%s cut at %zu: %s (%s)", real[f], k,
				     tls_hello_status_name(st), h.why ? h.why : "");
			cr_assert(h.need > k && h.need <= n, "%s cut at %zu: need %zu", real[f], k, h.need);
			cr_assert_eq(tls_hello_parse(&inc, b, k, TLS_HELLO_MAX_DEFAULT),
				     TLS_HELLO_NEED_MORE, "%s: incremental, at %zu", real[f], k);
		}
		cr_assert_eq(tls_hello_parse(&inc, b, n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE);
		cr_assert_str_eq(inc.sni, whole.sni);
		cr_assert_eq(inc.alpn_len, whole.alpn_len);
		cr_assert(!memcmp(inc.alpn, whole.alpn, whole.alpn_len));
		cr_assert_eq(inc.consumed, n);
		cr_assert_eq(tls_hello_parse(&inc, b, n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE,
			     "a finished reader keeps its answer");
	}
}

/* Re-cuts the handshake message of a one-record hello into records of the
 * sizes in cut[] (the last takes the rest). Returns the new length. */
static size_t recut(const uint8_t *in, size_t n, uint8_t *out, const size_t *cut, size_t ncut)
{
	size_t msg = n - 5, at = 0, o = 0;

	for (size_t i = 0; at < msg; i++) {
		size_t len = i < ncut && cut[i] < msg - at ? cut[i] : msg - at;
		memcpy(out + o, in, 3);
		out[o + 3] = (uint8_t)(len >> 8);
		out[o + 4] = (uint8_t)len;
		memcpy(out + o + 5, in + 5 + at, len);
		o += 5 + len;
		at += len;
	}
	return o;
}

Test(unit_tls_hello, one_hello_in_two_records_at_every_cut_and_one_byte_records)
{
	static uint8_t b[BIG], r[BIG * 6];
	struct tls_hello h;
	size_t n = load("openssl_sni_alpn.bin", b);

	for (size_t c = 1; c < n - 5; c++) {
		size_t m = recut(b, n, r, &c, 1);
		cr_assert_eq(m, n + 5);
		cr_assert_eq(parse(&h, r, m, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "cut at %zu: %s", c,
			     h.why ? h.why : "");
		cr_assert_str_eq(h.sni, "a.example.com");
		cr_assert_eq(h.consumed, m);
		cr_assert(tls_hello_offers_alpn(&h, "http/1.1", 8));
		for (size_t k = 0; k < m; k += 7)
			cr_assert_eq(parse(&h, r, k, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_NEED_MORE,
				     "cut at %zu, prefix %zu", c, k);
	}
	size_t ones[BIG];
	for (size_t i = 0; i < n; i++)
		ones[i] = 1;
	size_t m = recut(b, n, r, ones, n);
	cr_assert_eq(m, n - 5 + (n - 5) * 5);
	cr_assert_eq(parse(&h, r, m, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s", h.why ? h.why : "");
	cr_assert_str_eq(h.sni, "a.example.com");
	/* 332 one-byte records take 1992 bytes: over a max of 1024 */
	cr_assert_eq(parse(&h, r, m, 1024), TLS_HELLO_TOO_BIG);
}

Test(unit_tls_hello, bytes_after_the_hello_are_not_consumed)
{
	static uint8_t b[BIG];
	struct tls_hello h;
	size_t n = load("curl.bin", b);

	/* a TLS 1.3 client may send change_cipher_spec and early data at once */
	memcpy(b + n, "\x14\x03\x03\x00\x01\x01\x17\x03\x03\x00\x02hi", 13);
	cr_assert_eq(parse(&h, b, n + 13, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE);
	cr_assert_eq(h.consumed, n);
}

Test(unit_tls_hello, not_tls)
{
	static uint8_t g[16384];
	struct tls_hello h;
	static const uint8_t sslv2[] = { 0x80, 0x2e, 0x01, 0x00, 0x02, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10 };

	srand(15);
	for (size_t i = 0; i < sizeof g; i++)
		g[i] = (uint8_t)rand();
	g[0] = 0x42;
	cr_assert_eq(parse(&h, g, sizeof g, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_NOT_TLS);
	cr_assert_eq(parse(&h, (const uint8_t *)"GET / HTTP/1.1\r\n", 16, 16384), TLS_HELLO_NOT_TLS);
	cr_assert_eq(parse(&h, (const uint8_t *)"G", 1, 16384), TLS_HELLO_NOT_TLS, "one byte decides");
	cr_assert_eq(parse(&h, sslv2, sizeof sslv2, 16384), TLS_HELLO_NOT_TLS, "SSLv2-compatible hello");
	cr_assert_eq(parse(&h, (const uint8_t *)"\x16\x02", 2, 16384), TLS_HELLO_NOT_TLS);
	cr_assert_eq(parse(&h, (const uint8_t *)"\x16\x03\x09", 3, 16384), TLS_HELLO_NOT_TLS);
	cr_assert_eq(parse(&h, (const uint8_t *)"\x16\x03", 2, 16384), TLS_HELLO_NEED_MORE);
	/* 16 KiB of garbage behind a handshake record header: never DONE */
	memcpy(g, "\x16\x03\x01\x3f\xfb", 5);
	cr_assert_neq(parse(&h, g, sizeof g, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE);
}

Test(unit_tls_hello, too_big_is_told_early)
{
	static uint8_t b[BIG];
	struct tls_hello h;
	size_t n = load("python_big.bin", b);

	cr_assert_eq(parse(&h, b, n, n), TLS_HELLO_DONE, "a max of exactly the hello is enough");
	cr_assert_eq(parse(&h, b, 5, n - 1), TLS_HELLO_TOO_BIG, "the record header says it already");
	cr_assert_eq(parse(&h, b, n, 2048), TLS_HELLO_TOO_BIG);
	/* a handshake length of 2^24-1 in a small first record: told at the
	 * handshake header, without waiting for 16 MiB */
	static const uint8_t huge[] = { 0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0xff, 0xff, 0xff };
	cr_assert_eq(parse(&h, huge, sizeof huge, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_TOO_BIG);
}

/* Every length field of a synthetic hello one too large and one too small
 * (and 0 where that is a value of its own). */
Test(unit_tls_hello, a_wrong_length_at_each_level_is_bad)
{
	static struct hb x;
	struct offs o;
	struct tls_hello h;

	build(&x, &o, "a.example.com", NULL, 0);
	cr_assert_eq(parse(&h, x.b, x.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s", h.why ? h.why : "");
	cr_assert_str_eq(h.sni, "a.example.com");
	cr_assert_eq(h.alpn_count, 2);
	cr_assert_eq(h.version, 0x0304);

	const struct { const char *what; size_t at; int wide; } f[] = {
		{ "session id", o.sid, 1 },      { "cipher suites", o.cs, 2 },
		{ "compression", o.comp, 1 },    { "extensions block", o.exts, 2 },
		{ "server_name ext", o.sni_ext, 2 }, { "server_name list", o.sni_list, 2 },
		{ "host_name", o.sni_name, 2 },  { "alpn ext", o.alpn_ext, 2 },
		{ "alpn list", o.alpn_list, 2 }, { "alpn protocol", o.alpn_proto, 1 },
		{ "versions ext", o.ver_ext, 2 }, { "versions list", o.ver_list, 1 },
	};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		size_t v = f[i].wide == 1 ? x.b[f[i].at] : (size_t)(x.b[f[i].at] << 8 | x.b[f[i].at + 1]);
		for (int d = -1; d <= 1; d++) {
			static struct hb y;
			size_t nv = d ? v + (size_t)d : 0;
			if (!d && !strcmp(f[i].what, "compression"))
				nv = 0;
			else if (!d)
				continue; /* 0 is tested where it is an error of its own */
			y = x;
			if (f[i].wide == 1)
				y.b[f[i].at] = (uint8_t)nv;
			else
				set16(&y, f[i].at, nv);
			char what[64];
			snprintf(what, sizeof what, "%s %zu instead of %zu", f[i].what, nv, v);
			expect_bad(y.b, y.n, what);
		}
	}
	/* The record and handshake lengths: too short leaves the rest of the
	 * hello to be read as a record header; too long waits for bytes that,
	 * when they come, are one too many. */
	static struct hb y;
	y = x;
	set16(&y, o.rec, x.n - 5 - 1);
	expect_bad(y.b, y.n, "record length one short");
	y = x;
	set16(&y, o.rec, x.n - 5 + 1);
	cr_assert_eq(parse(&h, y.b, y.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_NEED_MORE);
	y.b[y.n++] = 0;
	expect_bad(y.b, y.n, "record length one long (a stray byte after the hello)");
	y = x;
	set16(&y, o.hs + 1, x.n - 9 - 1);
	expect_bad(y.b, y.n, "handshake length one short");
	y = x;
	set16(&y, o.hs + 1, x.n - 9 + 1);
	cr_assert_eq(parse(&h, y.b, y.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_NEED_MORE,
		     "handshake length one long: the rest may come in another record");
	memcpy(y.b + y.n, "\x16\x03\x01\x00\x01\x00", 6);
	cr_assert_eq(parse(&h, y.b, y.n + 6, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_BAD,
		     "and a byte that makes it whole leaves the extensions one short");
}

/* RFC 8701 GREASE: as extension types (empty and not), as an ALPN
 * protocol, in supported_versions and among the cipher suites. */
Test(unit_tls_hello, grease_is_ignored)
{
	static struct hb x;
	struct offs o;
	struct tls_hello h;
	static const uint8_t extra[] = {
		0x0a, 0x0a, 0x00, 0x00,             /* GREASE extension, empty */
		0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, /* psk_key_exchange_modes */
		0xda, 0xda, 0x00, 0x01, 0x00,       /* GREASE extension, one byte */
	};

	build(&x, &o, "g.example.com", extra, sizeof extra);
	memcpy(x.b + o.cs + 2, "\x3a\x3a", 2);  /* a GREASE cipher suite */
	memcpy(x.b + o.alpn_proto, "\x02\x5a\x5a", 3); /* ALPN "h2" becomes GREASE */
	memcpy(x.b + o.ver_list + 1, "\x7a\x7a", 2);   /* 0x0304 becomes GREASE */
	cr_assert_eq(parse(&h, x.b, x.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s", h.why ? h.why : "");
	cr_assert_str_eq(h.sni, "g.example.com");
	cr_assert_eq(h.alpn_count, 1, "GREASE ALPN not counted");
	cr_assert(!tls_hello_offers_alpn(&h, "\x5a\x5a", 2));
	cr_assert(tls_hello_offers_alpn(&h, "http/1.1", 8));
	cr_assert_eq(h.version, 0x0303, "GREASE is not a version");
}

static void expect_bad_extra(const char *name, const void *extra, size_t elen, const char *what)
{
	static struct hb x;
	struct offs o;
	build(&x, &o, name, extra, elen);
	expect_bad(x.b, x.n, what);
}

Test(unit_tls_hello, strict_extensions_and_names)
{
	static struct hb x;
	struct offs o;
	struct tls_hello h;

	expect_bad_extra("a.example.com", "\x00\x10\x00\x05\x00\x03\x02h2", 9, "ALPN twice");
	expect_bad_extra("a.example.com", "\x00\x00\x00\x05\x00\x03\x00\x00\x00", 9, "server_name twice");
	expect_bad_extra("a.example.com", "\x00\x29\x00\x00\x00\x15\x00\x00", 8, "pre_shared_key not last");
	expect_bad_extra("a.example.com", "\x00\x15\x00\x05\x00", 5, "an extension overruns the block");
	expect_bad_extra("a_b.exa mple.com", NULL, 0, "a space in the name");
	expect_bad_extra("a.example.com.", NULL, 0, "a trailing dot");
	expect_bad_extra("a..example.com", NULL, 0, "an empty label");
	expect_bad_extra("a.exam\x01ple.com", NULL, 0, "a control byte");
	char label[80], longname[300];
	memset(label, 'x', 64);
	snprintf(longname, sizeof longname, "%.64s.example.com", label);
	expect_bad_extra(longname, NULL, 0, "a label of 64 bytes");
	memset(longname, 'a', 254);
	for (int i = 63; i < 254; i += 64)
		longname[i] = '.';
	longname[254] = '\0';
	expect_bad_extra(longname, NULL, 0, "a name of 254 bytes");
	longname[253] = '\0';
	build(&x, &o, longname, NULL, 0);
	cr_assert_eq(parse(&h, x.b, x.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "253 bytes is fine");

	/* upper case is lowered; a pre_shared_key last is fine; underscores pass */
	build(&x, &o, "WWW.Under_Score.Example.COM", "\x00\x29\x00\x00", 4);
	cr_assert_eq(parse(&h, x.b, x.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s", h.why ? h.why : "");
	cr_assert_str_eq(h.sni, "www.under_score.example.com");

	/* a second host_name in the list, and a name of another type (skipped) */
	build(&x, &o, "a.example.com", NULL, 0);
	static struct hb y;
	y.n = 0;
	put(&y, x.b, o.sni_name + 2 + 13);
	put8(&y, 7);
	put16(&y, 3);
	put(&y, "zzz", 3);
	put(&y, x.b + o.sni_name + 2 + 13, x.n - (o.sni_name + 2 + 13));
	set16(&y, o.sni_list, 3 + 13 + 6);
	set16(&y, o.sni_ext, 2 + 3 + 13 + 6);
	set16(&y, o.exts, y.n - o.exts - 2);
	set16(&y, o.rec, y.n - 5);
	set16(&y, o.hs + 1, y.n - 9);
	cr_assert_eq(parse(&h, y.b, y.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s", h.why ? h.why : "");
	cr_assert_str_eq(h.sni, "a.example.com");
	y.b[o.sni_name + 2 + 13] = 0; /* the other name becomes a second host_name */
	expect_bad(y.b, y.n, "two host_names");

	/* an empty ALPN protocol; an empty server_name extension */
	build(&x, &o, "a.example.com", NULL, 0);
	y = x;
	y.b[o.alpn_proto] = 0;
	y.b[o.alpn_proto + 1] = 1; /* "\0" then "\1h" ... lengths still add up */
	y.b[o.alpn_proto + 2] = 'h';
	expect_bad(y.b, y.n, "an empty ALPN protocol");
	expect_bad_extra("a.example.com", "\x00\x00\x00\x00", 4, "an empty server_name (and twice)");
}

Test(unit_tls_hello, record_level_errors)
{
	static uint8_t b[BIG], r[BIG];
	struct tls_hello h;
	size_t n = load("openssl_sni_alpn.bin", b), c = 100;
	size_t m = recut(b, n, r, &c, 1);

	r[105] = 0x17; /* the second record is application data */
	expect_bad(r, m, "a non-handshake record inside the hello");
	memcpy(r, b, n);
	r[3] = r[4] = 0;
	expect_bad(r, 5, "an empty record");
	memcpy(r, "\x16\x03\x01\x40\x01", 5);
	expect_bad(r, 5, "a record of 2^14 + 1 bytes");
	memcpy(r, b, n);
	r[5] = 2; /* a ServerHello */
	expect_bad(r, n, "not a ClientHello");
	memcpy(r, b, n);
	r[9] = 2; /* legacy_version 2.3 */
	expect_bad(r, n, "legacy_version");
	/* no extensions at all (TLS 1.0-1.2 may): done, no SNI */
	static struct hb x;
	struct offs o;
	build(&x, &o, "a.example.com", NULL, 0);
	x.n = o.exts;
	set16(&x, o.rec, x.n - 5);
	set16(&x, o.hs + 1, x.n - 9);
	cr_assert_eq(parse(&h, x.b, x.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE);
	cr_assert(!h.has_sni && !h.has_alpn);
	cr_assert_eq(h.version, 0x0303);
}

Test(unit_tls_hello, alpn_beyond_what_is_kept)
{
	static struct hb x;
	struct offs o;
	struct tls_hello h;
	uint8_t ext[4 + 2 + 20 * 51];
	size_t e = 6;

	for (int i = 0; i < 20; i++) {
		ext[e++] = 50;
		memset(ext + e, 'a' + i, 50);
		e += 50;
	}
	memcpy(ext, "\x00\x10", 2); /* a second ALPN would be a duplicate: replace the first */
	build(&x, &o, "a.example.com", NULL, 0);
	size_t alpn_at = o.alpn_ext - 2, alpn_end = o.alpn_ext + 2 + 14;
	ext[2] = (uint8_t)((e - 4) >> 8), ext[3] = (uint8_t)(e - 4);
	ext[4] = (uint8_t)((e - 6) >> 8), ext[5] = (uint8_t)(e - 6);
	static struct hb y;
	y.n = 0;
	put(&y, x.b, alpn_at);
	put(&y, ext, e);
	put(&y, x.b + alpn_end, x.n - alpn_end);
	set16(&y, o.exts, y.n - o.exts - 2);
	set16(&y, o.rec, y.n - 5);
	set16(&y, o.hs + 1, y.n - 9);
	cr_assert_eq(parse(&h, y.b, y.n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s", h.why ? h.why : "");
	cr_assert_eq(h.alpn_count, 20);
	cr_assert(h.alpn_truncated);
	cr_assert_eq(h.alpn_len, 10 * 51, "whole protocols only");
	char first[51];
	memset(first, 'a', 50);
	cr_assert(tls_hello_offers_alpn(&h, first, 50));
}
