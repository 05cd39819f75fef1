/* SPDX-License-Identifier: MIT */
/* The differential case of on_backend_down (issue 24, item 1): a backend
 * whose health check starts failing while it holds two sessions, an idle
 * one and a bulk answer the client has stopped reading, through HAProxy
 * (`on-marked-down shutdown-sessions`, `tcp-check expect string UP`) and
 * through splicer (`on_backend_down = close`, `check = expect:"UP"`), with
 * the same check interval, timeout and fall. nginx's stream module has no
 * active checks (nginx Plus only) and never ends a session for its
 * backend's health: its column is n/a.
 * Measured per column: how long after the backend turned DOWN the idle
 * session ended, and how (fin/rst), the flip made just after a check
 * connected (so the next check is an interval away in every column); how
 * many bytes of the bulk answer
 * reached the client in all (every one checked) and how it ended; whether
 * the backend's connection was cut. splicer must end the idle session
 * within the same bound as HAProxy (the check's interval and timeout, plus
 * a second for a loaded machine), and no later than HAProxy plus 300 ms,
 * and deliver only right bytes. */
#define _GNU_SOURCE
#include "peers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flag_backend.h"

#define INTERVAL_MS 500
#define TIMEOUT_MS  400
#define BULK        (64 * H_MIB)

static pid_t haproxy_pid;

static void bd_fini(void)
{
	pr_pid_stop(haproxy_pid);
	haproxy_pid = 0;
	h_fini();
}

struct bd_result {
	char name[16];
	int na;
	int64_t idle_ms;   /* the idle session's end after the flip */
	int idle_end;      /* 0 FIN, errno */
	uint64_t bulk;     /* bytes of the bulk answer the client got */
	int bulk_end;
	int bad;           /* a wrong byte */
	int backend_cut;   /* the backend's send failed: its connection was cut */
};

static uint64_t bd_read_all(int fd, int *end, int *bad)
{
	static char buf[65536];
	uint64_t got = 0;
	int64_t deadline = h_now_ms() + 15000;

	h_set_timeouts(fd, 500);
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n > 0) {
			*bad |= h_gen_check(7, got, buf, (size_t)n) != (size_t)n;
			got += (uint64_t)n;
		} else if (n == 0) {
			*end = 0;
			return got;
		} else if (h_now_ms() > deadline) {
			*end = ETIMEDOUT;
			return got;
		} else if (errno != EAGAIN && errno != EINTR) {
			*end = errno;
			return got;
		}
	}
}

/* One column: the proxy in front of backend a listens on front. */
static void bd_measure(struct flag_backend *a, const struct h_addr *front, struct bd_result *r)
{
	int idle = h_connect(front, 2000), bulk;
	char t;

	H_CHECK(idle >= 0 && fb_greeting(idle) == 'A', "%s: the idle session", r->name);
	fb_stream_next(a, BULK, 7);
	bulk = h_connect(front, 2000);
	H_CHECK(bulk >= 0 && (t = fb_greeting(bulk)) == 'A' && h_send_all(bulk, "S", 1, h_now_ms() + 2000) == 0,
		"%s: the bulk session", r->name);
	/* every buffer on the way fills: the backend's sends stop */
	uint64_t last = 0;
	for (int64_t since = h_now_ms(), end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(50)) {
		uint64_t v = atomic_load(&a->streamed);
		if (v != last)
			last = v, since = h_now_ms();
		else if (v && h_now_ms() - since >= 300)
			break;
	}
	/* the flip right after a check connected: in every column the next
	 * check is an interval away, so the times compare */
	int c0 = atomic_load(&a->accepted);
	for (int64_t end = h_now_ms() + 3 * INTERVAL_MS; atomic_load(&a->accepted) == c0 && h_now_ms() < end;)
		h_sleep_ms(1);
	int64_t t0 = h_now_ms();
	fb_set_down(a, 1);
	int e = h_expect_eof(idle, t0 + INTERVAL_MS + TIMEOUT_MS + 5000);
	r->idle_ms = h_now_ms() - t0;
	r->idle_end = e == 0 ? 0 : -e;
	r->bulk = bd_read_all(bulk, &r->bulk_end, &r->bad);
	for (int64_t end = h_now_ms() + 3000; !atomic_load(&a->stream_end) && h_now_ms() < end;)
		h_sleep_ms(20);
	r->backend_cut = atomic_load(&a->stream_end) < 0;
	close(idle);
	close(bulk);
}

static const char *bd_end(int e)
{
	return e == 0 ? "fin" : e == ECONNRESET ? "rst" : e == ETIMEDOUT ? "stall" : "err";
}

static void bd_haproxy(struct bd_result *r)
{
	struct flag_backend a;
	struct h_addr front;
	char conf[1024], log[300], where[32];
	int port = h_free_port();

	fb_start(&a, 'A', 0);
	snprintf(conf, sizeof conf,
		 "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1m\n"
		 "    timeout server 1m\n    timeout check %dms\n"
		 "frontend f\n    bind 127.0.0.1:%d\n    default_backend b\n"
		 "backend b\n    option tcp-check\n    tcp-check expect string UP\n"
		 "    server a %s check inter %dms fall 1 rise 1 on-marked-down shutdown-sessions\n",
		 TIMEOUT_MS, port, a.text, INTERVAL_MS);
	haproxy_pid = pr_haproxy_start("haproxy-down", conf, port, log, sizeof log);
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	h_addr_parse(where, &front);
	h_sleep_ms(INTERVAL_MS); /* its first check passed: the server is up */
	bd_measure(&a, &front, r);
	pr_pid_stop(haproxy_pid);
	haproxy_pid = 0;
	fb_stop(&a);
}

static void bd_splicer(const char *bin, const char *engine, struct bd_result *r)
{
	struct flag_backend a;
	struct h_proxy p;
	char text[1024], err[512];
	int port = h_free_port();

	fb_start(&a, 'A', 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\n\n[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = %s\n"
		 "check = expect:\"UP\"\ncheck_interval = %dms\ncheck_timeout = %dms\nrise = 1\nfall = 1\n"
		 "on_backend_down = close\n",
		 port, a.text, engine, INTERVAL_MS, TIMEOUT_MS);
	const char *args[] = { "-c", h_conf_write("down.conf", text), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "splicer: %s", err);
	bd_measure(&a, &p.addr, r);
	h_proxy_down(&p);
	fb_stop(&a);
}

Test(peer, backend_marked_down_ends_its_sessions, .init = h_init, .fini = bd_fini, .timeout = 180)
{
	static const char *const engines[] = { "copy", "splice", "auto" };
	struct bd_result res[5] = { { .name = "haproxy" }, { .name = "nginx", .na = 1 } };
	char head[512], row[512], cell[64];
	int n = 2;
	const int64_t bound = INTERVAL_MS + TIMEOUT_MS + 1000;

	bd_haproxy(&res[0]);
	for (size_t i = 0; i < 3; i++, n++) {
		snprintf(res[n].name, sizeof res[n].name, "%s", engines[i]);
		bd_splicer(h_binary(0), engines[i], &res[n]);
	}
	snprintf(head, sizeof head, "[peer] %-34s", "backend marked down (idle end; bulk)");
	snprintf(row, sizeof row, "[peer] %-34s", "backend_marked_down");
	for (int i = 0; i < n; i++) {
		size_t k = strlen(head), m = strlen(row);
		snprintf(head + k, sizeof head - k, " %20s", res[i].name);
		if (res[i].na)
			snprintf(cell, sizeof cell, "n/a");
		else
			snprintf(cell, sizeof cell, "%lldms %s; %.1fM %s%s", (long long)res[i].idle_ms,
				 bd_end(res[i].idle_end), (double)res[i].bulk / (double)H_MIB,
				 bd_end(res[i].bulk_end), res[i].bad ? "!" : "");
		snprintf(row + m, sizeof row - m, " %20s", cell);
	}
	fprintf(stderr, "%s\n%s\n", head, row);
	fprintf(stderr, "[peer]   nginx n/a: the stream module has no active health checks and never "
		"ends a session for its backend's health\n");
	for (int i = 0; i < n; i++)
		if (!res[i].na)
			fprintf(stderr, "[peer]   %-8s backend connection %s\n", res[i].name,
				res[i].backend_cut ? "cut" : "left open");
	pr_table_append(head, row);

	H_CHECK(res[0].idle_ms < bound, "HAProxy itself did not end the session within %lld ms: %lld",
		(long long)bound, (long long)res[0].idle_ms);
	for (int i = 2; i < n; i++) {
		H_CHECK(!res[i].bad, "%s delivered a wrong byte", res[i].name);
		H_CHECK(res[i].idle_ms < bound && res[i].idle_ms <= res[0].idle_ms + 300,
			"%s ended the idle session %lld ms after the flip, HAProxy %lld ms", res[i].name,
			(long long)res[i].idle_ms, (long long)res[0].idle_ms);
		H_CHECK(res[i].idle_end == ECONNRESET && res[i].bulk_end == ECONNRESET && res[i].backend_cut,
			"%s: the sessions did not end as on_backend_down = close says (idle %s, bulk %s, "
			"backend %s)", res[i].name, bd_end(res[i].idle_end), bd_end(res[i].bulk_end),
			res[i].backend_cut ? "cut" : "open");
	}
}
