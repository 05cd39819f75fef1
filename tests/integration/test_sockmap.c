/* SPDX-License-Identifier: MIT */
/* The experimental sockmap engine: a slow client taking a queued answer
 * keeps its session past half_close_timeout (below), and the fallback: when
 * BPF cannot be loaded the proxy says why in one line at start and forwards
 * with splice. For that case the proxy is started without the capabilities
 * BPF needs: through setpriv, dropping CAP_BPF, CAP_SYS_ADMIN, CAP_PERFMON
 * and CAP_NET_ADMIN from the bounding set (so the exec'd root process has
 * none of them), or directly when this process already lacks them. The engine's data-path cases are the
 * H_SOCKMAP_CASES in test_streams.c, test_concurrent.c and test_limits.c. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SETPRIV "/usr/bin/setpriv"

static void case_fallback(const char *bin)
{
	static struct h_server srv;
	static struct h_proxy p;
	const char *args[32];
	int n = 0;
	char why[256];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *exe = bin;
	if (h_bpf_capable()) {
		if (access(SETPRIV, X_OK) != 0)
			cr_skip_test("%s (util-linux) is missing: cannot drop CAP_BPF for the proxy", SETPRIV);
		exe = SETPRIV;
		args[n++] = "--bounding-set=-bpf,-sys_admin,-perfmon,-net_admin";
		args[n++] = "--inh-caps=-all";
		args[n++] = "--";
		args[n++] = bin;
	}
	args[n++] = "-l";
	args[n++] = "127.0.0.1:0";
	args[n++] = "-b";
	args[n++] = srv.addr.text;
	args[n++] = "--engine";
	args[n++] = "sockmap";
	args[n++] = "--workers";
	args[n++] = "1";
	args[n] = NULL;
	rc = h_proxy_start(&p, exe, args, why, sizeof why);
	H_CHECK(rc == 0, "proxy without BPF capabilities did not start: %s", why);

	H_CHECK(h_log_lines(&p, "warning: sockmap engine unavailable: ", "; using splice", NULL) == 1,
		"expected exactly one line 'sockmap engine unavailable: REASON; using splice' (log %s)",
		p.log);
	H_CHECK(h_log_lines(&p, "sockmap engine unavailable: ", "Operation not permitted", NULL) == 1,
		"the fallback line does not give the kernel's reason (EPERM) (log %s)", p.log);
	H_CHECK(h_log_lines(&p, "BPF program loaded", NULL) == 0, "the program was loaded anyway");
	H_CHECK(h_log_lines(&p, "engine splice;", NULL) == 1,
		"the route does not say it runs on splice (log %s)", p.log);

	/* and it forwards */
	rc = h_echo_roundtrip(&p.addr, 60000, 0x5F0C, 5000, why, sizeof why);
	H_CHECK(rc == 0, "echo through the fallen-back proxy: %s", why);
	h_server_stop(&srv);
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "spliced 0,", NULL) == 0, "the fallback did not splice (log %s)", p.log);
}

Test(integ, sockmap_fallback_logged_when_bpf_refused, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_fallback(h_binary(0));
}


/* ---- a slow client drains the redirect queue past half_close_timeout ---- */

/* The answer is bigger than the sockets between hold, and the client
 * takes it in about 5 s: the backend's FIN comes long before the last
 * bytes leave the kernel's redirect queue, and while they do, the session
 * waits to forward that FIN (sm_drained) with nothing redirected any more. */
#define SLOW_LEN (16 * H_MIB)
#define SLOW_SEED 0x51077ull

static struct h_xfer slow_tx;

/* Sends the whole answer at once, then FIN; holds the connection until the
 * client's end comes through, so the session stays half-closed. */
static void answer_then_fin(struct h_server *s, int fd, int index, void *arg)
{
	char c;

	h_xfer_init(&slow_tx, fd, SLOW_SEED, SLOW_LEN, h_now_ms() + 60000);
	slow_tx.shut_wr = 1;
	h_xfer_send(&slow_tx);
	h_set_timeouts(fd, 1000);
	for (int64_t end = h_now_ms() + 60000; h_now_ms() < end;) {
		ssize_t n = recv(fd, &c, 1, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
}

/* The model: a half-closed session ends after half_close_timeout without
 * a byte either way *or without the peer taking what is left*. A client
 * that keeps taking the answer must get all of it, then the FIN; the copy
 * engine, writing each chunk itself, never times out here. */
static void case_slow_drain(const char *bin, const char *engine)
{
	struct h_server be;
	struct h_proxy p;
	struct h_xfer rx;
	char baddr[64];

	H_CHECK(h_server_start(&be, "127.0.0.1:0", 16, answer_then_fin, NULL) == 0, "backend");
	snprintf(baddr, sizeof baddr, "127.0.0.1:%d", h_addr_port(&be.addr));
	const char *backends[] = { baddr, NULL };
	const char *extra[] = { "--half-close-timeout", "1s", "-v", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_xfer_init(&rx, fd, SLOW_SEED, 0, h_now_ms() + H_T(60000));
	rx.verify = 1;
	rx.pace_bytes = 64 * H_KIB; /* about 3 MB/s: 16 MiB in 5 s */
	rx.pace_ms = 20;
	h_xfer_recv(&rx);
	H_CHECK(rx.bytes == SLOW_LEN && rx.eof && !rx.err,
		"the client got %llu of %llu bytes (%s) while it kept reading: the session was cut "
		"during the drain (log %s)", (unsigned long long)rx.bytes,
		(unsigned long long)SLOW_LEN, rx.err ? strerror(rx.err) : rx.eof ? "then EOF" : "no EOF",
		p.log);
	close(fd);
	H_CHECK(h_server_wait_done(&be, 1, 5000) == 0, "the backend handler did not end");
	h_check_stream("backend->client", &slow_tx, &rx, SLOW_LEN);
	h_proxy_down(&p);
	h_server_stop(&be);
}
H_SOCKMAP_CASES(slow_drain, 120)
