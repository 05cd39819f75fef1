/* SPDX-License-Identifier: MIT */
/* Admin commands cost no memory per call. A weight change rebuilds the
 * route's balancing tables (a 64 KiB Maglev table) and publishes them to
 * the workers, which read them without a lock; the table it replaces must
 * go once no worker can hold it (src/core/qsbr.h), not pile up until the
 * next reload (64 KiB a call: 5 MB -> 198 MB of RSS after 3,000 calls).
 * 3,000 weight changes, and about 1,500 other commands (drain, disable,
 * enable, show ...), go through one admin connection while clients keep
 * going through the route on both workers; the proxy's RSS afterwards is
 * within 4 MiB of where it was, and every client was served. The ASan+UBSan
 * proxy runs the same churn: a table freed while a worker still picks with
 * it would be reported (its RSS is not asserted: freed memory waits in
 * ASan's quarantine). */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEIGHT_CALLS 3000
#define RSS_GROWTH_MAX_KIB (4 * 1024)

static const char *sock_path(void)
{
	static char path[300];
	snprintf(path, sizeof path, "%s/admin.sock", h_tmpdir());
	return path;
}

/* One command on the admin connection (not an error). */
static void admin(int fd, const char *line)
{
	static char ans[1 << 20];

	h_admin_cmd(fd, line, ans, sizeof ans);
}

/* ---- clients going through the route meanwhile ---------------------------- */

struct traffic {
	struct h_addr proxy;
	_Atomic int stop;
	_Atomic long ok, bad;
	pthread_t thr;
};

static void *traffic_loop(void *arg)
{
	struct traffic *t = arg;

	for (unsigned i = 0; !atomic_load(&t->stop); i++) {
		/* sources 127.0.0.1-64: maglev picks by the client's address */
		struct sockaddr_in src = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		char c = 0;

		src.sin_addr.s_addr = htonl(0x7f000001u + i % 64);
		h_set_timeouts(fd, 1000);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&src, sizeof src) == 0 &&
		    connect(fd, (struct sockaddr *)&t->proxy.ss, t->proxy.len) == 0 &&
		    h_recv_exact(fd, &c, 1, h_now_ms() + 3000) == 0 && (c == 'a' || c == 'b'))
			t->ok++;
		else
			t->bad++;
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/* ---- the case ---------------------------------------------------------------- */

/* The other commands, one after every second weight change, on one backend
 * per round of them: it leaves and comes back before the other's round, so
 * one of the two is always usable. */
static const char *const others[] = {
	"backend default %s drain",   "backend default %s enable", "show backends",
	"backend default %s disable", "backend default %s enable", "show sessions",
	"show routes",                "show process",              "show backends --json",
};

static void case_churn(const char *bin, int asan)
{
	struct h_tag_server a, b;
	struct h_proxy p;
	static struct traffic t; /* static: its thread may outlive a failed check */
	char ba[64], bb[64], line[256];
	const char *backends[] = { ba, bb, NULL };
	const char *extra[] = { "--admin", sock_path(), "--balance", "maglev", NULL };
	long rss0, rss1, nothers = 0;

	h_tag_start(&a, 'a', 0, 0);
	h_tag_start(&b, 'b', 0, 0);
	snprintf(ba, sizeof ba, "127.0.0.1:%d", a.port);
	snprintf(bb, sizeof bb, "127.0.0.1:%d", b.port);
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	t.proxy = p.addr;
	H_CHECK(pthread_create(&t.thr, NULL, traffic_loop, &t) == 0, "traffic thread");
	int fd = h_admin_connect(sock_path());

	/* warm-up: the allocator's arenas and the first tables reach their
	 * steady size before the baseline is taken */
	for (int i = 0; i < 300; i++) {
		snprintf(line, sizeof line, "backend default %s weight %d", i % 2 ? bb : ba, 1 + i % 256);
		admin(fd, line);
	}
	h_sleep_ms(500);
	rss0 = h_rss_kib(p.pid);
	long ok0 = t.ok;
	int64_t t0 = h_now_ms();
	for (int i = 0; i < WEIGHT_CALLS; i++) {
		snprintf(line, sizeof line, "backend default %s weight %d", i % 2 ? bb : ba,
			 1 + (i * 7) % 256);
		admin(fd, line);
		if (i % 2)
			continue;
		unsigned k = (unsigned)i / 2, n = sizeof others / sizeof others[0];
		snprintf(line, sizeof line, others[k % n], (k / n) % 2 ? ba : bb);
		admin(fd, line);
		nothers++;
	}
	int64_t took = h_now_ms() - t0;
	h_sleep_ms(500); /* the main loop's tick frees what the last calls replaced */
	rss1 = h_rss_kib(p.pid);
	atomic_store(&t.stop, 1);
	pthread_join(t.thr, NULL);
	close(fd);
	fprintf(stderr, "[admin_churn%s] %d weight changes + %ld other commands in %lld ms with %ld "
		"clients served meanwhile: RSS %ld KiB -> %ld KiB (%+ld KiB)\n", asan ? " asan" : "",
		WEIGHT_CALLS, nothers, (long long)took, t.ok - ok0, rss0, rss1, rss1 - rss0);
	H_CHECK(rss0 > 0 && rss1 > 0, "RSS not readable");
	H_CHECK(t.bad == 0, "%ld of %ld clients were not served during the churn", t.bad, t.ok + t.bad);
	H_CHECK(t.ok - ok0 > 50, "only %ld clients went through the route during the churn: the "
		"workers hardly read the tables", t.ok - ok0);
	if (!asan)
		H_CHECK(rss1 - rss0 < RSS_GROWTH_MAX_KIB,
			"RSS grew by %ld KiB over %d weight changes (%ld bytes a call): replaced "
			"balancing tables are kept", rss1 - rss0, WEIGHT_CALLS,
			(rss1 - rss0) * 1024 / WEIGHT_CALLS);
	h_proxy_down(&p); /* and no sanitizer report in its log */
	h_tag_stop(&a);
	h_tag_stop(&b);
}

Test(integ, admin_weight_churn_keeps_rss_flat, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_churn(h_binary(0), 0);
}

Test(integ, admin_weight_churn_asan, .init = h_init, .fini = h_fini, .timeout = 240)
{
	case_churn(h_binary(1), 1);
}
