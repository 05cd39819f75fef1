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

