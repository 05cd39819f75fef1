/* SPDX-License-Identifier: MIT */
/* worker: the event loop. One turn: wait for events (until the first
 * session deadline at most; no wait when sessions are queued with work
 * left), dispatch them, run the queued sessions and the due timers, keep
 * house every SCAN_MS, free what closed during the turn. */
#define _GNU_SOURCE
#include "worker.h"
#include "listener.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "log.h"
#include "qsbr.h"
#include "session.h"
#include "session_handoff.h"
#include "waitq.h"

#define MAX_EVENTS      256
#define SCAN_MS         100 /* housekeeping: pool trims, paused accepts (no session) */
#define ACCEPT_BUDGET   64  /* accepts per listener event before other work */
#define FD_PAUSE_MS     100 /* accept pause after EMFILE/ENFILE */
#define BUF_POOL_KEEP   256 /* idle copy buffers a worker keeps */
#define GIVE_BACK_MS    500 /* an upgrade waits this long for sessions going back to copy */
#define BYTES_FLUSH_MS  250 /* live sessions' bytes reach the route counters this often:
			     * a scrape is at most this stale; only sessions that
			     * moved bytes are visited */

/* The precise clock, read only when busy polling needs microseconds. */
static uint64_t now_precise_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static char *buf_alloc(size_t size)
{
	void *p;

	if (size < BUF_POOL_MMAP_MIN)
		return malloc(size);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void buf_free(char *buf, size_t size)
{
	if (size < BUF_POOL_MMAP_MIN)
		free(buf);
	else
		munmap(buf, size);
}

char *buf_pool_get(struct buf_pool *bp)
{
	char *b = bp->nfree ? bp->free[--bp->nfree] : buf_alloc(bp->size);

	if (b && ++bp->used > bp->peak)
		bp->peak = bp->used;
	return b;
}

void buf_pool_put(struct buf_pool *bp, char *buf)
{
	bp->used--;
	if (bp->nfree < bp->max)
		bp->free[bp->nfree++] = buf;
	else
		buf_free(buf, bp->size);
}

/* The pipe pool's rule (pipe_pool_trim), for buffers. */
unsigned buf_pool_trim(struct buf_pool *bp)
{
	unsigned freed = 0;

	if (bp->peak > bp->used)
		bp->peak -= (bp->peak - bp->used + 63) / 64;
	else
		bp->peak = bp->used;
	while (bp->nfree && bp->used + bp->nfree > bp->peak + BUF_POOL_HEADROOM &&
	       freed < BUF_POOL_TRIM_BATCH) {
		buf_free(bp->free[--bp->nfree], bp->size);
		freed++;
	}
	return freed;
}

void buf_pool_destroy(struct buf_pool *bp)
{
	while (bp->nfree)
		buf_free(bp->free[--bp->nfree], bp->size);
	free(bp->free);
	bp->free = NULL;
}

uint64_t worker_stalled_ms(const struct worker *w, uint64_t now_ms)
{
	uint64_t last = __atomic_load_n(&w->turn_ms, __ATOMIC_RELAXED);

	return now_ms > last && now_ms - last > WORKER_STALL_MS ? now_ms - last : 0;
}

/* ---- worker_call's mailbox ------------------------------------------------ */

static void call_init(struct worker *w)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->call_lock, NULL);
	pthread_mutex_init(&w->adopt_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->call_done, &ca);
	pthread_condattr_destroy(&ca);
}

/* The loop's side: run what waits, under the lock, so the caller's wait
 * ends only after fn returned (its arg is the caller's stack). */
static void call_serve(struct worker *w)
{
	pthread_mutex_lock(&w->call_lock);
	if (w->call_fn) {
		w->call_fn(w, w->call_arg);
		w->call_fn = NULL;
		pthread_cond_broadcast(&w->call_done);
	}
	__atomic_store_n(&w->call_pending, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&w->call_lock);
}

int worker_call(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg,
		int timeout_ms)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->call_lock);
	while (w->call_fn && rc == 0) /* another caller's request first */
		rc = pthread_cond_timedwait(&w->call_done, &w->call_lock, &until);
	if (rc == 0) {
		w->call_fn = fn;
		w->call_arg = arg;
		__atomic_store_n(&w->call_pending, 1, __ATOMIC_RELEASE);
		worker_wake(w);
		while (w->call_fn == fn && w->call_arg == arg && rc == 0)
			rc = pthread_cond_timedwait(&w->call_done, &w->call_lock, &until);
		if (w->call_fn == fn && w->call_arg == arg) {
			w->call_fn = NULL; /* not taken: withdrawn, it never runs */
			rc = ETIMEDOUT;
		} else {
			rc = 0;
		}
	}
	pthread_mutex_unlock(&w->call_lock);
	return rc ? -ETIMEDOUT : 0;
}

int worker_init(struct worker *w, unsigned id, struct shared *sh, const int *listen_fds)
{
	const struct config *cfg = sh->cfg;
	struct epoll_event ev = { .events = EPOLLIN };
	unsigned pipes;

	memset(w, 0, sizeof(*w));
	call_init(w);
	w->id = id;
	w->sh = sh;
	w->cfg = cfg;
	w->wake.kind = EV_WAKE;
	w->wake.fd = -1;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return -errno;
	w->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->wake.fd < 0)
		return -errno;
	ev.data.ptr = &w->wake;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake.fd, &ev))
		return -errno;
	/* The process-wide pipe bound, shared out evenly. */
	pipes = (unsigned)(cfg->max_pipes / cfg->workers);
	if (pipe_pool_init(&w->pipes, pipes, (unsigned)cfg->pipe_size))
		return -ENOMEM;
	w->bufs.size = cfg->buffer_size;
	w->bufs.max = BUF_POOL_KEEP;
	w->bufs.free = calloc(BUF_POOL_KEEP, sizeof(char *));
	if (!w->bufs.free)
		return -ENOMEM;
	worker_set_listeners(w, cfg, listen_fds);
	w->now_ms = now_monotonic_ms();
	w->turn_ms = w->now_ms;
	return worker_engines_init(w, cfg);
}

int worker_engine_start(struct worker *w, const struct engine *e)
{
	int r = 0;

	if (!e || w->engine_on[e->id])
		return 0;
	if (e->worker_init && (r = e->worker_init(w)) < 0)
		return r;
	w->engine_on[e->id] = 1;
	return 0;
}

int worker_engines_init(struct worker *w, const struct config *cfg)
{
	int r;

	for (unsigned i = 0; i < cfg->nroutes; i++) {
		const struct engine_choice *c = &engine_choices[cfg->route[i]->o.engine];
		if ((r = worker_engine_start(w, c->session)) || (r = worker_engine_start(w, c->start)) ||
		    (r = worker_engine_start(w, c->stream)))
			return r;
	}
	return 0;
}

/* The engines this worker runs, for the loop's hooks. */
#define FOR_ENGINES(w, e)                                                                 \
	for (unsigned e##_i = 0; e##_i < engine_nengines; e##_i++)                          \
		for (const struct engine *e = engines[e##_i]; e && (w)->engine_on[e##_i]; e = NULL)

void worker_counters_total(const struct worker *ws, unsigned n, struct counters *t)
{
	uint64_t *dst = (uint64_t *)t;

	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < n; i++) {
		const uint64_t *src = (const uint64_t *)&ws[i].ctr;
		for (size_t k = 0; k < sizeof(*t) / sizeof(uint64_t); k++)
			dst[k] += __atomic_load_n(&src[k], __ATOMIC_RELAXED);
	}
}

int worker_watch(struct worker *w, int fd, uint32_t events, void *ptr, uint32_t *handle)
{
	struct epoll_event ev = { .events = events, .data.ptr = ptr };

	if (w->waiter) {
		int h = w->waiter->watch(w, fd, events, ptr);

		if (h > 0) {
			*handle = (uint32_t)h;
			return 0;
		}
	}
	*handle = 0; /* epoll: the ring had no room for it now */
	return epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int worker_rewatch(struct worker *w, int fd, uint32_t events, void *ptr, uint32_t *handle)
{
	struct epoll_event ev = { .events = events, .data.ptr = ptr };

	if (*handle)
		return w->waiter->rewatch(w, handle, events);
	return epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &ev) ? -errno : 0;
}

void worker_unwatch(struct worker *w, int fd, uint32_t *handle)
{
	if (*handle)
		w->waiter->unwatch(w, *handle);
	else
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
	*handle = 0;
}

void worker_unwatch_close(struct worker *w, int fd, uint32_t *handle)
{
	if (*handle) /* (epoll forgets it with the close: no system call for it) */
		w->waiter->unwatch(w, *handle);
	*handle = 0;
	close(fd);
}

void worker_set_listeners(struct worker *w, const struct config *cfg, const int *fds)
{
	w->nlst = cfg->nlst;
	for (unsigned i = 0; i < cfg->nlst; i++) {
		w->lst[i] = (struct listener){ .kind = EV_LISTENER, .fd = fds[i],
					       .addr = cfg->lst[i].addr, .grp = &cfg->lst[i] };
		/* Accepted sockets inherit TCP_NODELAY from their listener: one
		 * setsockopt here instead of one per connection. Set on every
		 * socket a worker takes, inherited ones (upgrade) included. */
		if (fds[i] >= 0 && cfg->lst[i].addr->ss.ss_family != AF_UNIX) {
			int one = 1;
			setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
	}
	w->cfg = cfg;
}

void worker_listeners_arm(struct worker *w, int on)
{
	/* Paused on EMFILE: a session closing now (which frees a --max-conns
	 * slot, not necessarily a descriptor) must not bring accept back
	 * before the pause ends, or each close is one more failed accept. */
	if (on && w->accept_resume_ms)
		return;
	for (unsigned i = 0; i < w->nlst; i++) {
		struct listener *l = &w->lst[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = l };

		if (l->fd < 0 || l->armed == on)
			continue;
		l->more = 0;
		if (!on) {
			worker_unwatch(w, l->fd, &l->watch);
			l->armed = 0;
			continue;
		}
		/* a shared socket (a Unix listener, or systemd's that the
		 * workers hold dups of: listener_keep) wakes one worker: only
		 * epoll can say so (EPOLLEXCLUSIVE), so it stays there */
		if (l->addr->ss.ss_family == AF_UNIX || listener_kept(l->addr)) {
			ev.events |= EPOLLEXCLUSIVE;
			l->watch = 0;
			if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, l->fd, &ev) == 0)
				l->armed = 1;
		} else if (worker_watch(w, l->fd, EPOLLIN, l, &l->watch) == 0) {
			l->armed = 1;
		}
	}
	if (on)
		w->paused_max_conns = 0;
}

static void listeners_close(struct worker *w)
{
	worker_listeners_arm(w, 0);
	for (unsigned i = 0; i < w->nlst; i++) {
		if (w->lst[i].fd >= 0)
			close(w->lst[i].fd);
		w->lst[i].fd = -1;
	}
}

static int accept_fd_error(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

void worker_fd_pause(struct worker *w, const char *what, int err)
{
	/* Out of descriptors or memory: a level-triggered listener would wake
	 * us again at once, and each accept would take the descriptor a
	 * backend socket needs; step back, the backlog keeps the clients. */
	if (!__atomic_exchange_n(&w->sh->fd_warned, 1, __ATOMIC_RELAXED))
		log_warn("%s: %s; pausing accepts for %d ms (raise ulimit -n or lower --max-conns); "
			 "logged once, counted in accept_fd_pauses", what, strerror(err), FD_PAUSE_MS);
	CTR_ADD(w, accept_fd_pauses, 1);
	worker_listeners_arm(w, 0);
	w->accept_resume_ms = w->now_ms + FD_PAUSE_MS;
}

/* One connection from l's queue into a session. Returns 1 when the queue
 * may hold more (a session started, or a connection gone before its
 * accept), 0 when it is empty, -errno when accepting must stop. */
static int accept_one(struct worker *w, struct listener *l)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	int fd = accept4(l->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM)
			return 1;
		return errno == EAGAIN ? 0 : -errno;
	}
	if (plen == 0 || plen > sizeof(peer)) { /* unnamed Unix peer */
		peer.ss_family = l->addr->ss.ss_family;
		plen = sizeof(sa_family_t);
	}
	__atomic_add_fetch(&w->sh->active, 1, __ATOMIC_RELAXED);
	if (session_new(w, l->grp, fd, (struct sockaddr *)&peer, plen) == -ENOMEM) {
		__atomic_sub_fetch(&w->sh->active, 1, __ATOMIC_RELAXED);
		log_warn("accept: out of memory for a session");
	}
	return 1;
}

static void listener_accept(struct worker *w, struct listener *l)
{
	const uint64_t max = w->cfg->max_conns;

	l->more = 0;
	l->turn = w->turns;
	for (unsigned n = 0; n < ACCEPT_BUDGET; n++) {
		int r;

		if ((uint64_t)__atomic_load_n(&w->sh->active, __ATOMIC_RELAXED) >= max) {
			/* Connections wait in the kernel's backlog until a slot frees. */
			worker_listeners_arm(w, 0);
			w->paused_max_conns = 1;
			CTR_ADD(w, max_conns_pauses, 1);
			return;
		}
		if ((r = accept_one(w, l)) > 0)
			continue;
		if (r < 0 && accept_fd_error(-r)) {
			worker_fd_pause(w, "accept", -r);
		} else if (r < 0) {
			log_warn("accept on %s: %s", l->addr->text, strerror(-r));
		}
		return;
	}
	/* the budget ran out first: epoll (level-triggered) says so again, a
	 * ring's poll (edge-triggered) does not */
	if (l->watch)
		l->more = w->accept_more = 1;
}

/* Listeners that stopped at their budget with connections left (ring). */
static void listeners_more(struct worker *w)
{
	w->accept_more = 0;
	for (unsigned i = 0; i < w->nlst; i++) {
		struct listener *l = &w->lst[i];

		if (l->more && l->turn == w->turns) /* its event came this turn: next one */
			w->accept_more = 1;
		else if (l->more && l->armed && !w->draining)
			listener_accept(w, l);
	}
}

/* Before a listener closes (drain, a reload without its address): every
 * connection in its queue becomes a session, whatever --max-conns says,
 * since closing the socket would reset them. The closer has stopped new
 * ones from arriving first (listener.h: listener_stop_syns, a Unix path
 * unlinked; or, after an upgrade, the new process stopped them on a socket
 * it does not keep). */
static void listener_drain(struct worker *w, struct listener *l)
{
	unsigned n = 0;
	int r = 1;

	if (l->fd < 0)
		return;
	while (n < 65536 && (r = accept_one(w, l)) > 0)
		n++;
	if (r < 0)
		log_warn("accept on %s before closing it: %s; connections still queued are reset",
			 l->addr->text, strerror(-r));
	if (n)
		log_debug("worker %u: %u queued connection%s of %s accepted before its close", w->id,
			  n, n == 1 ? "" : "s", l->addr->text);
}

/* A listener of the running table that the next one (a reload's) does not
 * hold: the main thread closes it once every worker has taken the table. */
static int leaving(const struct worker *w, const struct listener *l)
{
	for (unsigned i = 0; i < w->next_cfg->nlst; i++)
		if (w->next_fds[i] == l->fd)
			return 0;
	return 1;
}

/* SIGHUP's hand-off: leave epoll with every old listener, take the new
 * table, and come back in unless accepting is paused. The sockets stay open
 * and listening throughout (the main thread closes only the ones no longer
 * configured, after this), so a connection arriving meanwhile waits in the
 * backlog: nobody is refused. A listener the new table does not hold is
 * accepted empty first (the main thread has stopped new connections to it),
 * so its close resets nobody. Sessions keep the routes they started with. */
static void worker_apply_reload(struct worker *w, uint64_t gen)
{
	int paused = w->paused_max_conns || w->accept_resume_ms;

	int r = worker_engines_init(w, w->next_cfg);

	if (r)
		log_warn("worker %u: an engine of the new config could not start: %s", w->id,
			 strerror(-r));
	worker_listeners_arm(w, 0);
	for (unsigned i = 0; i < w->nlst; i++)
		if (leaving(w, &w->lst[i]))
			listener_drain(w, &w->lst[i]);
	worker_set_listeners(w, w->next_cfg, w->next_fds);
	if (!paused) /* else worker_scan() arms the new table when the pause ends */
		worker_listeners_arm(w, 1);
	waitq_reload(w); /* its waiters move to the new routes: new backends, new slots */
	__atomic_store_n(&w->reload_ack, gen, __ATOMIC_RELEASE);
}

/* The sessions whose deadline has come (timer.h): no session is looked at
 * before its time. */
static void run_timers(struct worker *w)
{
	struct timer *t;

	while ((t = timer_pop_due(&w->timers, w->now_ms)))
		session_timer_fired((struct session *)((char *)t - offsetof(struct session, timer)));
}

/* Housekeeping every SCAN_MS; no idle session is visited here (only those
 * that moved bytes, once per BYTES_FLUSH_MS). */
static void worker_scan(struct worker *w)
{
	pipe_pool_trim(&w->pipes);
	buf_pool_trim(&w->bufs);
	if (w->now_ms >= w->next_flush_ms) {
		w->next_flush_ms = w->now_ms + BYTES_FLUSH_MS;
		session_flush_bytes(w);
	}
	backend_errors_report(w->now_ms, 0); /* connect errors whose interval ended */
	if (w->draining)
		return;
	if (w->accept_resume_ms && w->now_ms >= w->accept_resume_ms) {
		w->accept_resume_ms = 0;
		worker_listeners_arm(w, 1);
	}
	if (w->paused_max_conns &&
	    (uint64_t)__atomic_load_n(&w->sh->active, __ATOMIC_RELAXED) < w->cfg->max_conns)
		worker_listeners_arm(w, 1);
}

/* After an upgrade's hand-over, a socket the new process keeps: what it
 * queued is the new process's (it accepts with the new config), so this
 * worker only closes its descriptor. */
static int kept_by_new_process(const struct worker *w, const struct listener *l)
{
	for (unsigned i = 0; i < w->sh->nkept; i++)
		if (w->sh->kept_fds[i] == l->fd)
			return 1;
	return 0;
}

/* the sessions' graceful closes spread over the drain (drain_spread):
 * their clients reconnect a few at a time, not all at its end */
static void drain_spread(struct worker *w)
{
	session_drain_spread(w, __atomic_load_n(&w->sh->drain_deadline_ms, __ATOMIC_RELAXED));
}

static void worker_start_drain(struct worker *w)
{
	struct handoff_target *t = __atomic_load_n(&w->sh->handoff, __ATOMIC_ACQUIRE);

	w->draining = 1;
	worker_listeners_arm(w, 0);
	for (unsigned i = 0; i < w->nlst; i++)
		if (!kept_by_new_process(w, &w->lst[i]))
			listener_drain(w, &w->lst[i]);
	listeners_close(w); /* new connects are refused from now on */
	if (t) { /* an upgrade's: what can move goes on in the new process */
		/* Sessions auto moved to io_uring go back to copy first: their
		 * operations in flight are cancelled, which takes a turn or two
		 * of the loop (handoff_run). */
		for (struct session *s = w->sessions; s; s = s->next)
			if (s->eng->give_back && !s->giving_back && s->eng->give_back(s) > 0) {
				s->giving_back = 1;
				w->giving_back++;
			}
		if (w->giving_back) {
			w->handoff_wait = 1;
			w->handoff_due_ms = w->now_ms + GIVE_BACK_MS;
			return;
		}
		session_hand_over(w, t);
	}
	drain_spread(w);
}

/* The upgrade's hand-over, once the sessions given back are back (or
 * GIVE_BACK_MS passed: those still on their way stay, and drain here). */
static void handoff_run(struct worker *w)
{
	if (w->giving_back && w->now_ms < w->handoff_due_ms)
		return;
	w->handoff_wait = 0;
	session_hand_over(w, __atomic_load_n(&w->sh->handoff, __ATOMIC_ACQUIRE));
	drain_spread(w);
}

void worker_adopt(struct worker *w, struct handoff_msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&w->adopt_lock);
	if (w->adopt_tail)
		w->adopt_tail->next = m;
	else
		w->adopt_head = m;
	w->adopt_tail = m;
	__atomic_store_n(&w->adopt_pending, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->adopt_lock);
	worker_wake(w);
}

/* The sessions handed over since the last turn become this worker's. */
static void adopt_run(struct worker *w)
{
	struct handoff_msg *m;

	pthread_mutex_lock(&w->adopt_lock);
	m = w->adopt_head;
	w->adopt_head = w->adopt_tail = NULL;
	__atomic_store_n(&w->adopt_pending, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&w->adopt_lock);
	while (m) {
		struct handoff_msg *next = m->next;
		if (session_adopt(w, m) == 0)
			CTR_ADD(w, adopted, 1);
		else
			CTR_ADD(w, adopt_failed, 1);
		m = next;
	}
}

static void free_dead(struct worker *w)
{
	struct session **pp = &w->dead;

	while (*pp) {
		struct session *s = *pp;
		if (s->in_runq) { /* still referenced by the run queue */
			pp = &s->dead_next;
			continue;
		}
		*pp = s->dead_next;
		session_free(s);
	}
}

static void run_queue(struct worker *w)
{
	struct session *q = w->runq;

	w->runq = NULL;
	while (q) {
		struct session *s = q;
		q = s->rq_next;
		s->in_runq = 0;
		if (s->state != S_CLOSED)
			session_resume(s);
	}
}

static int engines_busy(const struct worker *w)
{
	FOR_ENGINES(w, e)
		if (e->busy && e->busy(w))
			return 1;
	return 0;
}

void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];

	w->in_thread = 1;
	FOR_ENGINES(w, e) /* a ring that only this thread may use (uring) */
		if (e->thread_start)
			e->thread_start(w);
	worker_listeners_arm(w, 1);
	for (;;) {
		/* no sleep with work queued, or waiters to look at (waitq.h) */
		int timeout = w->runq || w->accept_more || __atomic_load_n(&w->wq_kicked, __ATOMIC_RELAXED)
				      ? 0 : SCAN_MS;
		uint64_t next = timer_next(&w->timers);
		int n;

		if (timeout && next < w->now_ms + (uint64_t)timeout)
			timeout = next > w->now_ms ? (int)(next - w->now_ms) : 0;

		/* Busy polling: right after an event the next one tends to come
		 * within microseconds (a reply, the peer's window opening);
		 * polling for it saves the sleep and the wake-up, the larger part
		 * of a proxy's added latency on a virtual machine. */
		if (w->cfg->busy_poll_us && !w->runq && now_precise_us() < w->spin_until_us)
			timeout = 0;
		FOR_ENGINES(w, e) /* queued work goes out; a drain-wait may shorten the sleep */
			if (e->before_wait)
				e->before_wait(w, &timeout);
		/* no balancing table is held while it waits: what a weight
		 * change replaces meanwhile goes without waiting for it (qsbr.h) */
		qsbr_offline(w->id);
		if (w->waiter) /* one system call: the turn's submit and the sleep */
			n = w->waiter->wait(w, evs, MAX_EVENTS, timeout);
		else
			n = epoll_wait(w->epfd, evs, MAX_EVENTS, timeout);
		qsbr_online(w->id);
		if (n < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		if (n > 0 && w->cfg->busy_poll_us)
			w->spin_until_us = now_precise_us() + w->cfg->busy_poll_us;
		w->now_ms = now_monotonic_ms();
		w->turns++;
		__atomic_store_n(&w->turn_ms, w->now_ms, __ATOMIC_RELAXED);
		for (int i = 0; i < n; i++) {
			uint8_t kind = *(uint8_t *)evs[i].data.ptr;

			switch (kind) {
			case EV_LISTENER:
				/* not when an earlier event of this batch paused
				 * accepting: the event predates the pause */
				if (!w->draining && ((struct listener *)evs[i].data.ptr)->armed)
					listener_accept(w, evs[i].data.ptr);
				break;
			case EV_CLIENT:
			case EV_BACKEND:
				session_event(evs[i].data.ptr, evs[i].events);
				break;
			case EV_ENGINE: {
				const struct engine *e = ((struct engine_fd *)evs[i].data.ptr)->e;
				e->worker_event(w);
				break;
			}
			case EV_WAKE: {
				uint64_t v;
				if (read(w->wake.fd, &v, sizeof(v)) < 0) {
					/* spurious: the flag below is what counts */
				}
				break;
			}
			}
		}
		/* after the events: connects that completed give their
		 * descriptors to the ring before more clients take new ones */
		if (w->accept_more)
			listeners_more(w);
		if (__atomic_load_n(&w->adopt_pending, __ATOMIC_ACQUIRE))
			adopt_run(w); /* an upgrade's old process handed sessions over */
		run_queue(w);
		waitq_run(w);
		if (w->cut_seen != backend_cut_gen()) { /* on_backend_down = close */
			w->cut_seen = backend_cut_gen(); /* first: a cut meanwhile sweeps again */
			session_cut_sweep(w);
		}
		run_timers(w);
		FOR_ENGINES(w, e)
			if (e->each_turn)
				e->each_turn(w);
		if (__atomic_load_n(&w->call_pending, __ATOMIC_ACQUIRE))
			call_serve(w); /* the admin socket's request (worker_call) */
		{
			uint64_t gen = __atomic_load_n(&w->reload_gen, __ATOMIC_ACQUIRE);
			if (gen != w->reload_ack && !w->draining)
				worker_apply_reload(w, gen);
		}
		if (!w->draining && __atomic_load_n(&w->sh->stopping, __ATOMIC_ACQUIRE))
			worker_start_drain(w);
		else if (w->handoff_wait)
			handoff_run(w);
		if (w->now_ms >= w->next_scan_ms) {
			w->next_scan_ms = w->now_ms + SCAN_MS;
			worker_scan(w);
		}
		if (w->draining && w->sessions &&
		    w->now_ms >= __atomic_load_n(&w->sh->drain_deadline_ms, __ATOMIC_RELAXED)) {
			while (w->sessions)
				session_close(w->sessions, "drain-timeout");
		}
		free_dead(w);
		if (w->draining && !w->sessions && !w->dead && !engines_busy(w) && !w->handoff_wait &&
		    !__atomic_load_n(&w->adopt_pending, __ATOMIC_ACQUIRE) &&
		    (!__atomic_load_n(&w->sh->adopting, __ATOMIC_ACQUIRE) ||
		     w->now_ms >= __atomic_load_n(&w->sh->drain_deadline_ms, __ATOMIC_RELAXED)))
			break;
	}
	FOR_ENGINES(w, e) /* what the last turn queued (a listener's unwatch) */
		if (e->thread_end)
			e->thread_end(w);
	backend_errors_report(w->now_ms, 1); /* no error goes unsaid at exit */
	qsbr_offline(w->id); /* it reads no table again: nobody waits for it */
	return NULL;
}

void worker_wake(struct worker *w)
{
	uint64_t one = 1;

	if (write(w->wake.fd, &one, sizeof(one)) < 0) {
		/* the counter is full: a wake-up is already pending */
	}
}

void worker_destroy(struct worker *w)
{
	listeners_close(w);
	FOR_ENGINES(w, e)
		if (e->worker_fini)
			e->worker_fini(w);
	timer_heap_free(&w->timers);
	buf_pool_destroy(&w->bufs);
	pipe_pool_destroy(&w->pipes);
	if (w->wake.fd >= 0)
		close(w->wake.fd);
	if (w->epfd >= 0)
		close(w->epfd);
	pthread_cond_destroy(&w->call_done);
	pthread_mutex_destroy(&w->call_lock);
	while (w->adopt_head) { /* handed over as it stopped: closed with the rest */
		struct handoff_msg *m = w->adopt_head;
		w->adopt_head = m->next;
		handoff_msg_free(m);
	}
	pthread_mutex_destroy(&w->adopt_lock);
}
