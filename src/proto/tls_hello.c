/* SPDX-License-Identifier: MIT */
/* tls_hello: see tls_hello.h. Two passes: the record walk (incremental,
 * per call) finds where the handshake message ends; the body parse runs
 * once, when it is whole, over a cursor that hops across record headers. */
#include "tls_hello.h"

#include <string.h>

#define REC_HDR        5
#define REC_HANDSHAKE  22
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define EXT_ALPN        16
#define EXT_PSK         41 /* pre_shared_key: must be the last extension */
#define EXT_VERSIONS    43
#define SNI_HOST_NAME   0

static inline uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* RFC 8701: 0x0A0A, 0x1A1A, ..., 0xFAFA. */
static inline bool grease16(uint16_t v)
{
	return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

void tls_hello_init(struct tls_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->state = TLS_HELLO_NEED_MORE;
}

static enum tls_hello_status stop(struct tls_hello *h, enum tls_hello_status st, const char *why)
{
	h->state = st;
	h->why = why;
	return st;
}

/* ---- the cursor over the handshake message, across records ---- */

struct cur {
	const uint8_t *buf;
	size_t pos;     /* next byte */
	size_t rec_end; /* end of the record pos is in */
	size_t left;    /* bytes of the message not read yet */
};

/* Steps over record headers: the walk has checked them all already. */
static void cur_norm(struct cur *c)
{
	while (c->pos == c->rec_end && c->left) {
		c->rec_end = c->pos + REC_HDR + be16(c->buf + c->pos + 3);
		c->pos += REC_HDR;
	}
}

static int cur_get(struct cur *c, void *out, size_t k)
{
	uint8_t *o = out;

	if (k > c->left)
		return -1;
	while (k) {
		cur_norm(c);
		size_t take = c->rec_end - c->pos < k ? c->rec_end - c->pos : k;
		if (o) {
			memcpy(o, c->buf + c->pos, take);
			o += take;
		}
		c->pos += take;
		c->left -= take;
		k -= take;
	}
	return 0;
}

static int cur_skip(struct cur *c, size_t k)
{
	return cur_get(c, NULL, k);
}

static int cur_u8(struct cur *c, size_t *v)
{
	uint8_t b;
	if (cur_get(c, &b, 1))
		return -1;
	*v = b;
	return 0;
}

static int cur_u16(struct cur *c, size_t *v)
{
	uint8_t b[2];
	if (cur_get(c, b, 2))
		return -1;
	*v = be16(b);
	return 0;
}

/* ---- extensions ---- */

bool tls_host_name_valid(const char *s, size_t len)
{
	size_t label = 0;

	if (len < 1 || len > TLS_HOST_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];
		if (ch == '.') {
			if (!label)
				return false; /* empty label, leading dot */
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0; /* no trailing dot */
}

/* server_name (RFC 6066 3): a list of (type, name); one host_name at most. */
static const char *parse_sni(struct tls_hello *h, struct cur *c, size_t len)
{
	size_t list, type, nlen, end = c->left - len;
	char name[TLS_HOST_NAME_MAX];

	if (len < 2 || cur_u16(c, &list) || list != len - 2)
		return "server_name: list length does not match the extension";
	if (!list)
		return "server_name: empty list";
	while (c->left > end) {
		if (c->left - end < 3 || cur_u8(c, &type) || cur_u16(c, &nlen) || nlen > c->left - end)
			return "server_name: entry overruns the list";
		if (type != SNI_HOST_NAME) {
			cur_skip(c, nlen);
			continue;
		}
		if (h->has_sni)
			return "server_name: more than one host_name";
		if (!nlen)
			return "server_name: empty host_name";
		if (nlen > TLS_HOST_NAME_MAX)
			return "server_name: host_name longer than 253 bytes";
		cur_get(c, name, nlen);
		if (!tls_host_name_valid(name, nlen))
			return "server_name: host_name is not a DNS name";
		for (size_t i = 0; i < nlen; i++)
			h->sni[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
		h->sni[nlen] = '\0';
		h->sni_len = nlen;
		h->has_sni = true;
	}
	return NULL;
}

/* application_layer_protocol_negotiation (RFC 7301 3.1): a list of
 * non-empty protocol names; GREASE names (RFC 8701: two equal 0x?A bytes)
 * are left out. */
static const char *parse_alpn(struct tls_hello *h, struct cur *c, size_t len)
{
	size_t list, plen, end = c->left - len;
	uint8_t p[255];

	if (len < 2 || cur_u16(c, &list) || list != len - 2)
		return "alpn: list length does not match the extension";
	if (!list)
		return "alpn: empty list";
	h->has_alpn = true;
	while (c->left > end) {
		if (cur_u8(c, &plen) || plen > c->left - end)
			return "alpn: protocol overruns the list";
		if (!plen)
			return "alpn: empty protocol name";
		cur_get(c, p, plen);
		if (plen == 2 && p[0] == p[1] && (p[0] & 0x0f) == 0x0a)
			continue;
		h->alpn_count++;
		if (h->alpn_len + 1 + plen > sizeof(h->alpn)) {
			h->alpn_truncated = true;
			continue;
		}
		h->alpn[h->alpn_len] = (uint8_t)plen;
		memcpy(h->alpn + h->alpn_len + 1, p, plen);
		h->alpn_len += 1 + plen;
	}
	return NULL;
}

/* supported_versions in a ClientHello (RFC 8446 4.2.1): 2..254 bytes of
 * versions; the highest that is not GREASE is kept. */
static const char *parse_versions(struct tls_hello *h, struct cur *c, size_t len)
{
	size_t list, v = 0;

	if (len < 1 || cur_u8(c, &list) || list != len - 1 || list < 2 || list % 2)
		return "supported_versions: bad list length";
	for (size_t i = 0; i < list; i += 2) {
		cur_u16(c, &v);
		if (!grease16((uint16_t)v) && v > h->version)
			h->version = (uint16_t)v;
	}
	return NULL;
}

static const char *parse_extensions(struct tls_hello *h, struct cur *c)
{
	uint64_t seen[65536 / 64] = { 0 };
	size_t total, type, len;

	if (cur_u16(c, &total) || total != c->left)
		return "extensions: block length does not match the message";
	while (c->left) {
		const char *why = NULL;
		if (c->left < 4 || cur_u16(c, &type) || cur_u16(c, &len) || len > c->left)
			return "extensions: an extension overruns the block";
		if (grease16((uint16_t)type)) {
			cur_skip(c, len);
			continue;
		}
		if (seen[type / 64] & (1ull << (type % 64)))
			return "extensions: the same extension twice";
		seen[type / 64] |= 1ull << (type % 64);
		if (type == EXT_PSK && len != c->left)
			return "extensions: pre_shared_key is not the last";
		switch (type) {
		case EXT_SERVER_NAME:
			why = parse_sni(h, c, len);
			break;
		case EXT_ALPN:
			why = parse_alpn(h, c, len);
			break;
		case EXT_VERSIONS:
			why = parse_versions(h, c, len);
			break;
		default:
			cur_skip(c, len);
		}
		if (why)
			return why;
	}
	return NULL;
}

/* The ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2). */
static const char *parse_body(struct tls_hello *h, const uint8_t *buf)
{
	struct cur c = { .buf = buf, .pos = REC_HDR, .rec_end = REC_HDR + be16(buf + 3),
			 .left = h->hs_len };
	size_t v, n;

	cur_skip(&c, 4); /* the handshake header, read by the walk */
	if (cur_u16(&c, &v))
		return "client_hello: shorter than its version";
	if (v >> 8 != 3)
		return "client_hello: legacy_version is not 3.x";
	h->legacy_version = (uint16_t)v;
	if (cur_skip(&c, 32))
		return "client_hello: shorter than its random";
	if (cur_u8(&c, &n) || n > 32 || cur_skip(&c, n))
		return "client_hello: bad session id length";
	if (cur_u16(&c, &n) || n < 2 || n % 2 || cur_skip(&c, n))
		return "client_hello: bad cipher suites length";
	if (cur_u8(&c, &n) || n < 1 || cur_skip(&c, n))
		return "client_hello: bad compression methods length";
	if (!c.left) /* TLS 1.0-1.2 may send no extensions at all */
		return NULL;
	return parse_extensions(h, &c);
}

/* ---- the record walk ---- */

/* The least the buffer must hold before the message can be whole, once its
 * length is known: the rest of it, in records of at most 2^14 bytes. */
static size_t least_total(const struct tls_hello *h)
{
	size_t rem;

	if (!h->hs_len)
		return h->scan + REC_HDR + 1;
	rem = h->hs_len - h->hs_have;
	return h->scan + rem + REC_HDR * ((rem + TLS_RECORD_MAX - 1) / TLS_RECORD_MAX);
}

/* The bytes of a record header at buf[at..n) that are there so far. */
static const char *check_header(const uint8_t *p, size_t have)
{
	if (have >= 1 && p[0] != REC_HANDSHAKE)
		return "not a handshake record";
	if (have >= 2 && p[1] != 3)
		return "record version is not 3.x";
	if (have >= 3 && p[2] > 4)
		return "record version above 3.4";
	return NULL;
}

/* Takes in the complete record at scan. Returns NEED_MORE to go on. */
static enum tls_hello_status take_record(struct tls_hello *h, const uint8_t *buf, size_t rlen)
{
	const uint8_t *frag = buf + h->scan + REC_HDR;

	for (size_t k = 0; h->hs_have + k < 4 && k < rlen; k++)
		h->hs_hdr[h->hs_have + k] = frag[k];
	h->hs_have += rlen;
	h->scan += REC_HDR + rlen;
	if (!h->hs_len && h->hs_have >= 4) {
		if (h->hs_hdr[0] != HS_CLIENT_HELLO)
			return stop(h, TLS_HELLO_BAD, "the handshake message is not a ClientHello");
		h->hs_len = 4 + ((size_t)h->hs_hdr[1] << 16 | (size_t)h->hs_hdr[2] << 8 | h->hs_hdr[3]);
	}
	if (!h->hs_len || h->hs_have < h->hs_len)
		return TLS_HELLO_NEED_MORE;
	if (h->hs_have > h->hs_len)
		return stop(h, TLS_HELLO_BAD, "bytes after the ClientHello in its record");
	h->consumed = h->scan;
	h->version = 0;
	const char *why = parse_body(h, buf);
	if (why)
		return stop(h, TLS_HELLO_BAD, why);
	if (!h->version)
		h->version = h->legacy_version;
	return stop(h, TLS_HELLO_DONE, NULL);
}

enum tls_hello_status tls_hello_parse(struct tls_hello *h, const uint8_t *buf, size_t n,
				      size_t max)
{
	while (h->state == TLS_HELLO_NEED_MORE) {
		size_t have = n > h->scan ? n - h->scan : 0, rlen;
		const char *why;

		/* What is known before the next header is judged first, so the
		 * answer does not depend on how much of that header is there */
		if (least_total(h) > max || h->scan + REC_HDR > max)
			return stop(h, TLS_HELLO_TOO_BIG, "the ClientHello is larger than tls_hello_max");
		why = check_header(buf + h->scan, have < REC_HDR ? have : REC_HDR);
		if (why) /* the first record decides whether this is TLS at all */
			return stop(h, h->scan ? TLS_HELLO_BAD : TLS_HELLO_NOT_TLS,
				    h->scan ? "a record other than handshake inside the ClientHello" : why);
		if (have < REC_HDR) {
			h->need = least_total(h) > h->scan + REC_HDR ? least_total(h) : h->scan + REC_HDR;
			return TLS_HELLO_NEED_MORE;
		}
		rlen = be16(buf + h->scan + 3);
		if (!h->scan)
			h->record_version = be16(buf + 1);
		if (!rlen)
			return stop(h, TLS_HELLO_BAD, "an empty handshake record");
		if (rlen > TLS_RECORD_MAX)
			return stop(h, TLS_HELLO_BAD, "a record longer than 2^14 bytes");
		if (h->scan + REC_HDR + rlen > max)
			return stop(h, TLS_HELLO_TOO_BIG, "the ClientHello is larger than tls_hello_max");
		if (have < REC_HDR + rlen) {
			h->need = h->scan + REC_HDR + rlen;
			if (least_total(h) > h->need)
				h->need = least_total(h);
			return TLS_HELLO_NEED_MORE;
		}
		take_record(h, buf, rlen);
	}
	return h->state;
}

bool tls_hello_alpn_next(const struct tls_hello *h, size_t *off, const uint8_t **name, size_t *len)
{
	if (*off >= h->alpn_len)
		return false;
	*len = h->alpn[*off];
	*name = h->alpn + *off + 1;
	*off += 1 + *len;
	return true;
}

bool tls_hello_offers_alpn(const struct tls_hello *h, const char *proto, size_t len)
{
	const uint8_t *p;
	size_t off = 0, l;

	while (tls_hello_alpn_next(h, &off, &p, &l))
		if (l == len && !memcmp(p, proto, len))
			return true;
	return false;
}

const char *tls_hello_status_name(enum tls_hello_status st)
{
	switch (st) {
	case TLS_HELLO_NEED_MORE:
		return "need more";
	case TLS_HELLO_DONE:
		return "done";
	case TLS_HELLO_NOT_TLS:
		return "not TLS";
	case TLS_HELLO_TOO_BIG:
		return "too big";
	case TLS_HELLO_BAD:
		return "bad";
	}
	return "?";
}
