/* SPDX-License-Identifier: MIT */
/* Integration cases for what an operator sees (issue 14, "failures
 * visible"): backend connect errors at the default log level, one line per
 * backend per interval with their count; the access log's appended fields
 * (listener, connect_ms, error, ended_by) for each way a session ends; a
 * live session's bytes in /metrics before it ends; /metrics whose families
 * are each contiguous and announced by HELP and TYPE, with build info,
 * start time and the last reload's result, and that promtool accepts, the
 * route histograms included. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *ob_read(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = '\0';
	fclose(f);
	return buf;
}

static void ob_start(struct h_proxy *p, const char *bin, const char *conf)
{
	const char *args[] = { "-c", conf, NULL };
	char err[512];

	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy with %s: %s", conf, err);
}

/* ---- connect errors at the default level ---------------------------------- */

/* Sums the counts of the proxy's "backend B of route R: N connect error(s)"
 * lines; *lines gets how many there were, *bad how many lack "(ECONNREFUSED)". */
static long ob_error_lines(const struct h_proxy *p, const char *backend, int *lines, int *bad)
{
	char *log = ob_read(p->log), head[200];
	long sum = 0;

	*lines = *bad = 0;
	snprintf(head, sizeof head, "warning: backend %s of route default: ", backend);
	for (char *l = log; l && *l;) {
		char *nl = strchr(l, '\n'), *h;
		if (nl)
			*nl = '\0';
		if ((h = strstr(l, head))) {
			unsigned long long n = 0;
			sscanf(h + strlen(head), "%llu connect error", &n);
			sum += (long)n;
			(*lines)++;
			*bad += !strstr(l, "(ECONNREFUSED)");
		}
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(log);
	return sum;
}

Test(integ, backend_connect_errors_logged_at_default_level_once_per_interval, .init = h_init,
     .fini = h_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	struct h_refused dead;
	const int clients = 20;
	int lines, bad;

	H_CHECK(h_refused_open(&dead) == 0, "no refusing port");
	const char *backends[] = { dead.text, NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, NULL); /* no -v */
	int64_t t0 = h_now_ms();
	for (int i = 0; i < clients; i++) {
		int fd = h_connect(&p.addr, 2000);
		H_CHECK(fd >= 0, "connect to the proxy: %s", strerror(errno));
		H_CHECK(h_expect_eof(fd, h_now_ms() + 3000) != -ETIMEDOUT,
			"client %d: the proxy kept a client whose backend refuses", i);
		close(fd);
	}
	/* The first error at once, on its own line; the other 19 are held for
	 * the rest of the 10 s interval (the worker's housekeeping reports them
	 * when it ends), and said at exit when the proxy stops before that. */
	long sum = 0;
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end && sum < 1; h_sleep_ms(20))
		sum = ob_error_lines(&p, dead.text, &lines, &bad);
	H_CHECK(sum == 1 && lines == 1, "the first error is not reported at once on its own: %ld "
		"errors in %d lines", sum, lines);
	H_CHECK(h_log_lines(&p, "backend", dead.text, "1 connect error (ECONNREFUSED)", NULL) >= 1,
		"the first error's line does not name one error and ECONNREFUSED");
	h_sleep_ms(300); /* a housekeeping turn or three: nothing more may be said yet */
	sum = ob_error_lines(&p, dead.text, &lines, &bad);
	int64_t took = h_now_ms() - t0;
	H_CHECK(took >= 10000 || (sum == 1 && lines == 1),
		"%ld errors in %d lines %lld ms after the first: not one line per 10 s", sum, lines,
		(long long)took);
	h_proxy_down(&p);
	sum = ob_error_lines(&p, dead.text, &lines, &bad);
	took = h_now_ms() - t0;
	H_CHECK(sum == clients, "connect error lines count %ld errors, %d were made (%d lines; the "
		"held ones must be said at exit)", sum, clients, lines);
	H_CHECK(lines >= 2 && lines <= 2 + (int)(took / 10000),
		"%d connect error lines in %lld ms: at most one per backend per 10 s", lines,
		(long long)took);
	H_CHECK(!bad, "%d connect error lines without the errno name (ECONNREFUSED)", bad);
	h_refused_close(&dead);
}

/* ---- the access log's appended fields -------------------------------------- */

struct ob_entry {
	char route[64], backend[128], reason[40], listener[128], connect_ms[24], error[32],
		ended_by[16];
	unsigned long long up, down, ms;
};

/* The access log line of the client whose local port is port: waits for
 * it, parses every field in the documented order. */
static void ob_entry_of(const char *path, int port, struct ob_entry *e)
{
	char needle[64];
	int k = 0;

	snprintf(needle, sizeof needle, " client=127.0.0.1:%d ", port);
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20)) {
		char *log = ob_read(path), *l = log ? strstr(log, needle) : NULL;
		if (l) {
			while (l > log && l[-1] != '\n')
				l--;
			k = sscanf(l, "%*s route=%63s client=%*s backend=%127s up=%llu down=%llu "
				      "duration_ms=%llu reason=%39s listener=%127s connect_ms=%23s "
				      "error=%31s ended_by=%15s", e->route, e->backend, &e->up, &e->down,
				   &e->ms, e->reason, e->listener, e->connect_ms, e->error, e->ended_by);
			H_CHECK(k == 10, "access log line for port %d does not parse (%d fields): %.300s",
				port, k, l);
		}
		free(log);
		if (k)
			return;
	}
	H_CHECK(0, "no access log line for client port %d in %s", port, path);
}

static int local_port(int fd)
{
	struct sockaddr_in me;
	socklen_t len = sizeof me;

	H_CHECK(getsockname(fd, (struct sockaddr *)&me, &len) == 0, "getsockname");
	return ntohs(me.sin_port);
}

/* A client of a: connected, its local port in *port, and, with echo, one
 * round trip of 5 bytes done (the session is open end to end). */
static int ob_client(const struct h_addr *a, int *port, int echo)
{
	char buf[8];
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "connect to %s: %s", a->text, strerror(errno));
	*port = local_port(fd);
	H_CHECK(!echo || (h_send_all(fd, "hello", 5, h_now_ms() + 2000) == 0 &&
			  h_recv_exact(fd, buf, 5, h_now_ms() + 2000) == 0),
		"echo through %s", a->text);
	return fd;
}

static void ob_addr(struct h_addr *a, int port)
{
	char t[64];

	snprintf(t, sizeof t, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(t, a) == 0, "address %s", t);
}

/* A backend that resets each connection once it read a byte. */
static void ob_reset_conn(struct h_server *s, int fd, int index, void *arg)
{
	struct linger lg = { 1, 0 };
	char c;

	(void)s, (void)index, (void)arg;
	h_set_timeouts(fd, 1000);
	if (recv(fd, &c, 1, 0) == 1)
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

static void ob_expect(const struct ob_entry *e, const char *what, const char *reason,
		      const char *error, const char *ended_by, int connected, const char *listener)
{
	H_CHECK(!strcmp(e->reason, reason) && !strcmp(e->error, error) &&
			!strcmp(e->ended_by, ended_by) && !strcmp(e->listener, listener) &&
			(connected ? strspn(e->connect_ms, "0123456789") == strlen(e->connect_ms) &&
					     atoll(e->connect_ms) < 3000
				   : !strcmp(e->connect_ms, "-")),
		"%s: reason=%s error=%s ended_by=%s listener=%s connect_ms=%s; expected reason=%s "
		"error=%s ended_by=%s listener=%s connect_ms=%s", what, e->reason, e->error,
		e->ended_by, e->listener, e->connect_ms, reason, error, ended_by, listener,
		connected ? "a number" : "-");
}

Test(integ, access_log_names_listener_connect_time_error_and_ender, .init = h_init,
     .fini = h_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct h_server echo, resetter;
	static struct h_tag_server greeter;
	static struct h_proxy p;
	struct h_refused dead;
	struct h_addr a_echo, a_greet, a_dead, a_reset, a_hold;
	struct ob_entry e;
	char conf[2048], log[300];
	int ports[5], fd, port;

	snprintf(log, sizeof log, "%s/access.log", h_tmpdir());
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	H_CHECK(h_server_start(&resetter, "127.0.0.1:0", 64, ob_reset_conn, NULL) == 0,
		"resetting backend");
	h_tag_start(&greeter, 'g', 0, 0); /* writes a byte and closes first */
	H_CHECK(h_refused_open(&dead) == 0, "no refusing port");
	for (int i = 0; i < 5; i++)
		ports[i] = h_free_port();
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 2\nlog = %s\ndrain_timeout = 1s\ndrain_spread = no\n\n"
		 "[route echo]\nlisten = 127.0.0.1:%d\nbackend = %s\nidle_timeout = 1s\n\n"
		 "[route greet]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n\n"
		 "[route dead]\nlisten = 127.0.0.1:%d\nbackend = %s\n\n"
		 "[route reset]\nlisten = 127.0.0.1:%d\nbackend = %s\n\n"
		 "[route hold]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
		 log, ports[0], echo.addr.text, ports[1], greeter.port, ports[2], dead.text, ports[3],
		 resetter.addr.text, ports[4], echo.addr.text);
	ob_start(&p, bin, h_conf_write("observe.conf", conf));
	ob_addr(&a_echo, ports[0]);
	ob_addr(&a_greet, ports[1]);
	ob_addr(&a_dead, ports[2]);
	ob_addr(&a_reset, ports[3]);
	ob_addr(&a_hold, ports[4]);

	/* the client ends it: an echo, then its FIN */
	fd = ob_client(&a_echo, &port, 1);
	shutdown(fd, SHUT_WR);
	H_CHECK(h_expect_eof(fd, h_now_ms() + 3000) == 0, "no end after the client's FIN");
	close(fd);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "client FIN", "done", "-", "client", 1, a_echo.text);
	H_CHECK(!strcmp(e.route, "echo") && e.up == 5 && e.down == 5 &&
			!strcmp(e.backend, echo.addr.text),
		"the fields before reason changed: route=%s backend=%s up=%llu down=%llu", e.route,
		e.backend, e.up, e.down);

	/* the client resets */
	fd = ob_client(&a_echo, &port, 1);
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "client RST", "client-reset", "ECONNRESET", "client", 1, a_echo.text);

	/* idle: the timeout ends it */
	fd = ob_client(&a_echo, &port, 1);
	H_CHECK(h_expect_eof(fd, h_now_ms() + 5000) == 0, "idle_timeout = 1s did not end the session");
	close(fd);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "idle", "idle-timeout", "-", "timeout", 1, a_echo.text);

	/* the backend ends it: a greeting, then its FIN */
	int keep = -1;
	H_CHECK(h_tag_of(&a_greet, &keep) == 'g' && keep >= 0, "no greeting through the proxy");
	port = local_port(keep);
	H_CHECK(h_expect_eof(keep, h_now_ms() + 3000) == 0, "no end after the backend's FIN");
	close(keep);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "backend FIN", "done", "-", "backend", 1, a_greet.text);

	/* the backend resets */
	fd = ob_client(&a_reset, &port, 0);
	h_send_all(fd, "x", 1, h_now_ms() + 2000);
	H_CHECK(h_expect_eof(fd, h_now_ms() + 3000) != -ETIMEDOUT, "no end after the backend's RST");
	close(fd);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "backend RST", "backend-reset", "ECONNRESET", "backend", 1, a_reset.text);

	/* the backend refuses: no connection came up */
	fd = ob_client(&a_dead, &port, 0);
	H_CHECK(h_expect_eof(fd, h_now_ms() + 3000) != -ETIMEDOUT, "no end for a refused backend");
	close(fd);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "refused", "no-backend", "ECONNREFUSED", "backend", 0, a_dead.text);

	/* the proxy ends it: the drain deadline of a SIGTERM (drain_spread = no;
	 * the spread's graceful closes, reason=drain: lifetime_drain_spreads_closes) */
	fd = ob_client(&a_hold, &port, 1);
	int st = h_proxy_stop(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "proxy exit status %d", st);
	close(fd);
	ob_entry_of(log, port, &e);
	ob_expect(&e, "drain", "drain-timeout", "-", "proxy", 1, a_hold.text);

	h_server_stop(&echo);
	h_server_stop(&resetter);
	h_tag_stop(&greeter);
	h_refused_close(&dead);
}

/* ---- a live session's bytes in /metrics ------------------------------------ */

static long long ob_bytes(const struct h_addr *stats, const char *kind, const char *labels)
{
	char name[300];

	snprintf(name, sizeof name, "splicer_%s_bytes_total{%s,direction=\"up\"}", kind, labels);
	return h_metric(stats, name);
}

/* Waits (bounded) until both the route's and the backend's up bytes read
 * want; returns 1 then, 0 when they never did. */
/* Waits (up to 5 s) for both byte counters to say want; 1 when they do,
 * with the milliseconds it took in *ms. */
static int ob_wait_bytes(const struct h_addr *stats, const char *blabels, long long want,
			 long long *route, long long *backend, int64_t *ms)
{
	int64_t start = h_now_ms();

	for (int64_t end = start + 5000; h_now_ms() < end; h_sleep_ms(50)) {
		*route = ob_bytes(stats, "route", "route=\"default\"");
		*backend = ob_bytes(stats, "backend", blabels);
		*ms = h_now_ms() - start;
		if (*route == want && *backend == want)
			return 1;
	}
	return 0;
}

static void case_live_bytes(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static char data[256 * 1024], back[256 * 1024];
	struct h_addr stats;
	char blabels[200];
	long long route, backend;
	int64_t ms;

	H_CHECK(h_server_start(&srv, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backend");
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--stats", "127.0.0.1:0", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in %s", p.log);
	snprintf(blabels, sizeof blabels, "route=\"default\",backend=\"%s\"", srv.addr.text);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	/* two rounds on one session that stays open: the counters follow */
	const size_t sizes[2] = { 200 * 1024, 56 * 1024 };
	long long total = 0;
	for (int round = 0; round < 2; round++) {
		h_gen(0x11 + (uint64_t)round, 0, data, sizes[round]);
		H_CHECK(h_send_all(fd, data, sizes[round], h_now_ms() + H_T(5000)) == 0 &&
				h_recv_exact(fd, back, sizes[round], h_now_ms() + H_T(5000)) == 0 &&
				!memcmp(data, back, sizes[round]),
			"round %d: echo of %zu bytes", round, sizes[round]);
		total += (long long)sizes[round];
		H_CHECK(ob_wait_bytes(&stats, blabels, total, &route, &backend, &ms),
			"round %d: a live session moved %lld bytes up, /metrics says route %lld, "
			"backend %lld (bytes counted only when a session ends?)", round, total, route,
			backend);
		/* "at most about a second late": flushed every 250 ms, scraped every 50 */
		H_CHECK(ms <= H_T(1500), "round %d: a live session's bytes reached /metrics %lld ms "
			"after the echo (at most about a second expected)", round, (long long)ms);
	}
	H_CHECK(h_metric(&stats, "splicer_route_sessions_active{route=\"default\"}") == 1,
		"the session ended before its bytes were checked");
	/* its end adds only what was not reported yet: nothing twice */
	close(fd);
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(20))
		if (h_metric(&stats, "splicer_route_sessions_active{route=\"default\"}") == 0)
			break;
	H_CHECK(ob_wait_bytes(&stats, blabels, total, &route, &backend, &ms),
		"after the end: route %lld, backend %lld bytes up, %lld were moved", route, backend,
		total);
	H_CHECK(h_metric(&stats, "splicer_route_bytes_total{route=\"default\",direction=\"down\"}") ==
			total, "down bytes differ from the %lld echoed", total);
	h_server_stop(&srv);
	h_proxy_down(&p);
}
H_ENGINE_CASES(live_bytes, 60)
H_SOCKMAP_CASES(live_bytes, 60)

/* ---- /metrics as a whole ---------------------------------------------------- */

/* The body of a GET /metrics (malloc'd). */
static char *ob_scrape(const struct h_addr *stats)
{
	static char resp[256 * 1024];
	char *body;

	H_CHECK(h_metrics_get(stats, resp, sizeof resp, 3000) == 0, "GET /metrics failed: %.200s", resp);
	body = strstr(resp, "\r\n\r\n");
	H_CHECK(body, "no body in the /metrics answer");
	return strdup(body + 4);
}

/* Checks the exposition format's rules promtool would not be here to check:
 * each family's samples in one block, after its HELP and TYPE, never seen
 * again once another family started. Returns the number of families. */
static int ob_check_families(const char *body)
{
	char *copy = strdup(body), *save = NULL;
	char seen[128][96], cur[96] = "", help[96] = "", type[96] = "";
	int nseen = 0, histogram = 0;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char name[96];
		if (!strncmp(l, "# HELP ", 7) || !strncmp(l, "# TYPE ", 7)) {
			H_CHECK(sscanf(l + 7, "%95s", name) == 1, "bad comment line: %s", l);
			if (strcmp(name, cur)) { /* a new family starts */
				for (int i = 0; i < nseen; i++)
					H_CHECK(strcmp(seen[i], name), "family %s appears twice (not contiguous)",
						name);
				H_CHECK(nseen < 128, "too many families");
				snprintf(seen[nseen++], sizeof seen[0], "%s", name);
				snprintf(cur, sizeof cur, "%s", name);
				help[0] = type[0] = '\0';
			}
			snprintf(l[2] == 'H' ? help : type, sizeof help, "%s", name);
			if (l[2] == 'T')
				histogram = strstr(l, " histogram") != NULL;
			continue;
		}
		H_CHECK(l[0] != '#', "unexpected comment: %s", l);
		size_t n = strcspn(l, "{ ");
		H_CHECK(n < sizeof name, "metric name too long: %s", l);
		memcpy(name, l, n);
		name[n] = '\0';
		/* a histogram's samples: NAME_bucket, NAME_sum, NAME_count */
		size_t cn = strlen(cur);
		if (histogram && !strncmp(name, cur, cn) &&
		    (!strcmp(name + cn, "_bucket") || !strcmp(name + cn, "_sum") ||
		     !strcmp(name + cn, "_count")))
			name[cn] = '\0';
		H_CHECK(!strcmp(name, cur),
			"sample '%s' stands outside its family (the current one is %s): families must be "
			"contiguous", l, cur[0] ? cur : "(none)");
		H_CHECK(help[0] && type[0], "family %s has no %s line before its samples", cur,
			help[0] ? "TYPE" : "HELP");
	}
	free(copy);
	return nseen;
}

static const char *ob_conf_text(char *buf, size_t len, int p1, int p2, const char *b1,
				const char *b2, const char *extra)
{
	snprintf(buf, len,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\nbackend = %s\n\n"
		 "[route db]\nlisten = 127.0.0.1:%d\nbackend = %s\n%s",
		 p1, b1, b2, p2, b1, extra);
	return buf;
}

static long long ob_ms_of(const char *body, const char *metric)
{
	const char *l = strstr(body, metric);
	unsigned long long s = 0, ms = 0;

	if (!l || sscanf(l + strlen(metric), " %llu.%3llu", &s, &ms) < 1)
		return -1;
	return (long long)(s * 1000 + ms);
}

Test(integ, metrics_families_are_contiguous_and_name_build_start_and_reload, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server a, b;
	static struct h_proxy p;
	struct h_addr stats;
	char conf[1024], why[256];
	char *body;

	H_CHECK(h_server_start(&a, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0 &&
			h_server_start(&b, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backends");
	int p1 = h_free_port(), p2 = h_free_port();
	const char *path = h_conf_write("metrics.conf", ob_conf_text(conf, sizeof conf, p1, p2,
								  a.addr.text, b.addr.text, ""));
	int64_t before = (int64_t)time(NULL) * 1000;
	ob_start(&p, bin, path);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in %s", p.log);
	H_CHECK(h_echo_roundtrip(&p.addr, 1000, 3, 2000, why, sizeof why) == 0, "echo: %s", why);

	body = ob_scrape(&stats);
	int families = ob_check_families(body);
	H_CHECK(families >= 20, "only %d families", families);
	const char *bi = strstr(body, "splicer_build_info{version=\"");
	H_CHECK(bi && strstr(bi, "engines=\"copy,splice") && strstr(bi, "\"} 1\n"),
		"no splicer_build_info{version=...,engines=...} 1 in:\n%s", body);
	long long start = ob_ms_of(body, "\nsplicer_start_time_seconds");
	H_CHECK(start >= before - 2000 && start <= (int64_t)time(NULL) * 1000 + 2000,
		"splicer_start_time_seconds %lld ms is not the start (about %lld)", start,
		(long long)before);
	H_CHECK(strstr(body, "\nsplicer_last_reload_success 1\n") &&
			ob_ms_of(body, "\nsplicer_last_reload_time_seconds") == start,
		"before any reload: success 1 at the start time expected:\n%s", body);
	free(body);

	/* a good reload, then a bad one: the metrics say which */
	h_conf_write("metrics.conf", ob_conf_text(conf, sizeof conf, p1, p2, a.addr.text, b.addr.text,
					       "balance = leastconn\n"));
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20))
		if (h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1)
			break;
	body = ob_scrape(&stats);
	long long good = ob_ms_of(body, "\nsplicer_last_reload_time_seconds");
	H_CHECK(strstr(body, "\nsplicer_last_reload_success 1\n") && good > start,
		"after a good reload: success 1 and a time after the start (%lld) expected:\n%s", start,
		body);
	free(body);
	h_conf_write("metrics.conf", "[route web]\nlisten = 127.0.0.1:1\nbackend = nowhere\n");
	h_sleep_ms(20); /* a later millisecond than the good reload's */
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20))
		if (h_log_lines(&p, "SIGHUP:", "keeping the running config", NULL) >= 1)
			break;
	body = ob_scrape(&stats);
	H_CHECK(strstr(body, "\nsplicer_last_reload_success 0\n") &&
			ob_ms_of(body, "\nsplicer_last_reload_time_seconds") > good,
		"after a bad reload: success 0 and a later time expected:\n%s", body);
	ob_check_families(body);
	free(body);
	h_proxy_down(&p);
	h_server_stop(&a);
	h_server_stop(&b);
}

/* promtool, when installed (Debian package prometheus), on a real scrape. */
Test(integ, promtool_accepts_a_real_scrape, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0), *promtool = h_which("promtool");
	static struct h_server a, b;
	static struct h_proxy p;
	struct h_addr stats;
	struct h_refused dead;
	char conf[1024], why[256], file[300], cmd[900];
	char *out = NULL, *err = NULL;

	if (!promtool)
		cr_skip_test("promtool is not installed (Debian package prometheus): `promtool check "
			     "metrics` skipped; integ/metrics_families_are_contiguous* checks the "
			     "format without it");
	H_CHECK(h_server_start(&a, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0 &&
			h_server_start(&b, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backends");
	H_CHECK(h_refused_open(&dead) == 0, "no refusing port");
	int p1 = h_free_port(), p2 = h_free_port();
	ob_start(&p, bin, h_conf_write("prom.conf", ob_conf_text(conf, sizeof conf, p1, p2, a.addr.text,
							     dead.text, "")));
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in %s", p.log);
	for (int i = 0; i < 4; i++) /* traffic, and a refused backend's errors */
		h_echo_roundtrip(&p.addr, 100, (uint64_t)i, 2000, why, sizeof why);
	/* a session's histograms are written as the worker ends it, which may
	 * be just after the client saw its close */
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(20))
		if (h_metric(&stats, "splicer_route_session_bytes_count{route=\"web\",direction=\"up\"}") == 4)
			break;
	char *body = ob_scrape(&stats);
	/* the histograms (route_hist.h) are in what promtool reads, with data */
	H_CHECK(strstr(body, "# TYPE splicer_route_connect_seconds histogram\n") &&
			strstr(body, "# TYPE splicer_route_first_byte_seconds histogram\n") &&
			strstr(body, "# TYPE splicer_route_session_duration_seconds histogram\n") &&
			strstr(body, "# TYPE splicer_route_session_bytes histogram\n") &&
			strstr(body, "splicer_route_session_bytes_count{route=\"web\",direction=\"up\"} 4\n"),
		"histogram families missing from the scrape:\n%s", body);
	snprintf(file, sizeof file, "%s/scrape.txt", h_tmpdir());
	h_conf_write("scrape.txt", body);
	free(body);
	snprintf(cmd, sizeof cmd, "'%s' check metrics < '%s'", promtool, file);
	const char *args[] = { "-c", cmd, NULL };
	int st = h_run_capture("/bin/sh", args, 20000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && (!out || !out[0]) &&
			(!err || !err[0]),
		"promtool check metrics %s: status %d\nstdout: %s\nstderr: %s", file, st,
		out ? out : "", err ? err : "");
	free(out);
	free(err);
	h_proxy_down(&p);
	h_server_stop(&a);
	h_server_stop(&b);
	h_refused_close(&dead);
}
