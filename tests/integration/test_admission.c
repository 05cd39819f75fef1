/* SPDX-License-Identifier: MIT */
/* Admission control on real sockets: allow/deny ranges, source_max_conns
 * and source_conn_rate tried from several 127.0.0.x sources, and a backend
 * maxconn whose queue serves a waiting client when a slot frees and closes
 * it after queue_timeout. A refused client gets an RST at once; every
 * refusal is counted in /metrics by route and reason. And what a client
 * waiting for its ClientHello costs: a hello one byte per segment is read
 * in CPU linear in its bytes. */
#define _GNU_SOURCE
#include "harness.h"
#include "tls_hello_gen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int connect_from(int port, const char *src)
{
	return h_connect_from(port, src, 3000);
}

/* The backend's tag, or 0 when the proxy closed the client; *reset says
 * whether that close was an RST. */
static char tag_from(int fd, int *reset)
{
	char c = 0;
	ssize_t n = recv(fd, &c, 1, 0);

	if (reset)
		*reset = n < 0 && errno == ECONNRESET;
	return n == 1 ? c : 0;
}

static void proxy_up(struct h_proxy *p, struct h_addr *stats, const char *name, const char *text)
{
	const char *args[] = { "-c", h_conf_write(name, text), NULL };
	char err[256];

	H_CHECK(h_proxy_start(p, h_binary(1), args, err, sizeof err) == 0, "proxy: %s", err);
	H_CHECK(h_stats_addr(p, stats) == 0, "stats address");
}

static long long refused(const struct h_addr *stats, const char *route, const char *reason)
{
	char name[200];
	snprintf(name, sizeof name, "splicer_route_refused_total{route=\"%s\",reason=\"%s\"}", route,
		 reason);
	return h_metric(stats, name);
}

Test(integ, admission_allow_and_deny_by_source, .init = h_init, .fini = h_fini, .timeout = 60)
{
	struct h_tag_server t;
	struct h_proxy p;
	struct h_addr stats;
	char text[1024];
	int port = h_free_port(), reset;

	h_tag_start(&t, 't', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n"
		 "[route acl]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n"
		 "allow = 127.0.0.0/29 127.0.1.0/24\ndeny = 127.0.0.3 127.0.1.128/25\n",
		 port, t.port);
	proxy_up(&p, &stats, "acl.conf", text);
	static const struct {
		const char *src;
		char want;
	} cases[] = {
		{ "127.0.0.1", 't' }, { "127.0.0.2", 't' }, { "127.0.0.3", 0 }, /* denied: deny wins */
		{ "127.0.0.7", 't' }, { "127.0.0.9", 0 },                       /* outside allow */
		{ "127.0.1.5", 't' }, { "127.0.1.200", 0 },
	};
	int denied = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int fd = connect_from(port, cases[i].src);
		char got = tag_from(fd, &reset);
		close(fd);
		H_CHECK(got == cases[i].want, "source %s: got '%c', expected '%c'", cases[i].src,
			got ? got : '-', cases[i].want ? cases[i].want : '-');
		if (!cases[i].want) {
			H_CHECK(reset, "source %s: refused without an RST", cases[i].src);
			denied++;
		}
	}
	H_CHECK(refused(&stats, "acl", "denied") == denied, "denied counted %lld, expected %d",
		refused(&stats, "acl", "denied"), denied);
	H_CHECK(h_log_lines(&p, "route acl: refused client", "denied", NULL) == 1,
		"refusals are logged once per interval");
	h_proxy_down(&p);
	h_tag_stop(&t);
}

Test(integ, admission_source_max_conns_and_rate, .init = h_init, .fini = h_fini, .timeout = 60)
{
	struct h_tag_server t;
	struct h_proxy p;
	struct h_addr stats;
	char text[1024];
	int pc = h_free_port(), pr = h_free_port(), reset;

	h_tag_start(&t, 't', 1, 0); /* holds each connection open */
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n"
		 "[route conns]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\nsource_max_conns = 2\n"
		 "[route rate]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\nsource_conn_rate = 3\n",
		 pc, t.port, pr, t.port);
	proxy_up(&p, &stats, "limits.conf", text);

	/* two sessions from 127.0.0.2 live: a third is reset, another source is not */
	int a = connect_from(pc, "127.0.0.2"), b = connect_from(pc, "127.0.0.2");
	H_CHECK(tag_from(a, NULL) == 't' && tag_from(b, NULL) == 't', "the first two are served");
	int c = connect_from(pc, "127.0.0.2");
	H_CHECK(tag_from(c, &reset) == 0 && reset, "a third session from one source was not reset");
	close(c);
	int d = connect_from(pc, "127.0.0.4");
	H_CHECK(tag_from(d, NULL) == 't', "another source is limited on its own");
	/* one ends: the source may open one again */
	close(a);
	int64_t until = h_now_ms() + 3000;
	char got = 0;
	while (!got && h_now_ms() < until) {
		h_sleep_ms(50);
		int e = connect_from(pc, "127.0.0.2");
		got = tag_from(e, NULL);
		if (got)
			a = e;
		else
			close(e);
	}
	H_CHECK(got == 't', "a slot of the source did not come back after a session ended");
	close(a), close(b), close(d);
	H_CHECK(refused(&stats, "conns", "source_max_conns") >= 1, "source_max_conns not counted");

	/* rate: 3 per second from one source; burst of 6 at once */
	int ok = 0, rst = 0;
	for (int i = 0; i < 6; i++) {
		int fd = connect_from(pr, "127.0.0.5");
		char g = tag_from(fd, &reset);
		ok += g == 't';
		rst += !g && reset;
		close(fd);
	}
	H_CHECK(ok == 3 && rst == 3, "rate 3/s: %d served, %d reset of a burst of 6", ok, rst);
	int fd = connect_from(pr, "127.0.0.6");
	H_CHECK(tag_from(fd, NULL) == 't', "another source is not rate-limited by the first");
	close(fd);
	H_CHECK(refused(&stats, "rate", "source_conn_rate") == 3, "rate refusals counted %lld",
		refused(&stats, "rate", "source_conn_rate"));
	h_proxy_down(&p);
	h_tag_stop(&t);
}

/* source_table_size bounds the sources a route tracks: with every entry
 * holding live sessions a new source is reset and counted as
 * source_table_full; once a session ends its entry is idle, and evicted for
 * the next new source. */
Test(integ, admission_source_table_full, .init = h_init, .fini = h_fini, .timeout = 60)
{
	enum { SIZE = 16 }; /* the smallest table the config takes */
	struct h_tag_server t;
	struct h_proxy p;
	struct h_addr stats;
	char text[1024], src[32];
	int port = h_free_port(), fds[SIZE], reset;

	h_tag_start(&t, 't', 1, 0); /* holds each connection open */
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nsource_table_size = %d\n"
		 "[route tbl]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\nsource_max_conns = 4\n",
		 SIZE, port, t.port);
	proxy_up(&p, &stats, "table.conf", text);
	for (int i = 0; i < SIZE; i++) {
		snprintf(src, sizeof src, "127.0.2.%d", i + 1);
		fds[i] = connect_from(port, src);
		H_CHECK(tag_from(fds[i], NULL) == 't', "source %d of %d was not served", i + 1, SIZE);
	}
	int extra = connect_from(port, "127.0.2.100");
	H_CHECK(tag_from(extra, &reset) == 0 && reset, "a new source beyond a full table was not reset");
	close(extra);
	H_CHECK(refused(&stats, "tbl", "source_table_full") == 1 &&
			refused(&stats, "tbl", "source_max_conns") == 0,
		"a full table counted as source_table_full %lld, source_max_conns %lld",
		refused(&stats, "tbl", "source_table_full"), refused(&stats, "tbl", "source_max_conns"));
	/* a known source still gets in: its entry is there */
	int again = connect_from(port, "127.0.2.1");
	H_CHECK(tag_from(again, NULL) == 't', "a source already in the full table was refused");
	close(again);
	/* one source's sessions all end: its entry is idle, the new source takes it */
	close(fds[SIZE - 1]);
	char got = 0;
	for (int64_t until = h_now_ms() + 3000; !got && h_now_ms() < until;) {
		h_sleep_ms(50);
		extra = connect_from(port, "127.0.2.100");
		got = tag_from(extra, NULL);
		close(extra);
	}
	H_CHECK(got == 't', "an idle entry was not evicted for a new source");
	for (int i = 0; i < SIZE - 1; i++)
		close(fds[i]);
	h_proxy_down(&p);
	h_tag_stop(&t);
}

/* source_table_size changed by a reload is applied to the running table,
 * keeping every source's count: grown, the new room takes new sources (the
 * same ones a full table refused before); shrunk below the sources with
 * live sessions, those keep their counts and new sources are refused until
 * enough of them end. */
static void table_conf(char *text, size_t n, int size, int port, int backend)
{
	snprintf(text, n,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nsource_table_size = %d\n"
		 "[route tbl]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\nsource_max_conns = 2\n",
		 size, port, backend);
}

static void reload_wait(const struct h_proxy *p, int count)
{
	H_CHECK(kill(p->pid, SIGHUP) == 0, "kill SIGHUP: %s", strerror(errno));
	for (int64_t until = h_now_ms() + 5000; h_now_ms() < until; h_sleep_ms(10))
		if (h_log_lines(p, "SIGHUP: reloaded", NULL) >= count)
			return;
	H_CHECK(0, "reload %d did not apply within 5 s", count);
}

/* A new client from src: 't' when served (the session stays open in *keep),
 * 0 when reset (then closed). */
static char source_try(int port, const char *src, int *keep)
{
	int fd = connect_from(port, src), reset = 0;
	char c = tag_from(fd, &reset);

	H_CHECK(c == 't' || reset, "source %s: neither served nor reset", src);
	if (c && keep)
		*keep = fd;
	else
		close(fd);
	return c;
}

Test(integ, admission_source_table_size_follows_reload, .init = h_init, .fini = h_fini,
     .timeout = 90)
{
	struct h_tag_server t;
	struct h_proxy p;
	struct h_addr stats;
	char text[1024], src[32];
	int port = h_free_port(), held[40], nheld = 0, extra;
	const char *path;

	h_tag_start(&t, 't', 1, 0);
	table_conf(text, sizeof text, 16, port, t.port);
	path = h_conf_write("table.conf", text);
	proxy_up(&p, &stats, "table.conf", text);
	for (int i = 1; i <= 16; i++) { /* 127.0.2.1-16: the table is full */
		snprintf(src, sizeof src, "127.0.2.%d", i);
		H_CHECK(source_try(port, src, &held[nheld++]) == 't', "source %s not served", src);
	}
	H_CHECK(source_try(port, "127.0.2.1", &held[nheld++]) == 't', "a second session of .1");
	H_CHECK(source_try(port, "127.0.2.100", NULL) == 0, "a 17th source in a table of 16 served");

	/* grow to 32: 16 more sources get in, the 33rd does not; .1's two
	 * sessions are still counted */
	table_conf(text, sizeof text, 32, port, t.port);
	H_CHECK(!strcmp(h_conf_write("table.conf", text), path), "config path");
	reload_wait(&p, 1);
	for (int i = 100; i < 116; i++) {
		snprintf(src, sizeof src, "127.0.2.%d", i);
		H_CHECK(source_try(port, src, &held[nheld++]) == 't',
			"source %s refused after a reload raised source_table_size from 16 to 32", src);
	}
	H_CHECK(source_try(port, "127.0.2.200", NULL) == 0, "a 33rd source in a table of 32 served");
	H_CHECK(source_try(port, "127.0.2.1", NULL) == 0, "the source at its 2 sessions lost its count");
	H_CHECK(refused(&stats, "tbl", "source_max_conns") == 1 &&
			refused(&stats, "tbl", "source_table_full") == 2,
		"refusals: source_max_conns %lld (expected 1), source_table_full %lld (expected 2)",
		refused(&stats, "tbl", "source_max_conns"), refused(&stats, "tbl", "source_table_full"));
	H_CHECK(h_log_lines(&p, "route tbl: source_table_size 16 -> 32", NULL) == 1,
		"the resize is not logged");

	/* shrink to 16 with 32 sources live: all keep their counts, new ones
	 * are refused until fewer than 16 have sessions */
	table_conf(text, sizeof text, 16, port, t.port);
	h_conf_write("table.conf", text);
	reload_wait(&p, 2);
	H_CHECK(h_log_lines(&p, "route tbl: source_table_size 32 -> 16, below the 32 sources", NULL) == 1,
		"the shrink below the live sources is not logged");
	H_CHECK(source_try(port, "127.0.3.1", NULL) == 0, "a new source served over the shrunk size");
	H_CHECK(source_try(port, "127.0.2.5", &held[nheld++]) == 't', "a live source refused its 2nd");
	H_CHECK(source_try(port, "127.0.2.5", NULL) == 0, "a live source's count was lost in the shrink");
	/* the 16 sources .100-.115 end: 16 left, all live, still full */
	for (int i = 17; i < 33; i++)
		close(held[i]);
	h_sleep_ms(300);
	H_CHECK(source_try(port, "127.0.3.1", NULL) == 0, "a new source served with 16 of 16 live");
	close(held[15]); /* .16 ends: its entry is idle and makes room */
	char got = 0;
	for (int64_t until = h_now_ms() + 3000; !got && h_now_ms() < until;) {
		h_sleep_ms(50);
		got = source_try(port, "127.0.3.1", &extra);
	}
	H_CHECK(got == 't', "a new source still refused with 15 of 16 sources live");
	H_CHECK(source_try(port, "127.0.3.2", NULL) == 0, "a 17th source in a table shrunk to 16");
	close(extra);
	for (int i = 0; i < nheld; i++)
		if (i != 15 && (i < 17 || i > 32)) /* (those ended above) */
			close(held[i]);
	h_proxy_down(&p);
	h_tag_stop(&t);
}

/* Whether the proxy reset fd within ms without it sending a byte: 1 reset,
 * 0 still open and silent, -1 anything else (bytes, a FIN). */
static int reset_within(int fd, int ms)
{
	char c;

	h_set_timeouts(fd, ms);
	ssize_t n = recv(fd, &c, 1, 0);
	if (n < 0 && errno == ECONNRESET)
		return 1;
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
}

/* A shared listener with an sni route: sends a ClientHello for name and
 * returns the tag of the route that took it (0: none). */
static char hello_route(int fd, const char *name)
{
	uint8_t h[4096];
	size_t n = tls_make_hello(name, NULL, 0, h, sizeof h);

	H_CHECK(send(fd, h, n, MSG_NOSIGNAL) == (ssize_t)n, "send the hello: %s", strerror(errno));
	h_set_timeouts(fd, 3000);
	return tag_from(fd, NULL);
}

/* Admission on a listener whose routes choose by SNI: before the hello is
 * read, a source every route denies is reset at accept without having sent
 * a byte, and silent clients count against the default route's
 * source_max_conns and source_conn_rate while they wait; once the hello
 * names a route, that route's limits apply. */
Test(integ, admission_sni_listener_refuses_at_accept, .init = h_init, .fini = h_fini, .timeout = 60)
{
	struct h_tag_server a, d;
	struct h_proxy p;
	struct h_addr stats;
	char text[2048];
	int pd = h_free_port(), pc = h_free_port(), pr = h_free_port(), fd[8];

	h_tag_start(&a, 'a', 1, 0);
	h_tag_start(&d, 'd', 1, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n"
		 "[route da]\nlisten = 127.0.0.1:%d\nsni = a.example.com\nbackend = 127.0.0.1:%d\n"
		 "deny = 127.0.0.9\n"
		 "[route dd]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\ndeny = 127.0.0.8/29\n"
		 "[route ca]\nlisten = 127.0.0.1:%d\nsni = a.example.com\nbackend = 127.0.0.1:%d\n"
		 "[route cd]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\nsource_max_conns = 2\n"
		 "[route ra]\nlisten = 127.0.0.1:%d\nsni = a.example.com\nbackend = 127.0.0.1:%d\n"
		 "[route rd]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\nsource_conn_rate = 2\n",
		 pd, a.port, pd, d.port, pc, a.port, pc, d.port, pr, a.port, pr, d.port);
	proxy_up(&p, &stats, "sni-admit.conf", text);

	/* deny: 127.0.0.9 is denied by both routes, reset at accept however
	 * many come; 127.0.0.10 only by the default, so it waits for its hello */
	for (int i = 0; i < 20; i++) {
		int c = connect_from(pd, "127.0.0.9");
		int64_t t0 = h_now_ms();
		int r = reset_within(c, 1000);
		H_CHECK(r == 1 && h_now_ms() - t0 < 200,
			"silent client %d from a source every route denies: %s after %lld ms", i,
			r == 1 ? "reset" : r ? "bytes or a FIN" : "still open",
			(long long)(h_now_ms() - t0));
		close(c);
	}
	int c = connect_from(pd, "127.0.0.10");
	H_CHECK(reset_within(c, 300) == 0, "a source one route allows was refused before its hello");
	H_CHECK(hello_route(c, "a.example.com") == 'a', "its hello for the sni route");
	close(c);
	c = connect_from(pd, "127.0.0.10");
	int reset;
	H_CHECK(send(c, "PING\r\n", 6, MSG_NOSIGNAL) == 6 && tag_from(c, &reset) == 0 && reset,
		"plain TCP from it goes to the default, which denies it: reset");
	close(c);
	H_CHECK(refused(&stats, "dd", "denied") == 21 && refused(&stats, "da", "denied") == 0,
		"denied: %lld on the default (21 expected: 20 at accept, 1 plain), %lld on the sni route",
		refused(&stats, "dd", "denied"), refused(&stats, "da", "denied"));

	/* source_max_conns 2 on the default: two silent clients from a source
	 * wait, a third is reset at once; another source is not limited */
	fd[0] = connect_from(pc, "127.0.0.11");
	fd[1] = connect_from(pc, "127.0.0.11");
	H_CHECK(reset_within(fd[0], 300) == 0 && reset_within(fd[1], 50) == 0,
		"the first two silent clients wait for their hello");
	c = connect_from(pc, "127.0.0.11");
	int64_t t0 = h_now_ms();
	H_CHECK(reset_within(c, 1000) == 1 && h_now_ms() - t0 < 200,
		"a third silent client from the source was not reset at once");
	close(c);
	fd[2] = connect_from(pc, "127.0.0.12");
	H_CHECK(reset_within(fd[2], 300) == 0, "another source's silent client was refused");
	/* a waiting client's hello takes it to the sni route: its place among
	 * the waiting is free again */
	H_CHECK(hello_route(fd[0], "a.example.com") == 'a', "a waiting client's hello");
	fd[3] = connect_from(pc, "127.0.0.11");
	H_CHECK(reset_within(fd[3], 300) == 0,
		"the source's wait count was not released when its hello chose a route");
	H_CHECK(refused(&stats, "cd", "source_max_conns") == 1 &&
			refused(&stats, "ca", "source_max_conns") == 0,
		"source_max_conns refusals: %lld on the default, %lld on the sni route",
		refused(&stats, "cd", "source_max_conns"), refused(&stats, "ca", "source_max_conns"));
	for (int i = 0; i < 4; i++)
		close(fd[i]);

	/* source_conn_rate 2 on the default: a burst of four hellos for the sni
	 * route counts against it at accept, so two are served and two reset */
	int ok = 0, rst = 0;
	for (int i = 0; i < 4; i++)
		fd[i] = connect_from(pr, "127.0.0.13");
	for (int i = 0; i < 4; i++) {
		int r = reset_within(fd[i], 300);
		if (r == 1)
			rst++;
		else if (!r && hello_route(fd[i], "a.example.com") == 'a')
			ok++;
		close(fd[i]);
	}
	H_CHECK(ok == 2 && rst == 2, "rate 2/s at accept: %d served, %d reset of a burst of 4", ok,
		rst);
	H_CHECK(refused(&stats, "rd", "source_conn_rate") == 2, "rate refusals %lld",
		refused(&stats, "rd", "source_conn_rate"));
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&d);
}

/* The value of a metric once it is want, or what it is after ms. */
static long long metric_becomes(const struct h_addr *stats, const char *name, long long want,
				int ms)
{
	long long v = h_metric(stats, name);

	for (int64_t end = h_now_ms() + ms; v != want && h_now_ms() < end; h_sleep_ms(10))
		v = h_metric(stats, name);
	return v;
}

/* An echo round trip of n bytes of seed's stream on fd. */
static void echo_ok(int fd, size_t n, uint64_t seed, const char *who)
{
	char out[256], in[256];

	H_CHECK(n <= sizeof out, "echo of %zu bytes", n);
	h_gen(seed, 0, out, n);
	H_CHECK(h_send_all(fd, out, n, h_now_ms() + 3000) == 0, "%s: send", who);
	H_CHECK(h_recv_exact(fd, in, n, h_now_ms() + 3000) == 0 && !memcmp(in, out, n),
		"%s: the echo of %zu bytes", who, n);
}

#define QLEN "splicer_route_queue_length{route=\"q\"}"

static void queue_proxy_up(struct h_proxy *p, struct h_addr *stats, struct h_server *echo,
			   int port, const char *queue_timeout)
{
	char text[1024];

	H_CHECK(h_server_start(echo, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backend");
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n"
		 "[route q]\nlisten = 127.0.0.1:%d\nbackend = %s maxconn=1\nqueue_timeout = %s\n",
		 port, echo->addr.text, queue_timeout);
	proxy_up(p, stats, "queue.conf", text);
}

/* A waiting client is held back with nothing read from it: what it sends
 * meanwhile reaches the backend first, byte for byte, once a slot frees;
 * the wait is counted; a waiter without a slot by queue_timeout is reset. */
Test(integ, maxconn_queues_then_serves_or_times_out, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct h_server echo;
	struct h_proxy p;
	struct h_addr stats;
	int port = h_free_port(), reset;
	char sent[100], got[100];

	queue_proxy_up(&p, &stats, &echo, port, "1500ms");
	int first = connect_from(port, "127.0.0.1");
	echo_ok(first, 5, 1, "the first client");
	/* the second waits: no connection to the backend, nothing back, and
	 * what it sends stays in its socket */
	int second = connect_from(port, "127.0.0.1");
	int64_t t_queued = h_now_ms();
	h_gen(2, 0, sent, sizeof sent);
	H_CHECK(send(second, sent, sizeof sent, MSG_NOSIGNAL) == sizeof sent, "send while queued");
	h_set_timeouts(second, 300);
	char c;
	H_CHECK(recv(second, &c, 1, 0) < 0 && errno == EAGAIN, "the second was not held back");
	H_CHECK(h_metric(&stats, QLEN) == 1, "queue length %lld", h_metric(&stats, QLEN));
	H_CHECK(echo.accepted == 1, "the backend saw %d connections while at maxconn 1",
		(int)echo.accepted);
	H_CHECK(metric_becomes(&stats, "splicer_route_bytes_total{route=\"q\",direction=\"up\"}", 5,
			       1000) == 5,
		"bytes up %lld: the waiting client's bytes were taken",
		h_metric(&stats, "splicer_route_bytes_total{route=\"q\",direction=\"up\"}"));
	int64_t t_freed = h_now_ms();
	close(first); /* its slot goes to the waiting client */
	H_CHECK(h_recv_exact(second, got, sizeof got, h_now_ms() + 3000) == 0 &&
			!memcmp(got, sent, sizeof got),
		"the backend did not get the 100 bytes sent while waiting, first and whole");
	int64_t t_served = h_now_ms();
	echo_ok(second, 50, 3, "the served client");
	H_CHECK(echo.accepted == 2, "backend connections %d", (int)echo.accepted);
	H_CHECK(h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}") == 1, "served %lld",
		h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}"));
	/* the wait it counted: from the queue to the slot */
	static char body[256 * 1024];
	char *w;
	H_CHECK(h_metrics_get(&stats, body, sizeof body, 3000) == 0 &&
			(w = strstr(body, "\nsplicer_route_queue_wait_seconds_total{route=\"q\"} ")),
		"no queue wait metric");
	long long wait_ms = (long long)(strtod(strchr(w, '}') + 2, NULL) * 1000);
	H_CHECK(wait_ms >= t_freed - t_queued - 50 && wait_ms <= t_served - t_queued + 50,
		"queue wait %lld ms counted; it was between %lld and %lld", wait_ms,
		(long long)(t_freed - t_queued), (long long)(t_served - t_queued));

	/* a third waits behind the second and is reset after queue_timeout */
	int third = connect_from(port, "127.0.0.1");
	int64_t t0 = h_now_ms();
	h_set_timeouts(third, 5000);
	H_CHECK(tag_from(third, &reset) == 0, "the third got a slot that was not free");
	int64_t waited = h_now_ms() - t0;
	H_CHECK(waited >= 1300, "closed after %lld ms, before queue_timeout", (long long)waited);
	H_CHECK(reset, "a waiter closed at queue_timeout got a FIN, not an RST");
	close(third);
	close(second);
	H_CHECK(h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}") == 1, "served %lld",
		h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}"));
	H_CHECK(h_metric(&stats, "splicer_route_queue_timeouts_total{route=\"q\"}") == 1,
		"timeouts %lld", h_metric(&stats, "splicer_route_queue_timeouts_total{route=\"q\"}"));
	H_CHECK(metric_becomes(&stats, QLEN, 0, 1000) == 0, "queue not empty");
	h_proxy_down(&p);
	h_server_stop(&echo);
}

/* A waiting client that sends its FIN with nothing before it is gone: its
 * place is freed at once. One that sent bytes before its FIN still wants
 * the answer: it keeps its place, and its bytes and its FIN reach the
 * backend once it is served. */
Test(integ, maxconn_queued_client_gone_frees_its_place, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct h_server echo;
	struct h_proxy p;
	struct h_addr stats;
	int port = h_free_port();
	char got[16];

	queue_proxy_up(&p, &stats, &echo, port, "20s"); /* no waiter leaves by its timeout */
	int holder = connect_from(port, "127.0.0.1");
	echo_ok(holder, 5, 1, "the slot's holder");
	int gone = connect_from(port, "127.0.0.1");
	H_CHECK(metric_becomes(&stats, QLEN, 1, 2000) == 1, "the second client is not queued");
	H_CHECK(shutdown(gone, SHUT_WR) == 0, "shutdown");
	H_CHECK(metric_becomes(&stats, QLEN, 0, 1000) == 0,
		"a queued client's FIN without bytes did not free its place within 1 s (queue length "
		"%lld)", h_metric(&stats, QLEN));
	H_CHECK(h_expect_eof(gone, h_now_ms() + 1000) == 0, "the gone client was not closed");
	close(gone);

	int half = connect_from(port, "127.0.0.1");
	H_CHECK(send(half, "hello", 5, MSG_NOSIGNAL) == 5 && shutdown(half, SHUT_WR) == 0,
		"bytes then a FIN");
	H_CHECK(metric_becomes(&stats, QLEN, 1, 2000) == 1, "the half-closed client is not queued");
	h_sleep_ms(300); /* (nothing to wait for: it must still be there after) */
	H_CHECK(h_metric(&stats, QLEN) == 1, "a queued client with bytes before its FIN lost its place");
	close(holder);
	H_CHECK(h_recv_exact(half, got, 5, h_now_ms() + 3000) == 0 && !memcmp(got, "hello", 5) &&
			h_expect_eof(half, h_now_ms() + 3000) == 0,
		"the half-closed client's bytes and FIN did not reach the backend once served");
	close(half);
	H_CHECK(echo.accepted == 2, "backend connections %d (the gone client took one?)",
		(int)echo.accepted);
	H_CHECK(h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}") == 1, "served %lld",
		h_metric(&stats, "splicer_route_queue_served_total{route=\"q\"}"));
	h_proxy_down(&p);
	h_server_stop(&echo);
}

/* OpenSSL's ClientHello for sni, grown to about `total` bytes (one record)
 * by an extension of an unassigned type the reader skips: the largest hello
 * tls_hello_max (16k) admits. */
static size_t big_hello(const char *sni, size_t total, uint8_t *out, size_t cap)
{
	uint8_t h[4096];
	size_t n = tls_make_hello(sni, NULL, 0, h, sizeof h), p = 5 + 4 + 2 + 32;

	p += 1 + h[p];                          /* session id */
	p += 2 + ((size_t)h[p] << 8 | h[p + 1]); /* cipher suites */
	p += 1 + h[p];                          /* compression methods */
	size_t ext = (size_t)h[p] << 8 | h[p + 1], pad = total - n - 4;
	H_CHECK(p + 2 + ext == n && total > n + 4 && total <= cap && total - 5 < 16384,
		"OpenSSL's hello is not one record of one message ending in its extensions");
	memcpy(out, h, n);
	out[n] = 0x42, out[n + 1] = 0x42; /* the extension: type, length, zeros */
	out[n + 2] = (uint8_t)(pad >> 8), out[n + 3] = (uint8_t)pad;
	memset(out + n + 4, 0, pad);
	ext += 4 + pad;
	out[p] = (uint8_t)(ext >> 8), out[p + 1] = (uint8_t)ext;
	size_t body = total - 9, rec = total - 5;
	out[6] = (uint8_t)(body >> 16), out[7] = (uint8_t)(body >> 8), out[8] = (uint8_t)body;
	out[3] = (uint8_t)(rec >> 8), out[4] = (uint8_t)rec;
	return total;
}

/* A 16 KB ClientHello one byte per segment: the proxy looks at the bytes
 * only once the parser's need is queued (SIOCINQ, SO_RCVLOWAT), so its CPU
 * grows with the bytes, not with bytes times segments. Before, every
 * segment re-peeked the whole buffer: about 300 ms of CPU for this one
 * connection; now a few ms. The bound is far from both. */
Test(integ, sni_hello_in_one_byte_segments_costs_linear_cpu, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	struct h_tag_server a, d;
	struct h_proxy p;
	struct h_addr stats;
	static uint8_t hello[16384];
	char text[1024];
	int port = h_free_port();

	h_tag_start(&a, 'a', 0, 0);
	h_tag_start(&d, 'd', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n"
		 "[route a]\nlisten = 127.0.0.1:%d\nsni = a.example.com\nbackend = 127.0.0.1:%d\n"
		 "tls_hello_timeout = 20s\n"
		 "[route other]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n",
		 port, a.port, port, d.port);
	proxy_up(&p, &stats, "hello-cpu.conf", text);
	size_t n = big_hello("a.example.com", 16000, hello, sizeof hello);

	int fd = connect_from(port, "127.0.0.1");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	double cpu0 = h_cpu_seconds(p.pid);
	/* each byte its own segment, with a pause so that the proxy sees each
	 * arrive (not a sender's burst, coalesced or read in one wakeup) */
	for (size_t off = 0; off < n; off++) {
		H_CHECK(send(fd, hello + off, 1, MSG_NOSIGNAL) == 1, "send byte %zu: %s", off,
			strerror(errno));
		usleep(200);
	}
	h_set_timeouts(fd, 10000);
	char got = tag_from(fd, NULL);
	double cpu = h_cpu_seconds(p.pid) - cpu0;
	close(fd);
	H_CHECK(got == 'a', "the %zu-byte hello sent a byte at a time reached '%c', not route a", n,
		got ? got : '-');
	H_CHECK(cpu0 >= 0 && cpu < 0.06,
		"the proxy used %.0f ms of CPU for one %zu-byte hello in 1-byte segments: the peeks "
		"are quadratic again", cpu * 1000, n);
	fprintf(stderr, "sni hello of %zu bytes in 1-byte segments: proxy CPU %.0f ms\n", n,
		cpu * 1000);
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_tag_stop(&d);
}

/* The hello's handshake message one byte per TLS record (6 bytes on the
 * wire per byte of it). */
static size_t hello_in_byte_records(const uint8_t *h, size_t n, uint8_t *out)
{
	size_t k = 0;

	for (size_t i = 5; i < n; i++) {
		memcpy(out + k, h, 3);
		out[k + 3] = 0, out[k + 4] = 1, out[k + 5] = h[i];
		k += 6;
	}
	return k;
}

/* A hello in hundreds of records, at once or each record apart: the
 * reader's need assumes full records and undershoots, so it looks again a
 * few dozen times (a sixth of what is left each time), never once per
 * record, and the hello is read either way. */
Test(integ, sni_hello_in_hundreds_of_records_at_once_or_apart, .init = h_init, .fini = h_fini, .timeout = 60)
{
	struct h_tag_server a;
	struct h_proxy p;
	struct h_addr stats;
	uint8_t h[4096];
	static uint8_t recs[6 * 4096];
	char text[1024];
	int port = h_free_port();

	h_tag_start(&a, 'a', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n"
		 "[route a]\nlisten = 127.0.0.1:%d\nsni = a.example.com\nbackend = 127.0.0.1:%d\n",
		 port, a.port);
	proxy_up(&p, &stats, "hello-pieces.conf", text);
	size_t n = hello_in_byte_records(h, tls_make_hello("a.example.com", NULL, 0, h, sizeof h), recs);
	H_CHECK(n > 6 * 200 && n < 16384, "%zu bytes of records", n);

	int fd = connect_from(port, "127.0.0.1");
	H_CHECK(h_send_all(fd, recs, n, h_now_ms() + 3000) == 0, "send");
	H_CHECK(tag_from(fd, NULL) == 'a', "a hello in %zu one-byte records sent at once", n / 6);
	close(fd);

	fd = connect_from(port, "127.0.0.1");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (size_t off = 0; off < n; off += 6) {
		H_CHECK(send(fd, recs + off, 6, MSG_NOSIGNAL) == 6, "record %zu: %s", off / 6,
			strerror(errno));
		h_sleep_ms(2);
	}
	H_CHECK(tag_from(fd, NULL) == 'a', "a hello in %zu records sent apart", n / 6);
	close(fd);
	H_CHECK(h_metric(&stats, "splicer_tls_hello_errors_total") == 0, "hello errors %lld",
		h_metric(&stats, "splicer_tls_hello_errors_total"));
	h_proxy_down(&p);
	h_tag_stop(&a);
}
