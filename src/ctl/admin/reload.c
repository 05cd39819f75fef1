/* SPDX-License-Identifier: MIT */
/* reload: see reload.h. */
#define _GNU_SOURCE
#include "reload.h"
#include "activation.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "backend.h"
#include "dns.h"
#include "engine.h"
#include "health.h"
#include "listener.h"
#include "sockopt.h"
#include "log.h"
#include "notify.h"
#include "privs.h"
#include "route_admit.h"
#include "stats_http.h"
#include "syslog_out.h"

/* The running values of what a reload cannot change, with a warning for
 * each one the file changed. */
static void keep_process_settings(const struct config *old, struct config *nw)
{
#define KEEP_NUM(f, name)                                                                   \
	do {                                                                                \
		if (nw->f != old->f)                                                        \
			log_warn("SIGHUP: %s changed; it needs a restart, keeping %llu", name,   \
				 (unsigned long long)old->f);                                \
		nw->f = old->f;                                                             \
	} while (0)
#define KEEP_TEXT(f, name)                                                                  \
	do {                                                                                \
		if (strcmp(nw->f, old->f))                                                  \
			log_warn("SIGHUP: %s changed; it needs a restart, keeping %s", name,     \
				 old->f);                                                    \
		memcpy(nw->f, old->f, sizeof(nw->f));                                       \
	} while (0)
	KEEP_NUM(workers, "workers");
	KEEP_NUM(buffer_size, "buffer_size");
	KEEP_NUM(pipe_size, "pipe_size");
	KEEP_NUM(max_pipes, "max_pipes");
	KEEP_NUM(max_conns, "max_conns");
	KEEP_NUM(busy_poll_us, "busy_poll");
	KEEP_NUM(sandbox, "sandbox");
	KEEP_TEXT(access_log, "log");
	if (nw->log_format != old->log_format || nw->log_facility != old->log_facility)
		log_warn("SIGHUP: log_format or log_facility changed; it needs a restart, keeping "
			 "%s and %s", access_log_formats[old->log_format],
			 syslog_facility_names[old->log_facility]);
	nw->log_format = old->log_format;
	nw->log_facility = old->log_facility;
	KEEP_TEXT(stats, "stats");
	KEEP_TEXT(user, "user");
	KEEP_TEXT(admin, "admin");
	nw->stats_addr = old->stats_addr;
#undef KEEP_NUM
#undef KEEP_TEXT
}

/* Index in the old listener table (its listen groups) of an equal address,
 * or -1. An ephemeral port (":0") never matches: binding wrote the kernel's
 * port into the old address, so the file asks for a new one. */
static int old_index(const struct config *old, const struct addr *a)
{
	for (unsigned k = 0; k < old->nlst; k++)
		if (addr_equal(old->lst[k].addr, a))
			return (int)k;
	return -1;
}

/* 1 if an old listener holds a's TCP port in a's family: until the old
 * ones close, the new sockets share it with them, which the in-use check
 * would take for another process (127.0.0.1:80 becoming 0.0.0.0:80). */
static int old_holds_port(const struct config *old, const struct addr *a)
{
	for (unsigned k = 0; k < old->nlst; k++) {
		const struct addr *o = old->lst[k].addr;
		if (o->ss.ss_family != a->ss.ss_family)
			continue;
		if (a->ss.ss_family == AF_INET &&
		    ((const struct sockaddr_in *)&o->ss)->sin_port ==
			    ((const struct sockaddr_in *)&a->ss)->sin_port)
			return 1;
		if (a->ss.ss_family == AF_INET6 &&
		    ((const struct sockaddr_in6 *)&o->ss)->sin6_port ==
			    ((const struct sockaddr_in6 *)&a->ss)->sin6_port)
			return 1;
	}
	return 0;
}

/* The old listeners nobody takes over: new connections stop reaching them
 * (listener.h: listener_quiesce) while the workers still accept, for the
 * handshakes under way to complete; the workers then accept their queues
 * empty as they take the new table, before the close below. */
static void quiesce_removed(const struct reload_ctx *r, const char *used)
{
	int grace = 0;

	for (unsigned k = 0; k < r->cfg->nlst; k++)
		for (unsigned w = 0; w < r->nw && !used[k]; w++)
			grace |= listener_quiesce(r->cfg->lst[k].addr, r->fds[w][k]) > 0;
	if (grace)
		usleep(LISTENER_CLOSE_GRACE_MS * 1000);
}

/* The sockets nw keeps from the running config take nw's listener options
 * (backlog, fastopen, defer_accept, mark, tos, keepalive and user timeout
 * of the connections accepted from now on), once every new socket is bound:
 * a reload that fails leaves the running sockets as they were. A refusal
 * (a mark without CAP_NET_ADMIN) is logged; the socket serves on. */
static void listeners_update(const struct reload_ctx *r, const struct config *nw,
			     int (*nfds)[MAX_LISTENERS], const char *used)
{
	char why[200];

	for (unsigned k = 0; k < nw->nlst; k++) {
		int kept = 0;
		for (unsigned o = 0; o < r->cfg->nlst && !kept; o++)
			kept = used[o] && r->fds[0][o] == nfds[0][k];
		for (unsigned w = 0; kept && w < r->nw; w++)
			if (sockopt_apply_listen(nfds[w][k], nw->lst[k].addr->ss.ss_family,
						 &nw->lst[k].lso, why, sizeof(why)) < 0) {
				log_warn("SIGHUP: listen %s: %s (the socket keeps its former value)",
					 nw->lst[k].addr->text, why);
				break;
			}
	}
}

static int last_ok = 1;      /* atomic: for /metrics */
static uint64_t last_unix_ms; /* atomic */

void reload_last(int *ok, uint64_t *unix_ms)
{
	*ok = __atomic_load_n(&last_ok, __ATOMIC_RELAXED);
	*unix_ms = __atomic_load_n(&last_unix_ms, __ATOMIC_RELAXED);
}

static int reload_try(struct reload_ctx *r);
static int swap_in(struct reload_ctx *r, struct config *nw, const char *who);

int reload_run(struct reload_ctx *r)
{
	int rc = reload_try(r);
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	__atomic_store_n(&last_ok, rc == 0, __ATOMIC_RELAXED);
	__atomic_store_n(&last_unix_ms, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000,
			 __ATOMIC_RELAXED);
	return rc;
}

static int reload_try(struct reload_ctx *r)
{
	struct config *old = r->cfg, *nw;
	int rc;

	reload_reap(r, now_monotonic_ms());
	if (!old->file[0]) {
		log_warn("SIGHUP: routes came from the command line, not a file (-c): nothing to reload");
		return -1;
	}
	notify_send("RELOADING=1");
	if (!(nw = calloc(1, sizeof(*nw)))) {
		log_err("SIGHUP: out of memory; keeping the running config");
		notify_send("READY=1");
		return -1;
	}
	config_defaults(nw);
	rc = config_parse_args(nw, r->argc, r->argv, 1);
	/* "auto" values are derived again (from a listener count that may have
	 * changed): they follow the running ones without a warning */
	uint64_t raw[3] = { nw->workers, nw->max_conns, nw->max_pipes };
	/* names with resolve=: the resolver thread's answers, no lookup */
	if (rc || dns_fill(nw, DNS_RELOAD) || config_finalize(nw)) {
		log_warn("SIGHUP: %s is not valid (the problems are above); keeping the running config",
			 old->file);
		config_free(nw);
		free(nw);
		notify_send("READY=1");
		return -1;
	}
	if (raw[0] == SETTING_AUTO)
		nw->workers = old->workers;
	if (raw[1] == SETTING_AUTO)
		nw->max_conns = old->max_conns;
	if (raw[2] == SETTING_AUTO)
		nw->max_pipes = old->max_pipes;
	keep_process_settings(old, nw);
	rc = swap_in(r, nw, "SIGHUP");
	notify_send("READY=1");
	return rc;
}

/* A copy of the running config without its run-time tables (config_finalize
 * builds them again, adopting the same run-time state by name) and without
 * the backends of resolve= names (dns_fill gives their current answers).
 * A route field that points to memory must be cleared here.
 * The whole-struct copies read fields the workers update atomically (the
 * round-robin cursor, the live count, the table pointer); each of those is
 * overwritten below before anything reads the copy, so the race is only in
 * the bytes thrown away: TSan is told so, rather than the copy being done
 * field by field (which would forget the next field added). */
__attribute__((no_sanitize_thread))
static struct config *config_clone(const struct config *old)
{
	struct config *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	memcpy(c, old, sizeof(*c));
	memset(c->lst, 0, sizeof(c->lst));
	c->nlst = 0;
	memset(c->route, 0, sizeof(c->route));
	c->nroutes = 0;
	for (unsigned i = 0; i < old->nroutes; i++) {
		struct route *r = malloc(sizeof(*r));
		unsigned n = 0;
		if (!r) {
			config_free(c);
			free(c);
			return NULL;
		}
		/* every pointer to run-time state is dropped here and taken again
		 * by config_finalize (a copied one would be released twice) */
		memcpy(r, old->route[i], sizeof(*r));
		r->tab = NULL;
		r->built_next = NULL;
		r->rr = 0;
		r->health = NULL;
		r->st = NULL;
		r->hist = NULL;
		r->live = 0;
		memset(&r->acl, 0, sizeof(r->acl));
		r->sources = NULL;
		r->has_queue = 0;
		r->has_backup = 0;
		for (unsigned b = 0; b < r->nbackend; b++)
			if (!r->backend[b].dns)
				r->backend[n++] = r->backend[b];
		r->nbackend = n;
		c->route[c->nroutes++] = r;
	}
	return c;
}

int reload_dns(struct reload_ctx *r)
{
	struct config *nw;
	int changed = 0;

	reload_reap(r, now_monotonic_ms());
	if (!(nw = config_clone(r->cfg))) {
		log_err("DNS: out of memory; keeping the running backends");
		return -1;
	}
	dns_fill(nw, DNS_REGEN);
	for (unsigned i = 0; i < nw->nroutes; i++) {
		const struct route *a = nw->route[i], *b = r->cfg->route[i];
		changed |= a->nbackend != b->nbackend;
		for (unsigned k = 0; k < a->nbackend && !changed; k++)
			changed |= strcmp(a->backend[k].spec, b->backend[k].spec) ||
				   a->backend[k].weight != b->backend[k].weight;
	}
	if (!changed || config_finalize(nw)) {
		if (changed)
			log_warn("DNS: the new addresses could not be put in force (the problems are "
				 "above); keeping the running backends");
		config_free(nw);
		free(nw);
		return changed ? -1 : 0;
	}
	return swap_in(r, nw, "DNS");
}

int reload_edit(struct reload_ctx *r, int (*edit)(struct config *nw, void *arg), void *arg)
{
	struct config *nw;
	int rc;

	reload_reap(r, now_monotonic_ms());
	if (!(nw = config_clone(r->cfg))) {
		log_err("ctl: out of memory; keeping the running backends");
		return -ENOMEM;
	}
	dns_fill(nw, DNS_REGEN); /* the resolver thread's answers, as reload_dns */
	if ((rc = edit(nw, arg)) || config_finalize(nw)) {
		if (!rc)
			log_warn("ctl: the change could not be put in force (the problems are above); "
				 "keeping the running backends");
		config_free(nw);
		free(nw);
		return rc ? rc : -EINVAL;
	}
	return swap_in(r, nw, "ctl") ? -ENOMEM : 0;
}

/* on_backend_down = close: the backends of old's routes that the route of
 * the same name in nw no longer has (a reload, a DNS answer, ctl backend
 * del) have their sessions closed, of every generation (the run-time state
 * is the backend's: backend.h). A route nw no longer has keeps its
 * sessions, as every route's sessions keep their route over a reload. */
static void cut_removed(const struct config *old, const struct config *nw)
{
	for (unsigned i = 0; i < old->nroutes; i++) {
		const struct route *o = old->route[i], *n = NULL;
		for (unsigned j = 0; j < nw->nroutes && !n; j++)
			if (!strcmp(nw->route[j]->name, o->name))
				n = nw->route[j];
		if (!n || n->o.on_backend_down != BACKEND_DOWN_CLOSE)
			continue;
		for (unsigned k = 0; k < o->nbackend; k++) {
			int kept = 0;
			for (unsigned b = 0; b < n->nbackend && !kept; b++)
				kept = n->health[b] == o->health[k];
			if (kept)
				continue;
			log_info("route %s: backend %s removed; its sessions are closed "
				 "(on_backend_down = close)", o->name, o->backend[k].addr.text);
			backend_cut(o->health[k], BACKEND_CUT_REMOVED);
		}
	}
}

/* Puts nw (finalized) in force: listeners kept or bound, the workers moved
 * to it, the old config retired until its sessions end. who: "SIGHUP" (a
 * reload), "DNS" (a DNS change) or "ctl" (ctl backend add/del), for the
 * messages. On failure nw is freed and the running config stays. */
static int swap_in(struct reload_ctx *r, struct config *nw, const char *who)
{
	int sighup = !strcmp(who, "SIGHUP");

	struct config *old = r->cfg;
	int (*nfds)[MAX_LISTENERS] = NULL;
	char used[MAX_LISTENERS] = { 0 }, err[256];
	struct addr *naddr[MAX_LISTENERS];
	unsigned kept = 0, opened = 0, closed = 0, k;
	int rc;

	/* a capability the process dropped at start cannot come back */
	if (privs_check_run(nw, err, sizeof(err))) {
		log_warn("%s: %s; keeping the running config", sighup ? "SIGHUP" : "DNS", err);
		goto fail_cfg;
	}
	if (r->nretired == r->retired_cap) {
		/* room for the running config to retire into, taken before
		 * anything changes: past this point the swap cannot fail on it */
		unsigned cap = r->retired_cap ? 2 * r->retired_cap : 16;
		struct retired *t = realloc(r->retired, cap * sizeof(*t));
		if (!t)
			goto fail_mem;
		r->retired = t;
		r->retired_cap = cap;
	}
	if (!(nfds = calloc(r->nw, sizeof(*nfds))))
		goto fail_mem;
	/* engines probed again: a sandbox may refuse now what it allowed at
	 * start (a route moved to an engine its seccomp profile blocks) */
	engine_routes_check(nw);
	/* listeners: keep, or bind */
	for (k = 0; k < nw->nlst; k++) {
		struct addr *a = nw->lst[k].addr;
		int o = old_index(old, a);
		naddr[k] = a;
		/* MPTCP or not and the device are the socket's for good: a
		 * change binds a new one beside it (options.md: reload) */
		if (o >= 0 && !used[o] && sockopt_listen_same_kind(r->fds[0][o], &nw->lst[k].lso)) {
			used[o] = 1;
			for (unsigned w = 0; w < r->nw; w++)
				nfds[w][k] = r->fds[w][o];
			kept++;
			continue;
		}
		int tmp[256];
		/* systemd's socket (activation.h), else a socket of splicer's own */
		int act = activation_listener_open_n(a, r->nw, tmp, &nw->lst[k].lso, err, sizeof(err));
		if (act < 0 || (!act && listener_open_n(a, r->nw, tmp, old_holds_port(old, a),
							&nw->lst[k].lso, err, sizeof(err)))) {
			log_warn("SIGHUP: route %s: %s; keeping the running config",
				 nw->lst[k].route[0]->name, err);
			/* close what this reload opened */
			for (unsigned j = 0; j < k; j++) {
				int reused = 0;
				for (unsigned m = 0; m < MAX_LISTENERS; m++)
					reused |= used[m] && r->fds[0][m] == nfds[0][j];
				if (reused)
					continue;
				for (unsigned w = 0; w < r->nw; w++)
					close(nfds[w][j]);
				listener_unlink(naddr[j]);
			}
			goto fail_cfg;
		}
		for (unsigned w = 0; w < r->nw; w++)
			nfds[w][k] = tmp[w];
		opened++;
	}
	listeners_update(r, nw, nfds, used);
	quiesce_removed(r, used);
	/* hand the table to every worker, and wait for each to take it (the
	 * removed listeners' queues accepted empty: worker.c) */
	r->gen++;
	for (unsigned w = 0; w < r->nw; w++) {
		r->ws[w].next_cfg = nw;
		memcpy(r->ws[w].next_fds, nfds[w], sizeof(nfds[w]));
		__atomic_store_n(&r->ws[w].reload_gen, r->gen, __ATOMIC_RELEASE);
		worker_wake(&r->ws[w]);
	}
	for (unsigned w = 0; w < r->nw; w++)
		while (__atomic_load_n(&r->ws[w].reload_ack, __ATOMIC_ACQUIRE) != r->gen)
			usleep(1000); /* a loop turn: microseconds, at most SCAN_MS */
	cut_removed(old, nw); /* no worker picks them any more */
	/* the old listeners nobody took over */
	for (k = 0; k < old->nlst; k++) {
		if (used[k])
			continue;
		int dup_seen = 0;
		for (unsigned w = 0; w < r->nw; w++) {
			/* Unix listeners are one socket and dups: close each fd once */
			dup_seen = 0;
			for (unsigned v = 0; v < w; v++)
				dup_seen |= r->fds[v][k] == r->fds[w][k];
			if (!dup_seen)
				close(r->fds[w][k]);
		}
		listener_unlink(old->lst[k].addr);
		closed++;
	}
	for (unsigned w = 0; w < r->nw; w++)
		memcpy(r->fds[w], nfds[w], sizeof(nfds[w]));
	free(nfds);
	/* source limits, checks and metrics follow the new routes */
	route_admit_resize(nw);
	for (unsigned i = 0; i < nw->nroutes; i++)
		backend_checks_apply(nw->route[i]);
	health_stop();
	if ((rc = health_start(nw)))
		log_warn("SIGHUP: health checks not restarted: %s", strerror(-rc));
	stats_http_set_config(nw);
	__atomic_store_n(&r->sh->cfg, nw, __ATOMIC_RELEASE);
	r->cfg = nw;
	r->retired[r->nretired++] = (struct retired){ old, now_monotonic_ms() }; /* room: made above */
	dns_set_config(nw);
	if (sighup)
		log_info("SIGHUP: reloaded %s: %u route%s; listeners kept %u, opened %u, closed %u",
			 nw->file, nw->nroutes, nw->nroutes == 1 ? "" : "s", kept, opened, closed);
	else
		log_info("%s: new backends in force for new sessions; running sessions finish where "
			 "they are (on_backend_down = close: a removed backend's are closed)", who);
	return 0;
fail_mem:
	log_err("%s: out of memory; keeping the running config", who);
fail_cfg:
	config_free(nw);
	free(nw);
	free(nfds);
	return -1;
}

/* The sessions of this generation, not the route's (route->st is shared
 * with the newer generations). */
static int sessions_left(const struct config *c)
{
	for (unsigned i = 0; i < c->nroutes; i++)
		if (__atomic_load_n(&c->route[i]->live, __ATOMIC_ACQUIRE))
			return 1;
	return 0;
}

void reload_reap(struct reload_ctx *r, uint64_t now_ms)
{
	for (unsigned i = 0; i < r->nretired;) {
		/* 10 s: also past any /metrics render or check round that still
		 * held the old pointer */
		struct retired *t = &r->retired[i];
		if (now_ms - t->since_ms >= 10000 && !sessions_left(t->cfg)) {
			config_free(t->cfg);
			free(t->cfg);
			*t = r->retired[--r->nretired];
		} else {
			i++;
		}
	}
}

void reload_free_all(struct reload_ctx *r)
{
	while (r->nretired) {
		r->nretired--;
		config_free(r->retired[r->nretired].cfg);
		free(r->retired[r->nretired].cfg);
	}
	free(r->retired);
	r->retired = NULL;
	r->retired_cap = 0;
}
