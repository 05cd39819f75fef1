/* SPDX-License-Identifier: MIT */
/* sockopt: see sockopt.h. */
#define _GNU_SOURCE
#include "sockopt.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "units.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif
#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif

/* ---- keepalive -------------------------------------------------------------- */

#define KA_MAX_S   32767 /* the kernel's MAX_TCP_KEEPIDLE and MAX_TCP_KEEPINTVL */
#define KA_MAX_CNT 127   /* MAX_TCP_KEEPCNT */

uint64_t sockopt_ka_pack(const struct sock_ka *ka)
{
	if (!ka->on)
		return 0;
	return (uint64_t)ka->idle_s | (uint64_t)ka->intvl_s << 16 | (uint64_t)ka->cnt << 32 |
	       1ULL << 40;
}

struct sock_ka sockopt_ka_unpack(uint64_t v)
{
	struct sock_ka ka = { 0 };

	if (v & (1ULL << 40)) {
		ka.on = 1;
		ka.idle_s = (uint16_t)v;
		ka.intvl_s = (uint16_t)(v >> 16);
		ka.cnt = (uint8_t)(v >> 32);
	}
	return ka;
}

/* One "60s" of a keepalive: whole seconds, 1..KA_MAX_S. */
static int ka_seconds(const char *what, const char *t, uint16_t *out, char *why, size_t len)
{
	uint64_t ms;
	int r = parse_duration_ms(t, &ms);

	if (r == -EDOM) {
		snprintf(why, len, "%s '%s' needs a unit (as 60s or 2m)", what, t);
		return -1;
	}
	if (r || ms % 1000 || ms < 1000 || ms > KA_MAX_S * 1000ULL) {
		snprintf(why, len, "%s '%s' must be whole seconds, 1s..%ds", what, t, KA_MAX_S);
		return -1;
	}
	*out = (uint16_t)(ms / 1000);
	return 0;
}

int sockopt_parse_keepalive(const char *text, uint64_t *out, char *why, size_t len)
{
	char buf[128], *part[4], *save, *p;
	struct sock_ka ka = { .on = 1 };
	uint64_t cnt;
	unsigned n = 0;

	if (!strcmp(text, "off") || !strcmp(text, "0")) {
		*out = 0;
		return 0;
	}
	if (strlen(text) >= sizeof(buf)) {
		snprintf(why, len, "expects IDLE,INTERVAL,COUNT (as 60s,10s,5) or off");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", text);
	for (p = strtok_r(buf, ",", &save); p && n < 4; p = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*p))
			p++;
		for (char *e = p + strlen(p); e > p && isspace((unsigned char)e[-1]);)
			*--e = '\0';
		part[n++] = p;
	}
	if (n != 3) {
		snprintf(why, len, "invalid value '%s' (expects IDLE,INTERVAL,COUNT: the idle time "
			 "before the first probe, the time between probes and how many go unanswered "
			 "before the connection is dead, as 60s,10s,5; or off)", text);
		return -1;
	}
	if (ka_seconds("idle", part[0], &ka.idle_s, why, len) ||
	    ka_seconds("interval", part[1], &ka.intvl_s, why, len))
		return -1;
	if (parse_uint(part[2], &cnt) || cnt < 1 || cnt > KA_MAX_CNT) {
		snprintf(why, len, "count '%s' must be an integer 1..%d", part[2], KA_MAX_CNT);
		return -1;
	}
	ka.cnt = (uint8_t)cnt;
	*out = sockopt_ka_pack(&ka);
	return 0;
}

/* ---- rates ------------------------------------------------------------------ */

#define RATE_MIN_BPS 1000ULL                  /* 8 kbit/s */
#define RATE_MAX_BPS (100ULL * 1000000000ULL) /* 800 gbit/s */

int sockopt_parse_rate(const char *text, uint64_t *out, char *why, size_t len)
{
	static const struct {
		const char *unit;
		double bytes; /* per second, for 1 of the unit */
	} units[] = {
		{ "bit", 1.0 / 8 }, { "kbit", 1e3 / 8 }, { "mbit", 1e6 / 8 }, { "gbit", 1e9 / 8 },
		{ "B", 1 },         { "kB", 1e3 },       { "MB", 1e6 },       { "GB", 1e9 },
	};
	char num[64], *end;
	const char *slash = strchr(text, '/');
	size_t n = slash ? (size_t)(slash - text) : strlen(text);
	uint64_t per_source = 0;
	double v, bps = -1;

	if (slash) {
		if (strcmp(slash, "/source")) {
			snprintf(why, len, "invalid value '%s': after the rate only /source may follow "
				 "(the client address's share, as 50mbit/source)", text);
			return -1;
		}
		per_source = SOCKOPT_RATE_PER_SOURCE;
	}
	if (n == 1 && text[0] == '0' && !slash) {
		*out = 0;
		return 0;
	}
	if (!n || n >= sizeof(num))
		goto bad;
	memcpy(num, text, n);
	num[n] = '\0';
	if (!isdigit((unsigned char)num[0]))
		goto bad;
	v = strtod(num, &end);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit))
			bps = v * units[i].bytes;
	if (bps < 0)
		goto bad;
	if (!isfinite(bps) || bps < (double)RATE_MIN_BPS || bps > (double)RATE_MAX_BPS) {
		snprintf(why, len, "invalid value '%s' (a rate 8kbit..800gbit, or 0: no limit)", text);
		return -1;
	}
	*out = (uint64_t)llround(bps) | per_source;
	return 0;
bad:
	snprintf(why, len, "invalid value '%s' (expects a rate with its unit: bits per second as "
		 "500kbit, 10mbit, 1.5gbit, or bytes per second as 2MB; /source after it for the "
		 "client address's share; 0: no limit)", text);
	return -1;
}

void sockopt_format_rate(uint64_t packed, char *buf, size_t len)
{
	double bits = (double)(packed & ~SOCKOPT_RATE_PER_SOURCE) * 8;
	const char *unit = "bit";
	char num[32];

	if (!(packed & ~SOCKOPT_RATE_PER_SOURCE)) {
		snprintf(buf, len, "0");
		return;
	}
	if (bits >= 1e9)
		bits /= 1e9, unit = "gbit";
	else if (bits >= 1e6)
		bits /= 1e6, unit = "mbit";
	else if (bits >= 1e3)
		bits /= 1e3, unit = "kbit";
	snprintf(num, sizeof(num), "%.3f", bits);
	for (char *e = num + strlen(num) - 1; e > num && (*e == '0' || *e == '.'); e--) {
		char c = *e;
		*e = '\0';
		if (c == '.')
			break;
	}
	snprintf(buf, len, "%s%s%s", num, unit, packed & SOCKOPT_RATE_PER_SOURCE ? "/source" : "");
}

/* ---- sources ---------------------------------------------------------------- */

static int ip_parse(const char *t, struct sock_ip *ip)
{
	char buf[64];
	size_t n = strlen(t);

	memset(ip, 0, sizeof(*ip));
	if (n >= sizeof(buf))
		return -1;
	if (t[0] == '[' && n > 2 && t[n - 1] == ']') { /* "[2001:db8::1]" */
		memcpy(buf, t + 1, n - 2);
		buf[n - 2] = '\0';
	} else {
		memcpy(buf, t, n + 1);
	}
	if (inet_pton(AF_INET, buf, ip->b) == 1)
		ip->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, ip->b) == 1)
		ip->family = AF_INET6;
	else
		return -1;
	return 0;
}

static int ip_unspecified(const struct sock_ip *ip)
{
	static const uint8_t zero[16];

	return !memcmp(ip->b, zero, ip->family == AF_INET ? 4 : 16);
}

int sockopt_parse_source(const char *text, struct sock_source *src, char *why, size_t len)
{
	char buf[1024], *save, *t;
	struct sock_source s = { 0 };

	if (strlen(text) >= sizeof(buf)) {
		snprintf(why, len, "the value is longer than %zu bytes", sizeof(buf) - 1);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", text);
	for (t = strtok_r(buf, " \t,", &save); t; t = strtok_r(NULL, " \t,", &save)) {
		if (!strcmp(t, "client")) {
			s.client = 1;
			continue;
		}
		if (s.n >= SOCKOPT_SOURCES_MAX) {
			snprintf(why, len, "at most %d source addresses", SOCKOPT_SOURCES_MAX);
			return -1;
		}
		if (ip_parse(t, &s.ip[s.n])) {
			snprintf(why, len, "'%s' is not a numeric IP address (expects client, or "
				 "addresses of this host without a port, as 10.0.0.5 10.0.0.6)", t);
			return -1;
		}
		if (ip_unspecified(&s.ip[s.n])) {
			snprintf(why, len, "'%s' is no source (leave source out for the kernel's "
				 "choice)", t);
			return -1;
		}
		for (unsigned i = 0; i < s.n; i++)
			if (s.ip[i].family == s.ip[s.n].family &&
			    !memcmp(s.ip[i].b, s.ip[s.n].b, sizeof(s.ip[i].b))) {
				snprintf(why, len, "source '%s' given twice", t);
				return -1;
			}
		s.n++;
	}
	if (s.client && s.n) {
		snprintf(why, len, "client (the client's own address, transparent) goes alone, "
			 "without addresses");
		return -1;
	}
	if (!s.client && !s.n) {
		snprintf(why, len, "expects client or one or more addresses");
		return -1;
	}
	if (src)
		*src = s;
	return 0;
}

unsigned sockopt_source_count(const struct sock_source *src, int family)
{
	unsigned n = 0;

	for (unsigned i = 0; i < src->n; i++)
		n += src->ip[i].family == family;
	return n;
}

int sockopt_source_pick(const struct sock_source *src, int family, unsigned pick,
			const struct sockaddr *client, struct sock_ip *ip)
{
	unsigned n;

	memset(ip, 0, sizeof(*ip));
	if (src->client) {
		if (client->sa_family == AF_INET) {
			ip->family = AF_INET;
			memcpy(ip->b, &((const struct sockaddr_in *)client)->sin_addr, 4);
		} else if (client->sa_family == AF_INET6) {
			const struct in6_addr *a = &((const struct sockaddr_in6 *)client)->sin6_addr;
			if (IN6_IS_ADDR_V4MAPPED(a)) {
				ip->family = AF_INET;
				memcpy(ip->b, a->s6_addr + 12, 4);
			} else {
				ip->family = AF_INET6;
				memcpy(ip->b, a, 16);
			}
		}
		return ip->family == family ? 1 : -EAFNOSUPPORT;
	}
	if (!(n = sockopt_source_count(src, family)))
		return 0;
	pick %= n;
	for (unsigned i = 0; i < src->n; i++)
		if (src->ip[i].family == family && !pick--) {
			*ip = src->ip[i];
			return 1;
		}
	return 0;
}

void sockopt_ip_format(const struct sock_ip *ip, char *buf, size_t len)
{
	char t[INET6_ADDRSTRLEN] = "?";

	if (ip->family)
		inet_ntop(ip->family, ip->b, t, sizeof(t));
	snprintf(buf, len, "%s", t);
}

int sockopt_bind_source(int fd, const struct sock_ip *ip, int transparent)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	int one = 1;

	if (ip->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, ip->b, 4);
		sl = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, ip->b, 16);
		sl = sizeof(*sin6);
	}
	if (transparent &&
	    (ip->family == AF_INET ? setsockopt(fd, IPPROTO_IP, IP_TRANSPARENT, &one, sizeof(one))
				   : setsockopt(fd, IPPROTO_IPV6, IPV6_TRANSPARENT, &one, sizeof(one))))
		return -errno;
	/* best effort: without it (before 4.2) bind() takes a port now, from
	 * the range shared by every destination */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	return bind(fd, (const struct sockaddr *)&ss, sl) ? -errno : 0;
}

/* ---- the host --------------------------------------------------------------- */

int sockopt_check_iface(const char *text, char *why, size_t len)
{
	size_t n = strlen(text);

	if (!strcmp(text, "off"))
		return 0;
	if (!n || n >= IF_NAMESIZE || !strcmp(text, ".") || !strcmp(text, "..") ||
	    strpbrk(text, "/: \t")) {
		snprintf(why, len, "invalid value '%s' (expects an interface or VRF name of 1..%d "
			 "characters, as eth1 or vrf-blue; or off)", text, IF_NAMESIZE - 1);
		return -1;
	}
	return 0;
}

int sockopt_iface_exists(const char *name)
{
	return if_nametoindex(name) != 0;
}

int sockopt_mptcp_available(void)
{
	char c = '0';
	int fd = open("/proc/sys/net/mptcp/enabled", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

/* ---- appliers --------------------------------------------------------------- */

/* Sets an int option unless it has that value already: a socket a reload
 * keeps gets only what changed (SO_MARK 0 on a socket never marked would
 * need CAP_NET_ADMIN for nothing). Returns 0 or -errno. */
static int set_int(int fd, int level, int name, int v)
{
	int cur = 0;
	socklen_t l = sizeof(cur);

	if (getsockopt(fd, level, name, &cur, &l) == 0 && l == sizeof(cur) && cur == v)
		return 0;
	return setsockopt(fd, level, name, &v, sizeof(v)) ? -errno : 0;
}

static int fail(int r, const char *what, char *why, size_t len, int first)
{
	if (r && !first)
		snprintf(why, len, "%s: %s", what, strerror(-r));
	return first ? first : r;
}

int sockopt_apply_early(int fd, const struct sock_opts *o, char *why, size_t len)
{
	if (!o || !o->iface[0])
		return 0;
	if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, o->iface, (socklen_t)strlen(o->iface) + 1)) {
		int r = -errno;
		snprintf(why, len, "interface %s: %s%s", o->iface, strerror(errno),
			 errno == ENODEV ? " (no such device here)" : "");
		return r;
	}
	return 0;
}

int sockopt_pacing(int fd, uint64_t bytes_per_s)
{
	unsigned long rate = bytes_per_s ? (unsigned long)bytes_per_s : ~0UL;

	return setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate)) ? -errno : 0;
}

/* One int option: fresh, only when it is not the default (0); else
 * compared first (set_int). */
static int put(int fd, int fresh, int level, int name, int v)
{
	if (fresh)
		return v ? (setsockopt(fd, level, name, &v, sizeof(v)) ? -errno : 0) : 0;
	return set_int(fd, level, name, v);
}

int sockopt_apply(int fd, int family, const struct sock_opts *o, int fresh, char *why, size_t len)
{
	int r = 0;

	if (!o || (family != AF_INET && family != AF_INET6))
		return 0;
	r = fail(put(fd, fresh, SOL_SOCKET, SO_MARK, (int)o->mark),
		 "mark (SO_MARK needs CAP_NET_ADMIN)", why, len, r);
	r = fail(family == AF_INET ? put(fd, fresh, IPPROTO_IP, IP_TOS, o->tos)
				   : put(fd, fresh, IPPROTO_IPV6, IPV6_TCLASS, o->tos),
		 "tos", why, len, r);
	r = fail(put(fd, fresh, SOL_SOCKET, SO_KEEPALIVE, o->ka.on), "keepalive", why, len, r);
	if (o->ka.on) {
		r = fail(put(fd, 1, IPPROTO_TCP, TCP_KEEPIDLE, o->ka.idle_s), "keepalive idle", why,
			 len, r);
		r = fail(put(fd, 1, IPPROTO_TCP, TCP_KEEPINTVL, o->ka.intvl_s), "keepalive interval",
			 why, len, r);
		r = fail(put(fd, 1, IPPROTO_TCP, TCP_KEEPCNT, o->ka.cnt), "keepalive count", why, len,
			 r);
	}
	if (o->user_timeout_ms || !o->mptcp) /* MPTCP sockets refuse the option */
		r = fail(put(fd, fresh, IPPROTO_TCP, TCP_USER_TIMEOUT, (int)o->user_timeout_ms),
			 "user timeout (TCP_USER_TIMEOUT)", why, len, r);
	if (o->pacing)
		r = fail(sockopt_pacing(fd, o->pacing), "rate limit (SO_MAX_PACING_RATE)", why, len, r);
	return r;
}

int sockopt_listen_same_kind(int fd, const struct listen_opts *o)
{
	char dev[IF_NAMESIZE + 1] = "";
	int proto = 0;
	socklen_t l = sizeof(proto);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) || (ss.ss_family != AF_INET &&
							    ss.ss_family != AF_INET6))
		return 1; /* Unix: no such options */
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l))
		return 1;
	if ((proto == IPPROTO_MPTCP) != (o && o->so.mptcp))
		return 0;
	l = sizeof(dev);
	if (getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &l))
		dev[0] = '\0';
	dev[l < sizeof(dev) ? l : sizeof(dev) - 1] = '\0';
	return !strcmp(dev, o ? o->so.iface : "");
}

int sockopt_apply_listen(int fd, int family, const struct listen_opts *o, char *why, size_t len)
{
	static const struct listen_opts none;
	int r;

	if (!o)
		o = &none;
	if (family != AF_INET && family != AF_INET6)
		return listen(fd, o->backlog ? (int)o->backlog : SOCKOPT_BACKLOG) ? -errno : 0;
	r = sockopt_apply(fd, family, &o->so, 0, why, len);
	r = fail(listen(fd, o->backlog ? (int)o->backlog : SOCKOPT_BACKLOG) ? -errno : 0, "backlog",
		 why, len, r);
	r = fail(set_int(fd, IPPROTO_TCP, TCP_FASTOPEN, (int)o->fastopen), "fastopen (TCP_FASTOPEN)",
		 why, len, r);
	r = fail(set_int(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, (int)o->defer_accept_s),
		 "defer_accept (TCP_DEFER_ACCEPT)", why, len, r);
	return r;
}
