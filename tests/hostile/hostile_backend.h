/* SPDX-License-Identifier: MIT */
/* A backend for the hostile suite: one epoll thread, any number of
 * connections, each told what to be by its first byte:
 *   'S'  a stream: the backend writes to it as fast as it is taken, for
 *        ever (a download that a stalled client never reads);
 *   else an echo of everything, the first byte included (a TLS
 *        ClientHello starts with 0x16: echoed).
 * No per-connection thread, so hundreds of stalled connections cost
 * nothing here; the test's main thread never waits on it. */
#ifndef SPLICER_HOSTILE_BACKEND_H
#define SPLICER_HOSTILE_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"

struct hb {
	int lfd, ep, stop_fd;
	pthread_t thr;
	struct h_addr addr;
	_Atomic long accepted;
};

/* Listens on 127.0.0.1 (any port: hb->addr) and serves. Asserts. */
void hb_start(struct hb *b);
/* Stops the thread and closes every connection. */
void hb_stop(struct hb *b);

/* One echo round trip of n bytes (n <= 64 KiB) on a new connection to a,
 * first byte 'E', within ms; returns the milliseconds it took, or -1 with
 * why. */
int hb_echo(const struct h_addr *a, size_t n, int ms, char *why, size_t len);

/* Opens a connection to a that asks for a stream and never reads (a
 * 4 KiB receive buffer, so the proxy's side fills); returns the fd or -1. */
int hb_stalled_download(const struct h_addr *a);

/* GET /health on the stats address; returns the milliseconds it took (a
 * 200 or 503 answer), or -1. */
int hb_health_ms(const struct h_addr *stats, int timeout_ms);

#endif
