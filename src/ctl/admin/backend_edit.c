/* SPDX-License-Identifier: MIT */
/* backend_edit: see backend_edit.h. */
#define _GNU_SOURCE
#include "backend_edit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "addr.h"
#include "log.h"

/* One request at a time: the admin thread serves one command at a time. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static struct backend_edit *pending;
static enum { EDIT_NONE, EDIT_WAITING, EDIT_TAKEN, EDIT_DONE } state;

int backend_edit_ask(struct backend_edit *e, int timeout_ms)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&lock);
	if (pending) {
		pthread_mutex_unlock(&lock);
		return -EBUSY;
	}
	pending = e;
	state = EDIT_WAITING;
	while (state != EDIT_DONE) {
		/* once taken, the main thread finishes it: wait for that */
		if (state == EDIT_WAITING &&
		    pthread_cond_timedwait(&done_cond, &lock, &until) == ETIMEDOUT &&
		    state == EDIT_WAITING) {
			rc = -ETIMEDOUT;
			break;
		}
		if (state == EDIT_TAKEN)
			pthread_cond_wait(&done_cond, &lock);
	}
	pending = NULL;
	state = EDIT_NONE;
	pthread_mutex_unlock(&lock);
	return rc;
}

static struct route *route_named(struct config *c, const char *name)
{
	for (unsigned i = 0; i < c->nroutes; i++)
		if (!strcmp(c->route[i]->name, name))
			return c->route[i];
	return NULL;
}

/* A numeric backend address: an IP address and port, or unix:/path. */
static int numeric_addr(const char *text, struct addr *a, char *why, size_t len)
{
	char host[256], err[256];
	unsigned port;
	unsigned char buf[16];

	if (strncmp(text, "unix:", 5)) {
		if (addr_split(text, ADDR_CONNECT, host, sizeof(host), &port, err, sizeof(err))) {
			snprintf(why, len, "'%s': %s", text, err);
			return -1;
		}
		if (inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1) {
			snprintf(why, len, "'%s': expects an IP address and port or unix:/path (a name "
				 "would need a lookup: give it in the file, with resolve= to follow it)",
				 text);
			return -1;
		}
	}
	if (addr_parse(text, ADDR_CONNECT, a, err, sizeof(err))) {
		snprintf(why, len, "'%s': %s", text, err);
		return -1;
	}
	return 0;
}

static int backend_add(struct route *r, struct backend_edit *e)
{
	struct backend_conf *b;
	struct addr a;
	char why[400];

	if (numeric_addr(e->addr, &a, why, sizeof(why))) {
		snprintf(e->msg, sizeof(e->msg), "backend add: %s", why);
		return -EINVAL;
	}
	for (unsigned i = 0; i < r->nbackend; i++)
		if (addr_equal(&r->backend[i].addr, &a)) {
			snprintf(e->msg, sizeof(e->msg), "route %s has backend %s already (weight N "
				 "changes its weight)", r->name, a.text);
			return -EEXIST;
		}
	if (r->nbackend >= MAX_BACKENDS) {
		snprintf(e->msg, sizeof(e->msg), "route %s has %d backends: no room for more", r->name,
			 MAX_BACKENDS);
		return -ENOSPC;
	}
	b = &r->backend[r->nbackend++];
	memset(b, 0, sizeof(*b));
	b->addr = a;
	snprintf(b->spec, sizeof(b->spec), "%s", a.text); /* its run-time state's key */
	b->weight = e->weight;
	b->backup = (uint8_t)e->backup;
	b->runtime = 1;
	return 0;
}

static int backend_del(struct route *r, struct backend_edit *e)
{
	unsigned n = 0, primaries = 0, gone = 0, gone_primary = 0;

	for (unsigned i = 0; i < r->nbackend; i++) {
		int hit = !strcmp(r->backend[i].addr.text, e->addr) || !strcmp(r->backend[i].spec, e->addr);
		if (hit && r->backend[i].dns) {
			snprintf(e->msg, sizeof(e->msg), "backend %s of route %s comes from a resolve= "
				 "name: DNS decides its addresses (drain or disable it instead)",
				 e->addr, r->name);
			return -EPERM;
		}
		gone += hit;
		gone_primary += hit && !r->backend[i].backup;
		primaries += !r->backend[i].backup;
	}
	if (!gone) {
		snprintf(e->msg, sizeof(e->msg), "route %s has no backend '%s'", r->name, e->addr);
		return -ENOENT;
	}
	if (gone == r->nbackend || (gone_primary && gone_primary == primaries)) {
		snprintf(e->msg, sizeof(e->msg), "backend %s is the last %s of route %s: a route keeps "
			 "one at least (disable it instead)", e->addr,
			 gone == r->nbackend ? "backend" : "primary backend", r->name);
		return -EPERM;
	}
	for (unsigned i = 0; i < r->nbackend; i++)
		if (strcmp(r->backend[i].addr.text, e->addr) && strcmp(r->backend[i].spec, e->addr))
			r->backend[n++] = r->backend[i];
	r->nbackend = n;
	return 0;
}

static int edit_cb(struct config *nw, void *arg)
{
	struct backend_edit *e = arg;
	struct route *r = route_named(nw, e->route);

	if (!r) {
		snprintf(e->msg, sizeof(e->msg), "no route '%s'", e->route);
		return -ENOENT;
	}
	return e->del ? backend_del(r, e) : backend_add(r, e);
}

/* The running sessions on the backends e names, before a del. */
static long long running_on(const struct config *c, const struct backend_edit *e)
{
	long long n = 0;

	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		if (strcmp(r->name, e->route))
			continue;
		for (unsigned b = 0; b < r->nbackend; b++)
			if (!strcmp(r->backend[b].addr.text, e->addr) || !strcmp(r->backend[b].spec, e->addr))
				n += __atomic_load_n(&r->health[b]->active, __ATOMIC_RELAXED);
	}
	return n;
}

static void edit_run(struct reload_ctx *r, struct backend_edit *e)
{
	long long running = e->del ? running_on(r->cfg, e) : 0;
	int close_them = 0;

	e->msg[0] = '\0';
	for (unsigned i = 0; i < r->cfg->nroutes; i++)
		if (!strcmp(r->cfg->route[i]->name, e->route))
			close_them = r->cfg->route[i]->o.on_backend_down == BACKEND_DOWN_CLOSE;
	e->rc = reload_edit(r, edit_cb, e);
	if (e->rc) {
		if (!e->msg[0])
			snprintf(e->msg, sizeof(e->msg), "backend %s: %s (see the log)",
				 e->del ? "del" : "add", e->rc == -ENOMEM ? "out of memory"
							   : "the change is not a valid config");
		return;
	}
	if (e->del) {
		log_info("ctl: route %s: backend %s removed (in memory; the next reload keeps what "
			 "the file says)", e->route, e->addr);
		snprintf(e->msg, sizeof(e->msg), "ok: backend %s of route %s removed: no new sessions; "
			 "%lld running %s", e->addr, e->route, running,
			 close_them ? "closed (on_backend_down = close)" : "finish");
	} else {
		log_info("ctl: route %s: backend %s added%s (in memory; the next reload keeps what "
			 "the file says)", e->route, e->addr, e->backup ? " as a backup" : "");
		snprintf(e->msg, sizeof(e->msg), "ok: backend %s added to route %s (weight %u%s): it "
			 "takes new sessions now; the next reload keeps what the file says", e->addr,
			 e->route, e->weight, e->backup ? ", backup" : "");
	}
}

void backend_edit_serve(struct reload_ctx *r)
{
	struct backend_edit *e;

	pthread_mutex_lock(&lock);
	if (state != EDIT_WAITING) {
		pthread_mutex_unlock(&lock);
		return;
	}
	state = EDIT_TAKEN;
	e = pending;
	pthread_mutex_unlock(&lock);
	edit_run(r, e);
	pthread_mutex_lock(&lock);
	state = EDIT_DONE;
	pthread_cond_broadcast(&done_cond);
	pthread_mutex_unlock(&lock);
}
