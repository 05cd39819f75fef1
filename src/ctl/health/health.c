/* SPDX-License-Identifier: MIT */
/* health: see health.h. */
#define _GNU_SOURCE
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "worker.h"

#define MAX_PROBES (MAX_ROUTES * MAX_BACKENDS)

/* One per backend of a route with checks. Each has its own schedule: a
 * slow or silent backend holds only its own probe, never another's. */
struct probe {
	struct route *r;
	unsigned b;
	int fd;               /* -1: idle, waiting for due_ms */
	uint64_t due_ms;      /* idle: when the next check starts */
	uint64_t started_ms;  /* in flight: when it started */
	uint64_t deadline_ms; /* in flight: when it fails as timed out */
};

static pthread_t thread;
static int started, stop_pipe[2] = { -1, -1 };
static struct probe *probes;
static unsigned nprobes;

static void record(struct route *r, unsigned b, int ok, const char *why)
{
	struct backend_health *h = r->health[b];
	char text[160];

	__atomic_add_fetch(ok ? &h->checks_ok : &h->checks_failed, 1, __ATOMIC_RELAXED);
	backend_check_seen(r, b, ok); /* the status page's history */
	/* down by sessions' failures: good checks from before do not count */
	if (__atomic_exchange_n(&h->passive_down, 0, __ATOMIC_RELAXED))
		h->good = 0;
	if (ok) {
		h->bad = 0;
		h->good++;
		/* a good check also clears the passive failure streak */
		__atomic_store_n(&h->fails, 0, __ATOMIC_RELAXED);
		if (!backend_is_up(r, b) && h->good >= r->o.rise) {
			snprintf(text, sizeof(text), "%u good checks", h->good);
			backend_set_down(r, b, 0, text);
		}
	} else {
		h->good = 0;
		h->bad++;
		if (backend_is_up(r, b) && h->bad >= r->o.fall) {
			snprintf(text, sizeof(text), "%u failed checks, last: %s", h->bad, why);
			backend_set_down(r, b, 1, text);
		}
	}
}

/* The probe is idle again: the next check is due one interval after this
 * one started, or at once when it took longer than that (one check per
 * backend in flight, never more). */
static void probe_done(struct probe *p, uint64_t now)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->due_ms = p->started_ms + p->r->o.check_interval_ms;
	if (p->due_ms < now)
		p->due_ms = now;
}

/* Starts a check: a non-blocking connect. Leaves p in flight, or idle
 * again when the connect decided at once (a Unix socket, a refusal). */
static void probe_start(struct probe *p, uint64_t now)
{
	const struct addr *a = &p->r->backend[p->b].addr;

	p->started_ms = now;
	p->deadline_ms = now + p->r->o.check_timeout_ms;
	p->fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0) {
		log_warn("health check of %s: socket: %s", a->text, strerror(errno));
		/* our problem, not the backend's: no verdict */
	} else if (connect(p->fd, (const struct sockaddr *)&a->ss, a->len) == 0) {
		record(p->r, p->b, 1, NULL);
	} else if (errno == EINPROGRESS) {
		return;
	} else {
		record(p->r, p->b, 0, strerror(errno));
	}
	probe_done(p, now);
}

/* Starts every due check, and returns the nearest moment something is due:
 * an idle probe's next check or an in-flight one's deadline. */
static uint64_t start_due(uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (unsigned i = 0; i < nprobes; i++) {
		struct probe *p = &probes[i];
		if (p->fd < 0 && now >= p->due_ms)
			probe_start(p, now);
		if (p->fd >= 0 && p->deadline_ms < next)
			next = p->deadline_ms;
		else if (p->fd < 0 && p->due_ms < next)
			next = p->due_ms;
	}
	return next;
}

static void *health_main(void *arg)
{
	static struct pollfd pfd[MAX_PROBES + 1];
	static struct probe *inflight[MAX_PROBES];

	(void)arg;
	for (;;) {
		uint64_t now = now_monotonic_ms(), next = start_due(now);
		unsigned n = 0;

		for (unsigned i = 0; i < nprobes; i++)
			if (probes[i].fd >= 0) {
				inflight[n] = &probes[i];
				pfd[n++] = (struct pollfd){ .fd = probes[i].fd, .events = POLLOUT };
			}
		pfd[n] = (struct pollfd){ .fd = stop_pipe[0], .events = POLLIN };
		uint64_t wait = next > now ? next - now : 0;
		int rc = poll(pfd, n + 1, wait > 60000 ? 60000 : (int)wait);
		if (rc < 0 && errno != EINTR) {
			log_err("health checks: poll: %s; checks stop", strerror(errno));
			break;
		}
		if (rc > 0 && pfd[n].revents)
			break; /* stopping */
		now = now_monotonic_ms();
		for (unsigned k = 0; k < n; k++) {
			struct probe *p = inflight[k];
			if (rc > 0 && pfd[k].revents) {
				int err = 0;
				socklen_t len = sizeof(err);
				getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len);
				record(p->r, p->b, !err, err ? strerror(err) : NULL);
			} else if (now >= p->deadline_ms) {
				record(p->r, p->b, 0, "check timed out");
			} else {
				continue;
			}
			probe_done(p, now);
		}
	}
	return NULL;
}

int health_start(struct config *cfg)
{
	uint64_t now = now_monotonic_ms();
	unsigned n = 0;

	for (unsigned i = 0; i < cfg->nroutes; i++)
		if (cfg->route[i]->o.check)
			n += cfg->route[i]->nbackend;
	if (!n)
		return 0;
	if (!(probes = calloc(n, sizeof(*probes))))
		return -ENOMEM;
	nprobes = 0;
	for (unsigned i = 0; i < cfg->nroutes; i++)
		for (unsigned b = 0; cfg->route[i]->o.check && b < cfg->route[i]->nbackend; b++)
			probes[nprobes++] = (struct probe){ .r = cfg->route[i], .b = b, .fd = -1,
							    .due_ms = now };
	if (pipe2(stop_pipe, O_CLOEXEC)) {
		int e = errno;
		free(probes);
		probes = NULL;
		return -e;
	}
	if ((errno = pthread_create(&thread, NULL, health_main, NULL))) {
		int e = errno;
		close(stop_pipe[0]);
		close(stop_pipe[1]);
		free(probes);
		probes = NULL;
		return -e;
	}
	started = 1;
	return 0;
}

void health_stop(void)
{
	if (!started)
		return;
	if (write(stop_pipe[1], "x", 1) < 0) {
		/* the pipe is ours and empty: cannot fail */
	}
	pthread_join(thread, NULL);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	/* checks in flight end without a verdict */
	for (unsigned i = 0; i < nprobes; i++)
		if (probes[i].fd >= 0)
			close(probes[i].fd);
	free(probes);
	probes = NULL;
	nprobes = 0;
	started = 0;
}
