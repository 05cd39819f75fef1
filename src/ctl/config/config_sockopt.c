/* SPDX-License-Identifier: MIT */
/* config_sockopt: see config_sockopt.h. */
#define _GNU_SOURCE
#include "config_sockopt.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_listen.h"
#include "config_pp.h"
#include "sockopt.h"
#include "units.h"

/* ---- the value kinds ---------------------------------------------------------- */

static int ka_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	return sockopt_parse_keepalive(v, out, why, len);
}

static int rate_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	return sockopt_parse_rate(v, out, why, len);
}

/* decimal or 0x hex, 0..max */
static int number(const char *v, uint64_t max, uint64_t *out, const char *expects, char *why,
		  size_t len)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 0);
	if (!*v || *end || errno || n > max || *v == '-' || *v == '+' || *v == ' ') {
		snprintf(why, len, "invalid value '%s' (expects %s)", v, expects);
		return -1;
	}
	*out = n;
	return 0;
}

static int mark_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	return number(v, 0xffffffffULL, out, kind_mark.accepts, why, len);
}

static int tos_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	return number(v, 255, out, kind_tos.accepts, why, len);
}

static int iface_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	(void)out;
	return sockopt_check_iface(v, why, len);
}

static int source_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	(void)out;
	return strcmp(v, "off") ? sockopt_parse_source(v, NULL, why, len) : 0;
}

const struct setting_kind kind_keepalive = {
	"IDLE,INTERVAL,COUNT", "keepalive",
	"off, or three values separated by commas: IDLE and INTERVAL, durations of whole seconds "
	"(1s to 32767s, with their unit), and COUNT, 1 to 127; a dead peer is found IDLE + "
	"INTERVAL x COUNT after its last packet",
	ka_parse,
};
const struct setting_kind kind_rate = {
	"RATE", "rate",
	"0 (no limit), or a rate with its unit: bits per second as 500kbit, 10mbit, 1.5gbit (powers "
	"of 1000), or bytes per second as 2MB (kB, MB, GB), from 8kbit to 800gbit; /source after it: "
	"the share of every session of one client address together",
	rate_parse,
};
const struct setting_kind kind_mark = {
	"MARK", "integer", "0 to 4294967295, decimal or hex (0x...)", mark_parse,
};
const struct setting_kind kind_tos = {
	"TOS", "integer", "0 to 255, decimal or hex (0x...)", tos_parse,
};
const struct setting_kind kind_iface = {
	"NAME", "text", "an interface or VRF name (1 to 15 characters), or off", iface_parse,
};
const struct setting_kind kind_source = {
	"ADDRESS ...|client", "addresses",
	"off; client; or 1 to 16 numeric IPv4 or IPv6 addresses of this host without a port, "
	"separated by spaces or commas",
	source_parse,
};

const struct setting_kind *setting_kind(const struct setting *s)
{
	static const struct {
		const char *name;
		const struct setting_kind *kind;
	} rows[] = {
		{ "client-keepalive", &kind_keepalive }, { "backend-keepalive", &kind_keepalive },
		{ "rate-limit-up", &kind_rate },         { "rate-limit-down", &kind_rate },
		{ "mark", &kind_mark },                  { "tos", &kind_tos },
		{ "interface", &kind_iface },            { "source", &kind_source },
		{ "proxy-protocol-tlvs", &kind_pp_tlvs }, { "proxy-protocol-pass", &kind_pp_pass },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (!strcmp(s->name, rows[i].name))
			return rows[i].kind;
	return NULL;
}

int config_backend_source(const char *text, struct sock_ip *ip, uint8_t *client, char *why,
			  size_t len)
{
	struct sock_source s;

	if (sockopt_parse_source(text, &s, why, len))
		return -1;
	if (s.n > 1) {
		snprintf(why, len, "source=%s: one address per backend (a pool is the route's "
			 "source)", text);
		return -1;
	}
	*client = s.client;
	memset(ip, 0, sizeof(*ip));
	if (s.n)
		*ip = s.ip[0];
	return 0;
}

/* ---- building ----------------------------------------------------------------- */

static uint64_t rate_of(uint64_t packed)
{
	return packed & SOCKOPT_RATE_PER_SOURCE ? 0 : packed;
}

/* r's own sockets: its backend connections, and what its client
 * connections get on top of their listener's. */
static void route_build(struct route *r)
{
	const struct route_opts *o = &r->o;

	memset(&r->srv_so, 0, sizeof(r->srv_so));
	memset(&r->cli_so, 0, sizeof(r->cli_so));
	memset(&r->src, 0, sizeof(r->src));
	r->srv_so.mptcp = (o->mptcp & SIDE_BACKEND) != 0;
	r->srv_so.tos = (uint8_t)o->tos;
	r->srv_so.mark = (uint32_t)o->mark;
	if (strcmp(o->iface, "off"))
		snprintf(r->srv_so.iface, sizeof(r->srv_so.iface), "%.15s", o->iface);
	r->srv_so.ka = sockopt_ka_unpack(o->backend_keepalive);
	r->srv_so.user_timeout_ms = (uint32_t)o->backend_user_timeout_ms;
	r->srv_so.pacing = rate_of(o->rate_up);
	r->cli_so.mptcp = (o->mptcp & SIDE_LISTEN) != 0;
	r->cli_so.tos = (uint8_t)o->tos;
	r->cli_so.mark = (uint32_t)o->mark;
	r->cli_so.ka = sockopt_ka_unpack(o->client_keepalive);
	r->cli_so.user_timeout_ms = (uint32_t)o->client_user_timeout_ms;
	r->cli_so.pacing = rate_of(o->rate_down);
	if (strcmp(o->source, "off"))
		sockopt_parse_source(o->source, &r->src, NULL, 0); /* checked when read */
	r->fastopen_backend = (o->fastopen & SIDE_BACKEND) != 0;
	r->cli_inherited = 1; /* until a listener of it cannot carry them */
}

/* What a listener of r carries. */
static void listen_of(const struct route *r, struct listen_opts *l)
{
	memset(l, 0, sizeof(*l));
	l->so.mptcp = (r->o.mptcp & SIDE_LISTEN) != 0;
	l->so.tos = (uint8_t)r->o.tos;
	l->so.mark = (uint32_t)r->o.mark;
	if (strcmp(r->o.iface, "off"))
		snprintf(l->so.iface, sizeof(l->so.iface), "%.15s", r->o.iface);
	l->backlog = (uint32_t)r->o.backlog;
	l->fastopen = r->o.fastopen & SIDE_LISTEN ? l->backlog : 0;
	l->defer_accept_s = (uint32_t)((r->o.defer_accept_ms + 999) / 1000);
}

static unsigned line_in(const struct route *r, const struct listen_group *g)
{
	for (unsigned l = 0; l < r->nlisten; l++)
		if (addr_equal(&r->listen[l], g->addr))
			return r->listen_line[l];
	return r->line;
}

/* The routes of g share its sockets: they must agree on the options a
 * listening socket has. The client connections' keepalive and user
 * timeout ride on the listener too when all agree (inherited at accept,
 * no system call per connection); else each session sets its own. */
static int group_build(const struct config *c, struct listen_group *g)
{
	static const char *const names[] = { "mptcp", "tos", "mark", "interface", "backlog",
					     "fastopen", "defer_accept" };
	const struct route *first = g->route[0];
	struct listen_opts a, b;
	char at[300], ref[300];
	int bad = 0, same_cli = 1;

	listen_of(first, &g->lso);
	for (unsigned i = 1; i < g->nroute; i++) {
		const struct route *r = g->route[i];
		int diff = -1;

		listen_of(r, &b);
		a = g->lso;
		if (a.so.mptcp != b.so.mptcp)
			diff = 0;
		else if (a.so.tos != b.so.tos)
			diff = 1;
		else if (a.so.mark != b.so.mark)
			diff = 2;
		else if (strcmp(a.so.iface, b.so.iface))
			diff = 3;
		else if (a.backlog != b.backlog)
			diff = 4;
		else if (!a.fastopen != !b.fastopen)
			diff = 5;
		else if (a.defer_accept_s != b.defer_accept_s)
			diff = 6;
		if (diff >= 0) {
			config_where(c, line_in(r, g), at, sizeof(at));
			fprintf(stderr, "%slisten %s: route '%s' and route '%s' (%s) share this "
				"address but not its %s: a listening socket has one; give both routes "
				"the same %s\n", at, g->addr->text, r->name, first->name,
				config_line_ref(c, line_in(first, g), ref, sizeof(ref)), names[diff],
				names[diff]);
			bad++;
		}
		same_cli &= r->o.client_keepalive == first->o.client_keepalive &&
			    r->o.client_user_timeout_ms == first->o.client_user_timeout_ms;
	}
	if (same_cli) {
		g->lso.so.ka = first->cli_so.ka;
		g->lso.so.user_timeout_ms = first->cli_so.user_timeout_ms;
	} else {
		for (unsigned i = 0; i < g->nroute; i++)
			g->route[i]->cli_inherited = 0;
	}
	return bad;
}

/* Can this host bind ip (an address of it)? */
static int local_ip(const struct sock_ip *ip)
{
	int fd = socket(ip->family, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return 1; /* the connect will say */
	r = sockopt_bind_source(fd, ip, 0);
	close(fd);
	return r != -EADDRNOTAVAIL;
}

/* What r's backends make of its source: an address of each one's family,
 * and (host checks) addresses of this host. */
static int source_check(const struct config *c, const struct route *r)
{
	char at[300], t[64];
	int bad = 0;

	config_where(c, r->line, at, sizeof(at));
	for (unsigned b = 0; b < r->nbackend; b++) {
		const struct backend_conf *bc = &r->backend[b];
		int fam = bc->addr.ss.ss_family;

		if (bc->source.family || bc->source_client || r->src.client || !r->src.n)
			continue;
		if ((fam == AF_INET || fam == AF_INET6) && !sockopt_source_count(&r->src, fam)) {
			fprintf(stderr, "%sroute '%s': backend %s is %s and source has no %s address\n",
				at, r->name, bc->addr.text, fam == AF_INET ? "IPv4" : "IPv6",
				fam == AF_INET ? "IPv4" : "IPv6");
			bad++;
		}
	}
	for (unsigned b = 0; b < r->nbackend; b++) {
		const struct backend_conf *bc = &r->backend[b];
		if (bc->source.family && bc->source.family != bc->addr.ss.ss_family &&
		    (bc->addr.ss.ss_family == AF_INET || bc->addr.ss.ss_family == AF_INET6)) {
			config_where(c, bc->line, at, sizeof(at));
			sockopt_ip_format(&bc->source, t, sizeof(t));
			fprintf(stderr, "%sbackend %s: source=%s is of another address family\n", at,
				bc->addr.text, t);
			bad++;
		}
	}
	if (!config_host_checks)
		return bad;
	config_where(c, r->line, at, sizeof(at));
	for (unsigned i = 0; i < r->src.n; i++)
		if (!local_ip(&r->src.ip[i])) {
			sockopt_ip_format(&r->src.ip[i], t, sizeof(t));
			fprintf(stderr, "%sroute '%s': source %s is not an address of this host (see "
				"`ip addr`)\n", at, r->name, t);
			bad++;
		}
	for (unsigned b = 0; b < r->nbackend; b++)
		if (r->backend[b].source.family && !local_ip(&r->backend[b].source)) {
			config_where(c, r->backend[b].line, at, sizeof(at));
			sockopt_ip_format(&r->backend[b].source, t, sizeof(t));
			fprintf(stderr, "%sbackend %s: source=%s is not an address of this host (see "
				"`ip addr`)\n", at, r->backend[b].addr.text, t);
			bad++;
		}
	return bad;
}

/* Options MPTCP sockets refuse (Linux 6.x: TCP_USER_TIMEOUT and
 * SO_MAX_PACING_RATE answer EOPNOTSUPP or ENOPROTOOPT), and the host. */
static int route_check(const struct config *c, const struct route *r)
{
	char at[300];
	int bad = 0;

	config_where(c, r->line, at, sizeof(at));
	if ((r->o.mptcp & SIDE_BACKEND) && (r->o.backend_user_timeout_ms || r->o.rate_up)) {
		fprintf(stderr, "%sroute '%s': mptcp on backend connections cannot take %s (MPTCP "
			"sockets refuse %s)\n", at, r->name,
			r->o.rate_up ? "rate_limit_up" : "backend_user_timeout",
			r->o.rate_up ? "SO_MAX_PACING_RATE" : "TCP_USER_TIMEOUT");
		bad++;
	}
	if ((r->o.mptcp & SIDE_LISTEN) && (r->o.client_user_timeout_ms || r->o.rate_down)) {
		fprintf(stderr, "%sroute '%s': mptcp on listeners cannot take %s (MPTCP sockets "
			"refuse %s)\n", at, r->name,
			r->o.rate_down ? "rate_limit_down" : "client_user_timeout",
			r->o.rate_down ? "SO_MAX_PACING_RATE" : "TCP_USER_TIMEOUT");
		bad++;
	}
	bad += source_check(c, r);
	if (!config_host_checks)
		return bad;
	if (r->o.mptcp && !sockopt_mptcp_available()) {
		fprintf(stderr, "%sroute '%s': mptcp: this kernel takes no MPTCP sockets "
			"(net.mptcp.enabled is not 1)\n", at, r->name);
		bad++;
	}
	if (strcmp(r->o.iface, "off") && !sockopt_iface_exists(r->o.iface)) {
		fprintf(stderr, "%sroute '%s': interface %s: no such device here (see `ip link`)\n",
			at, r->name, r->o.iface);
		bad++;
	}
	return bad;
}

/* A note, not an error: Fast Open on listeners is off in the kernel
 * unless net.ipv4.tcp_fastopen has bit 2 (the default is 1: client only). */
static void fastopen_note(const struct config *c, const struct route *r)
{
	char at[300], v[16] = "";
	int fd = open("/proc/sys/net/ipv4/tcp_fastopen", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, v, sizeof(v) - 1);
	close(fd);
	if (n <= 0 || (atoi(v) & 2))
		return;
	config_where(c, r->line, at, sizeof(at));
	fprintf(stderr, "%snote: route '%s': fastopen on listeners: net.ipv4.tcp_fastopen is %d, so "
		"the kernel takes no data in clients' SYNs (set it to 3)\n", at, r->name, atoi(v));
}

int config_sockopt_build(struct config *c)
{
	int bad = 0;

	for (unsigned i = 0; i < c->nroutes; i++) {
		route_build(c->route[i]);
		bad += route_check(c, c->route[i]);
		if (config_host_checks && (c->route[i]->o.fastopen & SIDE_LISTEN))
			fastopen_note(c, c->route[i]);
	}
	for (unsigned k = 0; k < c->nlst; k++)
		bad += group_build(c, &c->lst[k]);
	return bad;
}

const char *config_net_admin_need(const struct config *c)
{
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		if (r->o.mark)
			return "mark (SO_MARK)";
		if (r->src.client)
			return "source = client (IP_TRANSPARENT)";
		for (unsigned b = 0; b < r->nbackend; b++)
			if (r->backend[b].source_client)
				return "source=client (IP_TRANSPARENT)";
	}
	return NULL;
}
