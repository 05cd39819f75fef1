/* SPDX-License-Identifier: MIT */
/* addr: parsing and printing of socket addresses. Hostnames go through
 * getaddrinfo() once, at parse time: a proxy must not block its event loop on
 * DNS, and a name that does not resolve is a startup error, not a runtime one.
 * The config is parsed at start, at every reload (SIGHUP) and by `check`, so
 * those are the moments names are resolved; in between, the addresses hold.
 * Backend names given with resolve= are the exception: addr_split() takes
 * them apart, and the resolver thread (src/ctl/health/dns.c) looks them up. */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(char *err, unsigned errlen, const char *fmt, const char *s, const char *x)
{
	snprintf(err, errlen, fmt, s, x);
	return -EINVAL;
}

static int parse_unix(const char *s, struct addr *a, char *err, unsigned errlen)
{
	const char *path = s + 5;
	struct sockaddr_un *sun = (struct sockaddr_un *)&a->ss;
	size_t n = strlen(path);

	if (!n || (path[0] == '@' && n == 1))
		return fail(err, errlen, "address '%s': empty Unix socket path%s", s, "");
	/* A file path needs its trailing NUL; an abstract name's leading '@'
	 * becomes the leading NUL, so it may fill sun_path exactly. */
	if (n > sizeof(sun->sun_path) - (path[0] != '@'))
		return fail(err, errlen, "address '%.40s...': Unix socket path longer than %s bytes", s, "107");
	memset(&a->ss, 0, sizeof(a->ss));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, n);
	if (path[0] == '@') /* abstract namespace: leading NUL, no trailing one */
		sun->sun_path[0] = '\0';
	a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] != '@'));
	snprintf(a->text, sizeof(a->text), "%s", s);
	return 0;
}

static int parse_port(const char *p, const char *s, enum addr_use use, unsigned *port,
		      char *err, unsigned errlen)
{
	char *end;
	long v;

	if (!*p)
		return fail(err, errlen, "address '%s': missing port%s", s, "");
	if (*p < '0' || *p > '9')
		return fail(err, errlen, "address '%s': port '%s' is not a number", s, p);
	errno = 0;
	v = strtol(p, &end, 10);
	if (*end)
		return fail(err, errlen, "address '%s': port '%s' is not a number", s, p);
	if (errno || v > 65535)
		return fail(err, errlen, "address '%s': port %s out of range 0..65535", s, p);
	if (v == 0 && use == ADDR_CONNECT)
		return fail(err, errlen, "address '%s': port 0 is only valid for a listener%s", s, "");
	*port = (unsigned)v;
	return 0;
}

int addr_resolve_names = 1;

static int same_ip(const struct addr *a, const struct addr *b)
{
	return a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
}

/* Adds one inet address to out[] unless it is there already (a hosts file
 * may list an address twice); *n counts every distinct one, also beyond
 * max. Returns -EINVAL with err for a v4-mapped listen address. */
static int add_inet(const struct sockaddr *sa, socklen_t len, const char *s, enum addr_use use,
		    struct addr *out, unsigned max, unsigned *n, char *err, unsigned errlen)
{
	struct addr a;

	memset(&a, 0, sizeof(a));
	memcpy(&a.ss, sa, len);
	a.len = len;
	if (use == ADDR_LISTEN && a.ss.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&a.ss)->sin6_addr)) {
		/* IPv6 listeners are IPv6-only (IPV6_V6ONLY, so [::] and 0.0.0.0
		 * can both be bound), and bind() of a v4-mapped address on one
		 * says only "Invalid argument": name the IPv4 form instead */
		char ip4[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &((struct sockaddr_in6 *)&a.ss)->sin6_addr.s6_addr[12], ip4,
			  sizeof(ip4));
		snprintf(err, errlen, "address '%s': an IPv4-mapped IPv6 address cannot be listened "
			 "on; write %s:%u", s, ip4, ntohs(((struct sockaddr_in6 *)&a.ss)->sin6_port));
		return -EINVAL;
	}
	for (unsigned i = 0; i < *n && i < max; i++)
		if (same_ip(&out[i], &a))
			return 0;
	addr_format((struct sockaddr *)&a.ss, a.len, a.text, sizeof(a.text));
	if (*n < max)
		out[*n] = a;
	(*n)++;
	return 0;
}

/* "*:port": 0.0.0.0 and [::], the second only where this kernel has IPv6. */
static void add_wildcards(unsigned port, const char *s, struct addr *out, unsigned max, unsigned *n)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				     .sin6_addr = IN6ADDR_ANY_INIT };
	char err[8];
	int fd;

	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	add_inet((struct sockaddr *)&sin, sizeof(sin), s, ADDR_LISTEN, out, max, n, err, sizeof(err));
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 && errno == EAFNOSUPPORT)
		return;
	if (fd >= 0)
		close(fd);
	add_inet((struct sockaddr *)&sin6, sizeof(sin6), s, ADDR_LISTEN, out, max, n, err, sizeof(err));
}

int addr_split(const char *s, enum addr_use use, char *host, unsigned hostlen, unsigned *port,
	       char *err, unsigned errlen)
{
	const char *colon, *portstr;
	size_t n;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close)
			return fail(err, errlen, "address '%s': missing ']' after IPv6 address%s", s, "");
		if (close[1] != ':')
			return fail(err, errlen, "address '%s': expected ':port' after ']'%s", s, "");
		n = (size_t)(close - s - 1);
		if (n >= hostlen || close == s + 1)
			return fail(err, errlen, "address '%s': bad IPv6 address%s", s, "");
		memcpy(host, s + 1, n);
		host[n] = '\0';
		portstr = close + 2;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return fail(err, errlen, "address '%s': missing ':port' (forms: host:port, [v6]:port, :port, *:port, unix:/path)%s", s, "");
		if (strchr(s, ':') != colon)
			return fail(err, errlen, "address '%s': IPv6 addresses need brackets, as in [::1]:80%s", s, "");
		n = (size_t)(colon - s);
		if (n >= hostlen)
			return fail(err, errlen, "address '%s': host name too long%s", s, "");
		memcpy(host, s, n);
		host[n] = '\0';
		portstr = colon + 1;
	}
	return parse_port(portstr, s, use, port, err, errlen);
}

int addr_parse_all(const char *s, enum addr_use use, struct addr *out, unsigned max, char *err,
		   unsigned errlen)
{
	char host[256], portstr[8];
	unsigned port, n = 0;
	struct addrinfo hints, *res = NULL, *ai;
	int r;

	if (!max)
		return fail(err, errlen, "address '%s': no room%s", s, "");
	memset(out, 0, sizeof(*out));
	if (!strncmp(s, "unix:", 5))
		return (r = parse_unix(s, out, err, errlen)) ? r : 1;
	if ((r = addr_split(s, use, host, sizeof(host), &port, err, errlen)))
		return r;
	snprintf(portstr, sizeof(portstr), "%u", port);

	if (!host[0]) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&out->ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		sin->sin_addr.s_addr = htonl(use == ADDR_LISTEN ? INADDR_ANY : INADDR_LOOPBACK);
		out->len = sizeof(*sin);
		addr_format((struct sockaddr *)&out->ss, out->len, out->text, sizeof(out->text));
		return 1;
	}
	/* glibc's getaddrinfo() reads "*" as no host at all, the loopback:
	 * "*:8080" once listened on [::1] only */
	if (!strcmp(host, "*") && s[0] == '[')
		return fail(err, errlen, "address '%s': '*' is not an IPv6 address; *:PORT is every "
			    "address of both families%s", s, "");
	if (!strcmp(host, "*")) {
		if (use != ADDR_LISTEN)
			return fail(err, errlen, "address '%s': '*' (every address of this host) is for "
				    "listening; a backend needs a host%s", s, "");
		add_wildcards(port, s, out, max, &n);
		return (int)n;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (s[0] == '[' || !addr_resolve_names ? AI_NUMERICHOST : 0);
	if (s[0] == '[')
		hints.ai_family = AF_INET6; /* brackets are for IPv6 only */
	r = getaddrinfo(host, portstr, &hints, &res);
	if (r || !res) {
		snprintf(err, errlen, "address '%s': cannot resolve '%s': %s", s, host,
			 r ? gai_strerror(r) : "no address");
		return -EINVAL;
	}
	for (ai = res, r = 0; ai && !r; ai = ai->ai_next)
		if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
			r = add_inet(ai->ai_addr, ai->ai_addrlen, s, use, out, max, &n, err, errlen);
	freeaddrinfo(res);
	if (r)
		return r;
	if (!n)
		return fail(err, errlen, "address '%s': cannot resolve '%s': no IPv4 or IPv6 address", s, host);
	return (int)n;
}

void addr_from_inet(struct addr *a, const struct sockaddr *sa, unsigned port)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET) {
		a->len = sizeof(struct sockaddr_in);
		memcpy(&a->ss, sa, a->len);
		((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
	} else {
		a->len = sizeof(struct sockaddr_in6);
		memcpy(&a->ss, sa, a->len);
		((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
	}
	addr_format((struct sockaddr *)&a->ss, a->len, a->text, sizeof(a->text));
}

int addr_parse(const char *s, enum addr_use use, struct addr *a, char *err, unsigned errlen)
{
	int r = addr_parse_all(s, use, a, 1, err, errlen);

	return r < 0 ? r : 0;
}

void addr_format(const struct sockaddr *sa, socklen_t len, char *buf, unsigned buflen)
{
	char ip[INET6_ADDRSTRLEN];

	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *sin = (const void *)sa;
		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
		snprintf(buf, buflen, "%s:%u", ip, ntohs(sin->sin_port));
		break;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *sin6 = (const void *)sa;
		char scope[IF_NAMESIZE + 2] = "";
		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
		/* Keep a link-local scope, or the text would not connect again. */
		if (sin6->sin6_scope_id) {
			char ifn[IF_NAMESIZE];
			/* names parse back only on link-local addresses (glibc);
			 * elsewhere the number does (found by fuzz/fuzz_addr) */
			int ll = IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr) ||
				 IN6_IS_ADDR_MC_LINKLOCAL(&sin6->sin6_addr);
			if (ll && if_indextoname(sin6->sin6_scope_id, ifn))
				snprintf(scope, sizeof(scope), "%%%s", ifn);
			else
				snprintf(scope, sizeof(scope), "%%%u", sin6->sin6_scope_id);
		}
		snprintf(buf, buflen, "[%s%s]:%u", ip, scope, ntohs(sin6->sin6_port));
		break;
	}
	case AF_UNIX: {
		const struct sockaddr_un *sun = (const void *)sa;
		size_t n = len > offsetof(struct sockaddr_un, sun_path)
				   ? len - offsetof(struct sockaddr_un, sun_path) : 0;
		if (!n)
			snprintf(buf, buflen, "unix:");
		else if (sun->sun_path[0] == '\0')
			snprintf(buf, buflen, "unix:@%.*s", (int)(n - 1), sun->sun_path + 1);
		else
			snprintf(buf, buflen, "unix:%.*s", (int)strnlen(sun->sun_path, n), sun->sun_path);
		break;
	}
	default:
		snprintf(buf, buflen, "family-%d", sa->sa_family);
	}
}

int addr_is_inet(const struct addr *a)
{
	return a->ss.ss_family == AF_INET || a->ss.ss_family == AF_INET6;
}

int addr_equal(const struct addr *a, const struct addr *b)
{
	return a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
}

/* IP address and port of an inet address, a v4-mapped IPv6 one as IPv4. */
struct ip_port {
	int family;
	unsigned char ip[16];
	uint16_t port;
};

static void ip_port_of(const struct addr *a, struct ip_port *p)
{
	memset(p, 0, sizeof(*p));
	p->family = a->ss.ss_family;
	if (p->family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)&a->ss;
		memcpy(p->ip, &sin->sin_addr, 4);
		p->port = sin->sin_port;
	} else if (p->family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)&a->ss;
		p->port = sin6->sin6_port;
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			p->family = AF_INET;
			memcpy(p->ip, &sin6->sin6_addr.s6_addr[12], 4);
		} else {
			memcpy(p->ip, &sin6->sin6_addr, 16);
		}
	}
}

/* An address a connect() on this host would deliver to this host. */
static int ip_is_local(const struct ip_port *p)
{
	static const unsigned char zero[16], one6[16] = { [15] = 1 };
	size_t n = p->family == AF_INET ? 4 : 16;
	struct ifaddrs *ifa, *i;
	int local = 0;

	if (!memcmp(p->ip, zero, n) || (p->family == AF_INET && p->ip[0] == 127) ||
	    (p->family == AF_INET6 && !memcmp(p->ip, one6, 16)))
		return 1;
	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !local; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != p->family)
			continue;
		if (p->family == AF_INET)
			local = !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, p->ip, 4);
		else
			local = !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, p->ip, 16);
	}
	freeifaddrs(ifa);
	return local;
}

int addr_is_this_host(const struct addr *a)
{
	struct ip_port p;

	if (!addr_is_inet(a))
		return 0;
	ip_port_of(a, &p);
	return ip_is_local(&p);
}

enum addr_loop addr_loops_to(const struct addr *backend, const struct addr *listen)
{
	static const unsigned char zero[16];
	struct ip_port b, l;

	if (backend->ss.ss_family == AF_UNIX || listen->ss.ss_family == AF_UNIX)
		return backend->ss.ss_family == listen->ss.ss_family && backend->len == listen->len &&
		       !memcmp(&backend->ss, &listen->ss, listen->len) ? ADDR_LOOP_SAME : ADDR_LOOP_NONE;
	ip_port_of(backend, &b);
	ip_port_of(listen, &l);
	/* IPv6 listeners are IPv6-only: an IPv4 backend never reaches one */
	if (b.family != l.family || !l.port || b.port != l.port)
		return ADDR_LOOP_NONE;
	if (!memcmp(b.ip, l.ip, sizeof(b.ip)))
		return ADDR_LOOP_SAME;
	if (!memcmp(l.ip, zero, sizeof(l.ip)) && ip_is_local(&b))
		return ADDR_LOOP_LOCAL;
	return ADDR_LOOP_NONE;
}
