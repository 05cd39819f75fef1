/* SPDX-License-Identifier: MIT */
/* netns: see netns.h (taken out of test_faults.c, which has used it since
 * the fault matrix; the socket-option cases use it too). */
#define _GNU_SOURCE
#include "netns.h"
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct bench_link net;
static int root_ns = -1;

void enter(enum link_end e)
{
	if (setns(net.nsfd[e], CLONE_NEWNET))
		cr_assert_fail("setns: %s", strerror(errno));
}

void home(void)
{
	enter(LINK_PROXY);
}

const char *ns_of(enum link_end e)
{
	return net.ns[e];
}

/* Runs a command line inside a namespace; asserts it worked. */
void ns_sh(enum link_end e, const char *fmt, ...)
{
	char cmd[512], full[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "ip netns exec %s %s >/dev/null 2>&1", ns_of(e), cmd);
	int rc = system(full);
	H_CHECK(rc == 0, "`%s` failed (status %d)", full, rc);
}

/* Packets that hit the rules with `target` in a chain of a namespace. */
unsigned long long ipt_hits(enum link_end e, const char *chain, const char *target)
{
	char cmd[256], line[512];
	unsigned long long sum = 0, pkts;

	snprintf(cmd, sizeof cmd, "ip netns exec %s iptables -L %s -v -x -n 2>/dev/null", ns_of(e),
		 chain);
	FILE *f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		char tgt[64];
		if (sscanf(line, " %llu %*u %63s", &pkts, tgt) == 2 && !strcmp(tgt, target))
			sum += pkts;
	}
	pclose(f);
	return sum;
}

void net_up(void)
{
	char why[256];

	if (geteuid() != 0)
		cr_skip_test("needs root (network namespaces, iptables)");
	if (access("/usr/sbin/iptables", X_OK) && access("/sbin/iptables", X_OK))
		cr_skip_test("iptables is not installed (make deps installs it)");
	net = *bench_link_find("veth1500-nooffload");
	if (bench_link_setup(&net, why, sizeof why))
		cr_skip_test("cannot build the test network: %s", why);
	root_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	home();
}

void net_down(void)
{
	if (root_ns >= 0) {
		setns(root_ns, CLONE_NEWNET);
		close(root_ns);
		root_ns = -1;
	}
	bench_link_teardown(&net);
	memset(&net, 0, sizeof net);
}
