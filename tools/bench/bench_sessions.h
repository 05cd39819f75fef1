/* SPDX-License-Identifier: MIT */
/* bench_sessions: many established sessions held through a proxy at once,
 * for the modes that measure what sessions cost rather than what they move:
 * `bench --idle` (memory) and `bench --upgrade` (the hand-over). A backend
 * of the bench's own echoes and holds every connection; each session is
 * opened and carries BENCH_SESSION_MSG bytes each way, so the proxy has
 * connected its backend and moved bytes (established end to end, buffers
 * used once), then idles.
 *
 *   struct bench_holder h;
 *   bench_holder_start(&h);                       // h.addr: "127.0.0.1:PORT"
 *   bench_sessions_open(&p.ss, p.len, n, fds, err, sizeof(err));
 *   ...
 *   bench_sessions_close(fds, n, &h);             // RSTs, then h.open == 0
 *   bench_holder_stop(&h); */
#ifndef SPLICER_BENCH_SESSIONS_H
#define SPLICER_BENCH_SESSIONS_H
#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>

#define BENCH_SESSION_MSG  64   /* bytes each session carries each way when opened */
#define BENCH_SESSIONS_MIN 10   /* --sessions' bounds: the bench holds two */
#define BENCH_SESSIONS_MAX 9000 /* descriptors a session, within ulimit -n 20,000 */

struct bench_holder {
	int lfd, ep;
	volatile int stop;
	volatile int open;   /* connections it holds (atomic) */
	pthread_t thr;
	char addr[64];       /* where it listens, "127.0.0.1:PORT" */
};

/* The backend: echoes what it reads, holds every connection until its
 * peer closes. Returns 0 or -1 (errno). */
int bench_holder_start(struct bench_holder *h);
void bench_holder_stop(struct bench_holder *h);

/* Opens n sessions to ss (through the proxy), each carrying
 * BENCH_SESSION_MSG bytes each way, checked; fds[0..n-1] gets them (-1 for
 * those not opened). Returns 0, or -1 with err saying which session and why. */
int bench_sessions_open(const struct sockaddr_storage *ss, socklen_t len, unsigned n, int *fds,
			char *err, size_t errlen);
/* Closes them with RSTs (no TIME_WAIT left on the proxy's side to expire
 * while the next row is measured) and waits, up to 10 s, until the holder
 * has seen every backend side close. */
void bench_sessions_close(int *fds, unsigned n, struct bench_holder *h);
/* close() after SO_LINGER 0: an RST rather than a FIN. */
void bench_close_rst(int fd);

/* --sessions LIST of `mode` ("--idle"): up to max counts, each within
 * BENCH_SESSIONS_MIN..MAX, into sizes. Returns how many, or -1 after
 * saying why on stderr. */
int bench_sessions_parse(const char *list, unsigned *sizes, unsigned max);
/* Whether ulimit -n holds `most` sessions here (two descriptors each);
 * -1 after saying so on stderr for `mode`. */
int bench_sessions_fit(unsigned most, const char *mode);

void bench_sleep_ms(int ms);

#endif
