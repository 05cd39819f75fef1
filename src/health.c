/* health: see health.h. */
#define _GNU_SOURCE
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "worker.h"

#define MAX_PROBES (MAX_ROUTES * MAX_BACKENDS)

struct probe {
	struct route *r;
	unsigned b;
	int fd;
	uint64_t deadline_ms;
};

static pthread_t thread;
static int started, stop_pipe[2] = { -1, -1 };

static void record(struct route *r, unsigned b, int ok, const char *why)
{
	struct backend_health *h = r->health[b];
	char text[160];

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

static int probe_start(struct probe *p, struct route *r, unsigned b, uint64_t now)
{
	const struct addr *a = &r->backend[b].addr;

	p->r = r;
	p->b = b;
	p->deadline_ms = now + r->o.check_timeout_ms;
	p->fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0) {
		log_warn("health check of %s: socket: %s", a->text, strerror(errno));
		return -1; /* our problem, not the backend's: no verdict */
	}
	if (connect(p->fd, (const struct sockaddr *)&a->ss, a->len) == 0)
		return 1;
	if (errno == EINPROGRESS)
		return 0;
	record(r, b, 0, strerror(errno));
	close(p->fd);
	return -1;
}

/* One round: every due route's backends probed at once. */
static void round_run(struct config *cfg, uint64_t now)
{
	static struct probe probes[MAX_PROBES];
	struct pollfd pfd[MAX_PROBES + 1];
	unsigned n = 0;

	for (unsigned i = 0; i < cfg->nroutes; i++) {
		struct route *r = cfg->route[i];
		if (!r->o.check || now < r->next_check_ms)
			continue;
		r->next_check_ms = now + r->o.check_interval_ms;
		for (unsigned b = 0; b < r->nbackend; b++) {
			int s = probe_start(&probes[n], r, b, now);
			if (s == 1) {
				record(r, b, 1, NULL);
				close(probes[n].fd);
			} else if (s == 0) {
				n++;
			}
		}
	}
	while (n) {
		uint64_t t = now_monotonic_ms(), first = UINT64_MAX;
		for (unsigned k = 0; k < n; k++) {
			pfd[k] = (struct pollfd){ .fd = probes[k].fd, .events = POLLOUT };
			if (probes[k].deadline_ms < first)
				first = probes[k].deadline_ms;
		}
		pfd[n] = (struct pollfd){ .fd = stop_pipe[0], .events = POLLIN };
		int r = poll(pfd, n + 1, first > t ? (int)(first - t) : 0);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[n].revents)
			break; /* stopping */
		t = now_monotonic_ms();
		for (unsigned k = 0; k < n;) {
			struct probe *p = &probes[k];
			int done = 0;
			if (pfd[k].revents) {
				int err = 0;
				socklen_t len = sizeof(err);
				getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len);
				record(p->r, p->b, !err, err ? strerror(err) : NULL);
				done = 1;
			} else if (t >= p->deadline_ms) {
				record(p->r, p->b, 0, "check timed out");
				done = 1;
			}
			if (done) {
				close(p->fd);
				probes[k] = probes[--n];
				pfd[k] = pfd[n];
			} else {
				k++;
			}
		}
	}
	for (unsigned k = 0; k < n; k++)
		close(probes[k].fd);
}

static void *health_main(void *arg)
{
	struct config *cfg = arg;
	struct pollfd stop = { .fd = stop_pipe[0], .events = POLLIN };

	for (;;) {
		round_run(cfg, now_monotonic_ms());
		if (poll(&stop, 1, 50) > 0)
			break;
	}
	return NULL;
}

int health_start(struct config *cfg)
{
	int any = 0;

	for (unsigned i = 0; i < cfg->nroutes; i++)
		any |= cfg->route[i]->o.check != 0;
	if (!any)
		return 0;
	if (pipe2(stop_pipe, O_CLOEXEC))
		return -errno;
	if ((errno = pthread_create(&thread, NULL, health_main, cfg))) {
		int e = errno;
		close(stop_pipe[0]);
		close(stop_pipe[1]);
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
	started = 0;
}
