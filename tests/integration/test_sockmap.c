/* The experimental sockmap engine's fallback: when BPF cannot be loaded the
 * proxy says why in one line at start and forwards with splice. The proxy
 * is started without the capabilities BPF needs: through setpriv, dropping
 * CAP_BPF, CAP_SYS_ADMIN, CAP_PERFMON and CAP_NET_ADMIN from the bounding
 * set (so the exec'd root process has none of them), or directly when this
 * process already lacks them. The engine's data-path cases are the
 * H_SOCKMAP_CASES in test_streams.c, test_concurrent.c and test_limits.c. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
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
	H_CHECK(h_log_lines(&p, "Operation not permitted", NULL) == 1,
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

/* Back-pressure: the kernel's redirect queue is charged to no socket, so
 * without the program's bound (SM_BACKLOG_MAX) a client that stops reading
 * lets the backend push without limit into kernel memory (512 MiB in 3 s
 * was measured). With it, the push stalls like splice's (about 10 MiB:
 * socket buffers plus the 2 MiB bound). Then the client reads all of it,
 * byte-exact, tail included. */
struct bp_state {
	uint64_t seed, len;
	int64_t deadline;
	struct h_xfer tx;
	_Atomic int sessions;
};

static void bp_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct bp_state *st = arg;
	if (atomic_fetch_add(&st->sessions, 1) != 0)
		return;
	h_xfer_init(&st->tx, fd, st->seed, st->len, st->deadline);
	st->tx.shut_wr = 1;
	h_xfer_send(&st->tx);
}

static void case_backpressure(const char *bin, const char *engine)
{
	static struct bp_state st;
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer crx;
	memset(&st, 0, sizeof st);
	st.seed = 0xB9E55;
	st.len = 256 * H_MIB;
	st.deadline = h_now_ms() + H_T(60000);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, bp_conn, &st);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_sleep_ms(2000); /* the client reads nothing */
	uint64_t pushed = atomic_load(&st.tx.progress);
	H_CHECK(pushed < 48 * H_MIB,
		"the backend pushed %llu MiB through the proxy while the client read nothing for 2 s "
		"(limit 48 MiB): no back-pressure",
		(unsigned long long)(pushed >> 20));
	if (getenv("SPLICER_IT_VERBOSE"))
		fprintf(stderr, "[integ] backpressure %s: %llu KiB pushed during the stall\n", engine,
			(unsigned long long)(pushed >> 10));
	h_xfer_init(&crx, fd, st.seed, 0, st.deadline);
	crx.verify = 1;
	h_xfer_recv(&crx);
	H_CHECK(h_server_wait_done(&srv, 1, 10000) == 0, "backend session did not finish");
	h_check_stream("backend->client after a 2 s stall", &st.tx, &crx, st.len);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

H_SOCKMAP_CASES(backpressure, 150)
