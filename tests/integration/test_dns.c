/* SPDX-License-Identifier: MIT */
/* Integration cases for backend names with resolve= (src/ctl/health/dns.c), against
 * a DNS server of the test's own (UDP on 127.0.0.1, answering A, AAAA and
 * SRV from a table the test changes while the proxy runs; the proxy is
 * pointed at it with `resolvers =`), and backends that say who they are:
 *   - a name going from one address to two and back moves new sessions
 *     within one resolve interval (1 s, and 600 ms for the lookup, the
 *     main loop's 100 ms tick and the new generation), and a session on
 *     the address that went keeps working (and finishes) on it;
 *   - AAAA: a name with only ::1 is a backend at [::1]:P; given an A
 *     record too it is two backends, one of each family;
 *   - a failing resolver (SERVFAIL, then NXDOMAIN) keeps the last answer:
 *     sessions are still served, failures are counted and logged once;
 *   - SRV names give targets and ports, of the lowest priority only;
 *   - a name without an address at start: `check` notes it, the proxy
 *     starts without it (clients closed) and takes it when it appears;
 *   - a client waiting for a slot (maxconn) is served by an address DNS
 *     adds as soon as the new generation is in force. 
 * The times from a DNS change to the first new session on the new set are
 * printed. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- a DNS server the test controls ---------------------------------------- */

#define T_A    1
#define T_AAAA 28
#define T_SRV  33

struct tdns_rr {
	char name[128];
	uint16_t type;
	uint8_t data[300];
	uint16_t len;
};

struct tdns {
	int fd, port;
	pthread_t thr;
	_Atomic int stop;
	pthread_mutex_t mu;
	struct tdns_rr rr[32];
	int nrr;
	int rcode;            /* 0: answer from the table; else this rcode for everything */
	_Atomic int queries;
};

/* "a.b.c" in DNS wire form into out; returns its length. */
static size_t wire_name(const char *name, uint8_t *out)
{
	size_t n = 0;

	while (*name) {
		size_t l = strcspn(name, ".");
		out[n++] = (uint8_t)l;
		memcpy(out + n, name, l);
		n += l;
		name += l;
		if (*name == '.')
			name++;
	}
	out[n++] = 0;
	return n;
}

static void tdns_answer(struct tdns *d, const uint8_t *q, size_t qlen, struct sockaddr_in *from,
			socklen_t fromlen)
{
	uint8_t out[1500];
	char name[256];
	size_t p = 12, n = 0, o;
	uint16_t type, an = 0;
	int known = 0, rcode;

	if (qlen < 17 || (q[4] << 8 | q[5]) < 1)
		return;
	while (p < qlen && q[p]) { /* the question's name, dotted */
		size_t l = q[p++];
		if (l > 63 || p + l > qlen || n + l + 1 >= sizeof(name))
			return;
		if (n)
			name[n++] = '.';
		memcpy(name + n, q + p, l);
		n += l;
		p += l;
	}
	name[n] = '\0';
	if (p + 5 > qlen)
		return;
	p++; /* the root label */
	type = (uint16_t)(q[p] << 8 | q[p + 1]);
	p += 4; /* type, class */
	memcpy(out, q, p);
	out[2] = (uint8_t)(0x84 | (q[2] & 0x01)); /* QR, AA, RD as asked */
	out[3] = 0x80;                              /* RA */
	out[6] = out[7] = out[8] = out[9] = out[10] = out[11] = 0;
	out[4] = 0;
	out[5] = 1;
	o = p;
	pthread_mutex_lock(&d->mu);
	rcode = d->rcode;
	for (int i = 0; i < d->nrr && !rcode; i++) {
		struct tdns_rr *r = &d->rr[i];
		if (strcasecmp(r->name, name))
			continue;
		known = 1;
		if (r->type != type || o + 12 + r->len > sizeof(out))
			continue;
		out[o++] = 0xc0; /* the question's name */
		out[o++] = 12;
		out[o++] = (uint8_t)(type >> 8);
		out[o++] = (uint8_t)type;
		out[o++] = 0;
		out[o++] = 1;    /* IN */
		out[o++] = 0;
		out[o++] = 0;
		out[o++] = 0;
		out[o++] = 0;    /* TTL 0: a resolver that caches (c-ares 1.23 and
				  * later) must not keep an answer the test changed */
		out[o++] = (uint8_t)(r->len >> 8);
		out[o++] = (uint8_t)r->len;
		memcpy(out + o, r->data, r->len);
		o += r->len;
		an++;
	}
	pthread_mutex_unlock(&d->mu);
	if (!rcode && !known)
		rcode = 3; /* NXDOMAIN; a known name without this type: no answer, NOERROR */
	out[3] |= (uint8_t)rcode;
	out[6] = (uint8_t)(an >> 8);
	out[7] = (uint8_t)an;
	sendto(d->fd, out, o, 0, (struct sockaddr *)from, fromlen);
}

static void *tdns_loop(void *arg)
{
	struct tdns *d = arg;
	uint8_t buf[1500];

	while (!atomic_load(&d->stop)) {
		struct pollfd p = { .fd = d->fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t r;
		if (poll(&p, 1, 50) <= 0)
			continue;
		r = recvfrom(d->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (r <= 0)
			continue;
		atomic_fetch_add(&d->queries, 1);
		tdns_answer(d, buf, (size_t)r, &from, fl);
	}
	return NULL;
}

static void tdns_start(struct tdns *d)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);

	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->mu, NULL);
	d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	H_CHECK(d->fd >= 0 && bind(d->fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
			getsockname(d->fd, (struct sockaddr *)&sin, &len) == 0,
		"test DNS server: %s", strerror(errno));
	d->port = ntohs(sin.sin_port);
	H_CHECK(pthread_create(&d->thr, NULL, tdns_loop, d) == 0, "test DNS server thread");
}

static void tdns_stop(struct tdns *d)
{
	atomic_store(&d->stop, 1);
	pthread_join(d->thr, NULL);
	close(d->fd);
}

/* Forgets every record of name (NXDOMAIN from now on, unless added again). */
static void tdns_clear(struct tdns *d, const char *name)
{
	pthread_mutex_lock(&d->mu);
	for (int i = d->nrr - 1; i >= 0; i--)
		if (!strcasecmp(d->rr[i].name, name))
			d->rr[i] = d->rr[--d->nrr];
	pthread_mutex_unlock(&d->mu);
}

static void tdns_add(struct tdns *d, const char *name, uint16_t type, const void *data, size_t len)
{
	pthread_mutex_lock(&d->mu);
	H_CHECK(d->nrr < 32, "test DNS table full");
	struct tdns_rr *r = &d->rr[d->nrr++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->type = type;
	memcpy(r->data, data, len);
	r->len = (uint16_t)len;
	pthread_mutex_unlock(&d->mu);
}

static void tdns_add_a(struct tdns *d, const char *name, const char *ip)
{
	struct in_addr a;
	H_CHECK(inet_pton(AF_INET, ip, &a) == 1, "bad test IP %s", ip);
	tdns_add(d, name, T_A, &a, 4);
}

static void tdns_add_aaaa(struct tdns *d, const char *name, const char *ip)
{
	struct in6_addr a;
	H_CHECK(inet_pton(AF_INET6, ip, &a) == 1, "bad test IPv6 %s", ip);
	tdns_add(d, name, T_AAAA, &a, 16);
}

static void tdns_add_srv(struct tdns *d, const char *name, int prio, int weight, int port,
			 const char *target)
{
	uint8_t b[300] = { (uint8_t)(prio >> 8), (uint8_t)prio, (uint8_t)(weight >> 8),
			   (uint8_t)weight, (uint8_t)(port >> 8), (uint8_t)port };
	tdns_add(d, name, T_SRV, b, 6 + wire_name(target, b + 6));
}

/* The whole table's answer at once: rcode 0 (the table), 2 (SERVFAIL). */
static void tdns_rcode(struct tdns *d, int rcode)
{
	pthread_mutex_lock(&d->mu);
	d->rcode = rcode;
	pthread_mutex_unlock(&d->mu);
}

/* ---- backends that say who they are and echo ------------------------------ */

/* Listens on ip:port (port 0: any); each connection gets the tag byte, then
 * an echo of what it sends until it closes. */
struct tagecho {
	int lfd, port;
	char tag;
	_Atomic int stop, accepted;
	pthread_t thr;
};

static void *tagecho_loop(void *arg)
{
	struct tagecho *t = arg;
	struct pollfd p[65] = { { .fd = t->lfd, .events = POLLIN } };
	int n = 0;
	char buf[4096];

	while (!atomic_load(&t->stop)) {
		if (poll(p, (nfds_t)n + 1, 50) <= 0)
			continue;
		for (int i = n; i >= 1; i--) {
			ssize_t r;
			if (!p[i].revents)
				continue;
			r = read(p[i].fd, buf, sizeof(buf));
			if (r <= 0 || h_send_all(p[i].fd, buf, (size_t)r, h_now_ms() + 2000)) {
				close(p[i].fd);
				p[i] = p[n--];
			}
		}
		if (p[0].revents) {
			int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			atomic_fetch_add(&t->accepted, 1);
			h_set_timeouts(fd, 1000);
			if (write(fd, &t->tag, 1) != 1 || n == 64) {
				close(fd);
				continue;
			}
			p[++n] = (struct pollfd){ .fd = fd, .events = POLLIN };
		}
	}
	for (int i = 1; i <= n; i++)
		close(p[i].fd);
	return NULL;
}

/* ip:port (an IPv4 or IPv6 address) as a socket address; its length. */
static socklen_t sockaddr_of(const char *ip, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		return sizeof(*sin6);
	}
	H_CHECK(inet_pton(AF_INET, ip, &sin->sin_addr) == 1, "bad test IP %s", ip);
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	return sizeof(*sin);
}

/* Returns 0, or -1 when ip:port is taken (the caller picks another port)
 * or ip cannot be bound (no IPv6 here). */
static int tagecho_start(struct tagecho *t, char tag, const char *ip, int port)
{
	struct sockaddr_storage ss;
	socklen_t len = sockaddr_of(ip, port, &ss);

	memset(t, 0, sizeof(*t));
	t->tag = tag;
	t->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (t->lfd < 0)
		return -1;
	if (bind(t->lfd, (struct sockaddr *)&ss, len) || listen(t->lfd, 128) ||
	    getsockname(t->lfd, (struct sockaddr *)&ss, &len)) {
		close(t->lfd);
		return -1;
	}
	t->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	H_CHECK(pthread_create(&t->thr, NULL, tagecho_loop, t) == 0, "tag server thread");
	return 0;
}

static void tagecho_stop(struct tagecho *t)
{
	atomic_store(&t->stop, 1);
	pthread_join(t->thr, NULL);
	close(t->lfd);
}

/* Tag servers a on ip_a:P and b on ip_b:P, one port for both (a name's
 * addresses share the line's port). */
static void tagecho_pair_on(struct tagecho *a, char tag_a, const char *ip_a, struct tagecho *b,
			    char tag_b, const char *ip_b)
{
	for (int tries = 0; tries < 20; tries++) {
		H_CHECK(tagecho_start(a, tag_a, ip_a, 0) == 0, "bind %s: %s", ip_a, strerror(errno));
		if (tagecho_start(b, tag_b, ip_b, a->port) == 0)
			return;
		tagecho_stop(a);
	}
	H_CHECK(0, "no port free on both %s and %s", ip_a, ip_b);
}

/* Tag servers '2' on 127.0.0.2:P and '3' on 127.0.0.3:P. */
static void tagecho_pair(struct tagecho *two, struct tagecho *three)
{
	tagecho_pair_on(two, '2', "127.0.0.2", three, '3', "127.0.0.3");
}

/* Whether [::1] can be bound here (IPv6 loopback configured). */
static int ipv6_loopback(void)
{
	struct sockaddr_storage ss;
	socklen_t len = sockaddr_of("::1", 0, &ss);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* ---- the proxy -------------------------------------------------------------- */

static void proxy_from_file(struct h_proxy *p, const char *bin, const char *path)
{
	const char *args[] = { "-c", path, NULL };
	char err[512];

	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", path, err);
}

/* A route "web" on an ephemeral port with the backend line given, the
 * test's DNS server as resolver, and stats. */
static void proxy_up(struct h_proxy *p, const char *bin, const struct tdns *d, const char *backend,
		     struct h_addr *stats)
{
	char text[1024];

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nresolvers = 127.0.0.1:%d\n"
		 "[route web]\nlisten = 127.0.0.1:0\nbackend = %s\n", d->port, backend);
	proxy_from_file(p, bin, h_conf_write("dns.conf", text));
	H_CHECK(h_stats_addr(p, stats) == 0, "no stats address in the log");
}

/* The tag of one new session through the proxy (0: closed without one). */
static char tag_of(const struct h_proxy *p)
{
	return h_tag_of(&p->addr, NULL);
}

/* Opens sessions until one reaches a backend tagged want (ms at most);
 * returns the ms that took, or -1. */
static int64_t until_tag(const struct h_proxy *p, char want, int ms)
{
	int64_t t0 = h_now_ms();

	while (h_now_ms() - t0 < ms) {
		if (tag_of(p) == want)
			return h_now_ms() - t0;
		h_sleep_ms(10);
	}
	return -1;
}

/* Opens sessions until run of them in a row reach backends tagged only
 * want; returns the ms from the call to the first of that run, or -1. */
static int64_t until_only(const struct h_proxy *p, char want, int run, int ms)
{
	int64_t t0 = h_now_ms(), first = -1;
	int got = 0;

	while (h_now_ms() - t0 < ms) {
		int64_t t = h_now_ms();
		if (tag_of(p) == want) {
			if (!got++)
				first = t - t0;
			if (got == run)
				return first;
		} else {
			got = 0;
		}
		h_sleep_ms(10);
	}
	return -1;
}

static long long metric_of(const struct h_addr *stats, const char *family, const char *name)
{
	char m[300];
	snprintf(m, sizeof m, "%s{route=\"web\",name=\"%s\"}", family, name);
	return h_metric(stats, m);
}

static long long metric_until(const struct h_addr *stats, const char *family, const char *name,
			      long long atleast, int ms)
{
	int64_t t0 = h_now_ms();
	long long v;
	while ((v = metric_of(stats, family, name)) < atleast && h_now_ms() - t0 < ms)
		h_sleep_ms(50);
	return v;
}

/* New sessions follow a DNS change within one interval (the cases use
 * resolve=1s) and this much more: the lookup, the main loop's 100 ms tick,
 * building the new generation, and the test's session itself. */
#define RESOLVE_MS 1000
#define CHANGE_MARGIN_MS 600

/* t: the ms from a DNS change to what the cases wait for (-1: not within
 * their 10 s); printed, and asserted within an interval and the margin. */
static void expect_prompt(int64_t t, const char *what)
{
	fprintf(stderr, "dns: %s %lld ms after the change (resolve=1s; limit %d ms)\n", what,
		(long long)t, RESOLVE_MS + CHANGE_MARGIN_MS);
	H_CHECK(t >= 0 && t <= RESOLVE_MS + CHANGE_MARGIN_MS,
		"%s %lld ms after the DNS change (-1: not within 10 s): more than one interval "
		"(%d ms) + %d ms", what, (long long)t, RESOLVE_MS, CHANGE_MARGIN_MS);
}

/* The common start: the DNS server with name -> 127.0.0.2, tag servers on
 * 127.0.0.2:P and 127.0.0.3:P, and the proxy on "app.dns.test:P resolve=1s". */
struct fx {
	struct tdns d;
	struct tagecho two, three;
	struct h_proxy p;
	struct h_addr stats;
	char name[64];
};

static void fx_up(struct fx *f, const char *bin)
{
	char line[128];

	tdns_start(&f->d);
	tagecho_pair(&f->two, &f->three);
	snprintf(f->name, sizeof f->name, "app.dns.test:%d", f->two.port);
	tdns_add_a(&f->d, "app.dns.test", "127.0.0.2");
	snprintf(line, sizeof line, "%s resolve=1s", f->name);
	proxy_up(&f->p, bin, &f->d, line, &f->stats);
}

static void fx_down(struct fx *f)
{
	h_proxy_down(&f->p);
	tagecho_stop(&f->two);
	tagecho_stop(&f->three);
	tdns_stop(&f->d);
}

/* ---- cases ------------------------------------------------------------------ */

/* One address, then two, then one again: new sessions follow each answer
 * within about an interval (resolve=1s); a session on 127.0.0.3 opened
 * while it was in the answer keeps working after it left, and ends cleanly. */
static void case_one_two_one(const char *bin)
{
	struct fx f;
	int64_t t;
	int held = -1, seen2 = 0, seen3 = 0;

	fx_up(&f, bin);

	for (int i = 0; i < 6; i++)
		H_CHECK(tag_of(&f.p) == '2', "session %d: not on 127.0.0.2, the one address", i);
	H_CHECK(atomic_load(&f.three.accepted) == 0, "127.0.0.3 had sessions before DNS gave it");

	tdns_add_a(&f.d, "app.dns.test", "127.0.0.3");
	t = until_tag(&f.p, '3', 10000);
	expect_prompt(t, "one -> two addresses: first new session on the new address");
	for (int i = 0; i < 8; i++) {
		char c = tag_of(&f.p);
		seen2 += c == '2';
		seen3 += c == '3';
	}
	H_CHECK(seen2 >= 3 && seen3 >= 3, "two addresses: round robin over both expected, saw "
		"%d on .2 and %d on .3 of 8", seen2, seen3);
	/* a session on 127.0.0.3, held across its removal */
	for (int i = 0; i < 10 && held < 0; i++) {
		int fd;
		if (h_tag_of(&f.p.addr, &fd) == '3')
			held = fd;
		else if (fd >= 0)
			close(fd);
	}
	H_CHECK(held >= 0, "no session to 127.0.0.3 to hold");

	tdns_clear(&f.d, "app.dns.test");
	tdns_add_a(&f.d, "app.dns.test", "127.0.0.2");
	t = until_only(&f.p, '2', 8, 10000);
	expect_prompt(t, "two -> one address: new sessions only on the remaining address");
	H_CHECK(h_log_lines(&f.p, "DNS: new backends in force", NULL) >= 2,
		"no new generation logged for the two changes");

	/* the held session still carries bytes both ways, then ends cleanly */
	char out[] = "still-here", in[sizeof out];
	H_CHECK(h_send_all(held, out, sizeof out, h_now_ms() + 2000) == 0 &&
			h_recv_exact(held, in, sizeof in, h_now_ms() + 2000) == 0 &&
			!memcmp(in, out, sizeof out),
		"the session on the removed address stopped working");
	shutdown(held, SHUT_WR);
	H_CHECK(h_expect_eof(held, h_now_ms() + 3000) == 0, "the held session did not end with EOF");
	close(held);

	H_CHECK(metric_of(&f.stats, "splicer_dns_addresses", f.name) == 1, "splicer_dns_addresses not 1");
	H_CHECK(metric_of(&f.stats, "splicer_dns_resolutions_total", f.name) >= 2,
		"splicer_dns_resolutions_total below 2");
	H_CHECK(metric_of(&f.stats, "splicer_dns_failures_total", f.name) == 0, "failures counted");
	fx_down(&f);
}

Test(integ, dns_one_two_one, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_one_two_one(h_binary(0));
}

/* The ASan+UBSan proxy runs the case that exercises the most of dns.c and
 * of a regenerated config (add, remove, drain); the others run plain. */
Test(integ, dns_one_two_one_asan, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_one_two_one(h_binary(1));
}

/* A client waiting for a slot (the name's one address at maxconn=1) is
 * served by the address DNS adds, within 500 ms of the new generation's
 * line (and so about an interval of the change), not at queue_timeout. */
static void case_queue_takes_new_address(const char *bin)
{
	struct fx f;
	char line[160], got = 0;
	int64_t t_change, t_gen = 0;

	tdns_start(&f.d);
	tagecho_pair(&f.two, &f.three);
	snprintf(f.name, sizeof f.name, "app.dns.test:%d", f.two.port);
	tdns_add_a(&f.d, "app.dns.test", "127.0.0.2");
	snprintf(line, sizeof line, "%s resolve=1s maxconn=1\nqueue_timeout = 20s", f.name);
	proxy_up(&f.p, bin, &f.d, line, &f.stats);
	int held = -1;
	H_CHECK(h_tag_of(&f.p.addr, &held) == '2', "the first client not served by 127.0.0.2");
	int waiting = h_connect(&f.p.addr, 2000);
	H_CHECK(waiting >= 0, "connect");
	h_set_timeouts(waiting, 20);
	int64_t until = h_now_ms() + 3000;
	while (h_metric(&f.stats, "splicer_route_queue_length{route=\"web\"}") != 1 && h_now_ms() < until)
		h_sleep_ms(10);
	H_CHECK(h_metric(&f.stats, "splicer_route_queue_length{route=\"web\"}") == 1,
		"the second client is not waiting");

	t_change = h_now_ms();
	tdns_add_a(&f.d, "app.dns.test", "127.0.0.3");
	for (until = h_now_ms() + 5000; !t_gen && h_now_ms() < until; h_sleep_ms(5))
		if (h_log_lines(&f.p, "DNS: new backends in force", NULL))
			t_gen = h_now_ms();
	H_CHECK(t_gen, "no new generation within 5 s of the DNS change");
	int r = h_recv_exact(waiting, &got, 1, t_gen + 3000);
	int64_t t = h_now_ms() - t_gen;
	H_CHECK(r == 0 && got == '3', "the waiting client: %s after %lld ms, not served by 127.0.0.3",
		r ? strerror(-r) : "served elsewhere", (long long)t);
	H_CHECK(t < 500, "the waiting client was served %lld ms after the new generation (bound 500)",
		(long long)t);
	fprintf(stderr, "dns: a waiting client served by the added address %lld ms after the new "
		"generation (%lld ms after the DNS change)\n", (long long)t,
		(long long)(h_now_ms() - t_change));
	close(waiting);
	close(held);
	fx_down(&f);
}

Test(integ, dns_queue_takes_new_address, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_queue_takes_new_address(h_binary(0));
}

/* SERVFAIL and then NXDOMAIN keep the last answer: sessions go on to it,
 * each failed lookup is counted, and the log says so once (rate-limited);
 * an answer again is taken. */
static void case_failure_keeps_last(const char *bin)
{
	struct fx f;
	long long fails;

	fx_up(&f, bin);
	H_CHECK(tag_of(&f.p) == '2', "not served by 127.0.0.2 at start");

	tdns_rcode(&f.d, 2); /* SERVFAIL */
	fails = metric_until(&f.stats, "splicer_dns_failures_total", f.name, 2, (int)H_T(15000));
	H_CHECK(fails >= 2, "failures_total %lld after SERVFAIL answers, expected 2 or more", fails);
	for (int i = 0; i < 4; i++)
		H_CHECK(tag_of(&f.p) == '2', "session %d not served during SERVFAIL", i);
	tdns_rcode(&f.d, 0);
	tdns_clear(&f.d, "app.dns.test"); /* NXDOMAIN: a failure too, not an empty pool */
	fails = metric_until(&f.stats, "splicer_dns_failures_total", f.name, fails + 2, (int)H_T(15000));
	for (int i = 0; i < 4; i++)
		H_CHECK(tag_of(&f.p) == '2', "session %d not served during NXDOMAIN", i);
	H_CHECK(metric_of(&f.stats, "splicer_dns_addresses", f.name) == 1,
		"the last answer's address count is not kept");
	H_CHECK(h_log_lines(&f.p, "lookup of app.dns.test", "failed", NULL) == 1,
		"%d failure lines for %lld failures: expected one (rate-limited)",
		h_log_lines(&f.p, "lookup of app.dns.test", "failed", NULL), fails);

	tdns_add_a(&f.d, "app.dns.test", "127.0.0.3");
	H_CHECK(until_only(&f.p, '3', 4, (int)H_T(10000)) >= 0,
		"a new answer after failures was not taken");
	H_CHECK(h_log_lines(&f.p, "app.dns.test", "resolves again", NULL) == 1,
		"the recovery is not logged");
	fx_down(&f);
}

Test(integ, dns_failure_keeps_last, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_failure_keeps_last(h_binary(0));
}

/* SRV: the targets and ports of the lowest priority, each target looked up
 * for addresses; a record moving a target to another port moves sessions. */
static void case_srv(const char *bin)
{
	struct tdns d;
	struct tagecho a, b, c, z;
	struct h_proxy p;
	struct h_addr stats;
	int seen_a = 0, seen_b = 0;
	int64_t t;

	tdns_start(&d);
	H_CHECK(tagecho_start(&a, 'a', "127.0.0.2", 0) == 0, "bind a");
	H_CHECK(tagecho_start(&b, 'b', "127.0.0.3", 0) == 0, "bind b");
	H_CHECK(tagecho_start(&c, 'c', "127.0.0.3", 0) == 0, "bind c");
	H_CHECK(tagecho_start(&z, 'z', "127.0.0.4", 0) == 0, "bind z");
	tdns_add_a(&d, "a.dns.test", "127.0.0.2");
	tdns_add_a(&d, "b.dns.test", "127.0.0.3");
	tdns_add_a(&d, "z.dns.test", "127.0.0.4");
	tdns_add_srv(&d, "_app._tcp.dns.test", 10, 5, a.port, "a.dns.test");
	tdns_add_srv(&d, "_app._tcp.dns.test", 10, 5, b.port, "b.dns.test");
	tdns_add_srv(&d, "_app._tcp.dns.test", 20, 5, z.port, "z.dns.test"); /* a fallback */
	proxy_up(&p, bin, &d, "_app._tcp.dns.test resolve=1s srv", &stats);
	for (int i = 0; i < 8; i++) {
		char t1 = tag_of(&p);
		seen_a += t1 == 'a';
		seen_b += t1 == 'b';
	}
	H_CHECK(seen_a >= 3 && seen_b >= 3, "SRV targets: saw %d on a and %d on b of 8", seen_a,
		seen_b);
	H_CHECK(atomic_load(&z.accepted) == 0, "the priority-20 target had sessions");
	H_CHECK(metric_of(&stats, "splicer_dns_addresses", "_app._tcp.dns.test") == 2,
		"splicer_dns_addresses of the SRV name not 2");

	tdns_clear(&d, "_app._tcp.dns.test");
	tdns_add_srv(&d, "_app._tcp.dns.test", 10, 5, a.port, "a.dns.test");
	tdns_add_srv(&d, "_app._tcp.dns.test", 10, 5, c.port, "b.dns.test");
	t = until_tag(&p, 'c', 10000);
	expect_prompt(t, "SRV port change: first new session on the new port");
	int before = atomic_load(&b.accepted);
	for (int i = 0; i < 6; i++)
		H_CHECK(tag_of(&p) != 'b', "a session still went to the target's old port");
	H_CHECK(atomic_load(&b.accepted) == before, "the old port accepted more sessions");
	h_proxy_down(&p);
	tagecho_stop(&a);
	tagecho_stop(&b);
	tagecho_stop(&c);
	tagecho_stop(&z);
	tdns_stop(&d);
}

Test(integ, dns_srv, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_srv(h_binary(0));
}

/* A name with resolve= that has no address at start: `check` passes with a
 * note at its line; the proxy starts without the backend (clients are
 * closed, logged), and takes the address once DNS has one. */
static void case_start_without(const char *bin)
{
	struct tdns d;
	struct tagecho two, three;
	struct h_proxy p;
	struct h_addr stats;
	char line[128], text[512], *out = NULL, *err = NULL;
	const char *path;
	int64_t t;
	int st;

	tdns_start(&d);
	tagecho_pair(&two, &three);
	snprintf(text, sizeof text,
		 "[global]\nresolvers = 127.0.0.1:%d\n[route web]\nlisten = 127.0.0.1:0\n"
		 "backend = late.dns.test:%d resolve=1s\n", d.port, two.port);
	path = h_conf_write("check.conf", text);
	const char *args[] = { "check", "-c", path, NULL };
	st = h_run_capture(bin, args, 20000, &out, &err);
	H_CHECK(st == 0 && strstr(err, "check.conf:5: note: backend late.dns.test") &&
			strstr(out, "ok: 1 route"),
		"check with an unresolvable resolve= name: status %d, stdout: %s, stderr: %s", st,
		out, err);
	free(out);
	free(err);

	snprintf(line, sizeof line, "late.dns.test:%d resolve=1s", two.port);
	proxy_up(&p, bin, &d, line, &stats);
	H_CHECK(h_log_lines(&p, "late.dns.test", "no address", NULL) == 1,
		"the start does not say the name has no address");
	H_CHECK(tag_of(&p) == 0, "a client got a backend with none resolved");

	tdns_add_a(&d, "late.dns.test", "127.0.0.2");
	t = until_tag(&p, '2', 10000);
	expect_prompt(t, "none -> one address: first session served");
	h_proxy_down(&p);
	tagecho_stop(&two);
	tagecho_stop(&three);
	tdns_stop(&d);
}

Test(integ, dns_start_without_address, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_start_without(h_binary(0));
}

/* AAAA: a name with only an IPv6 address (::1) is one backend, at [::1]:P;
 * an A record added (127.0.0.2) makes it two, one of each family, and
 * sessions go to both. */
static void case_aaaa(const char *bin)
{
	struct tdns d;
	struct tagecho six, two;
	struct h_proxy p;
	struct h_addr stats;
	char name[64], line[128];
	int seen2 = 0, seen6 = 0;
	int64_t t;

	if (!ipv6_loopback())
		cr_skip_test("no IPv6 loopback here (cannot bind [::1]): AAAA answers not tested");
	tdns_start(&d);
	tagecho_pair_on(&six, '6', "::1", &two, '2', "127.0.0.2");
	tdns_add_aaaa(&d, "six.dns.test", "::1");
	snprintf(name, sizeof name, "six.dns.test:%d", six.port);
	snprintf(line, sizeof line, "%s resolve=1s", name);
	proxy_up(&p, bin, &d, line, &stats);
	for (int i = 0; i < 4; i++)
		H_CHECK(tag_of(&p) == '6', "session %d: not on [::1], the name's one (AAAA) address", i);
	H_CHECK(metric_of(&stats, "splicer_dns_addresses", name) == 1,
		"splicer_dns_addresses of the AAAA-only name not 1");

	tdns_add_a(&d, "six.dns.test", "127.0.0.2");
	t = until_tag(&p, '2', 10000);
	expect_prompt(t, "AAAA -> AAAA and A: first new session on the IPv4 address");
	for (int i = 0; i < 8; i++) {
		char c = tag_of(&p);
		seen2 += c == '2';
		seen6 += c == '6';
	}
	H_CHECK(seen2 >= 3 && seen6 >= 3, "A and AAAA: round robin over both expected, saw %d on "
		"127.0.0.2 and %d on [::1] of 8", seen2, seen6);
	H_CHECK(metric_of(&stats, "splicer_dns_addresses", name) == 2,
		"splicer_dns_addresses of the A and AAAA name not 2");
	h_proxy_down(&p);
	tagecho_stop(&six);
	tagecho_stop(&two);
	tdns_stop(&d);
}

Test(integ, dns_aaaa, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_aaaa(h_binary(0));
}

/* The backend line's options and `resolvers` are checked where the file
 * says them. */
Test(integ, dns_config_errors, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static const struct {
		const char *line, *expected;
	} cases[] = {
		{ "backend = app.dns.test:80 resolve=100ms",
		  ":5: backend app.dns.test:80: invalid resolve '100ms' (expects a duration 1s..24h" },
		{ "backend = app.dns.test:80 srv",
		  ":5: backend app.dns.test:80: srv needs resolve=DURATION" },
		{ "backend = _a._tcp.dns.test:80 resolve=1s srv",
		  ":5: backend _a._tcp.dns.test:80: an SRV name has no port" },
		{ "backend = unix:/run/x resolve=1s",
		  ":5: backend unix:/run/x: resolve= is for host names, not Unix sockets" },
		{ "backend = app.dns.test resolve=1s", ":5: backend 'app.dns.test': address "
		  "'app.dns.test': missing ':port'" },
		{ "backend = app.dns.test:80 resolve=1s ttl=3",
		  ":5: backend: unknown backend option 'ttl=3' (expects weight=N, maxconn=N, "
		  "backup, resolve=DURATION or srv[=yes|no])" },
		{ "backend = app.dns.test:80 srv=yes",
		  ":5: backend app.dns.test:80: srv needs resolve=DURATION" },
		{ "backend = _a._tcp.dns.test resolve=1s srv=maybe",
		  ":5: backend _a._tcp.dns.test: invalid srv 'maybe' (expects yes or no; the bare "
		  "word srv is yes)" },
		/* srv=no: an address name, which needs its port */
		{ "backend = _a._tcp.dns.test resolve=1s srv=no", ":5: backend '_a._tcp.dns.test': "
		  "address '_a._tcp.dns.test': missing ':port'" },
	};
	const char *bin = h_binary(0);
	char text[512], *out = NULL, *err = NULL;

	for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text, "[global]\nresolvers = 127.0.0.1:9\n[route web]\n"
			 "listen = 127.0.0.1:0\n%s\n", cases[i].line);
		const char *args[] = { "check", "--syntax-only", "-c", h_conf_write("bad.conf", text), NULL };
		int st = h_run_capture(bin, args, 20000, &out, &err);
		H_CHECK(st != 0 && strstr(err, cases[i].expected), "'%s': status %d, stderr: %s",
			cases[i].line, st, err);
		free(out);
		free(err);
	}
	/* srv, srv=yes: an SRV name (no port); srv=no: an address name */
	snprintf(text, sizeof text, "[global]\nresolvers = 127.0.0.1:9\n[route web]\n"
		 "listen = 127.0.0.1:0\nbackend = _a._tcp.dns.test resolve=1s srv\n"
		 "backend = _b._tcp.dns.test resolve=1s srv=yes\n"
		 "backend = app.dns.test:80 resolve=1s srv=no\n");
	const char *ok_args[] = { "check", "--syntax-only", "-c", h_conf_write("srv.conf", text), NULL };
	int ok = h_run_capture(bin, ok_args, 20000, &out, &err);
	H_CHECK(ok == 0 && strstr(out, "ok: 1 route"), "srv, srv=yes and srv=no: status %d, stdout: %s, "
		"stderr: %s", ok, out, err);
	free(out);
	free(err);
	snprintf(text, sizeof text, "[global]\nresolvers = dns.example\n[route web]\n"
		 "listen = 127.0.0.1:0\nbackend = app.dns.test:80 resolve=1s\n");
	const char *args[] = { "check", "--syntax-only", "-c", h_conf_write("res.conf", text), NULL };
	int st = h_run_capture(bin, args, 20000, &out, &err);
	H_CHECK(st != 0 && strstr(err, "res.conf:2: resolvers: invalid value 'dns.example' (expects "
				       "numeric addresses"),
		"resolvers = a name: status %d, stderr: %s", st, err);
	free(out);
	free(err);
}
