/* SPDX-License-Identifier: MIT */
/* check_proto: health check requests and verdicts (check_proto.h). */
#define _GNU_SOURCE
#include "check_proto.h"

#include <stdio.h>
#include <string.h>

/* ---- requests ------------------------------------------------------------ */

static size_t put(uint8_t *out, size_t cap, size_t n, const void *p, size_t k)
{
	if (n + k > cap)
		return cap + 1; /* never: every request fits CHECK_REQUEST_MAX */
	memcpy(out + n, p, k);
	return n + k;
}

/* A ClientHello a TLS 1.3 or 1.2 server answers with a ServerHello: the
 * common suites, groups and signature schemes, and an X25519 key share (the
 * RFC 7748 test vector's public key: any valid point will do, the handshake
 * is never finished). No server name: a server that needs one answers with
 * its default certificate, or an alert, which the verdict reports. */
static size_t tls_client_hello(uint8_t *out, size_t cap)
{
	static const uint8_t suites[] = {
		0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 0xc0, 0x2b, 0xc0, 0x2f, 0xc0, 0x2c, 0xc0, 0x30,
		0xcc, 0xa9, 0xcc, 0xa8, 0xc0, 0x13, 0xc0, 0x14, 0x00, 0x9c, 0x00, 0x9d, 0x00, 0x2f,
		0x00, 0x35,
	};
	static const uint8_t ext[] = {
		0x00, 0x0a, 0x00, 0x08, 0x00, 0x06, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x18, /* groups */
		0x00, 0x0b, 0x00, 0x02, 0x01, 0x00,                                     /* point formats */
		0x00, 0x0d, 0x00, 0x14, 0x00, 0x12, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x04,
		0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01,             /* sig algs */
		0x00, 0x2b, 0x00, 0x05, 0x04, 0x03, 0x04, 0x03, 0x03,                   /* versions */
		0x00, 0x2d, 0x00, 0x02, 0x01, 0x01,                                     /* psk modes */
		0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20,             /* key share */
		0x85, 0x20, 0xf0, 0x09, 0x89, 0x30, 0xa7, 0x54, 0x74, 0x8b, 0x7d, 0xdc, 0xb4, 0x3e,
		0xf7, 0x5a, 0x0d, 0xbf, 0x3a, 0x0d, 0x26, 0x38, 0x1a, 0xf4, 0xeb, 0xa4, 0xa9, 0x8e,
		0xaa, 0x9b, 0x4e, 0x6a,
	};
	uint8_t body[512];
	size_t b = 0, hs, n = 0;

	body[b++] = 0x03; /* legacy_version TLS 1.2 */
	body[b++] = 0x03;
	for (int i = 0; i < 32; i++) /* random: nothing rests on it */
		body[b++] = (uint8_t)(0x5a ^ (i * 37));
	body[b++] = 32; /* a legacy session id, as browsers send (middlebox compatibility) */
	for (int i = 0; i < 32; i++)
		body[b++] = (uint8_t)(0xa5 ^ (i * 11));
	body[b++] = 0;
	body[b++] = sizeof(suites);
	memcpy(body + b, suites, sizeof(suites));
	b += sizeof(suites);
	body[b++] = 1; /* compression: null */
	body[b++] = 0;
	body[b++] = (uint8_t)(sizeof(ext) >> 8);
	body[b++] = (uint8_t)sizeof(ext);
	memcpy(body + b, ext, sizeof(ext));
	b += sizeof(ext);
	hs = b + 4;
	uint8_t head[9] = { 0x16, 0x03, 0x01, (uint8_t)(hs >> 8), (uint8_t)hs,
			    0x01, 0, (uint8_t)(b >> 8), (uint8_t)b };
	n = put(out, cap, n, head, sizeof(head));
	return put(out, cap, n, body, b);
}

size_t check_request(const struct check_spec *c, const char *host, uint8_t *out, size_t cap)
{
	static const char ping[] = "*1\r\n$4\r\nPING\r\n";
	static const char info[] = "*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n";
	/* length 8, code 80877103: "may we speak TLS?", answered by one byte */
	static const uint8_t ssl_request[] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
	int k;

	switch (c->kind) {
	case CHECK_SEND_EXPECT:
		return put(out, cap, 0, c->send, c->nsend);
	case CHECK_REDIS:
		return put(out, cap, 0, ping, sizeof(ping) - 1);
	case CHECK_REDIS_PRIMARY:
		return put(out, cap, 0, info, sizeof(info) - 1);
	case CHECK_PGSQL:
		return put(out, cap, 0, ssl_request, sizeof(ssl_request));
	case CHECK_TLS:
		return tls_client_hello(out, cap);
	case CHECK_HTTP:
		k = snprintf((char *)out, cap, "%s %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: splicer-check\r\n"
			     "Connection: close\r\n\r\n", c->method, c->path, host);
		return k > 0 && (size_t)k < cap ? (size_t)k : 0;
	default:
		return 0; /* tcp, and the servers that speak first */
	}
}

/* ---- verdicts ------------------------------------------------------------ */

/* The start of an answer, printable: "-LOADING Redis is loading\r\n" comes
 * out as -LOADING Redis is loading\r\n, a byte 0x01 as \x01. */
static void snippet(const uint8_t *buf, size_t n, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < n && i < 48 && o + 5 < len; i++) {
		uint8_t c = buf[i];
		if (c == '\r' || c == '\n')
			o += (size_t)snprintf(out + o, len - o, "\\%c", c == '\r' ? 'r' : 'n');
		else if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
	}
	if (n > 48 && o + 4 < len)
		o += (size_t)snprintf(out + o, len - o, "...");
	out[o < len ? o : len - 1] = '\0';
}

static enum check_result bad(char *why, size_t len, const uint8_t *buf, size_t n, const char *what)
{
	char s[256];

	snippet(buf, n, s, sizeof(s));
	snprintf(why, len, "%s: %s", what, n ? s : "nothing");
	return CHECK_BAD;
}

/* Where the first line ends (its '\n'), or NULL. */
static const uint8_t *line_end(const uint8_t *buf, size_t n)
{
	return memchr(buf, '\n', n);
}

static enum check_result expect_bytes(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	char what[400], pat[300];

	if (re) {
		regmatch_t m[1] = { { .rm_so = 0, .rm_eo = (regoff_t)n } };
		if (!regexec(re, (const char *)buf, 1, m, REG_STARTEND))
			return CHECK_OK;
	} else if (memmem(buf, n, c->expect, c->nexpect)) {
		return CHECK_OK;
	}
	if (!eof && n < CHECK_READ_MAX)
		return CHECK_MORE;
	snippet((const uint8_t *)c->expect, c->nexpect, pat, sizeof(pat));
	snprintf(what, sizeof(what), "%s '%s' in %zu bytes", re ? "no match of" : "no", pat, n);
	return bad(why, len, buf, n, what);
}

static enum check_result redis_pong(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	static const char pong[] = "+PONG\r\n";
	size_t k = n < 7 ? n : 7;

	if (n && buf[0] == '-') /* an error: -NOAUTH, -LOADING, -MASTERDOWN */
		return line_end(buf, n) || eof ? bad(why, len, buf, n, "error") : CHECK_MORE;
	if (memcmp(buf, pong, k))
		return bad(why, len, buf, n, "not +PONG");
	return k == 7 ? CHECK_OK : eof ? bad(why, len, buf, n, "not +PONG") : CHECK_MORE;
}

/* INFO replication's bulk reply: $LEN\r\n then LEN bytes of lines. */
static enum check_result redis_role(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	const uint8_t *nl = line_end(buf, n), *body, *role;
	unsigned long want = 0;

	if (n && buf[0] == '-')
		return nl || eof ? bad(why, len, buf, n, "error") : CHECK_MORE;
	if (n && buf[0] != '$')
		return bad(why, len, buf, n, "not a bulk reply");
	if (!nl)
		return eof || n > 32 ? bad(why, len, buf, n, "not a bulk reply") : CHECK_MORE;
	for (const uint8_t *p = buf + 1; p < nl && *p != '\r'; p++) {
		if (*p < '0' || *p > '9' || want > CHECK_READ_MAX)
			return bad(why, len, buf, n, "not a bulk reply");
		want = want * 10 + (unsigned long)(*p - '0');
	}
	body = nl + 1;
	if ((size_t)(buf + n - body) < want && !eof && n < CHECK_READ_MAX)
		return CHECK_MORE; /* the whole reply first: role: may come late */
	if (memmem(body, (size_t)(buf + n - body), "role:master", 11))
		return CHECK_OK;
	if ((role = memmem(body, (size_t)(buf + n - body), "role:", 5))) {
		const uint8_t *e = memchr(role, '\r', (size_t)(buf + n - role));
		return bad(why, len, role, e ? (size_t)(e - role) : (size_t)(buf + n - role), "not a primary");
	}
	return bad(why, len, body, (size_t)(buf + n - body), "no role: in INFO replication");
}

static enum check_result pgsql(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	if (!n)
		return eof ? bad(why, len, buf, n, "closed without an answer") : CHECK_MORE;
	if (buf[0] == 'S' || buf[0] == 'N')
		return CHECK_OK;
	return bad(why, len, buf, n, buf[0] == 'E' ? "error response to the SSLRequest"
						   : "not a PostgreSQL answer to the SSLRequest");
}

static enum check_result mysql(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	size_t plen;

	if (n < 5)
		return eof ? bad(why, len, buf, n, "no greeting") : CHECK_MORE;
	plen = (size_t)buf[0] | (size_t)buf[1] << 8 | (size_t)buf[2] << 16;
	if (buf[3] != 0 || !plen)
		return bad(why, len, buf, n, "not a MySQL greeting");
	if (buf[4] == 0x0a)
		return CHECK_OK; /* protocol 10: MySQL 3.21 on, MariaDB */
	if (buf[4] == 0xff) { /* ERR packet: code, then (4.1+) #SQLSTATE, then the text */
		char what[64];
		size_t end = 4 + plen < n ? 4 + plen : n, at = 7;
		if (end < 4 + plen && !eof && n < CHECK_READ_MAX)
			return CHECK_MORE;
		if (end < 7)
			return bad(why, len, buf, n, "an ERR packet");
		if (at < end && buf[at] == '#')
			at += 6;
		snprintf(what, sizeof(what), "ERR %u", (unsigned)buf[5] | (unsigned)buf[6] << 8);
		return bad(why, len, buf + (at < end ? at : end), at < end ? end - at : 0, what);
	}
	return bad(why, len, buf, n, "not a MySQL greeting (protocol 10)");
}

static enum check_result smtp(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	const uint8_t *nl;

	if (n < 4)
		return eof ? bad(why, len, buf, n, "no greeting") : CHECK_MORE;
	if (buf[0] < '1' || buf[0] > '5' || buf[1] < '0' || buf[1] > '9' || buf[2] < '0' ||
	    buf[2] > '9' || (buf[3] != ' ' && buf[3] != '-' && buf[3] != '\r'))
		return bad(why, len, buf, n, "not an SMTP greeting");
	if (!memcmp(buf, "220", 3))
		return CHECK_OK;
	nl = line_end(buf, n);
	if (!nl && !eof && n < CHECK_READ_MAX)
		return CHECK_MORE; /* the whole line, for the log */
	return bad(why, len, buf, nl ? (size_t)(nl - buf) : n, "greeting");
}

static enum check_result tls(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	char what[64];

	if (n && buf[0] != 0x16 && buf[0] != 0x15)
		return bad(why, len, buf, n, "not a TLS answer");
	if (n < 7)
		return eof ? bad(why, len, buf, n, "no ServerHello") : CHECK_MORE;
	if (buf[1] != 0x03)
		return bad(why, len, buf, n, "not a TLS answer");
	if (buf[0] == 0x15) {
		snprintf(what, sizeof(what), "TLS alert %u (level %u)", buf[6], buf[5]);
		snprintf(why, len, "%s", what);
		return CHECK_BAD;
	}
	if (buf[5] != 0x02)
		return bad(why, len, buf, n, "a handshake record without a ServerHello");
	return CHECK_OK;
}

static enum check_result http(const struct check_spec *c, const regex_t *re, const uint8_t *buf, size_t n, int eof,
				 char *why, size_t len)
{
	const uint8_t *nl = line_end(buf, n);
	unsigned code = 0;
	size_t i = 5;
	char what[32];

	if (memcmp(buf, "HTTP/", n < 5 ? n : 5))
		return bad(why, len, buf, n, "not an HTTP answer");
	if (!nl && n < 64 && !eof)
		return CHECK_MORE;
	while (i < n && buf[i] != ' ')
		i++;
	if (i + 4 > n || buf[i + 1] < '1' || buf[i + 1] > '9' || buf[i + 2] < '0' ||
	    buf[i + 2] > '9' || buf[i + 3] < '0' || buf[i + 3] > '9')
		return bad(why, len, buf, n, "not an HTTP status line");
	code = (unsigned)(buf[i + 1] - '0') * 100 + (unsigned)(buf[i + 2] - '0') * 10 +
	       (unsigned)(buf[i + 3] - '0');
	if (check_status_ok(c, code))
		return CHECK_OK;
	snprintf(what, sizeof(what), "status %u", code);
	return bad(why, len, buf, nl ? (size_t)(nl - buf) : n, what);
}

/* The verdict of each kind; tcp has none (the connect was the check). */
static enum check_result (*const verdicts[])(const struct check_spec *c, const regex_t *re,
					     const uint8_t *buf, size_t n, int eof, char *why,
					     size_t len) = {
	[CHECK_SEND_EXPECT] = expect_bytes, [CHECK_REDIS] = redis_pong,
	[CHECK_REDIS_PRIMARY] = redis_role, [CHECK_PGSQL] = pgsql,
	[CHECK_MYSQL] = mysql,              [CHECK_SMTP] = smtp,
	[CHECK_TLS] = tls,                  [CHECK_HTTP] = http,
};

enum check_result check_verdict(const struct check_spec *c, const regex_t *re, const uint8_t *buf,
				size_t n, int eof, char *why, size_t len)
{
	if ((unsigned)c->kind >= sizeof(verdicts) / sizeof(verdicts[0]) || !verdicts[c->kind])
		return CHECK_OK;
	return verdicts[c->kind](c, re, buf, n, eof, why, len);
}
