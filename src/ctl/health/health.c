/* SPDX-License-Identifier: MIT */
/* health: see health.h. */
#define _GNU_SOURCE
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "check_proto.h"
#include "log.h"
#include "worker.h"

#define MAX_PROBES (MAX_ROUTES * MAX_BACKENDS)

/* A route's check, parsed once per start (check_spec.h), its regex
 * compiled once. */
struct check_run {
	struct check_spec spec;
	regex_t re;
	int has_re;
};

enum probe_phase { PH_IDLE, PH_CONNECT, PH_SEND, PH_READ };

/* One per backend of a route with checks. Each has its own schedule: a
 * slow or silent backend holds only its own probe, never another's. */
struct probe {
	struct route *r;
	unsigned b;
	const struct check_run *run;
	int fd;               /* -1: idle, waiting for due_ms */
	uint8_t phase;        /* enum probe_phase */
	uint64_t due_ms;      /* idle: when the next check starts */
	uint64_t started_ms;  /* in flight: when it started */
	uint64_t deadline_ms; /* in flight: when it fails as timed out */
	uint8_t *req;         /* the request (check_request), sent from req_off on */
	size_t req_len, req_off;
	uint8_t *buf;         /* the answer so far (CHECK_READ_MAX) */
	size_t n;
};

static pthread_t thread;
static int started, stop_pipe[2] = { -1, -1 };
static struct probe *probes;
static unsigned nprobes;
static struct check_run *runs;
static unsigned nruns;

static void record(struct route *r, unsigned b, int ok, const char *why)
{
	struct backend_health *h = r->health[b];
	char text[400];

	__atomic_add_fetch(ok ? &h->checks_ok : &h->checks_failed, 1, __ATOMIC_RELAXED);
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
	p->phase = PH_IDLE;
	free(p->req);
	free(p->buf);
	p->req = p->buf = NULL;
	p->n = p->req_len = p->req_off = 0;
	p->due_ms = p->started_ms + p->r->o.check_interval_ms;
	if (p->due_ms < now)
		p->due_ms = now;
}

/* The connection is up: a tcp check is over; the others send their
 * request (or, for a server that speaks first, read). Returns 1 when the
 * check ended (recorded), 0 when it goes on. */
static int probe_connected(struct probe *p)
{
	const struct check_spec *c = &p->run->spec;

	if (c->kind == CHECK_TCP) {
		record(p->r, p->b, 1, NULL);
		return 1;
	}
	p->req = malloc(CHECK_REQUEST_MAX);
	p->buf = malloc(CHECK_READ_MAX);
	if (!p->req || !p->buf) {
		log_warn("health check of %s: out of memory; no verdict", p->r->backend[p->b].addr.text);
		return 1;
	}
	p->req_len = check_request(c, addr_is_inet(&p->r->backend[p->b].addr)
					      ? p->r->backend[p->b].addr.text : "localhost",
				   p->req, CHECK_REQUEST_MAX);
	p->phase = p->req_len ? PH_SEND : PH_READ;
	return 0;
}

/* Sends what the kernel takes of the request. 1: the check ended. */
static int probe_send(struct probe *p)
{
	while (p->req_off < p->req_len) {
		ssize_t k = send(p->fd, p->req + p->req_off, p->req_len - p->req_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (k < 0) {
			record(p->r, p->b, 0, strerror(errno));
			return 1;
		}
		p->req_off += (size_t)k;
	}
	p->phase = PH_READ;
	return 0;
}

/* Reads what came (bounded: CHECK_READ_MAX in all) and asks for the
 * verdict. 1: the check ended. */
static int probe_read(struct probe *p)
{
	const struct check_run *run = p->run;
	char why[300];
	int eof = 0;

	for (;;) {
		ssize_t k = recv(p->fd, p->buf + p->n, CHECK_READ_MAX - p->n, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			break;
		if (k < 0) {
			/* a reset after a whole answer still has its verdict */
			enum check_result v = p->n ? check_verdict(&run->spec, run->has_re ? &run->re : NULL,
								  p->buf, p->n, 1, why, sizeof(why))
						   : CHECK_BAD;
			if (v == CHECK_OK)
				record(p->r, p->b, 1, NULL);
			else
				record(p->r, p->b, 0, p->n ? why : strerror(errno));
			return 1;
		}
		p->n += (size_t)k;
		if (!k || p->n == CHECK_READ_MAX) {
			eof = 1;
			break;
		}
	}
	enum check_result v = check_verdict(&run->spec, run->has_re ? &run->re : NULL, p->buf, p->n,
					    eof, why, sizeof(why));
	if (v == CHECK_MORE)
		return 0;
	record(p->r, p->b, v == CHECK_OK, why);
	return 1;
}

/* Starts a check: a non-blocking connect. Leaves p in flight, or idle
 * again when the connect decided at once (a Unix socket, a refusal). */
static void probe_start(struct probe *p, uint64_t now)
{
	const struct addr *a = &p->r->backend[p->b].addr;

	p->started_ms = now;
	p->deadline_ms = now + p->r->o.check_timeout_ms;
	p->fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	p->phase = PH_CONNECT;
	if (p->fd < 0) {
		log_warn("health check of %s: socket: %s", a->text, strerror(errno));
		/* our problem, not the backend's: no verdict */
	} else if (connect(p->fd, (const struct sockaddr *)&a->ss, a->len) == 0) {
		if (!probe_connected(p))
			return;
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

/* An in-flight probe's descriptor is ready: its next step. 1: it ended. */
static int probe_step(struct probe *p, short revents)
{
	if (p->phase == PH_CONNECT) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			record(p->r, p->b, 0, strerror(err));
			return 1;
		}
		if (probe_connected(p))
			return 1;
	}
	if (p->phase == PH_SEND && probe_send(p))
		return 1;
	if (p->phase == PH_READ && (revents & (POLLIN | POLLHUP | POLLERR)))
		return probe_read(p);
	return 0;
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
				pfd[n++] = (struct pollfd){ .fd = probes[i].fd,
							    .events = probes[i].phase == PH_READ ? POLLIN
												 : POLLOUT };
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
			if (rc > 0 && pfd[k].revents && probe_step(p, pfd[k].revents)) {
				probe_done(p, now);
			} else if (now >= p->deadline_ms) {
				record(p->r, p->b, 0, p->phase == PH_CONNECT ? "check timed out (connect)"
						      : p->phase == PH_SEND ? "check timed out (sending)"
						      : "check timed out (no whole answer)");
				probe_done(p, now);
			}
		}
	}
	return NULL;
}

/* The checks of cfg's routes, parsed (config_finalize accepted each). */
static int runs_build(struct config *cfg)
{
	char why[300];

	if (!(runs = calloc(cfg->nroutes, sizeof(*runs))))
		return -ENOMEM;
	nruns = cfg->nroutes;
	for (unsigned i = 0; i < cfg->nroutes; i++) {
		struct check_run *run = &runs[i];
		if (!cfg->route[i]->o.check)
			continue;
		if (check_spec_parse(cfg->route[i]->o.check_text, &run->spec, why, sizeof(why))) {
			log_warn("route %s: check: %s; tcp checks instead", cfg->route[i]->name, why);
			run->spec.kind = CHECK_TCP; /* never: config_finalize refused it */
		}
		if (run->spec.regex) {
			if (regcomp(&run->re, run->spec.expect, REG_EXTENDED | REG_NOSUB)) {
				log_warn("route %s: check: the regex does not compile; tcp checks "
					 "instead", cfg->route[i]->name);
				run->spec.kind = CHECK_TCP;
			} else {
				run->has_re = 1;
			}
		}
	}
	return 0;
}

static void runs_free(void)
{
	for (unsigned i = 0; i < nruns; i++)
		if (runs[i].has_re)
			regfree(&runs[i].re);
	free(runs);
	runs = NULL;
	nruns = 0;
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
	if (runs_build(cfg) || !(probes = calloc(n, sizeof(*probes)))) {
		runs_free();
		return -ENOMEM;
	}
	nprobes = 0;
	for (unsigned i = 0; i < cfg->nroutes; i++)
		for (unsigned b = 0; cfg->route[i]->o.check && b < cfg->route[i]->nbackend; b++)
			probes[nprobes++] = (struct probe){ .r = cfg->route[i], .b = b, .fd = -1,
							    .run = &runs[i], .due_ms = now };
	if (pipe2(stop_pipe, O_CLOEXEC)) {
		int e = errno;
		free(probes);
		probes = NULL;
		runs_free();
		return -e;
	}
	if ((errno = pthread_create(&thread, NULL, health_main, NULL))) {
		int e = errno;
		close(stop_pipe[0]);
		close(stop_pipe[1]);
		free(probes);
		probes = NULL;
		runs_free();
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
	for (unsigned i = 0; i < nprobes; i++) {
		if (probes[i].fd >= 0)
			close(probes[i].fd);
		free(probes[i].req);
		free(probes[i].buf);
	}
	free(probes);
	probes = NULL;
	nprobes = 0;
	runs_free();
	started = 0;
}
