/* SPDX-License-Identifier: MIT */
/* stats_http: see stats_http.h. */
#define _GNU_SOURCE
#include "stats_http.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "backend.h"
#include "ctl_server.h"
#include "dns.h"
#include "engine.h"
#include "handoff.h"
#include "http_req.h"
#include "listener.h"
#include "log.h"
#include "reload.h"
#include "route_hist.h"
#include "status_page.h"
#include "status_rates.h"
#include "upgrade.h"

#define REQ_TIMEOUT  2000 /* ms for the whole request, from its accept */

static struct {
	struct config *cfg;
	struct worker *ws;
	unsigned nw;
	struct shared *sh;
	int lfd, stop[2];
	pthread_t thread;
	int started;
	int lameduck;           /* the lame duck: /health 503 (atomic) */
	uint64_t start_unix_ms; /* CLOCK_REALTIME at start */
	uint64_t pages;         /* status pages rendered (the stats thread's) */
} st = { .lfd = -1, .stop = { -1, -1 } };

struct out {
	char *buf;
	size_t len, n;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(o->n < o->len ? o->buf + o->n : NULL, o->n < o->len ? o->len - o->n : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		o->n += (size_t)k;
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Every engine's counters (engine.h): its bytes in one family with an
 * engine label; its own counters in families of their own. The test-only
 * engines are left out. */
static void engine_metrics(struct out *o, const struct counters *t)
{
	char name[96];

	family(o, "splicer_engine_bytes_total", "counter", "Bytes moved, by engine (all routes).");
	for (unsigned e = 0; e < engine_nengines; e++)
		if (!engine_hidden(engines[e]))
			put(o, "splicer_engine_bytes_total{engine=\"%s\"} %llu\n", engines[e]->name,
			    (unsigned long long)t->engine[e][ENGINE_CTR_BYTES]);
	for (unsigned e = 0; e < engine_nengines; e++)
		for (unsigned k = 0; k < engines[e]->ncounters && !engine_hidden(engines[e]); k++) {
			snprintf(name, sizeof name, "splicer_%s", engines[e]->counters[k].name);
			family(o, name, "counter", engines[e]->counters[k].help);
			put(o, "%s %llu\n", name, (unsigned long long)t->engine[e][k + 1]);
		}
}

static uint64_t unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 18 bytes as 24 characters of base64 (no padding needed), NUL-terminated. */
static void base64_18(const unsigned char in[18], char out[25])
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	for (int i = 0, k = 0; i < 18; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[k++] = t[v >> 18];
		out[k++] = t[v >> 12 & 63];
		out[k++] = t[v >> 6 & 63];
		out[k++] = t[v & 63];
	}
	out[24] = '\0';
}

/* The process: what was built, since when it runs, how the last reload went
 * (the start counts as the first load). */
static void process_metrics(struct out *o)
{
	int ok;
	uint64_t at;

	family(o, "splicer_build_info", "gauge",
	       "Always 1; the labels say the version and the engines built in.");
	put(o, "splicer_build_info{version=\"%s\",engines=\"", SPLICER_VERSION);
	for (unsigned e = 0, n = 0; e < engine_nengines; e++)
		if (!engine_hidden(engines[e]))
			put(o, "%s%s", n++ ? "," : "", engines[e]->name);
	put(o, "\"} 1\n");
	family(o, "splicer_start_time_seconds", "gauge", "When the proxy started, in Unix time.");
	put(o, "splicer_start_time_seconds %llu.%03llu\n",
	    (unsigned long long)(st.start_unix_ms / 1000), (unsigned long long)(st.start_unix_ms % 1000));
	reload_last(&ok, &at);
	if (!at)
		at = st.start_unix_ms;
	family(o, "splicer_last_reload_success", "gauge",
	       "1 when the last reload (SIGHUP) put its config in force, 0 when the running config "
	       "stayed (the reasons are in the log); 1 before any reload.");
	put(o, "splicer_last_reload_success %d\n", ok);
	family(o, "splicer_last_reload_time_seconds", "gauge",
	       "When the last reload (SIGHUP) ended, in Unix time; the start time before any reload.");
	put(o, "splicer_last_reload_time_seconds %llu.%03llu\n", (unsigned long long)(at / 1000),
	    (unsigned long long)(at % 1000));
}

/* Route and backend names go into label values: escape \ " and newline. */
static const char *esc(const char *s, char *buf, size_t len)
{
	size_t n = 0;
	for (; *s && n + 2 < len; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n')
			buf[n++] = '\\';
		buf[n++] = *s == '\n' ? 'n' : *s;
	}
	buf[n] = '\0';
	return buf;
}


#define ROUTE_FAMILY(metric, type, help, expr)                                             \
	do {                                                                                \
		family(&o, "splicer_route_" metric, type, help);                            \
		for (unsigned i = 0; i < c->nroutes; i++) {                                 \
			struct route *r = c->route[i];                                      \
			put(&o, "splicer_route_" metric "{route=\"%s\"} %llu\n",            \
			    esc(r->name, rn, sizeof(rn)), (unsigned long long)(expr));      \
		}                                                                           \
	} while (0)

#define BACKEND_FAMILY(metric, type, help, expr)                                           \
	do {                                                                                \
		family(&o, "splicer_backend_" metric, type, help);                          \
		for (unsigned i = 0; i < c->nroutes; i++) {                                 \
			struct route *r = c->route[i];                                      \
			for (unsigned b = 0; b < r->nbackend; b++)                          \
				put(&o, "splicer_backend_" metric "{route=\"%s\",backend=\"%s\"} %llu\n", \
				    esc(r->name, rn, sizeof(rn)),                           \
				    esc(r->backend[b].addr.text, bn, sizeof(bn)),           \
				    (unsigned long long)(expr));                            \
		}                                                                           \
	} while (0)

#define WORKER_COUNTER(metric, help, field)                                                \
	do {                                                                                \
		family(&o, "splicer_" metric, "counter", help);                             \
		put(&o, "splicer_" metric " %llu\n", (unsigned long long)t.field);          \
	} while (0)

/* A backend family with two label values, each a uint64_t of struct
 * backend_health at offsets o1 and o2. */
static void backend_pair(struct out *o, const struct config *c, const char *metric,
			 const char *help, const char *label, const char *v1, size_t o1,
			 const char *v2, size_t o2)
{
	char name[96], rn[160], bn[300];

	snprintf(name, sizeof(name), "splicer_backend_%s", metric);
	family(o, name, "counter", help);
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		esc(r->name, rn, sizeof(rn));
		for (unsigned b = 0; b < r->nbackend; b++) {
			const char *h = (const char *)r->health[b];
			esc(r->backend[b].addr.text, bn, sizeof(bn));
			for (int k = 0; k < 2; k++)
				put(o, "%s{route=\"%s\",backend=\"%s\",%s=\"%s\"} %llu\n", name, rn, bn,
				    label, k ? v2 : v1,
				    (unsigned long long)__atomic_load_n((const uint64_t *)(h + (k ? o2 : o1)),
									__ATOMIC_RELAXED));
		}
	}
}

/* Backend names with resolve= (dns.c): their lookups, failed lookups, and
 * the addresses of the answer in force. No family without such a name. */
static void dns_metrics(struct out *o)
{
	static const char *const fam[3][3] = {
		{ "splicer_dns_resolutions_total", "counter",
		  "Lookups of a backend name with resolve=, one per interval, failed ones too." },
		{ "splicer_dns_failures_total", "counter",
		  "Lookups that failed (timeout, SERVFAIL, NXDOMAIN, no address); the last answer stayed." },
		{ "splicer_dns_addresses", "gauge", "Addresses of a name's answer in force." },
	};
	unsigned n = dns_stats(NULL, 0), m;
	struct dns_stat *d;
	char rn[160], nn[300];

	if (!n || !(d = calloc(n, sizeof(*d))))
		return;
	m = dns_stats(d, n);
	n = m < n ? m : n;
	for (unsigned f = 0; f < 3; f++) {
		family(o, fam[f][0], fam[f][1], fam[f][2]);
		for (unsigned i = 0; i < n; i++)
			put(o, "%s{route=\"%s\",name=\"%s\"} %llu\n", fam[f][0],
			    esc(d[i].route, rn, sizeof(rn)), esc(d[i].name, nn, sizeof(nn)),
			    (unsigned long long)(f == 0 ? d[i].resolutions
					       : f == 1 ? d[i].failures : d[i].addresses));
	}
	free(d);
}

/* ---- histograms (route_hist.h) ---------------------------------------------
 * One histogram's samples for one label set (labels: `route="web"` and
 * maybe more): cumulative _bucket lines, +Inf last, _sum and _count. Times
 * are kept in microseconds and shown in seconds. */
static void hist_samples(struct out *o, const char *name, const char *labels,
			 const struct route *r, enum hist_kind kind, int seconds)
{
	struct hist_read h;
	unsigned n;
	const uint64_t *b = route_hist_bounds(kind, &n);
	uint64_t cum = 0;

	route_hist_read(r, kind, &h);
	for (unsigned i = 0; i < n; i++) {
		cum += h.bucket[i];
		if (seconds)
			put(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, (double)b[i] / 1e6,
			    (unsigned long long)cum);
		else
			put(o, "%s_bucket{%s,le=\"%llu\"} %llu\n", name, labels,
			    (unsigned long long)b[i], (unsigned long long)cum);
	}
	put(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)h.count);
	if (seconds)
		put(o, "%s_sum{%s} %llu.%06llu\n", name, labels, (unsigned long long)(h.sum / 1000000),
		    (unsigned long long)(h.sum % 1000000));
	else
		put(o, "%s_sum{%s} %llu\n", name, labels, (unsigned long long)h.sum);
	put(o, "%s_count{%s} %llu\n", name, labels, (unsigned long long)h.count);
}

static void route_histogram(struct out *o, const struct config *c, const char *name,
			    const char *help, enum hist_kind kind)
{
	char rn[160], labels[200];

	family(o, name, "histogram", help);
	for (unsigned i = 0; i < c->nroutes; i++) {
		snprintf(labels, sizeof(labels), "route=\"%s\"", esc(c->route[i]->name, rn, sizeof(rn)));
		hist_samples(o, name, labels, c->route[i], kind, 1);
	}
}

static void histogram_metrics(struct out *o, const struct config *c)
{
	char rn[160], labels[220];

	route_histogram(o, c, "splicer_route_connect_seconds",
			"From a session's first backend connect attempt to its backend connection "
			"being up (retries on other backends included).", HIST_CONNECT);
	route_histogram(o, c, "splicer_route_first_byte_seconds",
			"The backend's answer time: from the first client byte written to it (or its "
			"connection being up, when it speaks first) to its first byte written to the "
			"client.", HIST_FIRST_BYTE);
	route_histogram(o, c, "splicer_route_session_duration_seconds",
			"Sessions from accept to close (every session of sessions_total, once it ended).",
			HIST_DURATION);
	family(o, "splicer_route_session_bytes", "histogram",
	       "Bytes per session by direction, up = client to backend (the sessions of "
	       "session_duration_seconds).");
	for (unsigned i = 0; i < c->nroutes; i++) {
		esc(c->route[i]->name, rn, sizeof(rn));
		snprintf(labels, sizeof(labels), "route=\"%s\",direction=\"up\"", rn);
		hist_samples(o, "splicer_route_session_bytes", labels, c->route[i], HIST_BYTES_UP, 0);
		snprintf(labels, sizeof(labels), "route=\"%s\",direction=\"down\"", rn);
		hist_samples(o, "splicer_route_session_bytes", labels, c->route[i], HIST_BYTES_DOWN, 0);
	}
}

/* The Prometheus text of config c (stats_http_metrics's contract). */
static size_t metrics_of(const struct config *c, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	char rn[160], bn[300];
	unsigned pin = 0, pfree = 0;
	struct counters t;

	worker_counters_total(st.ws, st.nw, &t);

	process_metrics(&o);
	ROUTE_FAMILY("sessions_total", "counter", "Sessions accepted.", STAT_GET(r->st->sessions));
	ROUTE_FAMILY("sessions_active", "gauge", "Sessions open now.", STAT_GET(r->st->active));
	family(&o, "splicer_route_bytes_total", "counter",
	       "Bytes forwarded, up = client to backend (live sessions' within about a second).");
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		esc(r->name, rn, sizeof(rn));
		put(&o, "splicer_route_bytes_total{route=\"%s\",direction=\"up\"} %llu\n", rn,
		    (unsigned long long)STAT_GET(r->st->bytes_up));
		put(&o, "splicer_route_bytes_total{route=\"%s\",direction=\"down\"} %llu\n", rn,
		    (unsigned long long)STAT_GET(r->st->bytes_down));
	}
	ROUTE_FAMILY("connect_errors_total", "counter", "Backend connect attempts that failed.",
		     STAT_GET(r->st->connect_errors));
	ROUTE_FAMILY("retries_total", "counter", "Connect attempts on a further backend.",
		     STAT_GET(r->st->retries));
	ROUTE_FAMILY("no_backend_total", "counter", "Clients closed because every backend failed.",
		     STAT_GET(r->st->no_backend));
	ROUTE_FAMILY("all_backends_down_total", "counter",
		     "Clients closed at once because every backend was marked down.",
		     STAT_GET(r->st->all_down));
	family(&o, "splicer_route_refused_total", "counter",
	       "Clients reset at once by admission: denied by allow/deny, over source_max_conns, "
	       "over source_conn_rate, or a new source while every entry of the route's source "
	       "table (source_table_size) has live sessions.");
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		esc(r->name, rn, sizeof(rn));
		put(&o, "splicer_route_refused_total{route=\"%s\",reason=\"denied\"} %llu\n", rn,
		    (unsigned long long)STAT_GET(r->st->denied));
		put(&o, "splicer_route_refused_total{route=\"%s\",reason=\"source_max_conns\"} %llu\n",
		    rn, (unsigned long long)STAT_GET(r->st->source_conns_rejected));
		put(&o, "splicer_route_refused_total{route=\"%s\",reason=\"source_conn_rate\"} %llu\n",
		    rn, (unsigned long long)STAT_GET(r->st->source_rate_rejected));
		put(&o, "splicer_route_refused_total{route=\"%s\",reason=\"source_table_full\"} %llu\n",
		    rn, (unsigned long long)STAT_GET(r->st->source_table_full));
	}
	ROUTE_FAMILY("queue_length", "gauge", "Clients waiting now for a backend slot (maxconn).",
		     STAT_GET(r->st->queued));
	ROUTE_FAMILY("queue_served_total", "counter", "Clients that waited for a backend slot and got one.",
		     STAT_GET(r->st->dequeued));
	family(&o, "splicer_route_queue_wait_seconds_total", "counter",
	       "Time the served clients waited for a slot, summed (divide by queue_served_total).");
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		put(&o, "splicer_route_queue_wait_seconds_total{route=\"%s\"} %.3f\n",
		    esc(r->name, rn, sizeof(rn)), (double)STAT_GET(r->st->queue_wait_ms) / 1000.0);
	}
	ROUTE_FAMILY("queue_timeouts_total", "counter", "Clients closed after queue_timeout without a slot.",
		     STAT_GET(r->st->queue_timeouts));
	family(&o, "splicer_route_backend_gone_closed_total", "counter",
	       "Sessions closed because their backend went (on_backend_down = close): marked down "
	       "(cause down) or removed by a reload, DNS or ctl backend del (cause removed).");
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		esc(r->name, rn, sizeof(rn));
		put(&o, "splicer_route_backend_gone_closed_total{route=\"%s\",cause=\"down\"} %llu\n",
		    rn, (unsigned long long)STAT_GET(r->st->cut_down));
		put(&o, "splicer_route_backend_gone_closed_total{route=\"%s\",cause=\"removed\"} %llu\n",
		    rn, (unsigned long long)STAT_GET(r->st->cut_removed));
	}
	histogram_metrics(&o, c);
	BACKEND_FAMILY("up", "gauge", "1 when the backend takes sessions, 0 when marked down.",
		       backend_is_up(r, b));
	BACKEND_FAMILY("backup", "gauge", "1 for a backup (used only while no primary is usable).",
		       r->backend[b].backup);
	family(&o, "splicer_backend_slowstart_ratio", "gauge",
	       "How far a backend that came up is in its slowstart ramp: its share of new sessions "
	       "is this times its weight's (1: done, or no slowstart).");
	for (unsigned i = 0; i < c->nroutes; i++)
		for (unsigned b = 0; b < c->route[i]->nbackend; b++)
			put(&o, "splicer_backend_slowstart_ratio{route=\"%s\",backend=\"%s\"} %.3f\n",
			    esc(c->route[i]->name, rn, sizeof(rn)),
			    esc(c->route[i]->backend[b].addr.text, bn, sizeof(bn)),
			    backend_ramp(c->route[i], b) / 1000.0);
	BACKEND_FAMILY("sessions_total", "counter", "Sessions connected to the backend.",
		       STAT_GET(r->health[b]->sessions));
	BACKEND_FAMILY("sessions_active", "gauge", "Sessions on (or connecting to) the backend.",
		       (uint64_t)__atomic_load_n(&r->health[b]->active, __ATOMIC_RELAXED));
	backend_pair(&o, c, "bytes_total", "Bytes forwarded through the backend (live sessions' within about a second).",
		     "direction", "up", offsetof(struct backend_health, bytes_up), "down",
		     offsetof(struct backend_health, bytes_down));
	BACKEND_FAMILY("connect_errors_total", "counter", "Connect attempts to the backend that failed.",
		       STAT_GET(r->health[b]->connect_errors));
	backend_pair(&o, c, "checks_total", "Active health check results.", "result", "ok",
		     offsetof(struct backend_health, checks_ok), "failed",
		     offsetof(struct backend_health, checks_failed));
	dns_metrics(&o);
	engine_metrics(&o, &t);
	WORKER_COUNTER("auto_switches_total", "Directions auto moved from copy to splice.", auto_switches);
	WORKER_COUNTER("auto_uring_moves_total",
		       "Sessions auto moved whole to io_uring as request/response (auto_uring_turns).",
		       auto_turns_moves);
	WORKER_COUNTER("auto_uring_returns_total",
		       "Sessions auto brought back from io_uring to copy (a direction streamed, or an "
		       "upgrade's hand-over).", auto_turns_returns);
	WORKER_COUNTER("idle_timeouts_total", "Sessions closed by idle_timeout (both directions open).",
		       idle_timeouts);
	WORKER_COUNTER("half_close_timeouts_total",
		       "Sessions closed by half_close_timeout (one direction over, or bytes waiting "
		       "to be delivered before a reset); never in idle_timeouts_total.",
		       half_close_timeouts);
	WORKER_COUNTER("resets_sent_total", "Sides closed with an RST.", resets_sent);
	WORKER_COUNTER("connect_local_errors_total",
		       "Backend connects failed by this host (ports, descriptors, memory, routes); not counted against backends.",
		       connect_local_errors);
	WORKER_COUNTER("loops_total", "Clients closed as this proxy's own backend connections (a connection loop).",
		       loops);
	WORKER_COUNTER("proxy_header_errors_total", "Clients closed for a bad or late PROXY header.",
		       proxy_header_errors);
	WORKER_COUNTER("tls_hello_timeouts_total",
		       "Clients of sni listeners closed without a whole ClientHello within tls_hello_timeout.",
		       tls_hello_timeouts);
	WORKER_COUNTER("tls_hello_errors_total",
		       "Clients of sni listeners closed for a malformed, truncated or oversized ClientHello.",
		       tls_hello_errors);
	WORKER_COUNTER("tls_no_route_total",
		       "Clients of sni listeners closed: no route for their name and no route without sni.",
		       tls_no_route);
	family(&o, "splicer_sessions_expired_total", "counter",
	       "Graceful closes begun by the proxy, by cause: max_session_time, or drain (drain_spread).");
	put(&o, "splicer_sessions_expired_total{cause=\"max_session_time\"} %llu\n",
	    (unsigned long long)t.expired_lifetime);
	put(&o, "splicer_sessions_expired_total{cause=\"drain\"} %llu\n",
	    (unsigned long long)t.expired_drain);
	family(&o, "splicer_dead_peers_total", "counter",
	       "Sessions ended because the kernel gave up on a peer (ETIMEDOUT: keepalive probes "
	       "unanswered, the user timeout, retransmissions), by side.");
	put(&o, "splicer_dead_peers_total{side=\"client\"} %llu\n", (unsigned long long)t.dead_client);
	put(&o, "splicer_dead_peers_total{side=\"backend\"} %llu\n", (unsigned long long)t.dead_backend);
	family(&o, "splicer_upgrade_sessions_total", "counter",
	       "Sessions of the upgrade that started this process, by outcome: handed (taken over "
	       "from the old process), drained (kept by the old process to drain: uring, sockmap, "
	       "a route, backend or listener this config lacks), closed (handed over but not "
	       "adopted).");
	put(&o, "splicer_upgrade_sessions_total{outcome=\"handed\"} %llu\n",
	    (unsigned long long)t.adopted);
	put(&o, "splicer_upgrade_sessions_total{outcome=\"drained\"} %llu\n",
	    (unsigned long long)handoff_drained());
	put(&o, "splicer_upgrade_sessions_total{outcome=\"closed\"} %llu\n",
	    (unsigned long long)t.adopt_failed);
	family(&o, "splicer_accept_pauses_total", "counter", "Times accepting paused, by cause.");
	put(&o, "splicer_accept_pauses_total{cause=\"fd_limit\"} %llu\n",
	    (unsigned long long)t.accept_fd_pauses);
	put(&o, "splicer_accept_pauses_total{cause=\"max_conns\"} %llu\n",
	    (unsigned long long)t.max_conns_pauses);
	/* read without the workers' cooperation: a moment's approximation */
	for (unsigned i = 0; i < st.nw; i++) {
		unsigned total = __atomic_load_n(&st.ws[i].pipes.total, __ATOMIC_RELAXED);
		unsigned nfree = __atomic_load_n(&st.ws[i].pipes.nfree, __ATOMIC_RELAXED);
		pfree += nfree;
		pin += total > nfree ? total - nfree : 0;
	}
	family(&o, "splicer_log_lines_dropped_total", "counter",
	       "Log lines dropped because the sink did not take them in time (a stalled pipe, "
	       "FIFO, disk or syslog); no worker waits for a log.");
	put(&o, "splicer_log_lines_dropped_total{log=\"error\"} %llu\n",
	    (unsigned long long)log_sink_dropped(&log_err_sink));
	put(&o, "splicer_log_lines_dropped_total{log=\"access\"} %llu\n",
	    (unsigned long long)access_log_dropped());
	family(&o, "splicer_control_clients_dropped_total", "counter",
	       "Clients of the stats endpoint and the admin socket that the server closed: evicted "
	       "(every slot taken, or the answers' memory: the one that moved nothing for the "
	       "longest gave way), request_timeout (no whole request in time), slow_reader (did not "
	       "take its answer in time). None of them delays another client.");
	for (unsigned e = 0; e < CTL_EP_N; e++)
		for (unsigned d = 0; d < CTL_DROP_N; d++)
			put(&o, "splicer_control_clients_dropped_total{endpoint=\"%s\",reason=\"%s\"} %llu\n",
			    ctl_endpoint_names[e], ctl_drop_names[d],
			    (unsigned long long)ctl_server_dropped((enum ctl_endpoint)e, (enum ctl_drop)d));
	family(&o, "splicer_pipes", "gauge", "Pipes in the pools, by state.");
	put(&o, "splicer_pipes{state=\"in_use\"} %u\nsplicer_pipes{state=\"free\"} %u\n", pin, pfree);
	if (o.n < len)
		buf[o.n] = '\0';
	return o.n;
}

size_t stats_http_metrics(char *buf, size_t len)
{
	return metrics_of(__atomic_load_n(&st.cfg, __ATOMIC_ACQUIRE), buf, len);
}

/* The Prometheus text of c, malloc'd: measured, then rendered (again if
 * it grew in between). NULL without memory. */
static char *metrics_text(const struct config *c, size_t *blen)
{
	size_t need = metrics_of(c, NULL, 0) + 4096;
	char *body = NULL;

	*blen = 0;
	for (int tries = 0; tries < 4; tries++) {
		free(body);
		if (!(body = malloc(need)))
			return NULL;
		if ((*blen = metrics_of(c, body, need)) < need)
			return body;
		need = *blen + 4096;
	}
	free(body);
	return NULL;
}

/* Queues the answer: the head and, unless head_only (HEAD), the body;
 * Content-Length is the body's length either way, as for GET. The client
 * is closed once it is sent (ctl_server: at the reader's pace, the thread
 * never waits for it). Returns 0, or -1 without memory for it. */
static int respond_with(struct ctl_conn *c, int code, const char *reason, const char *ctype,
			const char *extra, const char *body, size_t blen, int head_only)
{
	char head[1024], *buf;
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "%sConnection: close\r\n\r\n", code, reason, ctype, blen, extra);
	size_t len = (size_t)n + (head_only ? 0 : blen);

	if (!(buf = malloc(len)))
		return -1;
	memcpy(buf, head, (size_t)n);
	if (!head_only)
		memcpy(buf + n, body, blen);
	c->close_after = 1;
	return ctl_conn_answer(c, buf, len) ? -1 : 0;
}

static int respond_as(struct ctl_conn *c, int code, const char *reason, const char *ctype,
		      const char *body, size_t blen, int head_only)
{
	return respond_with(c, code, reason, ctype, "", body, blen, head_only);
}

static int error(struct ctl_conn *c, int code, const char *reason)
{
	char body[64];
	int n = snprintf(body, sizeof(body), "%d %s\n", code, reason);
	return respond_as(c, code, reason, "text/plain; charset=utf-8", body, (size_t)n, 0);
}

/* Clients at once: one more makes the one that moved nothing for the
 * longest give way (a 408 when its request was not whole). Each gets
 * REQ_TIMEOUT for its request from its accept, a trickle included, and a
 * reader that takes nothing of its answer for STALL_MS is dropped: clients
 * that never finish a request or never read keep neither /health from a
 * load balancer's probe nor /metrics from a scraper, whose requests take a
 * millisecond. */
#define MAX_CLIENTS 32
#define STALL_MS    2000     /* a reader may take nothing of its answer this long */
#define ANSWER_MS   30000    /* an answer's whole time (a slow link's scrape) */
#define OUT_BUDGET  (16u << 20) /* answer bytes held for all clients at once */

static int health(struct ctl_conn *c, int head_only)
{
	int draining = __atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED) ||
		       __atomic_load_n(&st.lameduck, __ATOMIC_RELAXED);
	uint64_t now = now_monotonic_ms(), age = 0;
	unsigned stuck = 0;
	char why[128];
	int n;

	/* a worker that stopped turning its loop moves nothing */
	for (unsigned i = 0; i < st.nw && !draining && !age; i++)
		if ((age = worker_stalled_ms(&st.ws[i], now)))
			stuck = i;
	if (draining)
		n = snprintf(why, sizeof(why), "draining\n");
	else if (age)
		n = snprintf(why, sizeof(why), "worker %u stalled: no loop turn for %llu ms\n", stuck,
			     (unsigned long long)age);
	else
		n = snprintf(why, sizeof(why), "ok\n");
	if (draining || age)
		return respond_as(c, 503, "Service Unavailable", "text/plain", why, (size_t)n, head_only);
	return respond_as(c, 200, "OK", "text/plain", why, (size_t)n, head_only);
}

/* ---- the status page (status_page.h) ---------------------------------------- */

/* GET /: the page, drawn from the /metrics text of the config in force.
 * Its Content-Security-Policy lets nothing load and runs only the page's
 * own <style> and <script> (a nonce new for each answer): a name that got
 * past the escaping could still not run or fetch anything. */
static int status(struct ctl_conn *c, int head_only)
{
	const struct config *cfg = __atomic_load_n(&st.cfg, __ATOMIC_ACQUIRE);
	unsigned char rnd[18];
	char nonce[32], csp[512], host[65] = "";
	struct utsname un;
	struct html_buf page;
	size_t mlen;
	char *m;
	int r;

	/* 18 random bytes, base64: a nonce no page can guess */
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		return error(c, 503, "Service Unavailable");
	base64_18(rnd, nonce);
	if (!uname(&un))
		snprintf(host, sizeof(host), "%s", un.nodename);
	if (!(m = metrics_text(cfg, &mlen)))
		return error(c, 500, "Internal Server Error");
	struct status_input in = {
		.cfg = cfg, .metrics = m, .metrics_len = mlen, .now_ms = unix_ms(),
		.start_ms = st.start_unix_ms,
		.state = __atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED) ? "draining"
			 : __atomic_load_n(&st.lameduck, __ATOMIC_RELAXED) ? "lameduck" : "serving",
		.host = host, .workers = st.nw, .seq = ++st.pages, .nonce = nonce,
		.refresh_s = STATUS_REFRESH_S,
	};
	html_init(&page, STATUS_PAGE_MAX);
	r = status_page_render(&in, &page);
	free(m);
	if (r) {
		html_free(&page);
		if (r == -EFBIG) {
			static const char big[] = "503 the status page is over its size limit: see /metrics\n";
			return respond_as(c, 503, "Service Unavailable", "text/plain; charset=utf-8", big,
					  sizeof(big) - 1, head_only);
		}
		return error(c, 500, "Internal Server Error");
	}
	snprintf(csp, sizeof(csp),
		 "Content-Security-Policy: default-src 'none'; script-src 'nonce-%s'; style-src "
		 "'nonce-%s'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
		 "frame-ancestors 'none'\r\nX-Content-Type-Options: nosniff\r\n"
		 "Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\n", nonce, nonce);
	r = respond_with(c, 200, "OK", "text/html; charset=utf-8", csp, page.p, page.n, head_only);
	html_free(&page);
	return r;
}

static int answer(struct ctl_conn *c, const char *method, const char *path)
{
	int r;

	if (strcmp(path, "/") && strcmp(path, "/metrics") && strcmp(path, "/health"))
		return error(c, 404, "Not Found");
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return error(c, 405, "Method Not Allowed");
	if (!strcmp(path, "/health"))
		return health(c, !strcmp(method, "HEAD"));
	if (!strcmp(path, "/"))
		return status(c, !strcmp(method, "HEAD"));
	size_t blen;
	char *body = metrics_text(__atomic_load_n(&st.cfg, __ATOMIC_ACQUIRE), &blen);
	if (!body)
		return error(c, 500, "Internal Server Error");
	r = respond_as(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body, blen,
		       !strcmp(method, "HEAD"));
	free(body);
	return r;
}

/* ctl_server's protocol: one request per connection, answered once its
 * head is whole (or bad), then closed. */
static int stats_input(struct ctl_conn *c, void *arg)
{
	char method[16], path[256];
	int r = http_req_parse(c->in, c->in_n, method, path);

	(void)arg;
	if (r == HTTP_REQ_MORE)
		return c->eof ? -1 : 0; /* closed before a whole request: nobody to answer */
	if (r == HTTP_REQ_OK)
		return answer(c, method, path);
	if (r == 431)
		return error(c, 431, "Request Header Fields Too Large");
	return error(c, 400, "Bad Request");
}

static void *stats_main(void *arg)
{
	static const char timeout[] = "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; "
				      "charset=utf-8\r\nContent-Length: 20\r\nConnection: close\r\n\r\n"
				      "408 Request Timeout\n";
	struct ctl_server srv = {
		.ep = CTL_EP_STATS, .lfd = st.lfd, .stop_fd = st.stop[0], .max_conns = MAX_CLIENTS,
		.in_max = HTTP_REQ_MAX, .out_budget = OUT_BUDGET, .request_ms = REQ_TIMEOUT,
		.stall_ms = STALL_MS, .answer_ms = ANSWER_MS,
		/* asked to stop: the requests read so far are answered (an
		 * upgrade's new process accepts from the same socket meanwhile,
		 * so a probe that came here still gets its answer), for 1 s */
		.drain_ms = 1000, .last_words = timeout, .on_input = stats_input,
	};
	int r;

	(void)arg;
	if ((r = ctl_server_run(&srv)))
		log_err("stats: %s; the endpoint does not answer", strerror(-r));
	return NULL;
}

int stats_http_start(struct config *cfg, struct worker *ws, unsigned nworkers, struct shared *sh,
		     char *err, size_t errlen)
{
	st.cfg = cfg;
	st.ws = ws;
	st.nw = nworkers;
	st.sh = sh;
	st.start_unix_ms = unix_ms();
	if (!strcmp(cfg->stats, "off"))
		return 0;
	char why[256];
	/* an upgrade hands the socket over: /health answers throughout */
	if ((st.lfd = upgrade_take_one(&cfg->stats_addr)) < 0 &&
	    (st.lfd = listener_open(&cfg->stats_addr, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "stats: %s", why);
		return -1;
	}
	if (pipe2(st.stop, O_CLOEXEC) || (errno = pthread_create(&st.thread, NULL, stats_main, NULL))) {
		snprintf(err, errlen, "stats: %s", strerror(errno));
		return -1;
	}
	st.started = 1;
	/* the page's rates; without them it shows dashes, so only say why */
	if ((errno = -status_rates_start(&st.cfg)))
		log_warn("stats: no rates on the status page: %s", strerror(errno));
	log_info("stats: listening on %s (GET / for people, /metrics, /health)", cfg->stats_addr.text);
	return 0;
}

void stats_http_set_config(struct config *cfg)
{
	__atomic_store_n(&st.cfg, cfg, __ATOMIC_RELEASE);
}

void stats_http_set_lameduck(void)
{
	__atomic_store_n(&st.lameduck, 1, __ATOMIC_RELAXED);
}

int stats_http_lameduck(void)
{
	return __atomic_load_n(&st.lameduck, __ATOMIC_RELAXED);
}

int stats_http_fd(void)
{
	return st.started ? st.lfd : -1;
}

void stats_http_stop(void)
{
	if (!st.started)
		return;
	if (write(st.stop[1], "x", 1) < 0) {
		/* our own empty pipe */
	}
	pthread_join(st.thread, NULL);
	status_rates_stop();
	close(st.stop[0]);
	close(st.stop[1]);
	close(st.lfd);
	listener_unlink(&st.cfg->stats_addr); /* a Unix path: no file left behind */
	st.started = 0;
}
