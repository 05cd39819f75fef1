/* SPDX-License-Identifier: MIT */
/* check_spec: a `check =` value (check_spec.h). */
#define _GNU_SOURCE
#include "check_spec.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[] = {
	[CHECK_NONE] = "none",
	[CHECK_TCP] = "tcp",
	[CHECK_SEND_EXPECT] = "send/expect",
	[CHECK_REDIS] = "redis",
	[CHECK_REDIS_PRIMARY] = "redis-primary",
	[CHECK_PGSQL] = "pgsql",
	[CHECK_MYSQL] = "mysql",
	[CHECK_SMTP] = "smtp",
	[CHECK_TLS] = "tls",
	[CHECK_HTTP] = "http",
};

#define CHECK_FORMS "none, tcp, redis, redis-primary, pgsql, mysql, smtp, tls, " \
		    "http[:[METHOD ]PATH[ STATUS]], or [send:\"...\"] expect:\"...\" " \
		    "(or expect-regex:\"...\")"

const char *check_kind_name(enum check_kind k)
{
	return (unsigned)k < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[k] : "?";
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A "..." at *p with its escapes into out (at most cap bytes); *p moves
 * past the closing quote. In a regex (re), an escape other than \r \n \t
 * \xHH and \" is the regex's own (\. \+ \\) and stays as written.
 * Returns the byte count, or -1 with why. */
static long quoted(const char **p, const char *what, int re, uint8_t *out, size_t cap, char *why,
		   size_t len)
{
	const char *s = *p;
	size_t n = 0;

	if (*s != '"') {
		snprintf(why, len, "%s expects a quoted string, as %s\"...\"", what, what);
		return -1;
	}
	for (s++; *s && *s != '"'; s++) {
		int c = (unsigned char)*s;
		if (c == '\\' && re && s[1] && !strchr("rntx\"", s[1])) {
			if (n + 2 > cap) {
				snprintf(why, len, "%s: longer than %zu bytes", what, cap);
				return -1;
			}
			out[n++] = '\\';
			out[n++] = (uint8_t)*++s;
			continue;
		}
		if (c == '\\') {
			switch (*++s) {
			case 'r': c = '\r'; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case '0': c = 0; break;
			case '\\': c = '\\'; break;
			case '"': c = '"'; break;
			case 'x':
				if (hexval((unsigned char)s[1]) < 0 || hexval((unsigned char)s[2]) < 0) {
					snprintf(why, len, "%s: \\x needs two hex digits (\\x0d)", what);
					return -1;
				}
				c = hexval((unsigned char)s[1]) * 16 + hexval((unsigned char)s[2]);
				s += 2;
				break;
			default:
				snprintf(why, len, "%s: unknown escape '\\%c' (\\r \\n \\t \\0 \\\\ \\\" "
					 "\\xHH)", what, *s ? *s : ' ');
				return -1;
			}
		}
		if (n == cap) {
			snprintf(why, len, "%s: longer than %zu bytes", what, cap);
			return -1;
		}
		out[n++] = (uint8_t)c;
	}
	if (*s != '"') {
		snprintf(why, len, "%s: the string has no closing quote", what);
		return -1;
	}
	*p = s + 1;
	return (long)n;
}

/* send:"..." expect:"..." | expect-regex:"...", in any order, each once. */
static int send_expect(const char *p, struct check_spec *c, char *why, size_t len)
{
	int sent = 0, expected = 0;

	c->kind = CHECK_SEND_EXPECT;
	for (;;) {
		long n;
		p += strspn(p, " \t");
		if (!*p)
			break;
		if (!strncmp(p, "send:", 5)) {
			p += 5;
			if (sent++) {
				snprintf(why, len, "send: given twice");
				return -1;
			}
			if ((n = quoted(&p, "send:", 0, c->send, sizeof(c->send), why, len)) < 0)
				return -1;
			c->nsend = (size_t)n;
		} else if (!strncmp(p, "expect:", 7) || !strncmp(p, "expect-regex:", 13)) {
			int re = p[6] == '-';
			const char *what = re ? "expect-regex:" : "expect:";
			p += re ? 13 : 7;
			if (expected++) {
				snprintf(why, len, "expect given twice (one expect: or expect-regex:)");
				return -1;
			}
			if ((n = quoted(&p, what, re, (uint8_t *)c->expect, CHECK_EXPECT_MAX, why, len)) < 0)
				return -1;
			c->nexpect = (size_t)n;
			c->expect[n] = '\0';
			c->regex = (uint8_t)re;
			if (!n) {
				snprintf(why, len, "%s is empty: it would match anything", what);
				return -1;
			}
		} else {
			snprintf(why, len, "invalid value '%s' (expects " CHECK_FORMS ")", p);
			return -1;
		}
		if (*p && *p != ' ' && *p != '\t') {
			snprintf(why, len, "expects a space after the closing quote, not '%c'", *p);
			return -1;
		}
	}
	if (!expected) {
		snprintf(why, len, "send: needs an expect:\"...\" (or expect-regex:\"...\") for "
			 "the answer");
		return -1;
	}
	if (c->regex) {
		regex_t re;
		char err[160];
		int rc;
		if (memchr(c->expect, '\0', c->nexpect)) {
			snprintf(why, len, "expect-regex: a regex cannot hold \\0 (use expect:\"...\")");
			return -1;
		}
		if ((rc = regcomp(&re, c->expect, REG_EXTENDED | REG_NOSUB))) {
			regerror(rc, &re, err, sizeof(err));
			snprintf(why, len, "expect-regex: '%s': %s", c->expect, err);
			return -1;
		}
		regfree(&re);
	}
	return 0;
}

static void status_set(struct check_spec *c, unsigned code)
{
	c->status[(code - 100) / 8] |= (uint8_t)(1u << ((code - 100) % 8));
}

int check_status_ok(const struct check_spec *c, unsigned code)
{
	return code >= 100 && code < 700 && (c->status[(code - 100) / 8] >> ((code - 100) % 8) & 1);
}

/* "200,3xx": codes 100..599 and classes 1xx..5xx. */
static int statuses(const char *s, struct check_spec *c, char *why, size_t len)
{
	char buf[64], *save, *t;

	if (strlen(s) >= sizeof(buf)) {
		snprintf(why, len, "http: status list '%.20s...' too long", s);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strlen(t) == 3 && t[0] >= '1' && t[0] <= '5' && !strcmp(t + 1, "xx")) {
			for (unsigned k = 0; k < 100; k++)
				status_set(c, (unsigned)(t[0] - '0') * 100 + k);
		} else if (strlen(t) == 3 && strspn(t, "0123456789") == 3 && t[0] >= '1' && t[0] <= '5') {
			status_set(c, (unsigned)((t[0] - '0') * 100 + (t[1] - '0') * 10 + (t[2] - '0')));
		} else {
			snprintf(why, len, "http: invalid status '%s' (expects codes or classes such as "
				 "200,3xx)", t);
			return -1;
		}
	}
	return 0;
}

/* http[:[METHOD ]PATH[ STATUS]]: "http" alone is GET / 2xx. */
static int http_spec(const char *p, struct check_spec *c, char *why, size_t len)
{
	char buf[256], *tok[4], *save;
	unsigned n = 0, k = 0;

	c->kind = CHECK_HTTP;
	snprintf(c->method, sizeof(c->method), "GET");
	snprintf(c->path, sizeof(c->path), "/");
	if (*p == ':')
		p++;
	else if (*p) {
		snprintf(why, len, "invalid value 'http%s' (expects http or http:[METHOD ]PATH[ STATUS])", p);
		return -1;
	}
	if (strlen(p) >= sizeof(buf)) {
		snprintf(why, len, "http: longer than %zu characters", sizeof(buf) - 1);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", p);
	for (char *t = strtok_r(buf, " \t", &save); t && n < 4; t = strtok_r(NULL, " \t", &save))
		tok[n++] = t;
	if (n && tok[0][0] != '/') {
		if (strlen(tok[0]) >= sizeof(c->method) || strspn(tok[0], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") !=
							     strlen(tok[0])) {
			snprintf(why, len, "http: invalid method '%s' (expects GET, HEAD, OPTIONS, ...)",
				 tok[0]);
			return -1;
		}
		snprintf(c->method, sizeof(c->method), "%s", tok[k++]);
	}
	if (k < n) {
		const char *path = tok[k++];
		if (path[0] != '/') {
			snprintf(why, len, "http: the path must start with '/', not '%s'", path);
			return -1;
		}
		if (strlen(path) >= sizeof(c->path)) {
			snprintf(why, len, "http: path longer than %zu characters", sizeof(c->path) - 1);
			return -1;
		}
		for (const char *q = path; *q; q++)
			if ((unsigned char)*q <= ' ' || *q == 0x7f) {
				snprintf(why, len, "http: the path holds a control character");
				return -1;
			}
		snprintf(c->path, sizeof(c->path), "%s", path);
	} else if (n) {
		snprintf(why, len, "http: %s needs a path (http:%s /health)", c->method, c->method);
		return -1;
	}
	if (k < n && statuses(tok[k++], c, why, len))
		return -1;
	if (k < n) {
		snprintf(why, len, "http: unexpected '%s' after the status list", tok[k]);
		return -1;
	}
	return 0;
}

int check_spec_parse(const char *text, struct check_spec *out, char *why, size_t len)
{
	static const struct {
		const char *name;
		enum check_kind kind;
	} presets[] = {
		{ "none", CHECK_NONE },   { "tcp", CHECK_TCP },     { "redis", CHECK_REDIS },
		{ "redis-primary", CHECK_REDIS_PRIMARY },           { "pgsql", CHECK_PGSQL },
		{ "mysql", CHECK_MYSQL }, { "smtp", CHECK_SMTP },   { "tls", CHECK_TLS },
	};
	const char *p = text + strspn(text, " \t");
	int empty;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
		if (!strcmp(p, presets[i].name)) {
			out->kind = presets[i].kind;
			return 0;
		}
	if (!strncmp(p, "http", 4) && (!p[4] || p[4] == ':')) {
		if (http_spec(p + 4, out, why, len))
			return -1;
		empty = 1;
		for (size_t i = 0; i < sizeof(out->status); i++)
			empty &= !out->status[i];
		if (empty)
			for (unsigned k = 200; k < 300; k++)
				status_set(out, k);
		return 0;
	}
	if (!strncmp(p, "send:", 5) || !strncmp(p, "expect:", 7) || !strncmp(p, "expect-regex:", 13))
		return send_expect(p, out, why, len);
	snprintf(why, len, "invalid value '%s' (expects " CHECK_FORMS ")", p);
	return -1;
}
