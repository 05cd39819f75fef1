/* SPDX-License-Identifier: MIT */
/* Unit tests for src/proto/http_req.c: the stats endpoint's request parser. */
#include <criterion/criterion.h>
#include <string.h>

#include "http_req.h"

static int parse(const char *s, char *m, char *p)
{
	return http_req_parse(s, strlen(s), m, p);
}

Test(unit_http_req, complete_requests)
{
	char m[16], p[256];

	cr_assert_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", m, p), HTTP_REQ_OK);
	cr_assert_str_eq(m, "GET");
	cr_assert_str_eq(p, "/metrics");
	cr_assert_eq(parse("HEAD /health?verbose=1 HTTP/1.0\n\n", m, p), HTTP_REQ_OK);
	cr_assert_str_eq(m, "HEAD");
	cr_assert_str_eq(p, "/health");
}

Test(unit_http_req, incomplete_then_too_large)
{
	char m[16], p[256], big[HTTP_REQ_MAX];

	cr_assert_eq(parse("GET /metrics HTTP/1.1\r\n", m, p), HTTP_REQ_MORE);
	cr_assert_eq(parse("GET /metr", m, p), HTTP_REQ_MORE);
	memset(big, 'a', sizeof(big));
	cr_assert_eq(http_req_parse(big, sizeof(big), m, p), 431);
}

Test(unit_http_req, malformed_requests)
{
	char m[16], p[256];
	const char *bad[] = {
		"garbage\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n", "get /metrics HTTP/1.1\r\n\r\n",
		"GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2.0\r\n\r\n",
		"GET /metrics HTTP/1.1 extra\r\n\r\n", "AAAAAAAAAAAAAAAAAAAA / HTTP/1.1\r\n\r\n",
		"GET /a\tb HTTP/1.1\r\n\r\n",
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		cr_assert_eq(parse(bad[i], m, p), 400, "accepted '%s'", bad[i]);
	cr_assert_eq(http_req_parse("GET /\0 HTTP/1.1\r\n\r\n", 19, m, p), 400, "NUL");
}
