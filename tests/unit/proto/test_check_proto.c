/* SPDX-License-Identifier: MIT */
/* Unit tests for src/proto/check_spec.c and check_proto.c: every form of
 * `check =` and its refusals, the requests on the wire (the ClientHello read
 * back by the proxy's own strict parser), and each preset's verdict on good,
 * bad and partial answers: no verdict before a decisive byte, and a
 * byte-at-a-time answer decided exactly as the whole one. */
#include <criterion/criterion.h>
#include <regex.h>
#include <string.h>

#include "check_proto.h"
#include "check_spec.h"
#include "tls_hello.h"

static struct check_spec spec(const char *text)
{
	struct check_spec c;
	char why[300];

	cr_assert_eq(check_spec_parse(text, &c, why, sizeof(why)), 0, "'%s': %s", text, why);
	return c;
}

static void refused(const char *text, const char *needle)
{
	struct check_spec c;
	char why[300] = "";

	cr_assert_eq(check_spec_parse(text, &c, why, sizeof(why)), -1, "'%s' was accepted", text);
	cr_assert(strstr(why, needle), "'%s': '%s' lacks '%s'", text, why, needle);
}

Test(unit_check_proto, presets_and_forms_parse)
{
	cr_assert_eq(spec("none").kind, CHECK_NONE);
	cr_assert_eq(spec("tcp").kind, CHECK_TCP);
	cr_assert_eq(spec("redis").kind, CHECK_REDIS);
	cr_assert_eq(spec("redis-primary").kind, CHECK_REDIS_PRIMARY);
	cr_assert_eq(spec("pgsql").kind, CHECK_PGSQL);
	cr_assert_eq(spec("mysql").kind, CHECK_MYSQL);
	cr_assert_eq(spec("smtp").kind, CHECK_SMTP);
	cr_assert_eq(spec("tls").kind, CHECK_TLS);

	struct check_spec h = spec("http");
	cr_assert_str_eq(h.method, "GET");
	cr_assert_str_eq(h.path, "/");
	cr_assert(check_status_ok(&h, 200) && check_status_ok(&h, 299));
	cr_assert(!check_status_ok(&h, 301) && !check_status_ok(&h, 503));
	h = spec("http:GET /health 2xx");
	cr_assert_str_eq(h.path, "/health");
	h = spec("http:HEAD /ready 200,3xx");
	cr_assert_str_eq(h.method, "HEAD");
	cr_assert(check_status_ok(&h, 200) && check_status_ok(&h, 302) && !check_status_ok(&h, 204));
	h = spec("http:/ping");
	cr_assert_str_eq(h.method, "GET");
	cr_assert_str_eq(h.path, "/ping");

	struct check_spec s = spec("send:\"PING\\r\\n\" expect:\"+PONG\"");
	cr_assert_eq(s.kind, CHECK_SEND_EXPECT);
	cr_assert_eq(s.nsend, 6);
	cr_assert(!memcmp(s.send, "PING\r\n", 6));
	cr_assert_eq(s.nexpect, 5);
	cr_assert(!s.regex);
	s = spec("send:\"\\x00\\x01\\xff\\\"\" expect:\"\\x00ok\"");
	cr_assert_eq(s.nsend, 4);
	cr_assert(!memcmp(s.send, "\x00\x01\xff\"", 4));
	cr_assert_eq(s.nexpect, 3);
	cr_assert(!memcmp(s.expect, "\x00ok", 3));
	s = spec("expect:\"220 \"");
	cr_assert_eq(s.nsend, 0, "a banner check sends nothing");
	/* regex escapes stay the regex's own */
	s = spec("expect-regex:\"^\\+PONG\\r\\n\" send:\"PING\\r\\n\"");
	cr_assert(s.regex);
	cr_assert_str_eq(s.expect, "^\\+PONG\r\n");
}

Test(unit_check_proto, bad_values_say_why)
{
	refused("tcpp", "expects none, tcp");
	refused("send:\"x\"", "needs an expect");
	refused("send:x expect:\"y\"", "quoted string");
	refused("expect:\"abc", "no closing quote");
	refused("expect:\"\"", "empty");
	refused("expect:\"a\\q\"", "unknown escape");
	refused("expect:\"\\x4\"", "two hex digits");
	refused("expect:\"a\" expect:\"b\"", "twice");
	refused("expect:\"a\"x", "space after");
	refused("expect-regex:\"(\"", "expect-regex");
	refused("http:get /", "invalid method");
	refused("http:GET health", "must start with '/'");
	refused("http:GET / 99x", "invalid status");
	refused("http:GET / 2xx extra", "unexpected");
	refused("https", "expects");
	char big[700];
	memset(big, 'a', sizeof(big));
	memcpy(big, "send:\"", 6);
	memcpy(big + sizeof(big) - 18, "\" expect:\"b\"", 13);
	big[sizeof(big) - 5] = '\0';
	refused(big, "longer than");
}

static enum check_result verdict(const char *text, const void *buf, size_t n, int eof, char *why)
{
	struct check_spec c = spec(text);
	regex_t re;
	enum check_result r;

	if (c.regex)
		cr_assert_eq(regcomp(&re, c.expect, REG_EXTENDED | REG_NOSUB), 0);
	r = check_verdict(&c, c.regex ? &re : NULL, buf, n, eof, why, 300);
	if (c.regex)
		regfree(&re);
	return r;
}

/* The whole answer decides `want`; every prefix of it before byte `decisive`
 * says MORE, and the prefix of `decisive` bytes decides as the whole. */
static void answer(const char *text, const void *buf, size_t n, size_t decisive,
		   enum check_result want, const char *why_has)
{
	char why[300] = "";

	for (size_t k = 0; k < decisive; k++)
		cr_assert_eq(verdict(text, buf, k, 0, why), CHECK_MORE, "%s: %zu of %zu bytes decided",
			     text, k, n);
	cr_assert_eq(verdict(text, buf, decisive, 0, why), want, "%s: %zu bytes: %s", text, decisive, why);
	cr_assert_eq(verdict(text, buf, n, 1, why), want, "%s: whole: %s", text, why);
	if (why_has)
		cr_assert(strstr(why, why_has), "%s: '%s' lacks '%s'", text, why, why_has);
}

Test(unit_check_proto, redis_answers)
{
	answer("redis", "+PONG\r\n", 7, 7, CHECK_OK, NULL);
	answer("redis", "-LOADING Redis is loading\r\n", 27, 27, CHECK_BAD, "LOADING");
	answer("redis", "+OK\r\n", 5, 2, CHECK_BAD, "not +PONG");

	static const char master[] = "$60\r\n# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_x:1\r\n\r\n";
	static const char slave[] = "$45\r\n# Replication\r\nrole:slave\r\nmaster_port:6379\r\n\r\n";
	answer("redis-primary", master, sizeof(master) - 1, sizeof(master) - 1 - 2, CHECK_OK, NULL);
	answer("redis-primary", slave, sizeof(slave) - 1, sizeof(slave) - 1 - 2, CHECK_BAD, "role:slave");
	answer("redis-primary", "-NOAUTH Authentication required.\r\n", 34, 34, CHECK_BAD, "NOAUTH");
}

Test(unit_check_proto, pgsql_mysql_smtp_answers)
{
	answer("pgsql", "N", 1, 1, CHECK_OK, NULL);
	answer("pgsql", "S", 1, 1, CHECK_OK, NULL);
	answer("pgsql", "E\0\0\0\x10", 5, 1, CHECK_BAD, "error");
	answer("pgsql", "HTTP/1.1 400", 12, 1, CHECK_BAD, "not a PostgreSQL");

	static const unsigned char greeting[] = { 0x0a, 0, 0, 0, 0x0a, '8', '.', '0', 0 };
	answer("mysql", greeting, sizeof(greeting), 5, CHECK_OK, NULL);
	static const unsigned char blocked[] = { 0x17, 0, 0, 0, 0xff, 0x69, 0x04, 'H', 'o', 's', 't',
						 ' ', 'x', ' ', 'i', 's', ' ', 'b', 'l', 'o', 'c', 'k',
						 'e', 'd', '!', '!', '!' };
	answer("mysql", blocked, sizeof(blocked), sizeof(blocked), CHECK_BAD, "ERR 1129: Host x is blocked");
	static const unsigned char seq1[] = { 1, 0, 0, 1, 0x0a };
	answer("mysql", seq1, sizeof(seq1), 5, CHECK_BAD, "not a MySQL greeting");

	answer("smtp", "220 mx.example ESMTP\r\n", 22, 4, CHECK_OK, NULL);
	answer("smtp", "220-mx.example ESMTP\r\n220 more\r\n", 32, 4, CHECK_OK, NULL);
	answer("smtp", "554 no service\r\n", 16, 16, CHECK_BAD, "554 no service");
	answer("smtp", "SSH-2.0-OpenSSH\r\n", 17, 4, CHECK_BAD, "not an SMTP");
}

Test(unit_check_proto, http_and_expect_answers)
{
	static const char ok[] = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\n";
	static const char down[] = "HTTP/1.1 503 Service Unavailable\r\n\r\n";
	answer("http:GET /health 2xx", ok, sizeof(ok) - 1, 17, CHECK_OK, NULL);
	answer("http:GET /health 2xx", down, sizeof(down) - 1, 34, CHECK_BAD, "status 503");
	answer("http:GET / 503", down, sizeof(down) - 1, 34, CHECK_OK, NULL);
	answer("http", "SSH-2.0\r\n", 9, 1, CHECK_BAD, "not an HTTP");

	answer("expect:\"+PONG\"", "+PONG\r\n", 7, 5, CHECK_OK, NULL);
	answer("expect-regex:\"role:(master|primary)\"", "x\r\nrole:primary\r\n", 17, 15, CHECK_OK, NULL);
	char why[300];
	/* not there: undecided until the peer closes or the read bound */
	cr_assert_eq(verdict("expect:\"OK\"", "NOPE", 4, 0, why), CHECK_MORE);
	cr_assert_eq(verdict("expect:\"OK\"", "NOPE", 4, 1, why), CHECK_BAD);
	cr_assert(strstr(why, "no 'OK' in 4 bytes: NOPE"), "%s", why);
	/* binary: a NUL in the answer is just a byte */
	cr_assert_eq(verdict("expect:\"\\x00ok\"", "ab\0ok", 5, 0, why), CHECK_OK);
	cr_assert_eq(verdict("expect-regex:\"ok$\"", "ab\0ok", 5, 0, why), CHECK_OK);
}

Test(unit_check_proto, requests_on_the_wire)
{
	uint8_t out[CHECK_REQUEST_MAX];
	struct check_spec c = spec("redis");
	size_t n = check_request(&c, "h", out, sizeof(out));

	cr_assert_eq(n, 14);
	cr_assert(!memcmp(out, "*1\r\n$4\r\nPING\r\n", 14));
	c = spec("redis-primary");
	n = check_request(&c, "h", out, sizeof(out));
	cr_assert(!memcmp(out, "*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n", n));
	c = spec("pgsql");
	cr_assert_eq(check_request(&c, "h", out, sizeof(out)), 8);
	cr_assert(!memcmp(out, "\0\0\0\x08\x04\xd2\x16\x2f", 8));
	c = spec("mysql");
	cr_assert_eq(check_request(&c, "h", out, sizeof(out)), 0, "the server speaks first");
	c = spec("smtp");
	cr_assert_eq(check_request(&c, "h", out, sizeof(out)), 0);
	c = spec("http:HEAD /ready 2xx");
	n = check_request(&c, "10.0.0.1:8080", out, sizeof(out));
	out[n] = 0;
	cr_assert_str_eq((char *)out, "HEAD /ready HTTP/1.0\r\nHost: 10.0.0.1:8080\r\n"
				      "User-Agent: splicer-check\r\nConnection: close\r\n\r\n");
	c = spec("send:\"a\\0b\" expect:\"x\"");
	cr_assert_eq(check_request(&c, "h", out, sizeof(out)), 3);
	cr_assert(!memcmp(out, "a\0b", 3));
}

Test(unit_check_proto, tls_hello_is_one_the_strict_parser_takes)
{
	uint8_t out[CHECK_REQUEST_MAX];
	struct check_spec c = spec("tls");
	size_t n = check_request(&c, "h", out, sizeof(out));
	struct tls_hello h;

	tls_hello_init(&h);
	cr_assert_eq(tls_hello_parse(&h, out, n, TLS_HELLO_MAX_DEFAULT), TLS_HELLO_DONE, "%s",
		     h.why ? h.why : "");
	cr_assert_eq(h.consumed, n);
	cr_assert_eq(h.version, 0x0304, "offers TLS 1.3");

	static const uint8_t server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x7a, 0x02, 0x00, 0x00, 0x76 };
	static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28 };
	answer("tls", server_hello, sizeof(server_hello), 7, CHECK_OK, NULL);
	answer("tls", alert, sizeof(alert), 7, CHECK_BAD, "TLS alert 40");
	answer("tls", "HTTP/1.1 400 Bad Request\r\n", 26, 1, CHECK_BAD, "not a TLS answer");
}
