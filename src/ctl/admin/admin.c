/* SPDX-License-Identifier: MIT */
/* admin: see admin.h. */
#define _GNU_SOURCE
#include "admin.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "backend_edit.h"
#include "ctl_server.h"
#include "engine.h"
#include "listener.h"
#include "log.h"
#include "privs.h"
#include "reload.h"
#include "session.h"
#include "stats_http.h"
#include "units.h"
#include "upgrade.h"

#define LINE_MAX_LEN  4096  /* a command line */
#define MAX_CONNS     16    /* connections at once; one more drops the one that moved
			       nothing for the longest (ctl_server.h) */
#define IDLE_MS       60000 /* no whole line this long after the connect or the last
			       answer: closed */
#define SEND_MS       5000  /* an answer's reader may take nothing of it this long */
#define ANSWER_MS     60000 /* and take all of it within this */
#define OUT_BUDGET    (64u << 20) /* answer bytes held for all connections at once */
#define DRAIN_MS      1000  /* at the stop: answers under way finish within this */
#define CALL_MS       2000  /* a worker's answer (worker_call) */
#define RELOAD_MS     15000 /* a reload's outcome */
#define UPGRADE_WAIT_MS (UPGRADE_TIMEOUT_MS + 5000) /* an upgrade's: above its own limit */
#define MAX_ARGS      16

static struct {
	struct worker *ws;
	unsigned nw;
	struct shared *sh;
	struct addr addr;
	int lfd, stop[2];
	pthread_t thread;
	int started;
	uint64_t start_ms; /* monotonic, at admin_start */
} st = { .lfd = -1, .stop = { -1, -1 } };

/* ---- answers ---------------------------------------------------------------- */

struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	for (;;) {
		va_start(ap, fmt);
		k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (k < 0 || b->oom)
			return;
		if (b->p && b->n + (size_t)k < b->cap) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = b->cap ? b->cap : 4096;
		while (cap <= b->n + (size_t)k)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/* The answer is this one error line, whatever was written before it. */
static void fail(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct buf *b, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	b->n = 0;
	put(b, "error: %s\n", msg);
}

/* JSON string (quotes included) of text that may hold anything. */
static void json_str(struct buf *b, const char *s)
{
	put(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(b, "\\%c", c);
		else if (c < 0x20)
			put(b, "\\u%04x", c);
		else
			put(b, "%c", c);
	}
	put(b, "\"");
}

/* An aligned table: cells are copied; columns two spaces apart. */
#define TAB_COLS 12

struct table {
	unsigned ncol, nrow, cap;
	char *(*row)[TAB_COLS];
};

static void tab_row(struct table *t, struct buf *b, ...)
{
	va_list ap;

	if (t->nrow == t->cap) {
		unsigned cap = t->cap ? 2 * t->cap : 64;
		void *p = realloc(t->row, cap * sizeof(*t->row));
		if (!p) {
			b->oom = 1;
			return;
		}
		t->row = p;
		t->cap = cap;
	}
	va_start(ap, b);
	for (unsigned c = 0; c < t->ncol; c++) {
		const char *s = va_arg(ap, const char *);
		if (!(t->row[t->nrow][c] = strdup(s && *s ? s : "-")))
			b->oom = 1;
	}
	va_end(ap);
	t->nrow++;
}

static void tab_flush(struct table *t, struct buf *b)
{
	size_t width[TAB_COLS] = { 0 };

	for (unsigned r = 0; r < t->nrow; r++)
		for (unsigned c = 0; c < t->ncol; c++)
			if (t->row[r][c] && strlen(t->row[r][c]) > width[c])
				width[c] = strlen(t->row[r][c]);
	for (unsigned r = 0; r < t->nrow; r++) {
		for (unsigned c = 0; c < t->ncol; c++) {
			const char *s = t->row[r][c] ? t->row[r][c] : "?";
			if (c + 1 < t->ncol)
				put(b, "%-*s  ", (int)width[c], s);
			else
				put(b, "%s\n", s);
		}
		for (unsigned c = 0; c < t->ncol; c++)
			free(t->row[r][c]);
	}
	free(t->row);
	memset(t, 0, sizeof(*t));
}

static const struct config *cfg_now(void)
{
	return __atomic_load_n(&st.sh->cfg, __ATOMIC_ACQUIRE);
}

static void u64(char *buf, size_t len, uint64_t v)
{
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* ---- show routes ------------------------------------------------------------ */

static void route_listens(const struct route *r, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < r->nlisten && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", r->listen[i].text);
}

/* sni's names are space-separated: one cell, comma-separated */
static void route_sni(const struct route *r, char *buf, size_t len)
{
	size_t n = 0;

	for (const char *p = r->sni; *p && n + 1 < len; p++)
		if (*p != ' ' || (n && buf[n - 1] != ','))
			buf[n++] = *p == ' ' ? ',' : *p;
	buf[n] = '\0';
}

static void show_routes(struct buf *b, int json)
{
	const struct config *c = cfg_now();
	struct table t = { .ncol = 9 };
	char lst[1024], sni[1024], act[24], ses[24], up[24], down[24];

	if (json)
		put(b, "{\"routes\":[");
	else
		tab_row(&t, b, "ROUTE", "LISTEN", "SNI", "BALANCE", "ENGINE", "ACTIVE", "SESSIONS",
			"BYTES_UP", "BYTES_DOWN");
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		route_listens(r, lst, sizeof(lst));
		route_sni(r, sni, sizeof(sni));
		if (!json) {
			u64(act, sizeof(act), STAT_GET(r->st->active));
			u64(ses, sizeof(ses), STAT_GET(r->st->sessions));
			u64(up, sizeof(up), STAT_GET(r->st->bytes_up));
			u64(down, sizeof(down), STAT_GET(r->st->bytes_down));
			tab_row(&t, b, r->name, lst, sni, balance_names[r->o.balance],
				engine_names[r->o.engine], act, ses, up, down);
			continue;
		}
		put(b, "%s\n{\"name\":", i ? "," : "");
		json_str(b, r->name);
		put(b, ",\"listen\":[");
		for (unsigned l = 0; l < r->nlisten; l++) {
			put(b, l ? "," : "");
			json_str(b, r->listen[l].text);
		}
		put(b, "],\"sni\":");
		json_str(b, r->sni);
		put(b, ",\"balance\":\"%s\",\"engine\":\"%s\",\"sessions_active\":%llu,"
		    "\"sessions_total\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu}",
		    balance_names[r->o.balance], engine_names[r->o.engine],
		    (unsigned long long)STAT_GET(r->st->active),
		    (unsigned long long)STAT_GET(r->st->sessions),
		    (unsigned long long)STAT_GET(r->st->bytes_up),
		    (unsigned long long)STAT_GET(r->st->bytes_down));
	}
	if (json)
		put(b, "\n]}\n");
	else
		tab_flush(&t, b);
}

/* ---- show backends ---------------------------------------------------------- */

static const char *backend_state(const struct route *r, unsigned i)
{
	switch (backend_admin(r, i)) {
	case BACKEND_DRAIN:
		return "drain";
	case BACKEND_DISABLED:
		return "disabled";
	}
	return backend_is_up(r, i) ? "up" : "down";
}

/* Where a backend comes from: the file (or command line), a resolve= name,
 * or `ctl backend add` (gone at the next reload). */
static const char *backend_origin(const struct backend_conf *bc)
{
	return bc->runtime ? "ctl" : bc->dns ? "dns" : "file";
}

static void show_backends(struct buf *b, int json)
{
	const struct config *c = cfg_now();
	struct table t = { .ncol = 12 };
	char wt[48], act[24], maxc[24], errs[24], ses[24], up[24], down[24];
	int first = 1;

	if (json)
		put(b, "{\"backends\":[");
	else
		tab_row(&t, b, "ROUTE", "BACKEND", "STATE", "WEIGHT", "ACTIVE", "MAXCONN",
			"CONNECT_ERRORS", "SESSIONS", "BYTES_UP", "BYTES_DOWN", "ROLE", "ORIGIN");
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *r = c->route[i];
		for (unsigned k = 0; k < r->nbackend; k++) {
			const struct backend_health *h = r->health[k];
			unsigned w = backend_weight(r, k), fw = r->backend[k].weight, rp = backend_ramp(r, k);
			uint64_t active = (uint64_t)__atomic_load_n(&h->active, __ATOMIC_RELAXED);
			if (!json) {
				size_t n = (size_t)snprintf(wt, sizeof(wt), "%u", w);
				if (w != fw)
					n += (size_t)snprintf(wt + n, sizeof(wt) - n, " (file: %u)", fw);
				if (rp < 1000 && n < sizeof(wt))
					snprintf(wt + n, sizeof(wt) - n, " (slowstart %u%%)", rp / 10);
				u64(act, sizeof(act), active);
				u64(maxc, sizeof(maxc), r->backend[k].maxconn);
				u64(errs, sizeof(errs), STAT_GET(h->connect_errors));
				u64(ses, sizeof(ses), STAT_GET(h->sessions));
				u64(up, sizeof(up), STAT_GET(h->bytes_up));
				u64(down, sizeof(down), STAT_GET(h->bytes_down));
				tab_row(&t, b, r->name, r->backend[k].addr.text, backend_state(r, k), wt, act,
					r->backend[k].maxconn ? maxc : "-", errs, ses, up, down,
					r->backend[k].backup ? "backup" : "primary", backend_origin(&r->backend[k]));
				continue;
			}
			put(b, "%s\n{\"route\":", first ? "" : ",");
			first = 0;
			json_str(b, r->name);
			put(b, ",\"backend\":");
			json_str(b, r->backend[k].addr.text);
			put(b, ",\"configured\":");
			json_str(b, r->backend[k].spec[0] ? r->backend[k].spec : r->backend[k].addr.text);
			put(b, ",\"state\":\"%s\",\"health\":\"%s\",\"weight\":%u,\"file_weight\":%u,"
			    "\"sessions_active\":%llu,\"maxconn\":%u,\"connect_errors\":%llu,"
			    "\"sessions_total\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu,"
			    "\"backup\":%s,\"origin\":\"%s\",\"slowstart_permille\":%u}",
			    backend_state(r, k), backend_is_up(r, k) ? "up" : "down", w, fw,
			    (unsigned long long)active, r->backend[k].maxconn,
			    (unsigned long long)STAT_GET(h->connect_errors),
			    (unsigned long long)STAT_GET(h->sessions),
			    (unsigned long long)STAT_GET(h->bytes_up),
			    (unsigned long long)STAT_GET(h->bytes_down),
			    r->backend[k].backup ? "true" : "false", backend_origin(&r->backend[k]), rp);
		}
	}
	if (json)
		put(b, "\n]}\n");
	else
		tab_flush(&t, b);
}

/* ---- show process ----------------------------------------------------------- */

/* Which process answers (after an upgrade, the new one) and what it does. */
static const char *process_state(void)
{
	if (__atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED))
		return "draining";
	return stats_http_lameduck() ? "lameduck" : "serving";
}

static void show_process(struct buf *b, int json)
{
	struct table t = { .ncol = 6 };
	uint64_t up = now_monotonic_ms() - st.start_ms;
	char pid[24], age[32], nw[24], act[24];

	u64(pid, sizeof(pid), (uint64_t)getpid());
	u64(nw, sizeof(nw), st.nw);
	u64(act, sizeof(act), (uint64_t)__atomic_load_n(&st.sh->active, __ATOMIC_RELAXED));
	if (json) {
		put(b, "{\"process\":{\"pid\":%s,\"version\":", pid);
		json_str(b, SPLICER_VERSION);
		put(b, ",\"state\":\"%s\",\"uptime_ms\":%llu,\"workers\":%s,\"sessions_active\":%s}}\n",
		    process_state(), (unsigned long long)up, nw, act);
		return;
	}
	snprintf(age, sizeof(age), "%llu.%llus", (unsigned long long)(up / 1000),
		 (unsigned long long)(up % 1000 / 100));
	tab_row(&t, b, "PID", "VERSION", "STATE", "UPTIME", "WORKERS", "ACTIVE");
	tab_row(&t, b, pid, SPLICER_VERSION, process_state(), age, nw, act);
	tab_flush(&t, b);
}

/* ---- the workers' sessions -------------------------------------------------- */

/* What a worker copies out of a session; the admin thread formats it. */
struct sess_row {
	uint64_t id, age_ms, up, down;
	char route[ROUTE_NAME_MAX];
	char backend[ADDR_TEXT_MAX];
	struct sockaddr_storage peer;
	socklen_t peerlen;
	const char *state, *eng_up, *eng_down;
	const char *why_up, *why_down; /* dir_why_name: static strings */
};

struct sess_list {
	struct sess_row *row;
	size_t n, cap;
	int oom;
};

static const char *session_state(const struct session *s)
{
	switch (s->state) {
	case S_HEADER:
		return "proxy-header";
	case S_HELLO:
		return "tls-hello";
	case S_QUEUED:
		return "queued";
	case S_CONNECTING:
		return "connecting";
	}
	if (s->ending)
		return "closing";
	return s->up.eof || s->down.eof ? "half-closed" : "open";
}

/* On the worker's thread (worker_call): a copy of each session's row. */
static void sessions_collect(struct worker *w, void *arg)
{
	struct sess_list *l = arg;

	for (struct session *s = w->sessions; s; s = s->next) {
		struct sess_row *r;
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 256;
			void *p = realloc(l->row, cap * sizeof(*l->row));
			if (!p) {
				l->oom = 1;
				return;
			}
			l->row = p;
			l->cap = cap;
		}
		r = &l->row[l->n++];
		r->id = s->id;
		r->age_ms = w->now_ms - s->start_ms;
		r->up = s->up.bytes;
		r->down = s->down.bytes;
		snprintf(r->route, sizeof(r->route), "%s", s->route->name);
		snprintf(r->backend, sizeof(r->backend), "%s",
			 s->tries ? s->route->backend[s->backend].addr.text : "");
		memcpy(&r->peer, &s->peer, sizeof(r->peer));
		r->peerlen = s->peerlen;
		r->state = session_state(s);
		r->eng_up = s->up.eng ? s->up.eng->name : "-";
		r->eng_down = s->down.eng ? s->down.eng->name : "-";
		r->why_up = dir_why_name(&s->up);
		r->why_down = dir_why_name(&s->down);
	}
}

static int row_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sess_row *)a)->id, y = ((const struct sess_row *)b)->id;

	return x < y ? -1 : x > y;
}

static void show_sessions(struct buf *b, int json)
{
	struct sess_list l = { 0 };
	struct table t = { .ncol = 10 };
	char missing[256] = "", id[24], client[ADDR_TEXT_MAX], age[32], up[24], down[24], eng[64];
	char why[40];
	size_t nm = 0;

	for (unsigned i = 0; i < st.nw; i++)
		if (worker_call(&st.ws[i], sessions_collect, &l, CALL_MS) && nm < sizeof(missing))
			nm += (size_t)snprintf(missing + nm, sizeof(missing) - nm, "%s%u", nm ? "," : "", i);
	if (l.oom) {
		free(l.row);
		fail(b, "out of memory");
		return;
	}
	if (l.n) /* none: l.row is NULL, which qsort must not be given */
		qsort(l.row, l.n, sizeof(*l.row), row_cmp);
	if (json)
		put(b, "{\"sessions\":[");
	else
		tab_row(&t, b, "ID", "ROUTE", "CLIENT", "BACKEND", "STATE", "AGE", "BYTES_UP",
			"BYTES_DOWN", "ENGINE", "WHY");
	for (size_t i = 0; i < l.n; i++) {
		const struct sess_row *r = &l.row[i];
		addr_format((const struct sockaddr *)&r->peer, r->peerlen, client, sizeof(client));
		if (!json) {
			snprintf(id, sizeof(id), "%llx", (unsigned long long)r->id);
			snprintf(age, sizeof(age), "%llu.%llus", (unsigned long long)(r->age_ms / 1000),
				 (unsigned long long)(r->age_ms % 1000 / 100));
			u64(up, sizeof(up), r->up);
			u64(down, sizeof(down), r->down);
			snprintf(eng, sizeof(eng), "%s/%s", r->eng_up, r->eng_down);
			snprintf(why, sizeof(why), "%s/%s", r->why_up, r->why_down);
			tab_row(&t, b, id, r->route, client, r->backend, r->state, age, up, down, eng,
				why);
			continue;
		}
		put(b, "%s\n{\"id\":\"%llx\",\"route\":", i ? "," : "", (unsigned long long)r->id);
		json_str(b, r->route);
		put(b, ",\"client\":");
		json_str(b, client);
		put(b, ",\"backend\":");
		json_str(b, r->backend);
		put(b, ",\"state\":\"%s\",\"age_ms\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu,"
		    "\"engine_up\":\"%s\",\"engine_down\":\"%s\",\"engine_reason_up\":\"%s\","
		    "\"engine_reason_down\":\"%s\"}", r->state,
		    (unsigned long long)r->age_ms, (unsigned long long)r->up,
		    (unsigned long long)r->down, r->eng_up, r->eng_down, r->why_up, r->why_down);
	}
	free(l.row);
	if (json) {
		put(b, "\n],\"workers_not_answering\":[%s]}\n", missing);
		return;
	}
	tab_flush(&t, b);
	if (nm)
		put(b, "note: worker(s) %s did not answer within %d ms (stalled?): their sessions "
		    "are not listed\n", missing, CALL_MS);
}

/* Ends sessions on a worker: the one with an id, or every one that holds a
 * slot of a backend (its run-time state: any generation's route). */
struct kill_req {
	uint64_t id;
	const struct backend_health *h;
	const char *reason;
	unsigned n;
};

static void sessions_kill(struct worker *w, void *arg)
{
	struct kill_req *k = arg;
	struct session *next;

	for (struct session *s = w->sessions; s; s = next) {
		next = s->next; /* session_close unlinks s */
		if (k->h ? s->counted && s->route->health[s->backend] == k->h : s->id == k->id) {
			session_close(s, k->reason);
			k->n++;
		}
	}
}

/* k on every worker (or only on w_only); returns how many did not answer. */
static unsigned kill_on(struct kill_req *k, int w_only)
{
	unsigned missed = 0;

	for (unsigned i = 0; i < st.nw; i++)
		if ((w_only < 0 || (unsigned)w_only == i) && worker_call(&st.ws[i], sessions_kill, k, CALL_MS))
			missed++;
	return missed;
}

/* ---- commands --------------------------------------------------------------- */

static void cmd_show(struct buf *b, int argc, char **argv, int json)
{
	if (argc != 2) {
		fail(b, argc < 2 ? "show what? show routes|backends|sessions|process [--json]"
				 : "show %s: unexpected argument '%s'", argv[1], argc > 2 ? argv[2] : "");
		return;
	}
	if (!strcmp(argv[1], "routes"))
		show_routes(b, json);
	else if (!strcmp(argv[1], "backends"))
		show_backends(b, json);
	else if (!strcmp(argv[1], "sessions"))
		show_sessions(b, json);
	else if (!strcmp(argv[1], "process"))
		show_process(b, json);
	else
		fail(b, "show: unknown '%s' (routes, backends, sessions or process)", argv[1]);
}

static void list_routes(const struct config *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < c->nroutes && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", c->route[i]->name);
}

static void list_backends(const struct route *r, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < r->nbackend && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", r->backend[i].addr.text);
}

#define BACKEND_USAGE "backend ROUTE ADDR drain|disable [--kill]|enable|weight N, " \
		      "backend ROUTE add ADDR [weight=N] [backup], backend ROUTE del ADDR"
#define EDIT_MS 20000 /* an add or del: a config generation swapped in */

/* backend ROUTE add ADDR [weight=N] [backup] | del ADDR: the main thread
 * builds and swaps in the new generation (backend_edit.h). */
static void backend_add_del(struct buf *b, int argc, char **argv)
{
	struct backend_edit e = { .del = !strcmp(argv[2], "del"), .weight = 1 };
	int rc;

	if (argc < 4 || (e.del && argc != 4)) {
		fail(b, "usage: backend ROUTE add ADDR [weight=N] [backup], backend ROUTE del ADDR");
		return;
	}
	for (int i = 4; i < argc; i++) {
		uint64_t w;
		if (!strcmp(argv[i], "backup")) {
			e.backup = 1;
		} else if (!strncmp(argv[i], "weight=", 7)) {
			if (parse_uint(argv[i] + 7, &w) || w < 1 || w > MAX_WEIGHT) {
				fail(b, "backend add: weight expects an integer 1..%d, not '%s'",
				     MAX_WEIGHT, argv[i] + 7);
				return;
			}
			e.weight = (unsigned)w;
		} else {
			fail(b, "backend add: unknown option '%s' (weight=N, backup)", argv[i]);
			return;
		}
	}
	if (__atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED)) {
		fail(b, "backend %s: the proxy is stopping", argv[2]);
		return;
	}
	snprintf(e.route, sizeof(e.route), "%s", argv[1]);
	snprintf(e.addr, sizeof(e.addr), "%s", argv[3]);
	if ((rc = backend_edit_ask(&e, EDIT_MS)))
		fail(b, "backend %s: %s", argv[2], rc == -EBUSY ? "another add or del is under way"
						  : "the main thread did not take it (an upgrade "
						    "or a stop under way?)");
	else if (e.rc)
		fail(b, "%s", e.msg);
	else
		put(b, "%s\n", e.msg);
}

/* The backends of r that addr names (as configured, or as resolved): every
 * one, for an address listed twice. Returns how many went into idx. */
static unsigned backend_find(const struct route *r, const char *addr, unsigned *idx)
{
	unsigned n = 0;

	for (unsigned i = 0; i < r->nbackend; i++)
		if (!strcmp(r->backend[i].addr.text, addr) || !strcmp(r->backend[i].spec, addr))
			idx[n++] = i;
	return n;
}

static void backend_disable(struct buf *b, struct route *r, const unsigned *idx, unsigned n,
			    const char *addr, int kill)
{
	unsigned ended = 0, missed = 0;

	for (unsigned i = 0; i < n; i++)
		backend_set_admin(r, idx[i], BACKEND_DISABLED);
	if (!kill) {
		put(b, "ok: backend %s of route %s disabled: no new sessions; %lld running go on "
		    "(--kill ends them)\n", addr, r->name,
		    (long long)__atomic_load_n(&r->health[idx[0]]->active, __ATOMIC_RELAXED));
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		struct kill_req k = { .h = r->health[idx[i]], .reason = "backend-disabled" };
		missed += kill_on(&k, -1);
		ended += k.n;
	}
	put(b, "ok: backend %s of route %s disabled: no new sessions; %u running ended\n", addr,
	    r->name, ended);
	if (missed)
		put(b, "note: %u worker(s) did not answer within %d ms: their sessions on it go on\n",
		    missed, CALL_MS);
}

static void cmd_backend(struct buf *b, int argc, char **argv, int json)
{
	const struct config *c = cfg_now();
	struct route *r = NULL;
	unsigned idx[MAX_BACKENDS], n;
	const char *act;
	char list[1024];

	(void)json;
	if (argc >= 3 && (!strcmp(argv[2], "add") || !strcmp(argv[2], "del"))) {
		backend_add_del(b, argc, argv);
		return;
	}
	if (argc < 4) {
		fail(b, "usage: " BACKEND_USAGE);
		return;
	}
	for (unsigned i = 0; i < c->nroutes && !r; i++)
		if (!strcmp(c->route[i]->name, argv[1]))
			r = c->route[i];
	if (!r) {
		list_routes(c, list, sizeof(list));
		fail(b, "no route '%s' (routes: %s)", argv[1], list);
		return;
	}
	if (!(n = backend_find(r, argv[2], idx))) {
		list_backends(r, list, sizeof(list));
		fail(b, "route %s has no backend '%s' (backends: %s)", r->name, argv[2], list);
		return;
	}
	act = argv[3];
	if (!strcmp(act, "disable") && argc == 5 && !strcmp(argv[4], "--kill")) {
		backend_disable(b, r, idx, n, argv[2], 1);
		return;
	}
	if (!strcmp(act, "weight")) {
		uint64_t w;
		if (argc != 5 || parse_uint(argv[4], &w) || w < 1 || w > MAX_WEIGHT) {
			fail(b, "weight: expects an integer 1..%d%s%s%s", MAX_WEIGHT,
			     argc > 4 ? ", not '" : "", argc > 4 ? argv[4] : "", argc > 4 ? "'" : "");
			return;
		}
		for (unsigned i = 0; i < n; i++)
			if (backend_set_weight(r, idx[i], (unsigned)w)) {
				fail(b, "weight: out of memory for the balancing tables");
				return;
			}
		put(b, "ok: backend %s of route %s: weight %llu (file: %u)\n", argv[2], r->name,
		    (unsigned long long)w, r->backend[idx[0]].weight);
		return;
	}
	if (argc != 4) {
		fail(b, "backend %s %s %s: unexpected argument '%s' (usage: " BACKEND_USAGE ")",
		     argv[1], argv[2], act, argv[4]);
		return;
	}
	if (!strcmp(act, "disable")) {
		backend_disable(b, r, idx, n, argv[2], 0);
	} else if (!strcmp(act, "drain")) {
		for (unsigned i = 0; i < n; i++)
			backend_set_admin(r, idx[i], BACKEND_DRAIN);
		put(b, "ok: backend %s of route %s drains: no new sessions; %lld running finish\n",
		    argv[2], r->name,
		    (long long)__atomic_load_n(&r->health[idx[0]]->active, __ATOMIC_RELAXED));
	} else if (!strcmp(act, "enable")) {
		for (unsigned i = 0; i < n; i++)
			backend_set_admin(r, idx[i], BACKEND_READY);
		put(b, "ok: backend %s of route %s enabled%s\n", argv[2], r->name,
		    backend_is_up(r, idx[0]) ? "" : " (its health checks say down: sessions go to it "
						    "once they say up)");
	} else {
		fail(b, "backend: unknown action '%s' (drain, disable [--kill], enable, weight N)", act);
	}
}

static void cmd_session(struct buf *b, int argc, char **argv, int json)
{
	struct kill_req k = { .reason = "admin-kill" };
	char *end;

	(void)json;
	if (argc != 3 || strcmp(argv[1], "kill")) {
		fail(b, "usage: session kill ID (the ID as show sessions prints it)");
		return;
	}
	errno = 0;
	k.id = strtoull(argv[2], &end, 16);
	if (errno || end == argv[2] || *end || argv[2][0] == '-') {
		fail(b, "session kill: '%s' is not a session ID (hex, as show sessions prints it)",
		     argv[2]);
		return;
	}
	if ((k.id >> 56) >= st.nw) {
		fail(b, "no session %s (no worker %llu)", argv[2], (unsigned long long)(k.id >> 56));
		return;
	}
	if (kill_on(&k, (int)(k.id >> 56))) {
		fail(b, "session kill: worker %llu did not answer within %d ms (stalled?)",
		     (unsigned long long)(k.id >> 56), CALL_MS);
		return;
	}
	if (!k.n) {
		fail(b, "no session %s (it ended, or never was)", argv[2]);
		return;
	}
	put(b, "ok: session %s ended\n", argv[2]);
}

static int no_args(struct buf *b, int argc, char **argv)
{
	if (argc > 1)
		fail(b, "%s: unexpected argument '%s'", argv[0], argv[1]);
	return argc > 1;
}

/* SIGHUP to this process (the main thread reloads), then its outcome. */
static void cmd_reload(struct buf *b, int argc, char **argv, int json)
{
	uint64_t before, at, t0;
	struct timespec ts;
	int ok;

	(void)json;
	if (no_args(b, argc, argv))
		return;
	if (__atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED)) {
		fail(b, "reload: the proxy is stopping");
		return;
	}
	reload_last(&ok, &before);
	clock_gettime(CLOCK_REALTIME, &ts);
	t0 = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	if (kill(getpid(), SIGHUP)) {
		fail(b, "reload: kill(SIGHUP): %s", strerror(errno));
		return;
	}
	for (uint64_t end = now_monotonic_ms() + RELOAD_MS; now_monotonic_ms() < end;) {
		reload_last(&ok, &at);
		if (at != before && at >= t0) {
			if (ok)
				put(b, "ok: reloaded %s\n", cfg_now()->file);
			else
				fail(b, "reload: the running config stays (the reasons are in the log)");
			return;
		}
		poll(NULL, 0, 10);
	}
	fail(b, "reload: asked (SIGHUP), no outcome within %d ms; see the log", RELOAD_MS);
}

/* The failure's detail: the new process's last lines, each indented (an
 * empty one would end the answer). */
static void put_msgs(struct buf *b, const char *msgs)
{
	for (const char *p = msgs; *p;) {
		size_t len = strcspn(p, "\n");
		if (len)
			put(b, "  %.*s\n", (int)len, p);
		p += len + (p[len] == '\n');
	}
}

/* SIGUSR2 to this process (the upgrade is the main thread's), then its
 * outcome: the new process's pid, or why it did not take over. */
static void cmd_upgrade(struct buf *b, int argc, char **argv, int json)
{
	static struct upgrade_outcome before, o; /* the admin thread's alone */
	sigset_t mask;

	(void)json;
	if (no_args(b, argc, argv))
		return;
	/* a SIGUSR2 nobody waits for would end the process (its default) */
	if (pthread_sigmask(SIG_BLOCK, NULL, &mask) || !sigismember(&mask, SIGUSR2)) {
		fail(b, "upgrade: this process does not take SIGUSR2");
		return;
	}
	if (__atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED)) {
		fail(b, "upgrade: the proxy is stopping");
		return;
	}
	upgrade_outcome(&before);
	if (kill(getpid(), SIGUSR2)) {
		fail(b, "upgrade: kill(SIGUSR2): %s", strerror(errno));
		return;
	}
	for (uint64_t end = now_monotonic_ms() + UPGRADE_WAIT_MS; now_monotonic_ms() < end;) {
		upgrade_outcome(&o);
		if (o.seq != before.seq) {
			if (o.ok) {
				put(b, "ok: upgraded: %s\n", o.why);
				return;
			}
			fail(b, "upgrade: %s", o.why);
			if (o.msgs[0]) {
				put(b, "the new process said:\n");
				put_msgs(b, o.msgs);
			}
			return;
		}
		poll(NULL, 0, 10);
	}
	fail(b, "upgrade: asked (SIGUSR2), no outcome within %d ms; see the log", UPGRADE_WAIT_MS);
}

/* SIGTERM to this process: the lame duck (/health 503 for lameduck while
 * the listeners still accept), then the drain; the main thread's. */
static void cmd_drain(struct buf *b, int argc, char **argv, int json)
{
	(void)json;
	if (no_args(b, argc, argv))
		return;
	if (kill(getpid(), SIGTERM)) {
		fail(b, "drain: kill(SIGTERM): %s", strerror(errno));
		return;
	}
	put(b, "ok: draining (SIGTERM): /health answers 503 for lameduck, then the listeners "
	       "close and sessions finish within drain_timeout\n");
}

/* The lame duck without a stop: /health answers 503 so that a load balancer
 * (a Kubernetes readiness probe) stops sending, while the listeners accept
 * on; the SIGTERM that follows drains at once (main.c: the lame duck was
 * this). For a preStop hook: `splicer ctl -s PATH lameduck && sleep N`. */
static void cmd_lameduck(struct buf *b, int argc, char **argv, int json)
{
	(void)json;
	if (no_args(b, argc, argv))
		return;
	if (stats_http_fd() < 0) {
		fail(b, "lameduck: no stats endpoint (stats = off): there is no /health to turn 503");
		return;
	}
	if (__atomic_load_n(&st.sh->stopping, __ATOMIC_RELAXED)) {
		put(b, "ok: draining already: /health answers 503, the listeners are closed\n");
		return;
	}
	if (stats_http_lameduck()) {
		put(b, "ok: lame duck already: /health answers 503; the listeners accept on\n");
		return;
	}
	stats_http_set_lameduck();
	log_info("ctl lameduck: /health answers 503 from now on; the listeners accept on until "
		 "SIGTERM, which then drains at once");
	put(b, "ok: lame duck: /health answers 503; the listeners accept on until SIGTERM, which "
	       "then drains at once\n");
}

static void cmd_help(struct buf *b, int argc, char **argv, int json);

static const struct command {
	const char *name;
	void (*run)(struct buf *b, int argc, char **argv, int json);
	const char *usage;
} commands[] = {
	{ "show", cmd_show, "show routes|backends|sessions|process [--json]" },
	{ "backend", cmd_backend, "backend ROUTE ADDR drain|disable [--kill]|enable|weight N" },
	{ "backend", cmd_backend, "backend ROUTE add ADDR [weight=N] [backup]" },
	{ "backend", cmd_backend, "backend ROUTE del ADDR" },
	{ "session", cmd_session, "session kill ID" },
	{ "reload", cmd_reload, "reload" },
	{ "upgrade", cmd_upgrade, "upgrade" },
	{ "lameduck", cmd_lameduck, "lameduck" },
	{ "drain", cmd_drain, "drain" },
	{ "help", cmd_help, "help" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void cmd_help(struct buf *b, int argc, char **argv, int json)
{
	(void)argc;
	(void)argv;
	(void)json;
	for (unsigned i = 0; i < NCOMMANDS; i++)
		put(b, "%s\n", commands[i].usage);
}

/* One command line into its answer (the empty line included). */
static void answer_line(struct buf *b, char *line)
{
	char *argv[MAX_ARGS + 1], *save = NULL, *tok;
	int argc = 0, json = 0;

	for (tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
		if (!strcmp(tok, "--json")) {
			json = 1;
			continue;
		}
		if (argc == MAX_ARGS) {
			fail(b, "more than %d words", MAX_ARGS);
			goto end;
		}
		argv[argc++] = tok;
	}
	argv[argc] = NULL;
	if (!argc) {
		fail(b, "empty command (help lists them)");
		goto end;
	}
	for (unsigned i = 0; i < NCOMMANDS; i++)
		if (!strcmp(argv[0], commands[i].name)) {
			commands[i].run(b, argc, argv, json);
			goto end;
		}
	fail(b, "unknown command '%s' (show, backend, session, reload, upgrade, lameduck, drain, "
	     "help)", argv[0]);
end:
	if (b->oom) {
		b->oom = 0;
		b->n = 0;
		put(b, "error: out of memory\n");
	}
	if (b->n && b->p[b->n - 1] != '\n')
		put(b, "\n");
	put(b, "\n"); /* the terminator: an empty line */
}

/* ---- the thread ------------------------------------------------------------- */

/* ctl_server's protocol: a command per line, as many as the client likes,
 * answered in order, one at a time (the next line is read once the answer
 * before it was taken). At EOF, the whole lines left are answered, then the
 * connection closes. */
static int admin_input(struct ctl_conn *c, void *arg)
{
	char *nl = memchr(c->in, '\n', c->in_n);
	struct buf b = { 0 };
	size_t len;

	(void)arg;
	if (!nl) {
		if (c->in_n < LINE_MAX_LEN)
			return c->eof ? -1 : 0; /* half a line, and more may come */
		put(&b, "error: a line longer than %d bytes\n\n", LINE_MAX_LEN - 1);
		c->close_after = 1;
		return b.p && !ctl_conn_answer(c, b.p, b.n) ? 0 : -1;
	}
	len = (size_t)(nl - c->in);
	*nl = '\0';
	if (memchr(c->in, '\0', len))
		put(&b, "error: a NUL byte in the command line\n\n");
	else
		answer_line(&b, c->in);
	ctl_conn_consume(c, len + 1);
	return b.p && !ctl_conn_answer(c, b.p, b.n) ? 0 : -1;
}

static void *admin_main(void *arg)
{
	struct ctl_server srv = {
		.ep = CTL_EP_ADMIN, .lfd = st.lfd, .stop_fd = st.stop[0], .max_conns = MAX_CONNS,
		.in_max = LINE_MAX_LEN, .out_budget = OUT_BUDGET, .request_ms = IDLE_MS,
		.stall_ms = SEND_MS, .answer_ms = ANSWER_MS, .drain_ms = DRAIN_MS,
		.on_input = admin_input,
	};
	int r;

	(void)arg;
	if ((r = ctl_server_run(&srv)))
		log_err("admin: %s; the admin socket does not answer", strerror(-r));
	return NULL;
}

/* The socket file: mode 0600 from the start (umask while it is bound, so no
 * moment exists when another user could connect). It is made after root is
 * dropped (main.c), so it is the run-as user's without a chown: root never
 * changes the owner of a path in a directory the user controls. An upgrade
 * hands the bound socket over (upgrade.h): the file is there already. */
static int admin_bind(const struct config *cfg, char *err, size_t errlen)
{
	const char *path = cfg->admin;
	char text[SETTING_TEXT_MAX + 8], why[256];
	mode_t old;

	if (!strncmp(path, "unix:", 5))
		path += 5;
	if (path[0] == '@' || !path[0]) {
		snprintf(err, errlen, "admin %s: needs a file path (an abstract socket has no file "
			 "mode to keep other users out)", cfg->admin);
		return -1;
	}
	snprintf(text, sizeof(text), "unix:%s", path);
	if (addr_parse(text, ADDR_LISTEN, &st.addr, why, sizeof(why))) {
		snprintf(err, errlen, "admin: %s", why);
		return -1;
	}
	if ((st.lfd = upgrade_take_one(&st.addr)) < 0) {
		old = umask(0177);
		st.lfd = listener_open(&st.addr, why, sizeof(why));
		umask(old);
		if (st.lfd < 0) {
			snprintf(err, errlen, "admin: %s", why);
			return -1;
		}
	}
	return 0;
}

int admin_start(const struct config *cfg, struct worker *ws, unsigned nworkers, struct shared *sh,
		char *err, size_t errlen)
{
	st.ws = ws;
	st.nw = nworkers;
	st.sh = sh;
	st.start_ms = now_monotonic_ms();
	if (!strcmp(cfg->admin, "off"))
		return 0;
	if (admin_bind(cfg, err, errlen))
		goto fail;
	if (pipe2(st.stop, O_CLOEXEC) || (errno = pthread_create(&st.thread, NULL, admin_main, NULL))) {
		snprintf(err, errlen, "admin: %s", strerror(errno));
		goto fail;
	}
	st.started = 1;
	log_info("admin: listening on %s (splicer ctl -s %s help)", st.addr.text, st.addr.text + 5);
	return 0;
fail:
	if (st.lfd >= 0) {
		close(st.lfd);
		listener_unlink(&st.addr);
	}
	st.lfd = -1;
	return -1;
}

int admin_fd(void)
{
	return st.started ? st.lfd : -1;
}

void admin_stop(void)
{
	if (!st.started)
		return;
	if (write(st.stop[1], "x", 1) < 0) {
		/* our own empty pipe */
	}
	pthread_join(st.thread, NULL);
	close(st.stop[0]);
	close(st.stop[1]);
	close(st.lfd);
	listener_unlink(&st.addr);
	st.lfd = -1;
	st.started = 0;
}
