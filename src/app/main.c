/* SPDX-License-Identifier: MIT */
/* main: command dispatch and the proxy's process life: parse options, probe
 * the engines, bind listeners, start workers, then wait for signals.
 *   splicer -l 127.0.0.1:8080 -b 10.0.0.1:80 -b 10.0.0.2:80 --engine auto
 *   splicer demo                                                           */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access_log.h"
#include "activation.h"
#include "admin.h"
#include "backend_edit.h"
#include "backend.h"
#include "cmd.h"
#include "config.h"
#include "config_doc.h"
#include "dns.h"
#include "engine.h"
#include "listener.h"
#include "health.h"
#include "log.h"
#include "notify.h"
#include "privs.h"
#include "qsbr.h"
#include "reload.h"
#include "sandbox.h"
#include "stats_http.h"
#include "units.h"
#include "handoff.h"
#include "upgrade.h"
#include "waitq.h"
#include "worker.h"

/* "A, B, C" of a route's listen addresses, or of its backends with weights. */
static void addr_list(const struct route *r, int backends, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < (backends ? r->nbackend : r->nlisten) && n < len; i++) {
		const struct addr *a = backends ? &r->backend[i].addr : &r->listen[i];
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", a->text);
		if (backends && r->backend[i].weight != 1 && n < len)
			n += (size_t)snprintf(buf + n, len - n, " weight=%u", r->backend[i].weight);
	}
}

static void log_startup(const struct config *c, unsigned pipe_actual)
{
	char backends[2048], listens[1024], all[2048] = "", psz[16], bsz[16], lw[16];
	size_t n = 0;

	format_size(c->buffer_size, bsz, sizeof(bsz));
	format_size(pipe_actual ? pipe_actual : c->pipe_size, psz, sizeof(psz));
	log_info("splicer %s: %u route%s%s%s; workers %llu; buffer %s; pipe %s; busy-poll %llu us; "
		 "max-conns %llu; max-pipes %llu; access log %s", SPLICER_VERSION, c->nroutes,
		 c->nroutes == 1 ? "" : "s", c->file[0] ? " from " : "", c->file,
		 (unsigned long long)c->workers, bsz, psz, (unsigned long long)c->busy_poll_us,
		 (unsigned long long)c->max_conns, (unsigned long long)c->max_pipes, c->access_log);
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		addr_list(r, 0, listens, sizeof(listens));
		addr_list(r, 1, backends, sizeof(backends));
		format_size(r->o.lowat, lw, sizeof(lw));
		log_info("route %s: %s -> %s (%s); engine %s; lowat %s; timeouts: connect %llu ms, "
			 "idle %llu ms; checks %s", r->name, listens, backends,
			 balance_names[r->o.balance], engine_names[r->o.engine],
			 r->o.lowat ? lw : "off", (unsigned long long)r->o.connect_timeout_ms,
			 (unsigned long long)r->o.idle_timeout_ms, r->o.check_text);
		if (r->sni[0])
			log_info("route %s: for TLS clients naming %s%s%s", r->name, r->sni,
				 r->alpn[0] ? " and offering " : "", r->alpn);
	}
	for (unsigned i = 0; i < c->nlst && n < sizeof(all); i++)
		n += (size_t)snprintf(all + n, sizeof(all) - n, "%s%s", i ? ", " : "",
				      c->lst[i].addr->text);
	log_info("ready: listening on %s", all);
}

static void log_totals(struct worker *ws, unsigned n)
{
	struct counters t;

	worker_counters_total(ws, n, &t);
	char eng[512];
	size_t k = 0;

	/* "by engine: copy N, sockmap N; sockmap sessions N, sockmap fallbacks N" */
	k = (size_t)snprintf(eng, sizeof(eng), "by engine:");
	for (unsigned e = 0; e < engine_nengines && k < sizeof(eng); e++)
		if (t.engine[e][ENGINE_CTR_BYTES])
			k += (size_t)snprintf(eng + k, sizeof(eng) - k, " %s %llu,", engines[e]->name,
					      (unsigned long long)t.engine[e][ENGINE_CTR_BYTES]);
	for (unsigned e = 0; e < engine_nengines && k < sizeof(eng); e++)
		for (unsigned c = 0; c < engines[e]->ncounters && k < sizeof(eng); c++) {
			const char *name = engines[e]->counters[c].name;
			size_t len = strlen(name), cut = len > 6 && !strcmp(name + len - 6, "_total") ? 6 : 0;
			k += (size_t)snprintf(eng + k, sizeof(eng) - k, " ");
			for (size_t i = 0; i < len - cut && k + 1 < sizeof(eng); i++)
				eng[k++] = name[i] == '_' ? ' ' : name[i];
			eng[k < sizeof(eng) ? k : sizeof(eng) - 1] = '\0';
			k += (size_t)snprintf(eng + k, sizeof(eng) - k, " %llu,",
					      (unsigned long long)t.engine[e][c + 1]);
		}
	if (k && k < sizeof(eng) && eng[k - 1] == ',')
		eng[k - 1] = '\0';
	log_info("stopped: sessions %llu (no-backend %llu, all-backends-down %llu, idle-timeout %llu, "
		 "half-close-timeout %llu); bytes up %llu down %llu "
		 "(%s); auto switches %llu; "
		 "connect errors %llu, retries %llu; resets sent %llu; accept pauses fd %llu max-conns %llu; "
		 "bad proxy headers %llu",
		 (unsigned long long)t.accepted, (unsigned long long)t.no_backend,
		 (unsigned long long)t.all_down,
		 (unsigned long long)t.idle_timeouts, (unsigned long long)t.half_close_timeouts,
		 (unsigned long long)t.bytes_up,
		 (unsigned long long)t.bytes_down, eng,
		 (unsigned long long)t.auto_switches, (unsigned long long)t.connect_errors,
		 (unsigned long long)t.connect_retries, (unsigned long long)t.resets_sent,
		 (unsigned long long)t.accept_fd_pauses, (unsigned long long)t.max_conns_pauses,
		 (unsigned long long)t.proxy_header_errors);
}

/* What F_SETPIPE_SZ grants for the configured size: the kernel may refuse
 * it (fs.pipe-max-size for unprivileged users, fs.pipe-user-pages-soft),
 * and the operator should hear so once, at startup. */
static unsigned granted_pipe_size(const struct config *cfg)
{
	int p[2], got;

	if (pipe2(p, O_CLOEXEC))
		return 0;
	if (cfg->pipe_size && fcntl(p[1], F_SETPIPE_SZ, (int)cfg->pipe_size) < 0)
		log_warn("pipe size %llu refused (%s; see /proc/sys/fs/pipe-max-size and "
			 "fs.pipe-user-pages-soft): pipes keep the kernel's size",
			 (unsigned long long)cfg->pipe_size, strerror(errno));
	got = fcntl(p[1], F_GETPIPE_SZ);
	close(p[0]);
	close(p[1]);
	return got > 0 ? (unsigned)got : 0;
}

/* verbose 0, 1, 2 (-v, -vv): info, per-session lines, debug. */
static void set_log_level(const struct config *cfg)
{
	/* a reload sets it while workers read it: atomic, relaxed */
	__atomic_store_n(&log_level, LOG_INFO + (int)cfg->verbose > LOG_DEBUG ? LOG_DEBUG
									     : LOG_INFO + (int)cfg->verbose,
			 __ATOMIC_RELAXED);
}

/* A start that fails after binding leaves no socket file behind: the
 * first n listen groups are the ones this process bound. */
static int start_failed(const struct config *c, unsigned n)
{
	admin_stop();
	for (unsigned l = 0; l < n && l < c->nlst; l++)
		listener_unlink(c->lst[l].addr);
	return 1;
}

/* Heartbeats (worker.h): each worker that stops turning its loop is logged
 * once, and once more when it turns again. /health answers 503 meanwhile. */
static void watch_workers(struct worker *ws, unsigned n, char *stalled)
{
	uint64_t now = now_monotonic_ms();

	for (unsigned i = 0; i < n; i++) {
		uint64_t age = worker_stalled_ms(&ws[i], now);
		if (age && !stalled[i])
			log_err("worker %u has not turned its loop for %llu ms (blocked?): /health "
				"answers 503", i, (unsigned long long)age);
		else if (!age && stalled[i])
			log_warn("worker %u turns its loop again", i);
		stalled[i] = age != 0;
	}
}

/* The way out: SIGTERM's lame duck (/health 503 while the listeners still
 * accept), then the listeners close without dropping what they queued, then
 * the sessions drain; or, after an upgrade's hand-over, straight to the
 * drain (the new process has the sockets). */
struct stop {
	int stopping;        /* listeners closed, sessions draining */
	uint64_t lame_until; /* lame duck until then (monotonic ms; 0: none) */
	int handed_over;     /* the drain began with an upgrade's hand-over */
	int signalled;       /* a stop signal came since */
};

/* Stops accepting and starts the drain. Unless the sockets went to a new
 * process, new connections stop first (listener.h: listener_quiesce) and
 * the workers go on accepting for LISTENER_CLOSE_GRACE_MS, so the
 * handshakes under way land in the queues they accept empty before the
 * close. After a hand-over the workers close the sockets the new process
 * keeps without accepting again (upgrade_kept), and accept the others'
 * queues empty (the new process stopped their SYNs). */
static void stop_begin(struct reload_ctx *rl, struct stop *s, const char *why, int handed_over)
{
	int grace = 0;

	if (handed_over) {
		listener_unlink_enable(0); /* the paths are the new process's: first */
		stats_http_stop(); /* the new process answers /health now */
		rl->sh->nkept = upgrade_kept(&rl->sh->kept_fds); /* worker.c: not accepted from */
		/* the sessions that can move go to the new process as the
		 * workers stop (session_handoff.h); the rest drain here */
		__atomic_store_n(&rl->sh->handoff, upgrade_handoff_begin(), __ATOMIC_RELAXED);
	} else {
		for (unsigned l = 0; l < rl->cfg->nlst; l++)
			for (unsigned w = 0; w < rl->nw; w++)
				grace |= listener_quiesce(rl->cfg->lst[l].addr, rl->fds[w][l]) > 0;
		if (grace)
			usleep(LISTENER_CLOSE_GRACE_MS * 1000);
	}
	log_info("%s: stopping: no new connections; draining sessions for up to %llu ms", why,
		 (unsigned long long)rl->cfg->drain_timeout_ms);
	__atomic_store_n(&rl->sh->drain_deadline_ms, now_monotonic_ms() + rl->cfg->drain_timeout_ms,
			 __ATOMIC_RELAXED);
	s->stopping = 1;
	s->handed_over = handed_over;
	__atomic_store_n(&rl->sh->stopping, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < rl->nw; i++)
		worker_wake(&rl->ws[i]);
	if (rl->sh->handoff) /* the workers hand theirs over: `ctl upgrade` answers the counts */
		upgrade_handoff_finish(rl->sh->handoff, rl->nw);
	if (handed_over) /* last: it may be finishing `ctl upgrade`'s answer */
		admin_stop(); /* the new process answers ctl now */
}

/* SIGTERM, SIGINT (`ctl drain` sends SIGTERM). The lame duck is for a load
 * balancer that probes /health: without a stats endpoint there is nobody
 * to tell, and SIGINT is an operator at a terminal. During an upgrade
 * (upgrade.h): a new process that is ready takes over and this one drains;
 * one that is not is sent SIGTERM, and this one stops as it would have. */
static void stop_signal(struct reload_ctx *rl, struct stop *s, int sig)
{
	const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
	uint64_t now = now_monotonic_ms();

	if (upgrade_pending() && upgrade_poll(now)) {
		log_info("%s during the upgrade: the new process is ready: it serves on, this one "
			 "drains", name);
		stop_begin(rl, s, "upgrade", 1);
		s->signalled = 1;
		return;
	}
	upgrade_abandon(name); /* when one is starting */
	if (s->stopping && s->handed_over && !s->signalled) {
		/* the drain is the upgrade's, not a signal's: this is the first */
		log_info("%s: draining since the upgrade's hand-over already; a second signal closes "
			 "every session now", name);
		s->signalled = 1;
		return;
	}
	if (s->stopping) {
		log_info("second signal: closing every session now");
		__atomic_store_n(&rl->sh->drain_deadline_ms, now, __ATOMIC_RELAXED);
		for (unsigned i = 0; i < rl->nw; i++)
			worker_wake(&rl->ws[i]);
		return;
	}
	if (s->lame_until) {
		stop_begin(rl, s, "second signal: lame duck cut short", 0);
		return;
	}
	notify_send("STOPPING=1\nSTATUS=draining");
	if (stats_http_lameduck()) { /* `ctl lameduck`: the load balancer had its time */
		stop_begin(rl, s, sig == SIGTERM ? "SIGTERM after ctl lameduck" : name, 0);
		return;
	}
	if (sig == SIGTERM && rl->cfg->lameduck_ms && strcmp(rl->cfg->stats, "off")) {
		stats_http_set_lameduck();
		s->lame_until = now + rl->cfg->lameduck_ms;
		log_info("SIGTERM: lame duck: /health answers 503 while the listeners accept for %llu ms "
			 "more; then they close and sessions drain for up to %llu ms",
			 (unsigned long long)rl->cfg->lameduck_ms,
			 (unsigned long long)rl->cfg->drain_timeout_ms);
		return;
	}
	stop_begin(rl, s, name, 0);
}

/* SIGUSR2 (`ctl upgrade` sends it): upgrade.h. */
static void upgrade_signal(struct reload_ctx *rl, const struct stop *s)
{
	if (s->stopping || s->lame_until)
		upgrade_refuse("SIGUSR2 while stopping: ignored");
	else if (stats_http_lameduck()) /* the new process would answer /health 200 */
		upgrade_refuse("SIGUSR2 during the lame duck (ctl lameduck): ignored");
	else if (__atomic_load_n(&rl->sh->adopting, __ATOMIC_ACQUIRE))
		/* they would stay here to drain: the next upgrade waits for them */
		upgrade_refuse("SIGUSR2 while the sessions of the last upgrade still come: ignored; "
			       "ask again in a moment");
	else
		upgrade_start(rl->cfg, rl->fds, rl->nw, stats_http_fd(), admin_fd());
}

/* backend_on_capacity's hook: the waiting clients look again (waitq.h). */
static void capacity_cb(void *sh)
{
	waitq_kick(sh);
}

/* backend_on_cut's hook: every worker looks at its sessions at once
 * (on_backend_down = close), not at its next tick. */
static void cut_cb(void *arg)
{
	const struct shared *sh = arg;

	for (unsigned i = 0; i < sh->nworkers; i++)
		worker_wake(&sh->workers[i]);
}

/* Runs the proxy until SIGTERM/SIGINT and the drain that follows. Takes
 * cfg (heap) and frees it, and every config a SIGHUP replaced it with. */
static int run_proxy(struct config *cfg, int argc, char **argv)
{
	struct reload_ctx rl = { .argc = argc, .argv = argv };
	struct shared sh = { .cfg = cfg };
	struct worker *ws;
	int (*fds)[MAX_LISTENERS];
	char *joined; /* a thread may be joined once only */
	char *stalled; /* heartbeat missed, logged */
	char err[256];
	sigset_t sigs;
	unsigned started = 0, nlisteners = 0;
	int rc = 0, hr;

	/* every engine a route uses is probed (and, before root is dropped,
	 * set up: sockmap loads its BPF program); a route whose engine cannot
	 * run here moves to its fallback, said once (reload does the same) */
	engine_routes_check(cfg);
	upgrade_apply_state(cfg); /* the old process's drain, disable, weight, health, rates */
	/* before any thread, session or listener of this process: upgrade.c.
	 * It runs as the user (root's only if there is no user) with what an
	 * upgrade needs: binding ports, and BPF for an engine that loads it */
	if ((hr = upgrade_spawner_start(cfg->user, privs_keep(cfg) | (engine_routes_need_setup(cfg) ?
								      PRIVS_KEEP_SETUP : 0))))
		log_warn("upgrade spawner process: %s; SIGUSR2 will be refused", strerror(-hr));
	/* Not root (systemd's User=, or an upgrade's new process): the
	 * capabilities the engines' setup needed go now, before any thread.
	 * Root: from here on every path is opened as the user (privs.h), so
	 * nothing the user can put in its directories steers what root opens */
	if (geteuid() != 0 && privs_drop(cfg->user, privs_keep(cfg), err, sizeof(err))) {
		log_err("%s", err);
		return 1;
	}
	if (privs_become_fs(cfg->user, err, sizeof(err))) {
		log_err("%s", err);
		return 1;
	}
	/* Signals go to this thread only, through sigtimedwait(). splice()
	 * into a socket the peer closed raises SIGPIPE: ignore it, the EPIPE
	 * return is handled. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/* from here on no thread waits for stderr (log.c says why a thread);
	 * after the mask: the writer must not take SIGTERM's default action */
	if ((hr = log_async_start()))
		log_warn("error log writer thread: %s; logging directly", strerror(-hr));
	if (access_log_open(cfg->access_log, (unsigned)cfg->log_format,
			    (unsigned)cfg->log_facility, err, sizeof(err))) {
		log_err("%s", err);
		return 1;
	}

	ws = calloc(cfg->workers, sizeof(*ws));
	sh.workers = ws; /* waitq.h: a slot freed in one worker wakes the others' waiters */
	sh.nworkers = (unsigned)cfg->workers;
	fds = calloc(cfg->workers, sizeof(*fds));
	joined = calloc(cfg->workers, 1);
	stalled = calloc(cfg->workers, 1);
	if (!ws || !fds || !joined || !stalled) {
		fprintf(stderr, "splicer: out of memory\n");
		return 1;
	}
	for (unsigned l = 0; l < cfg->nlst; l++) {
		int tmp[256];
		int act = activation_listener_open_n(cfg->lst[l].addr, (unsigned)cfg->workers, tmp,
						     &cfg->lst[l].lso, err, sizeof(err));
		if (act < 0 || (!act && upgrade_listener_open_n(cfg->lst[l].addr, (unsigned)cfg->workers,
								tmp, &cfg->lst[l].lso, err, sizeof(err)))) {
			log_err("route %s: %s", cfg->lst[l].route[0]->name, err);
			return start_failed(cfg, l);
		}
		for (unsigned i = 0; i < cfg->workers; i++)
			fds[i][l] = tmp[i];
		nlisteners = l + 1;
	}
	for (unsigned i = 0; i < cfg->workers; i++) {
		int r = worker_init(&ws[i], i, &sh, fds[i]);
		if (r) {
			log_err("worker %u: %s", i, strerror(-r));
			return start_failed(cfg, nlisteners);
		}
	}
	/* the routes' sockets are bound: root is no longer needed. Before the
	 * stats and admin threads, so no request is ever parsed as root (their
	 * sockets are bound as the user, CAP_NET_BIND_SERVICE kept) */
	if (privs_drop(cfg->user, privs_keep(cfg), err, sizeof(err)) ||
	    privs_check_run(cfg, err, sizeof(err))) {
		log_err("%s", err);
		return start_failed(cfg, nlisteners);
	}
	/* from here on, what the process will never need is gone: the stats
	 * and admin sockets, the threads and every request run inside it */
	if (sandbox_enter(cfg, err, sizeof(err))) {
		log_err("%s", err);
		return start_failed(cfg, nlisteners);
	}
	if (stats_http_start(cfg, ws, (unsigned)cfg->workers, &sh, err, sizeof(err))) {
		log_err("%s", err);
		return start_failed(cfg, nlisteners);
	}
	if (admin_start(cfg, ws, (unsigned)cfg->workers, &sh, err, sizeof(err))) {
		log_err("%s", err);
		stats_http_stop();
		return start_failed(cfg, nlisteners);
	}
	privs_warn_limits(cfg);
	/* the workers are the readers whose turns free replaced balancing
	 * tables (qsbr.h); backends that come back wake the waiting clients */
	if (qsbr_init((unsigned)cfg->workers)) {
		log_err("out of memory");
		stats_http_stop();
		return start_failed(cfg, nlisteners);
	}
	backend_on_capacity(capacity_cb, &sh);
	backend_on_cut(cut_cb, &sh);
	for (; started < cfg->workers; started++)
		if ((errno = pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]))) {
			log_err("pthread_create: %s", strerror(errno));
			break;
		}
	if (started < cfg->workers) {
		/* a worker short: its listeners would take connections nobody
		 * accepts, so stop the others and exit rather than half-run */
		__atomic_store_n(&sh.drain_deadline_ms, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&sh.stopping, 1, __ATOMIC_RELEASE);
		for (unsigned i = 0; i < started; i++)
			worker_wake(&ws[i]);
		for (unsigned i = 0; i < started; i++)
			pthread_join(ws[i].thread, NULL);
		stats_http_stop();
		return start_failed(cfg, nlisteners);
	}
	if ((hr = health_start(cfg)))
		log_warn("health checks not started: %s", strerror(-hr));
	dns_set_config(cfg);
	if ((hr = dns_start()))
		log_warn("resolver thread not started: %s; resolve= names keep their addresses",
			 strerror(-hr));
	/* "ready" once every thread runs: what a supervisor (or a test
	 * counting descriptors) sees next is the steady state */
	log_startup(cfg, engine_routes_use_pipes(cfg) ? granted_pipe_size(cfg) : 0);
	sandbox_log();
	sandbox_selftest(); /* the tests' proof; nothing without its variable */
	if (!upgrade_ready(cfg, ws, (unsigned)cfg->workers) && notify_send("READY=1\nSTATUS=forwarding") < 0)
		log_warn("NOTIFY_SOCKET is set but READY=1 could not be sent to it");
	rl.cfg = cfg;
	rl.ws = ws;
	rl.nw = started;
	rl.fds = fds;
	rl.sh = &sh;

	for (struct stop stop = { 0 }; started;) {
		/* while a new process starts, its "ready" is looked for every
		 * 5 ms, not at the next 100 ms tick: until then both accept, and
		 * the sessions wait for the hand-over (bench --upgrade: 95 ms of
		 * every ctl upgrade was this wait) */
		struct timespec tick = { 0, (upgrade_pending() ? 5 : 100) * 1000 * 1000 };
		int sig = sigtimedwait(&sigs, NULL, &tick);
		unsigned alive = 0;

		if (sig == SIGTERM || sig == SIGINT) {
			stop_signal(&rl, &stop, sig);
		} else if (sig == SIGUSR1) {
			int ro = access_log_reopen(err, sizeof(err));
			if (ro < 0)
				log_warn("SIGUSR1: %s; logging on to the old file", err);
			else if (ro > 0) /* not for -, syslog or off: nothing happened */
				log_info("SIGUSR1: access log %s reopened", cfg->access_log);
		} else if (sig == SIGUSR2) {
			upgrade_signal(&rl, &stop);
		} else if (sig == SIGHUP && (stop.stopping || stop.lame_until)) {
			log_warn("SIGHUP while stopping: ignored");
		} else if (sig == SIGHUP && upgrade_pending()) {
			log_warn("SIGHUP during an upgrade: ignored (the new process reads the file)");
		} else if (sig == SIGHUP) {
			if (reload_run(&rl) == 0) {
				cfg = rl.cfg;
				set_log_level(cfg);
			}
		}
		if (!stop.stopping && !stop.lame_until && dns_changed() && reload_dns(&rl) == 0)
			cfg = rl.cfg;
		if (!stop.stopping && !upgrade_pending()) {
			backend_edit_serve(&rl); /* ctl backend ROUTE add|del */
			cfg = rl.cfg;
		}
		if (upgrade_poll(now_monotonic_ms()))
			stop_begin(&rl, &stop, "upgrade", 1);
		if (stop.lame_until && !stop.stopping && now_monotonic_ms() >= stop.lame_until)
			stop_begin(&rl, &stop, "lame duck over", 0);
		reload_reap(&rl, now_monotonic_ms());
		qsbr_reclaim(); /* tables replaced since the last weight change */
		if (!stop.stopping) {
			watch_workers(ws, started, stalled);
			continue;
		}
		for (unsigned i = 0; i < started; i++) {
			if (!joined[i] && pthread_tryjoin_np(ws[i].thread, NULL) == 0)
				joined[i] = 1;
			alive += !joined[i];
		}
		if (!alive)
			break;
	}
	dns_stop();
	health_stop();
	stats_http_stop();
	admin_stop();
	backend_on_capacity(NULL, NULL); /* nobody changes a backend any more */
	backend_on_cut(NULL, NULL);
	qsbr_fini();                     /* nor reads a table: the workers ended */
	handoff_target_free(sh.handoff); /* an upgrade's: the workers ended */
	handoff_adopt_stop(); /* nothing is handed to a worker from here on */
	log_totals(ws, (unsigned)cfg->workers);
	access_log_close();
	for (unsigned i = 0; i < cfg->workers; i++)
		worker_destroy(&ws[i]);
	for (unsigned l = 0; l < cfg->nlst; l++)
		listener_unlink(cfg->lst[l].addr);
	free(ws);
	free(fds);
	free(joined);
	free(stalled);
	reload_free_all(&rl);
	config_free(cfg);
	free(cfg);
	return rc;
}

/* A descriptor among 0-2 that is closed (`splicer ... 2>&-`) would be taken
 * by the first socket opened, and log lines would go into a client's TCP
 * stream: /dev/null takes each such number first, for every subcommand. */
static void std_fds_open(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		int n;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		n = open("/dev/null", O_RDWR); /* the lowest free number: fd itself */
		if (n >= 0 && n != fd) {
			dup2(n, fd);
			close(n);
		}
	}
}

int main(int argc, char **argv)
{
	struct config *cfg;
	int r;

	std_fds_open();
	engine_registry_init();
	if (argc > 1 && !strcmp(argv[1], "demo"))
		return cmd_demo(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return cmd_bench(argc, argv);

	if (argc > 1 && !strcmp(argv[1], "check"))
		return cmd_check(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "config-reference"))
		return cmd_config_reference(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "recv"))
		return cmd_recv(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "send"))
		return cmd_send(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "ctl"))
		return cmd_ctl(argc, argv);

	if (!(cfg = calloc(1, sizeof(*cfg)))) {
		fprintf(stderr, "splicer: out of memory\n");
		return 1;
	}
	upgrade_init(argc, argv); /* what an upgrade handed over, if it did */
	activation_init(upgrade_inherited()); /* systemd's sockets, or their names after an upgrade */
	config_defaults(cfg);
	r = config_parse_args(cfg, argc, argv, 1);
	if (r || dns_fill(cfg, DNS_START) || config_finalize(cfg) || activation_check(cfg)) {
		config_free(cfg);
		free(cfg);
		return r > 0 ? 0 : 2;
	}
	set_log_level(cfg);
	r = run_proxy(cfg, argc, argv);
	/* what is still queued (the totals), unless stderr's reader is gone */
	log_sink_stop(&log_err_sink, 1000);
	return r;
}
