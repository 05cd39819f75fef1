/* SPDX-License-Identifier: MIT */
/* Integration cases: backend selection and failover (a refused first
 * backend, all backends down then one coming back). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- 6: the first backend refuses ------------------------------------------ */

static void case_first_backend_refuses(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_refused dead;
	H_CHECK(h_refused_open(&dead) == 0, "cannot reserve a refused port: %s", strerror(errno));
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { dead.text, srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	/* Round robin starts sessions at either backend: both orders occur. */
	for (int i = 0; i < 10; i++) {
		char why[256];
		int64_t t0 = h_now_ms();
		rc = h_echo_roundtrip(&p.addr, 1000, 0xF1 + (uint64_t)i, 3000, why, sizeof why);
		H_CHECK(rc == 0, "session %d of 10 (backends %s refused, %s echo) failed after %lld ms: %s",
			i + 1, dead.text, srv.addr.text, (long long)(h_now_ms() - t0), why);
	}
	H_CHECK(h_server_wait_done(&srv, 10, 5000) == 0, "echo backend served %d of 10 sessions",
		atomic_load(&srv.done));
	H_CHECK(atomic_load(&srv.accepted) == 10, "echo backend accepted %d connections, expected 10",
		atomic_load(&srv.accepted));
	h_server_stop(&srv);
	h_refused_close(&dead);
	h_proxy_down(&p);
}

/* ---- 7: every backend down, then one comes back ---------------------------- */

static void case_all_backends_down(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_refused a, b;
	H_CHECK(h_refused_open(&a) == 0 && h_refused_open(&b) == 0, "cannot reserve refused ports: %s",
		strerror(errno));
	const char *backends[] = { a.text, b.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	int64_t t0 = h_now_ms();
	int rc = h_expect_eof(fd, t0 + 3000);
	int64_t took = h_now_ms() - t0;
	close(fd);
	H_CHECK(rc == 0 || rc == -ECONNRESET,
		"with both backends refusing, the client expected EOF or a reset, got %s after %lld ms",
		rc == -EPROTO ? "data" : strerror(-rc), (long long)took);
	H_CHECK(took <= 1000, "with both backends refusing, the client was closed only after %lld ms "
			      "(limit 1000 ms)",
		(long long)took);
	H_CHECK(h_proxy_alive(&p), "proxy died after a session with no backend");

	/* An echo backend appears on the first port; the second stays refused. */
	int port = a.port;
	h_refused_close(&a);
	char where[64];
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	rc = h_server_start(&srv, where, 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "cannot bind the echo backend to the freed port %s: %s", where,
		strerror(-rc));
	for (int i = 0; i < 4; i++) {
		char why[256];
		int64_t t1 = h_now_ms();
		rc = h_echo_roundtrip(&p.addr, 2000, 0xA11 + (uint64_t)i, 3000, why, sizeof why);
		H_CHECK(rc == 0,
			"session %d after the echo backend came up on %s (%s still refused) failed after "
			"%lld ms: %s",
			i + 1, where, b.text, (long long)(h_now_ms() - t1), why);
	}
	H_CHECK(h_server_wait_done(&srv, 4, 5000) == 0, "echo backend served %d of 4 sessions",
		atomic_load(&srv.done));
	h_server_stop(&srv);
	h_refused_close(&b);
	h_proxy_down(&p);
}

H_ENGINE_CASES(first_backend_refuses, 60)
H_ENGINE_CASES(all_backends_down, 60)
H_TINY_CASE(first_backend_refuses, 60)
H_TINY_CASE(all_backends_down, 60)
