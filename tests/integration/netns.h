/* SPDX-License-Identifier: MIT */
/* netns: the test network of the cases that need one (the fault matrix,
 * the socket options that only a network of their own can show): three
 * namespaces joined by veth pairs, built by tools/bench/bench_link.c
 * (client 198.18.0.1 -- 198.18.0.2 proxy 198.18.1.2 -- 198.18.1.1 sink),
 * made and deleted by the test. The test's main thread lives in the proxy's
 * namespace, so the proxy it starts does too; client and backend sockets
 * are made after switching the thread into theirs (a socket stays in the
 * namespace it was made in). */
#ifndef SPLICER_NETNS_H
#define SPLICER_NETNS_H
#include "bench_link.h"

extern struct bench_link net; /* the network of the running test */

/* Builds the network (skips the test, with the reason, without root,
 * iptables or a way to build it) and enters the proxy's namespace. */
void net_up(void);
/* Back to the namespace the test started in; deletes the network. */
void net_down(void);

void enter(enum link_end e); /* the calling thread into an end's namespace */
void home(void);             /* back into the proxy's */
const char *ns_of(enum link_end e);

/* Runs a command line inside a namespace; asserts it worked. */
void ns_sh(enum link_end e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Packets that hit the rules with `target` in a chain of a namespace's
 * iptables (table filter, or "-t mangle"-style in chain: "OUTPUT"). */
unsigned long long ipt_hits(enum link_end e, const char *chain, const char *target);

#endif
