/* SPDX-License-Identifier: MIT */
/* bench_link: see bench_link.h. */
#define _GNU_SOURCE
#include "bench_link.h"

#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Client 198.18.0.1 -- .0.2 proxy .1.2 -- 198.18.1.1 sink. */
#define VETH_HOSTS { "198.18.0.1", "198.18.0.2", "198.18.1.1" }

static const struct bench_link links[] = {
	{ .name = "loopback", .what = "lo: MTU 64k, no segmentation", .offload = 1,
	  .host = { "127.0.0.1", "127.0.0.1", "127.0.0.1" } },
	{ .name = "veth1500", .what = "veth pairs through namespaces, MTU 1500, TSO/GSO/GRO on",
	  .mtu = 1500, .offload = 1, .host = VETH_HOSTS },
	{ .name = "veth9000", .what = "veth pairs, MTU 9000, TSO/GSO/GRO on", .mtu = 9000, .offload = 1,
	  .host = VETH_HOSTS },
	{ .name = "veth1500-nooffload", .what = "veth pairs, MTU 1500, TSO/GSO/GRO off (MTU-sized segments)",
	  .mtu = 1500, .host = VETH_HOSTS },
	{ .name = "veth9000-nooffload", .what = "veth pairs, MTU 9000, TSO/GSO/GRO off", .mtu = 9000,
	  .host = VETH_HOSTS },
};
#define NLINKS (sizeof(links) / sizeof(links[0]))

static int root_ns = -1;

const struct bench_link *bench_link_find(const char *name)
{
	for (size_t i = 0; i < NLINKS; i++)
		if (!strcmp(links[i].name, name))
			return &links[i];
	return NULL;
}

const char *bench_link_names(void)
{
	static char buf[256];

	if (!buf[0])
		for (size_t i = 0; i < NLINKS; i++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "",
				 links[i].name);
	return buf;
}

/* Runs a shell command quietly; on failure writes it into why. */
static int sh(char *why, unsigned len, const char *fmt, ...)
{
	char cmd[512], full[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
	if (system(full) != 0) {
		snprintf(why, len, "`%s` failed", cmd);
		return -1;
	}
	return 0;
}

static int have(const char *path)
{
	return access(path, X_OK) == 0;
}

int bench_link_setup(struct bench_link *l, char *why, unsigned len)
{
	static const char *const end_tag[LINK_ENDS] = { "c", "p", "s" };
	/* device names: <prefix>c0 (client) <-> <prefix>p0, <prefix>p1 <-> <prefix>s0 */
	char pre[16], dev[4][20];
	const char *devns[4];
	const char *off = l->offload ? "on" : "off";

	for (int e = 0; e < LINK_ENDS; e++)
		l->nsfd[e] = -1;
	if (!l->mtu) {
		l->up = 1;
		return 0;
	}
	if (geteuid() != 0) {
		snprintf(why, len, "needs root to create network namespaces");
		return -1;
	}
	if (!have("/usr/sbin/ip") && !have("/sbin/ip") && !have("/usr/bin/ip")) {
		snprintf(why, len, "`ip` not installed (iproute2)");
		return -1;
	}
	if (!have("/usr/sbin/ethtool") && !have("/sbin/ethtool")) {
		snprintf(why, len, "`ethtool` not installed (make bench-deps)");
		return -1;
	}
	static int made;
	snprintf(pre, sizeof(pre), "sb%d%c", (int)getpid() % 100000, (char)('a' + made++ % 26));
	for (int e = 0; e < LINK_ENDS; e++)
		snprintf(l->ns[e], sizeof(l->ns[e]), "%s-%s", pre, end_tag[e]);
	snprintf(dev[0], sizeof(dev[0]), "%sc0", pre);
	snprintf(dev[1], sizeof(dev[1]), "%sp0", pre);
	snprintf(dev[2], sizeof(dev[2]), "%sp1", pre);
	snprintf(dev[3], sizeof(dev[3]), "%ss0", pre);
	devns[0] = l->ns[LINK_CLIENT];
	devns[1] = devns[2] = l->ns[LINK_PROXY];
	devns[3] = l->ns[LINK_SINK];

	for (int e = 0; e < LINK_ENDS; e++)
		if (sh(why, len, "ip netns add %s", l->ns[e]) ||
		    sh(why, len, "ip -n %s link set lo up", l->ns[e]))
			goto fail;
	if (sh(why, len, "ip link add %s netns %s type veth peer name %s netns %s", dev[0], devns[0],
	       dev[1], devns[1]) ||
	    sh(why, len, "ip link add %s netns %s type veth peer name %s netns %s", dev[2], devns[2],
	       dev[3], devns[3]))
		goto fail;
	for (int d = 0; d < 4; d++)
		if (sh(why, len, "ip -n %s link set %s mtu %u up", devns[d], dev[d], l->mtu) ||
		    sh(why, len, "ip netns exec %s ethtool -K %s tso %s gso %s gro %s", devns[d], dev[d],
		       off, off, off))
			goto fail;
	if (sh(why, len, "ip -n %s addr add 198.18.0.1/24 dev %s", devns[0], dev[0]) ||
	    sh(why, len, "ip -n %s addr add 198.18.0.2/24 dev %s", devns[1], dev[1]) ||
	    sh(why, len, "ip -n %s addr add 198.18.1.2/24 dev %s", devns[2], dev[2]) ||
	    sh(why, len, "ip -n %s addr add 198.18.1.1/24 dev %s", devns[3], dev[3]) ||
	    sh(why, len, "ip -n %s route add default via 198.18.0.2", devns[0]) ||
	    sh(why, len, "ip -n %s route add default via 198.18.1.2", devns[3]) ||
	    sh(why, len, "ip netns exec %s sysctl -qw net.ipv4.ip_forward=1", devns[1]))
		goto fail;
	for (int e = 0; e < LINK_ENDS; e++) {
		char path[96];
		snprintf(path, sizeof(path), "/run/netns/%s", l->ns[e]);
		if ((l->nsfd[e] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			snprintf(why, len, "cannot open %s", path);
			goto fail;
		}
	}
	l->up = 1;
	return 0;
fail:
	l->up = 1; /* so teardown removes what was made */
	bench_link_teardown(l);
	return -1;
}

void bench_link_teardown(struct bench_link *l)
{
	char why[8];

	if (!l->up)
		return;
	for (int e = 0; e < LINK_ENDS && l->mtu; e++) {
		if (l->nsfd[e] >= 0)
			close(l->nsfd[e]);
		l->nsfd[e] = -1;
		/* deleting a namespace deletes the veth ends inside it */
		if (l->ns[e][0])
			sh(why, sizeof(why), "ip netns del %s", l->ns[e]);
		l->ns[e][0] = '\0';
	}
	l->up = 0;
}

int bench_link_enter(const struct bench_link *l, enum link_end end)
{
	if (!l->mtu)
		return 0;
	if (root_ns < 0 && (root_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	return setns(l->nsfd[end], CLONE_NEWNET);
}

void bench_link_leave(const struct bench_link *l)
{
	if (l->mtu && root_ns >= 0 && setns(root_ns, CLONE_NEWNET)) {
		/* cannot fail for the namespace we came from */
	}
}
