/* SPDX-License-Identifier: MIT */
/* What the tests of upgrades share: see upgrade_util.h. */
#define _GNU_SOURCE
#include "upgrade_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- process generations ------------------------------------------------- */

#define UU_MAX_PIDS 64
static pid_t uu_pids[UU_MAX_PIDS];
static int uu_npids;

void uu_track(pid_t pid)
{
	if (uu_npids < UU_MAX_PIDS)
		uu_pids[uu_npids++] = pid;
}

void uu_init(void)
{
	h_init();
	uu_npids = 0;
	prctl(PR_SET_CHILD_SUBREAPER, 1);
}

void uu_fini(void)
{
	for (int i = 0; i < uu_npids; i++)
		if (kill(uu_pids[i], SIGKILL) == 0)
			waitpid(uu_pids[i], NULL, 0);
	h_fini();
}

int uu_gone(struct h_proxy *p, pid_t pid)
{
	char path[64], st[256];
	FILE *f;

	if (p && p->pid && pid == p->pid)
		return !h_proxy_alive(p);
	waitpid(pid, NULL, WNOHANG);
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return 1;
	size_t n = fread(st, 1, sizeof st - 1, f);
	fclose(f);
	st[n] = '\0';
	/* a zombie has exited: its parent (an older generation, or this
	 * process) reaps it when it gets to it */
	const char *rp = strrchr(st, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

int uu_wait_gone(struct h_proxy *p, pid_t pid, int ms)
{
	int64_t end = h_now_ms() + ms;
	while (!uu_gone(p, pid)) {
		if (h_now_ms() > end)
			return -1;
		h_sleep_ms(5);
	}
	return 0;
}

pid_t uu_log_pid(const char *path, const char *mark, const char *at, const char *also, int n,
		 int ms)
{
	int64_t end = h_now_ms() + ms;

	for (;;) {
		FILE *f = fopen(path, "re");
		char line[1024];
		int seen = 0;
		pid_t pid = 0;

		while (f && !pid && fgets(line, sizeof line, f)) {
			const char *k = strstr(line, mark);
			if (k && (k = strstr(k, at)) && (!also || strstr(k, also)) && ++seen == n)
				pid = (pid_t)atoi(k + strlen(at));
		}
		if (f)
			fclose(f);
		if (pid || h_now_ms() > end)
			return pid;
		h_sleep_ms(5);
	}
}

pid_t uu_nth_takeover(const struct h_proxy *p, int n, int ms)
{
	return uu_log_pid(p->log, "upgrade: process ", "upgrade: process ", " serves now", n, ms);
}

void uu_upgrade(struct h_proxy *p, pid_t old, int n, int gone_ms, struct uu_upgrade *u)
{
	memset(u, 0, sizeof *u);
	u->old_pid = old;
	u->t_signal = h_now_ms();
	H_CHECK(kill(old, SIGUSR2) == 0, "upgrade %d: SIGUSR2 to %d: %s", n, (int)old,
		strerror(errno));
	u->new_pid = uu_nth_takeover(p, n, 15000);
	u->t_ready = h_now_ms();
	H_CHECK(u->new_pid > 0, "upgrade %d: no new process took over within 15 s; log %s", n,
		p->log);
	uu_track(u->new_pid);
	if (uu_wait_gone(p, old, gone_ms) == 0)
		u->t_gone = h_now_ms();
}

int64_t uu_lifetime(const struct uu_upgrade *u)
{
	return u->t_gone ? u->t_gone - u->t_ready : -1;
}

int uu_wait_all_gone(struct h_proxy *p, struct uu_upgrade *u, int n, int ms)
{
	int64_t end = h_now_ms() + ms;
	int alive;

	for (;;) {
		alive = 0;
		for (int i = 0; i < n; i++)
			if (!u[i].t_gone) {
				if (uu_gone(p, u[i].old_pid))
					u[i].t_gone = h_now_ms();
				else
					alive++;
			}
		if (!alive || h_now_ms() > end)
			return alive;
		h_sleep_ms(5);
	}
}

int uu_handed_line(const struct h_proxy *p, pid_t new_pid, long *handed, long *stay, double *ms)
{
	FILE *f = fopen(p->log, "re");
	char line[1024], want[48];
	int found = 0;

	snprintf(want, sizeof want, " sessions over to process %d in ", (int)new_pid);
	while (f && !found && fgets(line, sizeof line, f)) {
		const char *k = strstr(line, "upgrade: handed ");
		const char *w = k ? strstr(k, want) : NULL;
		const char *st = w ? strstr(w, "; ") : NULL;
		if (!w || !st)
			continue;
		*handed = strtol(k + strlen("upgrade: handed "), NULL, 10);
		*ms = strtod(w + strlen(want), NULL);
		*stay = strtol(st + 2, NULL, 10);
		found = strstr(st, " stay here and drain") != NULL;
	}
	if (f)
		fclose(f);
	return found;
}

void uu_local(struct h_addr *a, int port)
{
	char text[32];

	snprintf(text, sizeof text, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(text, a) == 0, "address %s", text);
}

void uu_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

int uu_ctl(const char *bin, const char *sock, char **out, char **err, const char *const *words)
{
	const char *args[16] = { "ctl", "-s", sock };
	int n = 3, st;

	for (int i = 0; words[i] && n < 15; i++)
		args[n++] = words[i];
	args[n] = NULL;
	st = h_run_capture(bin, args, 60000, out, err);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

long long uu_metric(int stats_port, const char *name)
{
	struct h_addr a;

	uu_local(&a, stats_port);
	return h_metric(&a, name);
}

/* ---- sessions across upgrades -------------------------------------------- */

#define UU_BUF (64 * 1024)
#define UU_HDR 8u
#define UU_MAGIC 0x5E55000000000000ull /* the header's high half: a session index is below */
#define UU_STEP 0xD6E8FEB86659FD93ull  /* odd: seeds of sessions never meet */
#define UU_LISTENER 0x80000000u
#define UU_EVENTS 256
#define UU_PASS_MS 5 /* the paced senders' pass */

static uint64_t uu_seed_up(const struct uu_load *l, unsigned i)
{
	return l->seed + (2 * (uint64_t)i + 1) * UU_STEP;
}

static uint64_t uu_seed_down(const struct uu_load *l, unsigned i)
{
	return l->seed + (2 * (uint64_t)i + 2) * UU_STEP;
}

static int uu_again(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

/* Records that an end failed: err is an errno (ENODATA: an EOF too early,
 * EPROTO: a wrong byte); counted once, the first reason kept. */
__attribute__((format(printf, 4, 5))) static void uu_fail(struct uu_load *l, _Atomic int *end,
							   int err, const char *fmt, ...)
{
	if (end) {
		if (atomic_load(end))
			return;
		atomic_store(end, -err);
	}
	atomic_fetch_add(&l->failed, 1);
	if (err == ECONNRESET || err == EPIPE)
		atomic_fetch_add(&l->resets, 1);
	if (!atomic_exchange(&l->why_taken, 1)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(l->why, sizeof l->why, fmt, ap);
		va_end(ap);
	}
}

void uu_load_init(struct uu_load *l, unsigned n, uint64_t seed)
{
	memset(l, 0, sizeof *l);
	l->n = n;
	l->seed = seed;
	l->s = calloc(n, sizeof *l->s);
	/* a backend connection per session, and room to see (and count) a
	 * second one: a reconnect */
	l->cap_bc = 2 * n + 16;
	l->bc = calloc(l->cap_bc, sizeof *l->bc);
	H_CHECK(l->s && l->bc, "memory for %u sessions", n);
	for (unsigned i = 0; i < n; i++) {
		l->s[i].cfd = -1;
		l->s[i].bconn = -1;
	}
	l->rate = 2048;
	l->period_ms = 100;
	l->half_len = 16 * 1024;
	l->tail = 4096;
	l->deadline = h_now_ms() + 120000;
}

int uu_target_add(struct uu_load *l, const char *name, const uint8_t *pre, size_t pre_len,
		  int pre_passes)
{
	struct uu_target *t = &l->tg[l->ntg];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int one = 1;

	H_CHECK(l->ntg < UU_MAX_TARGETS, "more than %d targets", UU_MAX_TARGETS);
	snprintf(t->name, sizeof t->name, "%s", name);
	t->pre = pre;
	t->pre_len = pre ? pre_len : 0;
	t->pre_passes = pre_passes;
	H_CHECK(h_addr_parse("127.0.0.1:0", &t->back) == 0, "address");
	t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	H_CHECK(t->lfd >= 0, "backend socket: %s", strerror(errno));
	setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	H_CHECK(bind(t->lfd, (struct sockaddr *)&t->back.ss, t->back.len) == 0 &&
		listen(t->lfd, 4096) == 0 &&
		getsockname(t->lfd, (struct sockaddr *)&ss, &sl) == 0,
		"backend %s: listen: %s", name, strerror(errno));
	h_addr_from(&t->back, (struct sockaddr *)&ss, sl);
	t->plug_fd = -1;
	return l->ntg++;
}

#define UU_PLUG 0xFFFFFFFFu /* the session index in a plug's header */

void uu_target_plug(struct uu_load *l, int t)
{
	struct uu_target *g = &l->tg[t];
	uint8_t hdr[UU_HDR];

	H_CHECK(!g->pre_len && !l->started, "a plug for %s: no pre, before the start", g->name);
	H_CHECK(listen(g->lfd, 0) == 0, "listen(0): %s", strerror(errno));
	g->plug_fd = h_connect(&g->back, 2000);
	for (unsigned k = 0; k < UU_HDR; k++)
		hdr[k] = (uint8_t)((UU_MAGIC | UU_PLUG) >> (8 * k));
	H_CHECK(g->plug_fd >= 0 && h_send_all(g->plug_fd, hdr, sizeof hdr, h_now_ms() + 2000) == 0,
		"the plug connection of %s: %s", g->name, strerror(errno));
}

void uu_target_release(struct uu_load *l, int t)
{
	struct uu_target *g = &l->tg[t];

	H_CHECK(listen(g->lfd, 4096) == 0, "listen(4096): %s", strerror(errno));
	atomic_store(&g->released, 1);
}

int uu_target_syn_sent(const struct uu_load *l, int t)
{
	FILE *f = fopen("/proc/net/tcp", "re");
	char line[512];
	int n = 0, port = h_addr_port(&l->tg[t].back);

	while (f && fgets(line, sizeof line, f)) {
		unsigned rport, st;
		if (sscanf(line, " %*d: %*8x:%*x %*8x:%x %x", &rport, &st) == 2)
			n += rport == (unsigned)port && st == 0x02;
	}
	if (f)
		fclose(f);
	return n;
}

/* What may be sent on a paced direction by now: rate per period since t0,
 * the first period's at once. (t0 may be a little after now: a loop reads
 * the clock once per pass.) */
static uint64_t uu_paced(const struct uu_load *l, int64_t t0, int64_t now)
{
	int64_t since = now > t0 ? now - t0 : 0;
	return ((uint64_t)since / (uint64_t)l->period_ms + 1) * l->rate;
}

/* ---- the client loop ----------------------------------------------------- */

static void uu_c_arm(struct uu_load *l, int ep, unsigned i, uint32_t want)
{
	h_epoll_arm(ep, l->s[i].cfd, i, &l->s[i].cmask, want);
}

static void uu_c_close(struct uu_load *l, int ep, unsigned i)
{
	struct uu_sess *s = &l->s[i];
	if (s->cfd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, s->cfd, NULL);
		close(s->cfd);
		s->cfd = -1;
	}
}

static void uu_c_done_maybe(struct uu_load *l, int ep, unsigned i)
{
	struct uu_sess *s = &l->s[i];
	if (s->c_shut && s->c_eof && !atomic_load(&s->c_end)) {
		atomic_store(&s->c_end, 1);
		atomic_fetch_add(&l->c_done, 1);
		uu_c_close(l, ep, i);
	}
}

static void uu_c_failed(struct uu_load *l, int ep, unsigned i, int err, const char *what)
{
	struct uu_sess *s = &l->s[i];
	uu_fail(l, &s->c_end, err, "client of session %u (%s): %s: %s (stream bytes sent %llu, "
		"received %llu)", i, l->tg[s->target].name, what, strerror(err),
		(unsigned long long)s->c_sent, (unsigned long long)atomic_load(&s->c_got));
	uu_c_close(l, ep, i);
}

/* Sends what session i's client may send now: pre (its first pre_cut bytes
 * at once, the rest at pre_stage), the header, then its stream. */
static void uu_c_write(struct uu_load *l, int ep, unsigned i, unsigned char *buf, int64_t now)
{
	struct uu_sess *s = &l->s[i];
	const struct uu_target *t = &l->tg[s->target];
	int fin = atomic_load(&((struct uu_target *)t)->finish);

	if (s->cfd < 0 || s->c_shut || (s->cmask & EPOLLOUT))
		return;
	if (s->kind == UU_IDLE && !fin)
		return;
	for (;;) {
		size_t n = 0, whole = t->pre_len + UU_HDR;
		if (s->c_pre < whole) {
			size_t may = s->kind == UU_IDLE || fin ||
						     atomic_load(&l->stage) >= s->pre_stage ?
					     whole : s->pre_cut;
			if (s->c_pre >= may)
				return;
			for (size_t k = s->c_pre; k < may; k++) {
				if (k < t->pre_len)
					buf[n++] = t->pre[k];
				else
					buf[n++] = (uint8_t)((UU_MAGIC | i) >> (8 * (k - t->pre_len)));
			}
		} else {
			if (!s->c_t0)
				s->c_t0 = now;
			if (!s->c_limit && s->kind == UU_HALF)
				s->c_limit = l->half_len;
			else if (!s->c_limit && fin)
				s->c_limit = s->c_sent + l->tail;
			uint64_t upto = s->c_limit ? s->c_limit : uu_paced(l, s->c_t0, now);
			if (s->c_sent >= upto) {
				if (s->c_limit && s->c_sent == s->c_limit) {
					if (shutdown(s->cfd, SHUT_WR) < 0) {
						uu_c_failed(l, ep, i, errno, "shutdown");
						return;
					}
					s->c_shut = 1;
					uu_c_done_maybe(l, ep, i);
				}
				return;
			}
			n = upto - s->c_sent < UU_BUF ? (size_t)(upto - s->c_sent) : UU_BUF;
			h_gen(uu_seed_up(l, i), s->c_sent, buf, n);
		}
		ssize_t r = send(s->cfd, buf, n, MSG_NOSIGNAL);
		if (r < 0 && uu_again(errno)) {
			uu_c_arm(l, ep, i, s->cmask | EPOLLOUT);
			return;
		}
		if (r < 0) {
			uu_c_failed(l, ep, i, errno, "send");
			return;
		}
		if (s->c_pre < whole)
			s->c_pre += (uint32_t)r;
		else
			s->c_sent += (uint64_t)r;
	}
}

static void uu_c_read(struct uu_load *l, int ep, unsigned i, unsigned char *buf)
{
	struct uu_sess *s = &l->s[i];

	for (int k = 0; k < 4 && s->cfd >= 0 && !s->c_eof; k++) {
		ssize_t r = recv(s->cfd, buf, UU_BUF, 0);
		if (r > 0) {
			uint64_t got = atomic_load(&s->c_got);
			size_t bad = h_gen_check(uu_seed_down(l, i), got, buf, (size_t)r);
			if (bad < (size_t)r) {
				uu_c_failed(l, ep, i, EPROTO, "the backend's stream differs");
				return;
			}
			atomic_store(&s->c_got, got + (uint64_t)r);
			atomic_fetch_add(&l->down_bytes, (uint64_t)r);
		} else if (r == 0) {
			/* the backend shuts its side only once its target finished */
			if (!atomic_load(&l->tg[s->target].finish)) {
				uu_c_failed(l, ep, i, ENODATA, "EOF before the session was finished");
				return;
			}
			s->c_eof = 1;
			uu_c_arm(l, ep, i, s->cmask & ~(uint32_t)EPOLLIN);
			uu_c_done_maybe(l, ep, i);
			return;
		} else {
			if (!uu_again(errno))
				uu_c_failed(l, ep, i, errno, "recv");
			return;
		}
	}
}

static void *uu_client_main(void *arg)
{
	struct uu_load *l = arg;
	unsigned char *buf = malloc(UU_BUF);
	struct epoll_event evs[UU_EVENTS];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (!buf || ep < 0) {
		uu_fail(l, NULL, ENOMEM, "client loop: no memory or epoll");
		atomic_store(&l->stop, 1);
		free(buf);
		return NULL;
	}
	for (unsigned i = 0; i < l->n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
		l->s[i].cmask = EPOLLIN;
		epoll_ctl(ep, EPOLL_CTL_ADD, l->s[i].cfd, &ev);
	}
	/* the paced sends are made by a pass over every session at most every
	 * UU_PASS_MS; a socket that was full is written as soon as it drains */
	for (int64_t pass = 0; !atomic_load(&l->stop) && h_now_ms() < l->deadline;) {
		int k = epoll_wait(ep, evs, UU_EVENTS, UU_PASS_MS);
		int64_t now = h_now_ms();
		for (int e = 0; e < k; e++) {
			unsigned i = evs[e].data.u32;
			if (l->s[i].cfd < 0)
				continue;
			if (evs[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				uu_c_read(l, ep, i, buf);
			if (l->s[i].cfd >= 0 && (evs[e].events & (EPOLLOUT | EPOLLERR))) {
				uu_c_arm(l, ep, i, l->s[i].cmask & ~(uint32_t)EPOLLOUT);
				uu_c_write(l, ep, i, buf, now);
			}
		}
		if (now - pass < UU_PASS_MS)
			continue;
		pass = now;
		int open = 0;
		for (unsigned i = 0; i < l->n; i++) {
			uu_c_write(l, ep, i, buf, now);
			open += l->s[i].cfd >= 0;
		}
		if (!open)
			break;
	}
	for (unsigned i = 0; i < l->n; i++)
		uu_c_close(l, ep, i);
	close(ep);
	free(buf);
	return NULL;
}

/* ---- the backend loop ---------------------------------------------------- */

static void uu_b_close(struct uu_load *l, int ep, struct uu_bconn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	c->ended = 1;
}

static void uu_b_failed(struct uu_load *l, int ep, struct uu_bconn *c, int err, const char *what)
{
	if (c->sess < 0) {
		uu_fail(l, NULL, err, "a backend connection of %s, before it named its session (%u "
			"bytes of pre and header): %s: %s", l->tg[c->target].name, c->pos, what,
			strerror(err));
	} else {
		struct uu_sess *s = &l->s[c->sess];
		uu_fail(l, &s->b_end, err, "backend of session %d (%s): %s: %s (stream bytes sent "
			"%llu, received %llu)", c->sess, l->tg[c->target].name, what, strerror(err),
			(unsigned long long)s->b_sent, (unsigned long long)atomic_load(&s->b_got));
	}
	uu_b_close(l, ep, c);
}

static void uu_b_done_maybe(struct uu_load *l, int ep, struct uu_bconn *c)
{
	struct uu_sess *s = &l->s[c->sess];
	if (s->b_shut && s->b_eof && !atomic_load(&s->b_end)) {
		atomic_store(&s->b_end, 1);
		atomic_fetch_add(&l->b_done, 1);
		uu_b_close(l, ep, c);
	}
}

static void uu_b_write(struct uu_load *l, int ep, struct uu_bconn *c, unsigned char *buf,
		       int64_t now)
{
	if (c->fd < 0 || c->sess < 0 || (c->mask & EPOLLOUT))
		return;
	struct uu_sess *s = &l->s[c->sess];
	int fin = atomic_load(&l->tg[c->target].finish);

	if (s->b_shut || (s->kind == UU_IDLE && !fin))
		return;
	for (;;) {
		if (!s->b_limit && fin)
			s->b_limit = s->b_sent + l->tail;
		uint64_t upto = s->b_limit ? s->b_limit : uu_paced(l, s->b_t0, now);
		if (s->b_sent >= upto) {
			if (s->b_limit && s->b_sent == s->b_limit) {
				if (shutdown(c->fd, SHUT_WR) < 0) {
					uu_b_failed(l, ep, c, errno, "shutdown");
					return;
				}
				s->b_shut = 1;
				uu_b_done_maybe(l, ep, c);
			}
			return;
		}
		size_t n = upto - s->b_sent < UU_BUF ? (size_t)(upto - s->b_sent) : UU_BUF;
		h_gen(uu_seed_down(l, (unsigned)c->sess), s->b_sent, buf, n);
		ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL);
		if (r < 0 && uu_again(errno)) {
			h_epoll_arm(ep, c->fd, (uint32_t)(c - l->bc), &c->mask, c->mask | EPOLLOUT);
			return;
		}
		if (r < 0) {
			uu_b_failed(l, ep, c, errno, "send");
			return;
		}
		s->b_sent += (uint64_t)r;
	}
}

/* The header names the session: it must be one of this target's, and not
 * named before (a second backend connection of a session is a reconnect). */
static int uu_b_claim(struct uu_load *l, int ep, struct uu_bconn *c)
{
	uint64_t h = 0;
	for (unsigned k = 0; k < UU_HDR; k++)
		h |= (uint64_t)c->hdr[k] << (8 * k);
	uint64_t i = h & ~UU_MAGIC;
	if ((h & UU_MAGIC) == UU_MAGIC && i == UU_PLUG && l->tg[c->target].plug_fd >= 0) {
		atomic_fetch_add(&l->plugs, 1);
		uu_b_close(l, ep, c);
		return -1;
	}
	if ((h & UU_MAGIC) != UU_MAGIC || i >= l->n) {
		uu_b_failed(l, ep, c, EPROTO, "the header names no session");
		return -1;
	}
	struct uu_sess *s = &l->s[i];
	if (s->target != c->target || s->bconn >= 0) {
		atomic_fetch_add(&l->extra, 1);
		uu_b_failed(l, ep, c, EPROTO, s->bconn >= 0 ? "a second backend connection of one "
			    "session (a reconnect)" : "a session of another target");
		return -1;
	}
	c->sess = (int)i;
	s->bconn = (int)(c - l->bc);
	s->b_t0 = h_now_ms();
	atomic_fetch_add(&l->claimed, 1);
	return 0;
}

static void uu_b_read(struct uu_load *l, int ep, struct uu_bconn *c, unsigned char *buf)
{
	const struct uu_target *t = &l->tg[c->target];
	size_t lead = (t->pre_passes ? t->pre_len : 0) + UU_HDR;

	for (int k = 0; k < 4 && c->fd >= 0; k++) {
		ssize_t r = recv(c->fd, buf, UU_BUF, 0);
		if (r == 0) {
			if (c->sess < 0) {
				uu_b_failed(l, ep, c, ENODATA, "EOF");
				return;
			}
			struct uu_sess *s = &l->s[c->sess];
			int legit = s->kind == UU_HALF ? atomic_load(&s->b_got) == l->half_len
						       : atomic_load(&((struct uu_target *)t)->finish);
			if (!legit) {
				uu_b_failed(l, ep, c, ENODATA, "EOF before the session was finished");
				return;
			}
			s->b_eof = 1;
			h_epoll_arm(ep, c->fd, (uint32_t)(c - l->bc), &c->mask,
				    c->mask & ~(uint32_t)EPOLLIN);
			uu_b_done_maybe(l, ep, c);
			return;
		}
		if (r < 0) {
			if (!uu_again(errno))
				uu_b_failed(l, ep, c, errno, "recv");
			return;
		}
		size_t off = 0;
		while (off < (size_t)r && c->pos < lead) {
			size_t p = c->pos++;
			uint8_t b = buf[off++];
			if (p < lead - UU_HDR) {
				if (b != t->pre[p]) {
					uu_b_failed(l, ep, c, EPROTO, "the bytes before the header "
						    "differ from what the client sent");
					return;
				}
			} else {
				c->hdr[p - (lead - UU_HDR)] = b;
				if (c->pos == lead && uu_b_claim(l, ep, c) < 0)
					return;
			}
		}
		if (off == (size_t)r)
			continue;
		struct uu_sess *s = &l->s[c->sess];
		uint64_t got = atomic_load(&s->b_got);
		size_t n = (size_t)r - off;
		if (h_gen_check(uu_seed_up(l, (unsigned)c->sess), got, buf + off, n) < n) {
			uu_b_failed(l, ep, c, EPROTO, "the client's stream differs");
			return;
		}
		atomic_store(&s->b_got, got + n);
		atomic_fetch_add(&l->up_bytes, n);
	}
}

static void uu_b_accept(struct uu_load *l, int ep, int t)
{
	for (int k = 0; k < 64; k++) {
		int fd = accept4(l->tg[t].lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		atomic_fetch_add(&l->accepts, 1);
		atomic_fetch_add(&l->tg[t].accepted, 1);
		if (l->nbc == l->cap_bc) {
			atomic_fetch_add(&l->extra, 1);
			uu_fail(l, NULL, EMFILE, "more backend connections than the table holds (%u)",
				l->cap_bc);
			close(fd);
			continue;
		}
		struct uu_bconn *c = &l->bc[l->nbc];
		*c = (struct uu_bconn){ .fd = fd, .target = (uint8_t)t, .mask = EPOLLIN, .sess = -1 };
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = l->nbc++ };
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
}

static void *uu_backend_main(void *arg)
{
	struct uu_load *l = arg;
	unsigned char *buf = malloc(UU_BUF);
	struct epoll_event evs[UU_EVENTS];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (!buf || ep < 0) {
		uu_fail(l, NULL, ENOMEM, "backend loop: no memory or epoll");
		atomic_store(&l->stop, 1);
		free(buf);
		return NULL;
	}
	for (int64_t pass = 0; !atomic_load(&l->stop) && h_now_ms() < l->deadline;) {
		int k = epoll_wait(ep, evs, UU_EVENTS, UU_PASS_MS);
		int64_t now = h_now_ms();
		for (int e = 0; e < k; e++) {
			uint32_t id = evs[e].data.u32;
			if (id & UU_LISTENER) {
				uu_b_accept(l, ep, (int)(id & ~UU_LISTENER));
				continue;
			}
			struct uu_bconn *c = &l->bc[id];
			if (c->fd < 0)
				continue;
			if (evs[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				uu_b_read(l, ep, c, buf);
			if (c->fd >= 0 && (evs[e].events & (EPOLLOUT | EPOLLERR))) {
				h_epoll_arm(ep, c->fd, id, &c->mask, c->mask & ~(uint32_t)EPOLLOUT);
				uu_b_write(l, ep, c, buf, now);
			}
		}
		if (now - pass < UU_PASS_MS)
			continue;
		pass = now;
		/* a plugged listener joins once released: polled before, it
		 * would be readable with the plug, not accepted, at every wait */
		for (int t = 0; t < l->ntg; t++) {
			struct uu_target *g = &l->tg[t];
			if (g->polled || (g->plug_fd >= 0 && !atomic_load(&g->released)))
				continue;
			struct epoll_event ev = { .events = EPOLLIN,
						  .data.u32 = UU_LISTENER | (uint32_t)t };
			epoll_ctl(ep, EPOLL_CTL_ADD, g->lfd, &ev);
			g->polled = 1;
		}
		for (unsigned j = 0; j < l->nbc; j++)
			uu_b_write(l, ep, &l->bc[j], buf, now);
	}
	for (unsigned j = 0; j < l->nbc; j++)
		uu_b_close(l, ep, &l->bc[j]);
	close(ep);
	free(buf);
	return NULL;
}

/* ---- control ------------------------------------------------------------- */

void uu_load_start(struct uu_load *l)
{
	H_CHECK(pthread_create(&l->bt, NULL, uu_backend_main, l) == 0, "backend loop thread");
	l->started = 1;
	for (unsigned i = 0; i < l->n; i++) {
		struct uu_sess *s = &l->s[i];
		const struct uu_target *t = &l->tg[s->target];
		if (s->pre_cut > t->pre_len || !t->pre)
			s->pre_cut = (uint32_t)t->pre_len;
		s->cfd = h_connect(&t->front, 3000);
		H_CHECK(s->cfd >= 0, "session %u: connect to %s (%s): %s", i, t->front.text, t->name,
			strerror(errno));
		fcntl(s->cfd, F_SETFL, fcntl(s->cfd, F_GETFL) | O_NONBLOCK);
		h_set_nodelay(s->cfd);
		atomic_fetch_add(&l->connected, 1);
	}
	H_CHECK(pthread_create(&l->ct, NULL, uu_client_main, l) == 0, "client loop thread");
	l->started = 2;
}

void uu_load_finish(struct uu_load *l, int t)
{
	for (int k = 0; k < l->ntg; k++)
		if (t < 0 || k == t)
			atomic_store(&l->tg[k].finish, 1);
}

/* 1 when both ends of session i have ended (either way). */
static int uu_ended(const struct uu_load *l, unsigned i)
{
	struct uu_sess *s = &l->s[i];
	return atomic_load(&s->c_end) && (atomic_load(&s->b_end) || atomic_load(&s->c_end) < 0);
}

int uu_load_wait(struct uu_load *l, int t, int ms)
{
	int64_t end = h_now_ms() + ms;
	for (;;) {
		int open = 0;
		for (unsigned i = 0; i < l->n; i++)
			if ((t < 0 || l->s[i].target == t) && !uu_ended(l, i))
				open++;
		if (!open || h_now_ms() > end)
			return open;
		h_sleep_ms(10);
	}
}

void uu_load_join(struct uu_load *l)
{
	atomic_store(&l->stop, 1);
	if (l->started >= 1)
		pthread_join(l->bt, NULL);
	if (l->started >= 2)
		pthread_join(l->ct, NULL);
	l->started = 0;
	for (unsigned i = 0; i < l->n; i++)
		if (l->s[i].cfd >= 0) {
			close(l->s[i].cfd);
			l->s[i].cfd = -1;
		}
	for (int t = 0; t < l->ntg; t++) {
		if (l->tg[t].lfd >= 0) {
			close(l->tg[t].lfd);
			l->tg[t].lfd = -1;
		}
		if (l->tg[t].plug_fd >= 0) {
			close(l->tg[t].plug_fd);
			l->tg[t].plug_fd = -1;
		}
	}
}

void uu_load_free(struct uu_load *l)
{
	free(l->s);
	free(l->bc);
	l->s = NULL;
	l->bc = NULL;
}

void uu_load_snapshot(struct uu_load *l, uint64_t *c, uint64_t *b)
{
	for (unsigned i = 0; i < l->n; i++) {
		c[i] = atomic_load(&l->s[i].c_got);
		b[i] = atomic_load(&l->s[i].b_got);
	}
}

unsigned uu_load_moved(struct uu_load *l, int t, const uint64_t *c, const uint64_t *b,
		       unsigned *want)
{
	unsigned moved = 0;

	*want = 0;
	for (unsigned i = 0; i < l->n; i++) {
		const struct uu_sess *s = &l->s[i];
		if ((t >= 0 && s->target != t) || s->kind == UU_IDLE || s->bconn < 0 ||
		    atomic_load(&l->tg[s->target].finish) || atomic_load(&s->c_end))
			continue;
		(*want)++;
		/* down: the backend's paced stream; up: the client's, unless it
		 * half-closed */
		int down = atomic_load(&s->c_got) > c[i];
		int up = s->kind == UU_HALF || atomic_load(&s->b_got) > b[i];
		moved += down && up;
	}
	return moved;
}

int uu_load_wait_moved(struct uu_load *l, int t, const uint64_t *c, const uint64_t *b, int ms,
		       unsigned *moved, unsigned *want)
{
	int64_t end = h_now_ms() + ms;
	for (;;) {
		*moved = uu_load_moved(l, t, c, b, want);
		if (*moved == *want)
			return 0;
		if (h_now_ms() > end)
			return -1;
		h_sleep_ms(10);
	}
}

enum uu_end uu_outcome(const struct uu_load *l, unsigned i)
{
	const struct uu_sess *s = &l->s[i];
	int ce = atomic_load(&s->c_end), be = atomic_load(&s->b_end);

	if (ce == -ECONNRESET || ce == -EPIPE || be == -ECONNRESET || be == -EPIPE)
		return UU_RESET;
	if (ce == 1 && be == 1 && atomic_load(&s->c_got) == s->b_sent &&
	    atomic_load(&s->b_got) == s->c_sent)
		return UU_DELIVERED;
	return ce || be ? UU_CUT : UU_RUNNING;
}

void uu_load_check(const struct uu_load *l, int t, const char *what)
{
	unsigned want = 0, delivered = 0, reset = 0, cut = 0, first_bad = l->n;

	for (unsigned i = 0; i < l->n; i++) {
		if (t >= 0 && l->s[i].target != t)
			continue;
		want++;
		switch (uu_outcome(l, i)) {
		case UU_DELIVERED: delivered++; break;
		case UU_RESET: reset++; break;
		default: cut++; break;
		}
		if (uu_outcome(l, i) != UU_DELIVERED && first_bad == l->n)
			first_bad = i;
	}
	if (first_bad < l->n) {
		const struct uu_sess *s = &l->s[first_bad];
		H_CHECK(0, "%s: %u of %u sessions delivered, %u reset, %u cut or unfinished; first "
			"failure: %s; session %u (%s): client end %d, sent %llu, received %llu of "
			"%llu; backend end %d, sent %llu, received %llu of %llu", what, delivered,
			want, reset, cut, l->why[0] ? l->why : "-", first_bad,
			l->tg[s->target].name, atomic_load(&s->c_end),
			(unsigned long long)s->c_sent, (unsigned long long)atomic_load(&s->c_got),
			(unsigned long long)s->b_sent, atomic_load(&s->b_end),
			(unsigned long long)s->b_sent, (unsigned long long)atomic_load(&s->b_got),
			(unsigned long long)s->c_sent);
	}
	if (t < 0) {
		H_CHECK(l->failed == 0 && l->resets == 0 && l->extra == 0, "%s: every session was "
			"delivered, yet %d ends failed, %d resets, %d backend connections of no "
			"session (first: %s)", what, (int)l->failed, (int)l->resets, (int)l->extra,
			l->why[0] ? l->why : "-");
		H_CHECK(l->accepts - l->plugs == (int)l->n && l->claimed == (int)l->n, "%s: %d "
			"backend connections accepted and %d named their session, for %u sessions "
			"(each session one client connection and one backend connection: no "
			"reconnect)", what, (int)(l->accepts - l->plugs), (int)l->claimed, l->n);
	}
}
