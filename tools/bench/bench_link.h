/* SPDX-License-Identifier: MIT */
/* bench_link: the links `splicer bench` measures over.
 *
 * `loopback` is the machine's lo (MTU 64k, no segmentation at all). The
 * veth links are built by the bench itself: three network namespaces it
 * creates and deletes, client -- proxy -- sink, joined by two veth pairs in
 * 198.18.0.0/15 (RFC 2544's benchmarking range), at MTU 1500 or 9000, with
 * TSO/GSO/GRO on (veth's default is TSO+GSO on, GRO off; "on" turns GRO on
 * too) or all off, so segment sizes are those of a real NIC without
 * offloads. The proxy namespace also routes, so `direct` is a client-to-sink
 * path through the same hops, without a proxy.
 *
 * The bench's own threads and the proxies it spawns are placed by switching
 * the calling thread's network namespace (setns) around socket creation and
 * fork: sockets stay in the namespace they were made in. */
#ifndef SPLICER_BENCH_LINK_H
#define SPLICER_BENCH_LINK_H

enum link_end { LINK_CLIENT, LINK_PROXY, LINK_SINK, LINK_ENDS };

struct bench_link {
	const char *name;            /* "loopback", "veth1500", "veth9000-nooffload" */
	const char *what;            /* one line for the legend */
	unsigned mtu;                /* 0 for loopback */
	int offload;                 /* TSO/GSO/GRO on */
	const char *host[LINK_ENDS]; /* each end's address */
	char ns[LINK_ENDS][32];      /* namespace names, empty for loopback */
	int nsfd[LINK_ENDS];
	int up;
};

/* The links known, by name; NULL if unknown. */
const struct bench_link *bench_link_find(const char *name);
/* "loopback,veth1500,..." for help texts. */
const char *bench_link_names(void);

/* Builds the namespaces and veth pairs (a no-op for loopback). Returns 0, or
 * -1 with why filled (not root, `ip`/`ethtool` missing, a failed command),
 * leaving nothing behind. */
int bench_link_setup(struct bench_link *l, char *why, unsigned len);
/* Deletes what setup made. Safe to call twice. */
void bench_link_teardown(struct bench_link *l);

/* Moves the calling thread into the namespace of an end (no-op for
 * loopback) and back to the one it started in. */
int bench_link_enter(const struct bench_link *l, enum link_end end);
void bench_link_leave(const struct bench_link *l);

#endif
