/* SPDX-License-Identifier: MIT */
/* cidr: see cidr.h. */
#include "cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool ip_from_sockaddr(const struct sockaddr *sa, struct ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	if (sa->sa_family == AF_INET) {
		memcpy(ip->a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		ip->v4 = 1;
		return true;
	}
	if (sa->sa_family != AF_INET6)
		return false;
	const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (!memcmp(a, v4_mapped, 12)) {
		memcpy(ip->a, a + 12, 4);
		ip->v4 = 1;
	} else {
		memcpy(ip->a, a, 16);
	}
	return true;
}

static void clear_host_bits(uint8_t *a, unsigned bytes, unsigned plen)
{
	for (unsigned i = 0; i < bytes; i++) {
		unsigned keep = plen > i * 8 ? plen - i * 8 : 0;
		if (keep < 8)
			a[i] &= (uint8_t)(0xff00 >> keep);
	}
}

/* A prefix length: 1 to 3 digits, no sign, no leading zero but "0". */
static int parse_plen(const char *s, unsigned *out)
{
	size_t n = strlen(s);

	if (!n || n > 3 || strspn(s, "0123456789") != n || (n > 1 && s[0] == '0'))
		return -1;
	*out = (unsigned)atoi(s);
	return 0;
}

int cidr_parse(const char *s, struct cidr *c, char *err, size_t errlen, char *warn, size_t warnlen)
{
	char text[CIDR_TEXT_MAX];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned plen = 0, max;

	if (warn && warnlen)
		warn[0] = '\0';
	memset(c, 0, sizeof(*c));
	if (alen >= sizeof text || !alen) {
		snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address", s);
		return -1;
	}
	memcpy(text, s, alen);
	text[alen] = '\0';
	if (inet_pton(AF_INET, text, c->ip.a) == 1) {
		c->ip.v4 = 1;
	} else if (inet_pton(AF_INET6, text, c->ip.a) != 1) {
		snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address", text);
		return -1;
	}
	max = c->ip.v4 ? 32 : 128;
	if (!slash) {
		plen = max;
	} else if (parse_plen(slash + 1, &plen)) {
		snprintf(err, errlen, "'%s': the prefix length after '/' must be a number", s);
		return -1;
	} else if (plen > max) {
		snprintf(err, errlen, "'%s': bad prefix length %u for %s (0..%u)", s, plen,
			 c->ip.v4 ? "IPv4" : "IPv6", max);
		return -1;
	}
	/* ::ffff:a.b.c.d/96+N is the IPv4 range a.b.c.d/N: v4-mapped clients
	 * are compared as IPv4 */
	if (!c->ip.v4 && plen >= 96 && !memcmp(c->ip.a, v4_mapped, 12)) {
		memmove(c->ip.a, c->ip.a + 12, 4);
		memset(c->ip.a + 4, 0, 12);
		c->ip.v4 = 1;
		plen -= 96;
	}
	c->plen = (uint8_t)plen;
	uint8_t before[16];
	memcpy(before, c->ip.a, 16);
	clear_host_bits(c->ip.a, c->ip.v4 ? 4 : 16, plen);
	if (memcmp(before, c->ip.a, 16) && warn && warnlen) {
		char fixed[CIDR_TEXT_MAX];
		cidr_format(c, fixed, sizeof fixed);
		snprintf(warn, warnlen, "'%s' has host bits set: it means %s", s, fixed);
	}
	return 0;
}

bool cidr_match(const struct cidr *c, const struct ip *ip)
{
	unsigned full = c->plen / 8, rest = c->plen % 8;

	if (c->ip.v4 != ip->v4)
		return false;
	if (memcmp(c->ip.a, ip->a, full))
		return false;
	return !rest || !((c->ip.a[full] ^ ip->a[full]) & (uint8_t)(0xff00 >> rest));
}

void cidr_format(const struct cidr *c, char *buf, size_t buflen)
{
	char a[INET6_ADDRSTRLEN];

	inet_ntop(c->ip.v4 ? AF_INET : AF_INET6, c->ip.a, a, sizeof a);
	snprintf(buf, buflen, "%s/%u", a, c->plen);
}

int cidr_list_parse(struct cidr_list *l, const char *value, char *err, size_t errlen, char *warn,
		    size_t warnlen)
{
	static const char sep[] = " \t,";
	size_t n = 0, old = l->n;
	char w[256];

	for (const char *p = value + strspn(value, sep); *p; p += strcspn(p, sep), p += strspn(p, sep))
		n++;
	if (!n) {
		snprintf(err, errlen, "an empty list of address ranges");
		return -1;
	}
	struct cidr *v = realloc(l->v, (old + n) * sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	l->v = v;
	if (warn && warnlen)
		warn[0] = '\0';
	for (const char *p = value + strspn(value, sep); *p; p += strspn(p, sep)) {
		char one[CIDR_TEXT_MAX + 8];
		size_t len = strcspn(p, sep);
		snprintf(one, sizeof one, "%.*s", (int)len, p);
		if (len >= CIDR_TEXT_MAX + 4 || cidr_parse(one, &v[l->n], err, errlen, w, sizeof w)) {
			if (len >= CIDR_TEXT_MAX + 4)
				snprintf(err, errlen, "'%.*s...' is not an address range", 40, p);
			l->n = old;
			return -1;
		}
		if (w[0] && warn && warnlen && !warn[0])
			snprintf(warn, warnlen, "%s", w);
		l->n++;
		p += len;
	}
	return 0;
}

void cidr_list_free(struct cidr_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

bool cidr_list_match(const struct cidr_list *l, const struct ip *ip)
{
	for (size_t i = 0; i < l->n; i++)
		if (cidr_match(&l->v[i], ip))
			return true;
	return false;
}

bool acl_allows(const struct acl *acl, const struct ip *ip)
{
	if (cidr_list_match(&acl->deny, ip))
		return false;
	return !acl->allow.n || cidr_list_match(&acl->allow, ip);
}

bool acl_allows_sockaddr(const struct acl *acl, const struct sockaddr *sa)
{
	struct ip ip;

	if (!ip_from_sockaddr(sa, &ip))
		return !acl->allow.n;
	return acl_allows(acl, &ip);
}
