/* SPDX-License-Identifier: MIT */
/* session_pp: see session_pp.h. */
#define _GNU_SOURCE
#include "session_pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "backend.h"
#include "log.h"
#include "proxy_proto.h"
#include "session.h"
#include "tls_hello.h"

/* The process's half of every unique id: drawn before the sandbox starts
 * (a constructor), so ids of two processes (an upgrade's, a restart's)
 * do not meet. */
static uint64_t nonce;

__attribute__((constructor)) static void nonce_draw(void)
{
	struct timespec ts;

	if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) == sizeof(nonce) && nonce)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	nonce = ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^
		((uint64_t)getpid() << 40);
}

void session_pp_uid(const struct session *s, uint64_t out[2])
{
	out[0] = s->uid[0] || s->uid[1] ? s->uid[0] : nonce;
	out[1] = s->uid[0] || s->uid[1] ? s->uid[1] : s->id;
}

void session_pp_unique_id(const struct session *s, char out[PP_UNIQUE_ID_LEN + 1])
{
	uint64_t uid[2];

	session_pp_uid(s, uid);
	snprintf(out, PP_UNIQUE_ID_LEN + 1, "%016llx%016llx", (unsigned long long)uid[0],
		 (unsigned long long)uid[1]);
}

static struct session_pp *pp_of(struct session *s)
{
	if (!s->pp)
		s->pp = calloc(1, sizeof(*s->pp));
	return s->pp;
}

int session_pp_received(struct session *s, const uint8_t *hdr, size_t n)
{
	size_t off = proxy_tlv_offset(hdr, n);
	struct session_pp *p;

	if (off >= n)
		return 0;
	if (!(p = pp_of(s)) || !(p->rx = malloc(n - off)))
		return -1;
	memcpy(p->rx, hdr + off, n - off);
	p->rx_len = (uint16_t)(n - off);
	return 0;
}

int session_pp_hello(struct session *s, const struct route *r, const struct tls_hello *h)
{
	size_t off = 0, len;
	const uint8_t *name;
	struct session_pp *p;

	if (!(r->o.pp_tlvs & (PP_SEND_AUTHORITY | PP_SEND_ALPN)) && !access_log_enabled())
		return 0;
	if (!h->has_sni && !h->alpn_len)
		return 0;
	if (!(p = pp_of(s)))
		return -1;
	if (h->has_sni && h->sni_len <= sizeof(p->authority)) {
		memcpy(p->authority, h->sni, h->sni_len);
		p->authority_len = (uint8_t)h->sni_len;
	}
	/* the first offered: splicer forwards the hello and never sees which
	 * one the server picks (HAProxy sends the negotiated one) */
	if (tls_hello_alpn_next(h, &off, &name, &len)) {
		memcpy(p->alpn, name, len);
		p->alpn_len = (uint8_t)len;
	}
	return 0;
}

/* The value of the client's header's first TLV of type t, or NULL. */
static const uint8_t *rx_find(const struct session_pp *p, uint8_t t, size_t *vlen)
{
	size_t off = 0;
	const uint8_t *val;
	uint8_t type;

	while (p && proxy_tlv_next(p->rx, p->rx_len, &off, &type, &val, vlen))
		if (type == t)
			return val;
	return NULL;
}

size_t session_pp_build(struct session *s, uint8_t *out, size_t n, size_t cap)
{
	const struct route *r = s->route;
	const struct session_pp *p = s->pp;
	struct pp_types sent = { { 0 } };
	char id[PP_UNIQUE_ID_LEN + 1];
	size_t off = 0, vlen, m;
	const uint8_t *val;
	uint8_t type;

	if (out[12] != 0x21) /* LOCAL: no client, nothing about it to say */
		return n;
	if ((r->o.pp_tlvs & PP_SEND_AUTHORITY) && p && p->authority_len) {
		n = proxy_tlv_add(out, n, cap, PP2_TYPE_AUTHORITY, p->authority, p->authority_len);
		pp_types_add(&sent, PP2_TYPE_AUTHORITY);
	}
	if ((r->o.pp_tlvs & PP_SEND_ALPN) && p && p->alpn_len) {
		n = proxy_tlv_add(out, n, cap, PP2_TYPE_ALPN, p->alpn, p->alpn_len);
		pp_types_add(&sent, PP2_TYPE_ALPN);
	}
	if (r->o.pp_tlvs & PP_SEND_UNIQUE_ID) {
		session_pp_unique_id(s, id);
		n = proxy_tlv_add(out, n, cap, PP2_TYPE_UNIQUE_ID, id, PP_UNIQUE_ID_LEN);
		pp_types_add(&sent, PP2_TYPE_UNIQUE_ID);
	}
	while (p && proxy_tlv_next(p->rx, p->rx_len, &off, &type, &val, &vlen)) {
		if (!pp_types_has(&r->pp_pass, type) || pp_types_has(&sent, type))
			continue;
		/* room for the CRC32C, which goes last */
		m = proxy_tlv_add(out, n, cap - ((r->o.pp_tlvs & PP_SEND_CRC32C) ? 7 : 0), type, val, vlen);
		if (m == n) {
			char nb[8];
			log_verbose("session %llx: PROXY header to %s: TLV %s (%zu bytes) left out: "
				    "the header would be longer than %d bytes", (unsigned long long)s->id,
				    r->backend[s->backend].addr.text, proxy_tlv_name(type, nb), vlen,
				    PROXY_V2_MAX);
			continue;
		}
		n = m;
	}
	if (r->o.pp_tlvs & PP_SEND_CRC32C)
		n = proxy_tlv_seal(out, n, cap);
	return n;
}

void session_pp_log(const struct session *s, struct session_pp_log *out)
{
	const struct session_pp *p = s->pp;
	const uint8_t *v;
	size_t vlen, off = 0, used = 0;
	uint8_t type;
	char nb[8];

	snprintf(out->authority, sizeof(out->authority), "-");
	snprintf(out->alpn, sizeof(out->alpn), "-");
	snprintf(out->unique_id, sizeof(out->unique_id), "-");
	snprintf(out->tlvs, sizeof(out->tlvs), "-");
	if (p && p->authority_len)
		snprintf(out->authority, sizeof(out->authority), "%.*s", p->authority_len, p->authority);
	else if ((v = rx_find(p, PP2_TYPE_AUTHORITY, &vlen)) && vlen)
		snprintf(out->authority, sizeof(out->authority), "%.*s", (int)vlen, (const char *)v);
	if (p && p->alpn_len)
		snprintf(out->alpn, sizeof(out->alpn), "%.*s", p->alpn_len, p->alpn);
	else if ((v = rx_find(p, PP2_TYPE_ALPN, &vlen)) && vlen)
		snprintf(out->alpn, sizeof(out->alpn), "%.*s", (int)(vlen < 255 ? vlen : 255),
			 (const char *)v);
	if (s->route->o.proxy_protocol == 2 && (s->route->o.pp_tlvs & PP_SEND_UNIQUE_ID))
		session_pp_unique_id(s, out->unique_id);
	else if ((v = rx_find(p, PP2_TYPE_UNIQUE_ID, &vlen)) && vlen)
		snprintf(out->unique_id, sizeof(out->unique_id), "%.*s", (int)vlen, (const char *)v);
	while (p && proxy_tlv_next(p->rx, p->rx_len, &off, &type, &v, &vlen) &&
	       used + 12 < sizeof(out->tlvs))
		used += (size_t)snprintf(out->tlvs + used, sizeof(out->tlvs) - used, "%s%s",
					 used ? "," : "", proxy_tlv_name(type, nb));
}

void session_pp_free(struct session *s)
{
	if (!s->pp)
		return;
	free(s->pp->rx);
	free(s->pp);
	s->pp = NULL;
}
