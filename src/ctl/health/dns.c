/* SPDX-License-Identifier: MIT */
/* dns: see dns.h.
 *
 * Why c-ares (Debian libc-ares-dev) and not getaddrinfo() in a thread:
 * getaddrinfo() cannot be pointed at given servers (`resolvers`, and the
 * tests' own DNS server) nor ask for SRV records, and its time limits are
 * the system's (5 s a try); libresolv's res_nquery() would do SRV but takes
 * IPv4 servers on port 53 only and blocks per query. c-ares sends every
 * name's queries at once on one channel, takes servers with ports of both
 * families, parses SRV, and reads /etc/hosts as getaddrinfo() does. It runs
 * in one thread of its own (the resolver thread) and in the main thread at
 * start and reload (a channel each: a channel is not shared by threads);
 * the workers never see it. */
#define _GNU_SOURCE
#include "dns.h"
#include "config_listen.h"

#include <ares.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_table.h"
#include "log.h"
#include "units.h"
#include "worker.h"

/* ---- one round of lookups ------------------------------------------------ */

struct dns_addr {
	struct addr a;
	unsigned weight; /* srv: the record's weight, 1..MAX_WEIGHT; else 0 */
};

struct dns_answer {
	struct dns_addr v[MAX_BACKENDS];
	unsigned n;
	unsigned dropped; /* addresses beyond MAX_BACKENDS */
};

/* A name's lookup: its A and AAAA, or its SRV records and then each
 * target's A and AAAA. Done when pending is 0. */
struct job {
	ares_channel ch;
	char route[ROUTE_NAME_MAX];
	struct dns_name q;
	int pending;
	int status; /* ARES_SUCCESS until a lookup fails */
	uint8_t look; /* dns_fill: to look up (else answered from the table) */
	char why[400];
	struct dns_answer ans;
};

struct target {
	struct job *j;
	unsigned port, weight;
	char host[256];
};

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static int lib_status = ARES_ENOTINITIALIZED;

static void lib_init(void)
{
	lib_status = ares_library_init(ARES_LIB_INIT_ALL);
}

static void job_fail(struct job *j, int status, const char *host)
{
	if (j->status != ARES_SUCCESS)
		return; /* the first reason */
	j->status = status;
	snprintf(j->why, sizeof(j->why), "%s: %s", host, ares_strerror(status));
}

static void answer_add(struct dns_answer *ans, const struct sockaddr *sa, unsigned port,
		       unsigned weight)
{
	struct dns_addr v;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return;
	addr_from_inet(&v.a, sa, port);
	v.weight = weight;
	for (unsigned i = 0; i < ans->n; i++)
		if (ans->v[i].a.len == v.a.len && !memcmp(&ans->v[i].a.ss, &v.a.ss, v.a.len))
			return; /* two SRV targets, or a hosts file, may repeat one */
	if (ans->n < MAX_BACKENDS)
		ans->v[ans->n++] = v;
	else
		ans->dropped++;
}

static void addrs_done(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct target *t = arg;
	(void)timeouts;

	if (status == ARES_SUCCESS && res)
		for (struct ares_addrinfo_node *n = res->nodes; n; n = n->ai_next)
			answer_add(&t->j->ans, n->ai_addr, t->port, t->weight);
	else
		job_fail(t->j, status == ARES_SUCCESS ? ARES_ENODATA : status, t->host);
	if (res)
		ares_freeaddrinfo(res);
	t->j->pending--;
	free(t);
}

static void lookup_addrs(ares_channel ch, struct job *j, const char *host, unsigned port,
			 unsigned weight)
{
	struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT };
	struct target *t = calloc(1, sizeof(*t));

	if (!t) {
		job_fail(j, ARES_ENOMEM, host);
		return;
	}
	t->j = j;
	t->port = port;
	t->weight = weight;
	snprintf(t->host, sizeof(t->host), "%s", host);
	j->pending++; /* before: the answer may come at once (hosts file) */
	ares_getaddrinfo(ch, t->host, NULL, &hints, addrs_done, t);
}

/* The SRV answer: the targets of the lowest priority (the others are its
 * fallbacks, which this does not follow), each looked up for addresses. */
static void srv_done(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct job *j = arg;
	struct ares_srv_reply *srv = NULL, *s;
	unsigned best = 0x10000, n = 0;
	(void)timeouts;

	if (status == ARES_SUCCESS)
		status = ares_parse_srv_reply(abuf, alen, &srv);
	if (status != ARES_SUCCESS) {
		job_fail(j, status, j->q.name);
	} else {
		for (s = srv; s; s = s->next)
			if (s->priority < best && s->host[0] && strcmp(s->host, "."))
				best = s->priority;
		for (s = srv; s; s = s->next)
			if (s->priority == best && s->host[0] && strcmp(s->host, ".")) {
				unsigned w = s->weight < 1 ? 1 : s->weight > MAX_WEIGHT ? MAX_WEIGHT : s->weight;
				lookup_addrs(j->ch, j, s->host, s->port, w);
				n++;
			}
		if (!n)
			job_fail(j, ARES_ENODATA, j->q.name); /* "." alone: no service there */
	}
	ares_free_data(srv);
	j->pending--;
}

static void job_start(ares_channel ch, struct job *j)
{
	char host[256], why[256];
	unsigned port;

	j->ch = ch;
	j->status = ARES_SUCCESS;
	j->why[0] = '\0';
	j->ans.n = j->ans.dropped = 0;
	j->pending = 0;
	if (j->q.srv) {
		j->pending++;
		ares_query(ch, j->q.name, ns_c_in, ns_t_srv, srv_done, j);
		return;
	}
	/* checked when the file was read (config_file.c) */
	if (addr_split(j->q.name, ADDR_CONNECT, host, sizeof(host), &port, why, sizeof(why))) {
		j->status = ARES_EBADNAME;
		snprintf(j->why, sizeof(j->why), "%s", why);
		return;
	}
	lookup_addrs(ch, j, host, port, 0);
}

static int by_text(const void *a, const void *b)
{
	const struct dns_addr *x = a, *y = b;
	int d = strcmp(x->a.text, y->a.text);

	return d ? d : (int)x->weight - (int)y->weight;
}

/* A finished lookup: no address is a failure too; the addresses in one
 * order, so that an answer in another order is no change. */
static void job_finish(struct job *j)
{
	if (j->status == ARES_SUCCESS && !j->ans.n) {
		j->status = ARES_ENODATA;
		snprintf(j->why, sizeof(j->why), "%s: no IPv4 or IPv6 address", j->q.name);
	}
	qsort(j->ans.v, j->ans.n, sizeof(j->ans.v[0]), by_text);
}

static int pending(const struct job *jobs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (jobs[i].pending)
			return 1;
	return 0;
}

/* Runs the channel until every job is done. wake_fd (-1: none) readable
 * with *stop set cancels what is under way; readable otherwise it is
 * drained and *woken set. poll(), not select(): a proxy's descriptors go
 * past FD_SETSIZE. */
static void drive(ares_channel ch, struct job *jobs, unsigned n, int wake_fd, const int *stop,
		  int *woken)
{
	while (pending(jobs, n)) {
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		struct pollfd p[ARES_GETSOCK_MAXNUM + 1];
		/* the bits as unsigned: ARES_GETSOCK_WRITABLE shifts a signed 1 by 31 */
		unsigned bits = (unsigned)ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
		struct timeval tv, max = { 1, 0 }, *t;
		int np = 0, ms;

		for (int i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
			short ev = (short)((bits >> i & 1 ? POLLIN : 0) |
					   (bits >> (i + ARES_GETSOCK_MAXNUM) & 1 ? POLLOUT : 0));
			if (ev)
				p[np++] = (struct pollfd){ .fd = socks[i], .events = ev };
		}
		if (wake_fd >= 0)
			p[np++] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		t = ares_timeout(ch, &max, &tv);
		ms = (int)(t->tv_sec * 1000 + t->tv_usec / 1000) + 1;
		poll(p, (nfds_t)np, ms);
		if (wake_fd >= 0 && (p[np - 1].revents & POLLIN)) {
			char buf[64];
			while (read(wake_fd, buf, sizeof(buf)) > 0)
				;
			*woken = 1;
			if (__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
				ares_cancel(ch); /* each callback runs, with ARES_ECANCELLED */
				break;
			}
		}
		for (int i = 0; i < np - (wake_fd >= 0); i++)
			if (p[i].revents)
				ares_process_fd(ch, p[i].revents & (POLLIN | POLLERR | POLLHUP) ? p[i].fd
											: ARES_SOCKET_BAD,
						p[i].revents & POLLOUT ? p[i].fd : ARES_SOCKET_BAD);
		ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timeouts */
	}
}

/* "127.0.0.1:5353 [::1]:53" as c-ares takes it: "127.0.0.1:5353,[::1]:53". */
static int channel_open(ares_channel *ch, const char *resolvers, char *err, size_t len)
{
	struct ares_options o = { .timeout = DNS_TIMEOUT_MS, .tries = DNS_TRIES };
	char csv[SETTING_TEXT_MAX];
	size_t n = 0;
	int r;

	pthread_once(&lib_once, lib_init);
	if (lib_status != ARES_SUCCESS) {
		snprintf(err, len, "c-ares: %s", ares_strerror(lib_status));
		return -1;
	}
	if ((r = ares_init_options(ch, &o, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES))) {
		snprintf(err, len, "c-ares: %s", ares_strerror(r));
		return -1;
	}
	if (!strcmp(resolvers, "system"))
		return 0;
	for (const char *p = resolvers; *p && n + 1 < sizeof(csv); p++)
		if (*p != ' ' && *p != '\t' && *p != ',')
			csv[n++] = *p;
		else if (n && csv[n - 1] != ',')
			csv[n++] = ',';
	while (n && csv[n - 1] == ',')
		n--;
	csv[n] = '\0';
	if (!n || (r = ares_set_servers_ports_csv(*ch, csv))) {
		snprintf(err, len, "invalid value '%s' (expects numeric addresses, IP or IP:PORT or "
			 "[IPv6]:PORT, separated by spaces; or system)", resolvers);
		ares_destroy(*ch);
		return -1;
	}
	return 0;
}

/* ---- the names followed: the resolver thread's table --------------------- */

struct watch {
	char route[ROUTE_NAME_MAX];
	struct dns_name q;
	struct dns_answer last; /* the addresses in force */
	uint8_t have;           /* last is an answer (or the config's addresses) */
	uint8_t live;           /* dns_set_config: in the running config */
	uint8_t failing;        /* the latest lookup failed */
	uint64_t due_ms;
	uint64_t resolutions, failures;
	uint64_t fail_logged_ms, fail_unlogged;
};

static struct {
	pthread_mutex_t lock;
	struct watch *w;
	unsigned n, cap;
	char resolvers[SETTING_TEXT_MAX];
	int wake[2];
	pthread_t thread;
	int started, stop, changed;
} dns = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = { -1, -1 } };

static struct watch *watch_find(const char *route, const struct dns_name *q)
{
	for (unsigned i = 0; i < dns.n; i++)
		if (dns.w[i].q.srv == q->srv && !strcmp(dns.w[i].route, route) &&
		    !strcmp(dns.w[i].q.name, q->name))
			return &dns.w[i];
	return NULL;
}

/* "a, b, c" of an answer, for the log. */
static void answer_text(const struct dns_answer *a, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < a->n && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", a->v[i].a.text);
	if (!a->n)
		snprintf(buf, len, "none");
}

static int same_answer(const struct dns_answer *a, const struct dns_answer *b)
{
	if (a->n != b->n)
		return 0;
	for (unsigned i = 0; i < a->n; i++)
		if (a->v[i].weight != b->v[i].weight || a->v[i].a.len != b->v[i].a.len ||
		    memcmp(&a->v[i].a.ss, &b->v[i].a.ss, a->v[i].a.len))
			return 0;
	return 1;
}

static void fail_log(struct watch *w, const char *why, uint64_t now)
{
	w->fail_unlogged++;
	if (!w->failing || now - w->fail_logged_ms >= DNS_FAIL_LOG_MS) {
		char n[64] = "";
		if (w->fail_unlogged > 1)
			snprintf(n, sizeof(n), " (%llu failures since the last line)",
				 (unsigned long long)w->fail_unlogged);
		char kept[64] = "no address yet";
		if (w->have)
			snprintf(kept, sizeof(kept), "keeping the last answer's %u address%s", w->last.n,
				 w->last.n == 1 ? "" : "es");
		log_warn("route %s: lookup of %s failed (%s)%s; %s; counted in "
			 "splicer_dns_failures_total, logged at most every %d s", w->route, w->q.name,
			 why, n, kept, DNS_FAIL_LOG_MS / 1000);
		w->fail_logged_ms = now;
		w->fail_unlogged = 0;
	}
	w->failing = 1;
}

/* A lookup's outcome (the lock held). */
static void watch_apply(struct watch *w, const struct job *j, uint64_t now)
{
	char was[512], is[512];

	w->resolutions++;
	if (j->status != ARES_SUCCESS) {
		w->failures++;
		fail_log(w, j->why, now);
		return;
	}
	if (w->failing)
		log_info("route %s: %s resolves again", w->route, w->q.name);
	w->failing = 0;
	w->fail_unlogged = 0;
	if (w->have && same_answer(&w->last, &j->ans))
		return;
	answer_text(&w->last, was, sizeof(was));
	answer_text(&j->ans, is, sizeof(is));
	log_info("route %s: %s now resolves to %s (was %s)%s", w->route, w->q.name, is, was,
		 j->ans.dropped ? "; addresses past the route's room left out" : "");
	w->last = j->ans;
	w->have = 1;
	__atomic_store_n(&dns.changed, 1, __ATOMIC_RELEASE);
}

/* ---- a config's backends from the answers --------------------------------- */

/* Appends the addresses of r's name k as backends with its line's options;
 * an address of the route's own listener is left out (a loop, as
 * config.c's check_loops refuses for the file's addresses). */
static void add_answer(struct route *r, unsigned k, const struct dns_answer *a, int quiet)
{
	const struct dns_name *q = &r->dns[k];
	unsigned left = 0;

	for (unsigned i = 0; i < a->n; i++) {
		int loops = 0;
		for (unsigned l = 0; l < r->nlisten; l++)
			loops |= addr_loops_to(&a->v[i].a, &r->listen[l]) != ADDR_LOOP_NONE;
		if (loops) {
			if (!quiet)
				log_warn("route %s: %s gives %s, where the route listens: left out "
					 "(sessions would loop back into the proxy)", r->name, q->name,
					 a->v[i].a.text);
			continue;
		}
		if (r->nbackend >= MAX_BACKENDS) {
			left++;
			continue;
		}
		struct backend_conf *b = &r->backend[r->nbackend++];
		char spec[sizeof(b->spec)];
		/* the run-time state's key (backend.c): the name and the address,
		 * so an address that stays keeps its state across answers */
		snprintf(spec, sizeof(spec), "%.60s %.60s", q->name, a->v[i].a.text);
		memset(b, 0, sizeof(*b));
		memcpy(b->spec, spec, sizeof(spec));
		b->addr = a->v[i].a;
		b->weight = q->weight ? q->weight : a->v[i].weight ? a->v[i].weight : 1;
		b->maxconn = q->maxconn;
		b->backup = q->backup;
		b->line = q->line;
		b->dns = (uint8_t)(k + 1);
		b->source = q->source;
		b->source_client = q->source_client;
	}
	if (left + a->dropped && !quiet)
		log_warn("route %s: %s: %u address%s left out: at most %d backends per route",
			 r->name, q->name, left + a->dropped, left + a->dropped == 1 ? "" : "es",
			 MAX_BACKENDS);
}

/* The answer the running config has for r's name k (its backends). */
static void answer_of(const struct route *r, unsigned k, struct dns_answer *a)
{
	a->n = a->dropped = 0;
	for (unsigned b = 0; b < r->nbackend && a->n < MAX_BACKENDS; b++)
		if (r->backend[b].dns == k + 1) {
			a->v[a->n].a = r->backend[b].addr;
			a->v[a->n].weight = r->dns[k].srv && !r->dns[k].weight ? r->backend[b].weight : 0;
			a->n++;
		}
}

static void fill_report(const struct config *c, const struct route *r, const struct dns_name *q,
			const char *why, enum dns_when when)
{
	char every[32];

	format_duration_ms(q->every_ms, every, sizeof(every));
	if (when == DNS_CHECK) {
		char at[300];
		config_where(c, q->line, at, sizeof(at));
		fprintf(stderr, "%snote: backend %s: cannot resolve now (%s): the proxy would "
			"start without its addresses and look again every %s\n", at, q->name, why,
			every);
	} else
		log_warn("%sroute %s: backend %s: no address (%s); the route goes on without its "
			 "addresses and looks again every %s", when == DNS_RELOAD ? "SIGHUP: " : "",
			 r->name, q->name, why, every);
}

int dns_fill(struct config *c, enum dns_when when)
{
	char err[384];
	unsigned total = 0, n = 0, look = 0;
	struct job *jobs;
	ares_channel ch;

	if (strcmp(c->resolvers, "system")) {
		if (channel_open(&ch, c->resolvers, err, sizeof(err))) {
			unsigned line = c->set_line[setting_find("resolvers") - settings];
			char at[300];
			config_where(c, line, at, sizeof(at));
			fprintf(stderr, "%sresolvers: %s\n", at, err);
			return -1;
		}
		ares_destroy(ch);
	}
	for (unsigned i = 0; i < c->nroutes; i++)
		total += c->route[i]->ndns;
	if (!total)
		return 0;
	if (!(jobs = calloc(total, sizeof(*jobs)))) {
		fprintf(stderr, "splicer: out of memory\n");
		return -1;
	}
	/* the resolver thread's answers, where it has one */
	pthread_mutex_lock(&dns.lock);
	for (unsigned i = 0; i < c->nroutes; i++)
		for (unsigned k = 0; k < c->route[i]->ndns; k++, n++) {
			struct watch *w = when >= DNS_RELOAD
				? watch_find(c->route[i]->name, &c->route[i]->dns[k]) : NULL;
			snprintf(jobs[n].route, sizeof(jobs[n].route), "%s", c->route[i]->name);
			jobs[n].q = c->route[i]->dns[k];
			if (w && w->have) {
				jobs[n].ans = w->last;
				jobs[n].status = ARES_SUCCESS;
			} else if (when == DNS_REGEN) {
				jobs[n].status = ARES_ENODATA; /* none yet: said when it failed */
			} else {
				jobs[n].look = 1;
				look++;
			}
		}
	pthread_mutex_unlock(&dns.lock);
	if (look && channel_open(&ch, c->resolvers, err, sizeof(err)) == 0) {
		for (unsigned j = 0; j < n; j++)
			if (jobs[j].look)
				job_start(ch, &jobs[j]);
		drive(ch, jobs, n, -1, NULL, NULL);
		for (unsigned j = 0; j < n; j++)
			if (jobs[j].look)
				job_finish(&jobs[j]);
		ares_destroy(ch);
	} else if (look) {
		for (unsigned j = 0; j < n; j++)
			if (jobs[j].look) {
				jobs[j].status = ARES_ENOTINITIALIZED;
				snprintf(jobs[j].why, sizeof(jobs[j].why), "%s", err);
			}
	}
	n = 0;
	for (unsigned i = 0; i < c->nroutes; i++)
		for (unsigned k = 0; k < c->route[i]->ndns; k++, n++) {
			if (jobs[n].status == ARES_SUCCESS)
				add_answer(c->route[i], k, &jobs[n].ans, when == DNS_REGEN);
			else if (when != DNS_REGEN)
				fill_report(c, c->route[i], &c->route[i]->dns[k], jobs[n].why, when);
		}
	free(jobs);
	return 0;
}

/* ---- the resolver thread --------------------------------------------------- */

void dns_set_config(const struct config *c)
{
	uint64_t now = now_monotonic_ms();
	unsigned keep = 0;

	pthread_mutex_lock(&dns.lock);
	for (unsigned i = 0; i < dns.n; i++)
		dns.w[i].live = 0;
	for (unsigned i = 0; i < c->nroutes; i++)
		for (unsigned k = 0; k < c->route[i]->ndns; k++) {
			const struct route *r = c->route[i];
			struct watch *w = watch_find(r->name, &r->dns[k]);
			if (!w) {
				if (dns.n == dns.cap) {
					unsigned cap = dns.cap ? 2 * dns.cap : 8;
					struct watch *t = realloc(dns.w, cap * sizeof(*t));
					if (!t) {
						log_err("route %s: %s: out of memory; not followed",
							r->name, r->dns[k].name);
						continue;
					}
					dns.w = t;
					dns.cap = cap;
				}
				w = &dns.w[dns.n++];
				memset(w, 0, sizeof(*w));
				snprintf(w->route, sizeof(w->route), "%s", r->name);
				answer_of(r, k, &w->last);
				w->have = w->last.n > 0;
				w->due_ms = now + r->dns[k].every_ms;
				/* no answer: dns_fill said so just now; the next line
				 * after DNS_FAIL_LOG_MS, as for any failure streak */
				w->failing = !w->have;
				w->fail_logged_ms = now;
			}
			w->q = r->dns[k]; /* options and interval as the new config says */
			w->live = 1;
		}
	for (unsigned i = 0; i < dns.n; i++)
		if (dns.w[i].live)
			dns.w[keep++] = dns.w[i];
	dns.n = keep;
	snprintf(dns.resolvers, sizeof(dns.resolvers), "%s", c->resolvers);
	pthread_mutex_unlock(&dns.lock);
	if (dns.wake[1] >= 0 && write(dns.wake[1], "", 1) < 0) {
		/* full: the thread has a wake-up waiting already */
	}
}

/* The jobs of the names that are due; *next_ms: when the next one is. */
static unsigned due_jobs(struct job **jobs, unsigned *cap, uint64_t now, uint64_t *next_ms)
{
	unsigned n = 0;

	*next_ms = now + 3600 * 1000;
	for (unsigned i = 0; i < dns.n; i++) {
		struct watch *w = &dns.w[i];
		if (w->due_ms > now) {
			if (w->due_ms < *next_ms)
				*next_ms = w->due_ms;
			continue;
		}
		if (n == *cap) {
			unsigned c = *cap ? 2 * *cap : 8;
			struct job *t = realloc(*jobs, c * sizeof(*t));
			if (!t)
				break; /* the rest the next round */
			*jobs = t;
			*cap = c;
		}
		memset(&(*jobs)[n], 0, sizeof((*jobs)[n]));
		snprintf((*jobs)[n].route, sizeof((*jobs)[n].route), "%s", w->route);
		(*jobs)[n].q = w->q;
		n++;
		w->due_ms = now + w->q.every_ms;
		if (w->due_ms < *next_ms)
			*next_ms = w->due_ms;
	}
	return n;
}

static void *dns_main(void *arg)
{
	ares_channel ch = NULL;
	char resolvers[SETTING_TEXT_MAX] = "", err[384];
	struct job *jobs = NULL;
	unsigned cap = 0;
	(void)arg;

	for (;;) {
		uint64_t now = now_monotonic_ms(), next;
		unsigned n;
		int woken = 0;

		pthread_mutex_lock(&dns.lock);
		if (__atomic_load_n(&dns.stop, __ATOMIC_ACQUIRE)) {
			pthread_mutex_unlock(&dns.lock);
			break;
		}
		if (ch && strcmp(resolvers, dns.resolvers)) {
			ares_destroy(ch);
			ch = NULL;
		}
		/* the channel (resolv.conf, hosts, sockets) only once a name is
		 * followed: a config without resolve= costs the thread alone */
		if (!ch && dns.n) {
			snprintf(resolvers, sizeof(resolvers), "%s", dns.resolvers);
			if (channel_open(&ch, resolvers, err, sizeof(err))) {
				log_err("resolver thread: %s; names are not looked up", err);
				ch = NULL;
			}
		}
		n = ch ? due_jobs(&jobs, &cap, now, &next) : 0;
		if (!ch)
			next = now + 10000;
		pthread_mutex_unlock(&dns.lock);
		if (n) {
			for (unsigned j = 0; j < n; j++)
				job_start(ch, &jobs[j]);
			drive(ch, jobs, n, dns.wake[0], &dns.stop, &woken);
			now = now_monotonic_ms();
			pthread_mutex_lock(&dns.lock);
			for (unsigned j = 0; j < n; j++) {
				struct watch *w = watch_find(jobs[j].route, &jobs[j].q);
				job_finish(&jobs[j]);
				if (w && jobs[j].status != ARES_ECANCELLED)
					watch_apply(w, &jobs[j], now);
			}
			pthread_mutex_unlock(&dns.lock);
			continue; /* the next due time, from the table again */
		}
		if (!woken) {
			struct pollfd p = { .fd = dns.wake[0], .events = POLLIN };
			char buf[64];
			int ms = next > now ? (int)(next - now) : 0;
			if (poll(&p, 1, ms) > 0)
				while (read(dns.wake[0], buf, sizeof(buf)) > 0)
					;
		}
	}
	if (ch)
		ares_destroy(ch);
	free(jobs);
	return NULL;
}

int dns_start(void)
{
	int r;

	if (dns.started)
		return 0;
	if (pipe2(dns.wake, O_CLOEXEC | O_NONBLOCK))
		return -errno;
	if ((r = pthread_create(&dns.thread, NULL, dns_main, NULL))) {
		close(dns.wake[0]);
		close(dns.wake[1]);
		dns.wake[0] = dns.wake[1] = -1;
		return -r;
	}
	dns.started = 1;
	return 0;
}

void dns_stop(void)
{
	if (dns.started) {
		__atomic_store_n(&dns.stop, 1, __ATOMIC_RELEASE);
		if (write(dns.wake[1], "", 1) < 0) {
			/* full: a wake-up is waiting already */
		}
		pthread_join(dns.thread, NULL);
		close(dns.wake[0]);
		close(dns.wake[1]);
		dns.wake[0] = dns.wake[1] = -1;
		dns.started = 0;
		dns.stop = 0;
	}
	pthread_mutex_lock(&dns.lock);
	free(dns.w);
	dns.w = NULL;
	dns.n = dns.cap = 0;
	pthread_mutex_unlock(&dns.lock);
}

int dns_changed(void)
{
	return __atomic_exchange_n(&dns.changed, 0, __ATOMIC_ACQ_REL);
}

unsigned dns_stats(struct dns_stat *out, unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&dns.lock);
	n = dns.n;
	for (unsigned i = 0; i < n && i < max; i++) {
		snprintf(out[i].route, sizeof(out[i].route), "%s", dns.w[i].route);
		snprintf(out[i].name, sizeof(out[i].name), "%s", dns.w[i].q.name);
		out[i].resolutions = dns.w[i].resolutions;
		out[i].failures = dns.w[i].failures;
		out[i].addresses = dns.w[i].last.n;
	}
	pthread_mutex_unlock(&dns.lock);
	return n;
}
