/* SPDX-License-Identifier: MIT */
/* bench_idle: see bench_idle.h. */
#define _GNU_SOURCE
#include "bench_idle.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_proxy.h"
#include "bench_traffic.h"
#include "json.h"
#include "stats.h"

#define ID_MAX_SIZES 4
#define ID_MAX_CASES 12
#define ID_MAX_REPS  9
#define ID_MSG       64   /* bytes each session carries each way before it idles */
#define ID_SETTLE_MS 1000 /* after the last session opened: lazy frees done */
#define ID_BATCH     100

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---- the backend: echoes, then holds every connection ------------------ */

struct holder {
	int lfd, ep;
	volatile int stop;
	volatile int open;   /* connections it holds */
	pthread_t thr;
	char addr[64];
};

/* An RST rather than a FIN at the end: no TIME_WAIT left on the proxy's
 * side to expire (and free slab) while the next case is measured. */
static void close_rst(int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void *holder_main(void *arg)
{
	struct holder *h = arg;
	struct epoll_event ev[256];
	char buf[4096];

	while (!h->stop) {
		int n = epoll_wait(h->ep, ev, 256, 100);
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd == h->lfd) {
				int c;
				while ((c = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event e = { .events = EPOLLIN, .data.fd = c };
					if (epoll_ctl(h->ep, EPOLL_CTL_ADD, c, &e))
						close(c);
					else
						__atomic_add_fetch(&h->open, 1, __ATOMIC_RELAXED);
				}
				continue;
			}
			ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r > 0 && send(fd, buf, (size_t)r, MSG_DONTWAIT | MSG_NOSIGNAL) == r)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			epoll_ctl(h->ep, EPOLL_CTL_DEL, fd, NULL);
			close_rst(fd);
			__atomic_sub_fetch(&h->open, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static int holder_start(struct holder *h)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t l = sizeof(sin);
	struct epoll_event e = { .events = EPOLLIN };

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	h->ep = epoll_create1(EPOLL_CLOEXEC);
	e.data.fd = h->lfd;
	if (h->lfd < 0 || h->ep < 0 || bind(h->lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(h->lfd, 4096) || getsockname(h->lfd, (struct sockaddr *)&sin, &l) ||
	    epoll_ctl(h->ep, EPOLL_CTL_ADD, h->lfd, &e))
		return -1;
	snprintf(h->addr, sizeof(h->addr), "127.0.0.1:%d", ntohs(sin.sin_port));
	return pthread_create(&h->thr, NULL, holder_main, h) ? -1 : 0;
}

static void holder_stop(struct holder *h)
{
	h->stop = 1;
	pthread_join(h->thr, NULL);
	close(h->lfd);
	close(h->ep);
}

/* ---- what the machine holds --------------------------------------------- */

struct mem_sample {
	long rss_kib;     /* the proxy's processes */
	long slab_kib;    /* the kernel's slab (sockets, files, epoll items, pipes' rings) */
	int sockets, pipes; /* descriptors the proxy holds */
};

static long meminfo_kib(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	size_t k = strlen(key);
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, k) && line[k] == ':')
			v = atol(line + k + 1);
	if (f)
		fclose(f);
	return v;
}

/* The sockets and pipes among the descriptors of the pids in list
 * ("PID,PID,..."). */
static void count_fds(const char *list, int *sockets, int *pipes)
{
	char copy[1024], *save, *t;

	*sockets = *pipes = 0;
	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char dir[64], path[340], to[64];
		struct dirent *d;
		DIR *dp;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", t);
		if (!(dp = opendir(dir)))
			continue;
		while ((d = readdir(dp))) {
			snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
			ssize_t n = readlink(path, to, sizeof(to) - 1);
			if (n <= 0)
				continue;
			to[n] = 0;
			*sockets += !strncmp(to, "socket:", 7);
			*pipes += !strncmp(to, "pipe:", 5);
		}
		closedir(dp);
	}
}

static void sample(pid_t pid, struct mem_sample *m)
{
	char list[1024];

	m->rss_kib = pid ? bench_tree_rss_kib(pid) : 0;
	m->slab_kib = meminfo_kib("Slab");
	bench_tree_pids(pid, list, sizeof(list));
	if (pid)
		count_fds(list, &m->sockets, &m->pipes);
	else
		m->sockets = m->pipes = 0;
}

/* ---- one measurement ------------------------------------------------------ */

struct idle_case {
	const char *name;
	struct bench_case c;
};

/* The same room for 8,000 sessions in every proxy, within `ulimit -n`
 * 20,000: splicer's automatic max-conns leaves fds for a pipe per direction
 * (4,981 sessions here), HAProxy's bench config has maxconn 7500 for its
 * splice modes' pipes (bench/haproxy-idle.cfg: 8500). Neither pipes nor
 * splicing matter to idle sessions. */
static const struct idle_case known[] = {
	{ "direct", { .name = "direct", .kind = PX_DIRECT } },
	{ "copy", { .name = "copy", .kind = PX_SPLICER,
		    .opts = { "--engine", "copy", "--max-conns", "8500", NULL } } },
	{ "splice", { .name = "splice", .kind = PX_SPLICER,
		      .opts = { "--engine", "splice", "--max-conns", "8500", NULL } } },
	{ "auto", { .name = "auto", .kind = PX_SPLICER,
		    .opts = { "--engine", "auto", "--max-conns", "8500", NULL } } },
	{ "uring", { .name = "uring", .kind = PX_SPLICER,
		     .opts = { "--engine", "uring", "--max-conns", "8500", NULL } } },
	{ "sockmap", { .name = "sockmap", .kind = PX_SPLICER,
		       .opts = { "--engine", "sockmap", "--max-conns", "8500", NULL } } },
	{ "haproxy", { .name = "haproxy", .kind = PX_HAPROXY,
		       .opts = { "conf:haproxy-idle.cfg", NULL } } },
	{ "nginx", { .name = "nginx", .kind = PX_NGINX } },
};
#define NKNOWN (sizeof(known) / sizeof(known[0]))

struct idle_fig {
	double rss, kernel, total;   /* KiB per session (kernel: less direct's) */
	double sockets, pipes;       /* descriptors per session */
	double open_s;               /* seconds to open them all */
};

struct idle_row {
	const struct idle_case *ic;
	unsigned sessions;
	int nrep;
	struct idle_fig rep[ID_MAX_REPS];
	struct idle_fig med;
	char err[240];
};

/* Opens n sessions through target, each carrying ID_MSG bytes each way
 * (so the proxy has connected its backend and moved bytes: the session is
 * established end to end, its buffers used once). fds[] gets them. */
static int open_sessions(const struct sockaddr_storage *ss, socklen_t len, unsigned n, int *fds,
			 char *err, size_t errlen)
{
	char msg[ID_MSG], back[ID_MSG];
	struct timeval tv = { .tv_sec = 5 };

	memset(msg, 'i', sizeof(msg));
	for (unsigned i = 0; i < n; i++)
		fds[i] = -1;
	for (unsigned b = 0; b < n; b += ID_BATCH) {
		unsigned e = b + ID_BATCH < n ? b + ID_BATCH : n;
		for (unsigned i = b; i < e; i++) {
			int one = 1;
			fds[i] = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fds[i] < 0 || setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
			    setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
			    setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
			    connect(fds[i], (const struct sockaddr *)ss, len) ||
			    send(fds[i], msg, sizeof(msg), MSG_NOSIGNAL) != (ssize_t)sizeof(msg)) {
				snprintf(err, errlen, "session %u of %u: connect or send: %s", i + 1, n,
					 strerror(errno));
				return -1;
			}
		}
		for (unsigned i = b; i < e; i++) {
			size_t got = 0;
			while (got < sizeof(back)) {
				ssize_t r = recv(fds[i], back + got, sizeof(back) - got, 0);
				if (r <= 0) {
					snprintf(err, errlen, "session %u of %u: no echo: %s", i + 1, n,
						 r ? strerror(errno) : "closed");
					return -1;
				}
				got += (size_t)r;
			}
			if (memcmp(back, msg, sizeof(msg))) {
				snprintf(err, errlen, "session %u of %u: wrong bytes back", i + 1, n);
				return -1;
			}
		}
	}
	return 0;
}

static void close_sessions(int *fds, unsigned n, struct holder *h)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close_rst(fds[i]);
	for (double end = bench_now() + 10; __atomic_load_n(&h->open, __ATOMIC_RELAXED) && bench_now() < end;)
		sleep_ms(20);
}

/* One repetition of one row: the proxy up, a sample, n sessions, a sample
 * once they idle, all closed, the proxy down. The kernel figure is raw
 * here (direct's is subtracted once every row has run). */
static int measure(struct idle_row *row, struct holder *h, struct idle_fig *f)
{
	struct bench_proxy p;
	struct mem_sample a, b;
	char err[256];
	int *fds = calloc(row->sessions, sizeof(int)), r = -1;

	if (!fds) {
		snprintf(row->err, sizeof(row->err), "out of memory");
		return -1;
	}
	if (bench_proxy_start(&p, &row->ic->c, h->addr, "127.0.0.1", 1, err, sizeof(err))) {
		snprintf(row->err, sizeof(row->err), "%.200s", err);
		free(fds);
		return -1;
	}
	sleep_ms(200);
	sample(p.pid, &a);
	double t0 = bench_now();
	if (open_sessions(&p.ss, p.len, row->sessions, fds, row->err, sizeof(row->err)) == 0) {
		f->open_s = bench_now() - t0;
		sleep_ms(ID_SETTLE_MS);
		sample(p.pid, &b);
		double n = row->sessions;
		f->rss = (double)(b.rss_kib - a.rss_kib) / n;
		/* not TCP's buffer pages (/proc/net/sockstat): an idle session's queues are
		 * empty, and the machine's other traffic moves them by hundreds of MB */
		f->kernel = (double)(b.slab_kib - a.slab_kib) / n;
		if (getenv("SPLICER_IDLE_DEBUG"))
			fprintf(stderr, "\n%s %u: rss %ld -> %ld KiB, slab %ld -> %ld KiB\n",
				row->ic->name, row->sessions, a.rss_kib, b.rss_kib, a.slab_kib, b.slab_kib);
		f->sockets = (double)(b.sockets - a.sockets) / n;
		f->pipes = (double)(b.pipes - a.pipes) / n;
		r = 0;
	}
	close_sessions(fds, row->sessions, h);
	bench_proxy_stop(&p);
	free(fds);
	return r;
}

/* ---- the run ---------------------------------------------------------------- */

static double med_of(const struct idle_row *r, size_t off)
{
	double v[ID_MAX_REPS];

	for (int i = 0; i < r->nrep; i++)
		v[i] = *(const double *)((const char *)&r->rep[i] + off);
	return r->nrep ? stats_median(v, (size_t)r->nrep) : NAN;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: splicer bench --idle [--sessions N[,N...]] [--cases LIST] [--reps N] [--json FILE]\n"
		"  --sessions LIST  idle sessions held at once (default 1000,8000; at most 9000: each\n"
		"                   takes two descriptors in the bench and two in the proxy)\n"
		"  --cases LIST     among direct,copy,splice,auto,uring,sockmap,haproxy,nginx\n"
		"                   (default: direct,copy,splice,auto,uring,haproxy,nginx; direct is\n"
		"                   always run: the kernel's cost of the client and backend sockets)\n"
		"  --reps N         repetitions, interleaved (default 3)\n"
		"  --json FILE      the rows as JSON too\n");
}

static const struct idle_case *find_case(const char *name)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (!strcmp(known[i].name, name))
			return &known[i];
	return NULL;
}

static void print_table(struct idle_row *rows, unsigned nrows)
{
	printf("| case | sessions | proxy RSS KiB/session | kernel KiB/session | total KiB/session | "
	       "x best peer | sockets/session | pipes/session | open s |\n"
	       "|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned i = 0; i < nrows; i++) {
		struct idle_row *r = &rows[i];
		if (r->ic->c.kind == PX_DIRECT)
			continue;
		if (!r->nrep) {
			printf("| %s | %u | not run: %s |\n", r->ic->name, r->sessions, r->err);
			continue;
		}
		double best = NAN;
		for (unsigned k = 0; k < nrows; k++) /* the better of HAProxy and nginx */
			if (rows[k].sessions == r->sessions && rows[k].nrep &&
			    (rows[k].ic->c.kind == PX_HAPROXY || rows[k].ic->c.kind == PX_NGINX) &&
			    (isnan(best) || rows[k].med.total < best))
				best = rows[k].med.total;
		char x[32] = "-";
		if (!isnan(best) && best > 0)
			snprintf(x, sizeof(x), "%.2fx", r->med.total / best);
		printf("| %s | %u | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.1f |\n", r->ic->name,
		       r->sessions, r->med.rss, r->med.kernel, r->med.total, x, r->med.sockets,
		       r->med.pipes, r->med.open_s);
	}
}

static int write_json(const char *path, struct idle_row *rows, unsigned nrows, int reps)
{
	FILE *f = fopen(path, "we");
	struct json j;

	if (!f) {
		fprintf(stderr, "splicer bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_int(&j, "reps", reps);
	json_arr_begin(&j, "rows");
	for (unsigned i = 0; i < nrows; i++) {
		json_obj_begin(&j, NULL);
		json_str(&j, "case", rows[i].ic->name);
		json_int(&j, "sessions", rows[i].sessions);
		if (!rows[i].nrep) {
			json_str(&j, "error", rows[i].err);
		} else {
			json_num(&j, "proxy_rss_kib_per_session", rows[i].med.rss);
			json_num(&j, "kernel_kib_per_session", rows[i].med.kernel);
			json_num(&j, "total_kib_per_session", rows[i].med.total);
			json_num(&j, "sockets_per_session", rows[i].med.sockets);
			json_num(&j, "pipes_per_session", rows[i].med.pipes);
			json_num(&j, "open_seconds", rows[i].med.open_s);
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	int bad = json_finish(&j) != 0;
	fclose(f);
	return bad ? -1 : 0;
}

int bench_idle_main(int argc, char **argv)
{
	unsigned sizes[ID_MAX_SIZES] = { 1000, 8000 }, nsizes = 2, nrows = 0;
	const struct idle_case *cases[ID_MAX_CASES];
	unsigned ncases = 0;
	int reps = 3, bad = 0;
	const char *json = NULL, *list = "direct,copy,splice,auto,uring,haproxy,nginx";
	static struct idle_row rows[ID_MAX_SIZES * ID_MAX_CASES];
	struct holder h = { .lfd = -1 };

	for (int i = 2; i < argc; i++) { /* splicer bench ... */
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char copy[512], *save, *t;
		if (!strcmp(a, "--idle")) {
			continue;
		} else if (!strcmp(a, "--sessions") && v) {
			snprintf(copy, sizeof(copy), "%s", v), i++;
			nsizes = 0;
			for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				char *end;
				long n = strtol(t, &end, 10);
				if (*end || n < 10 || n > 9000 || nsizes == ID_MAX_SIZES) {
					fprintf(stderr, "splicer bench: --sessions %s: up to %d counts, "
						"each 10 to 9000\n", v, ID_MAX_SIZES);
					return 2;
				}
				sizes[nsizes++] = (unsigned)n;
			}
		} else if (!strcmp(a, "--cases") && v) {
			list = v, i++;
		} else if (!strcmp(a, "--reps") && v) {
			reps = atoi(v), i++;
			if (reps < 1 || reps > ID_MAX_REPS) {
				fprintf(stderr, "splicer bench: --reps %s: 1 to %d\n", v, ID_MAX_REPS);
				return 2;
			}
		} else if (!strcmp(a, "--json") && v) {
			json = v, i++;
		} else {
			usage();
			return 2;
		}
	}
	/* direct first, always: the client's and the backend's sockets */
	char copy[512], *save, *t;
	cases[ncases++] = &known[0];
	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const struct idle_case *c = find_case(t);
		if (!c) {
			fprintf(stderr, "splicer bench: --cases: unknown case '%s' for --idle\n", t);
			usage();
			return 2;
		}
		if (c != &known[0] && ncases < ID_MAX_CASES)
			cases[ncases++] = c;
	}
	struct rlimit rl;
	unsigned most = 0;
	for (unsigned s = 0; s < nsizes; s++)
		most = sizes[s] > most ? sizes[s] : most;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2 * most + 200) {
		fprintf(stderr, "splicer bench: --idle with %u sessions needs %u descriptors here "
			"(two per session); ulimit -n is %llu\n", most, 2 * most + 200,
			(unsigned long long)rl.rlim_cur);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (holder_start(&h)) {
		fprintf(stderr, "splicer bench: the backend: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned s = 0; s < nsizes; s++)
		for (unsigned c = 0; c < ncases; c++) {
			rows[nrows].ic = cases[c];
			rows[nrows].sessions = sizes[s];
			const char *why = bench_case_unavailable(&cases[c]->c);
			if (why)
				snprintf(rows[nrows].err, sizeof(rows[nrows].err), "%s", why);
			nrows++;
		}
	/* interleaved: every row once per repetition, so drift spreads */
	for (int rep = 0; rep < reps; rep++)
		for (unsigned i = 0; i < nrows; i++) {
			struct idle_row *r = &rows[i];
			if (r->err[0] && !r->nrep)
				continue;
			fprintf(stderr, "\r\033[Kidle: rep %d/%d, %s, %u sessions", rep + 1, reps,
				r->ic->name, r->sessions);
			if (measure(r, &h, &r->rep[r->nrep]) == 0)
				r->nrep++;
		}
	fprintf(stderr, "\r\033[K");
	/* the kernel's part of a proxied session: less what direct's sockets took */
	for (unsigned i = 0; i < nrows; i++) {
		struct idle_row *r = &rows[i];
		double direct = NAN;
		for (unsigned k = 0; k < nrows; k++)
			if (rows[k].ic->c.kind == PX_DIRECT && rows[k].sessions == r->sessions &&
			    rows[k].nrep)
				direct = med_of(&rows[k], offsetof(struct idle_fig, kernel));
		for (int k = 0; k < r->nrep; k++) {
			if (r->ic->c.kind != PX_DIRECT)
				r->rep[k].kernel -= isnan(direct) ? 0 : direct;
			r->rep[k].total = r->rep[k].rss + r->rep[k].kernel;
		}
		r->med.rss = med_of(r, offsetof(struct idle_fig, rss));
		r->med.kernel = med_of(r, offsetof(struct idle_fig, kernel));
		r->med.total = med_of(r, offsetof(struct idle_fig, total));
		r->med.sockets = med_of(r, offsetof(struct idle_fig, sockets));
		r->med.pipes = med_of(r, offsetof(struct idle_fig, pipes));
		r->med.open_s = med_of(r, offsetof(struct idle_fig, open_s));
		if (!r->nrep && !r->err[0])
			snprintf(r->err, sizeof(r->err), "no repetition ran");
		bad |= !r->nrep && r->ic->c.kind == PX_SPLICER;
	}
	printf("Idle sessions held at once on loopback, each having carried %d bytes each way; "
	       "median of %d interleaved repetitions. Proxy RSS: its processes' VmRSS; kernel: "
	       "slab, less what the same sessions cost without a proxy "
	       "(direct); x best peer: total against the better of HAProxy and nginx.\n\n",
	       ID_MSG, reps);
	print_table(rows, nrows);
	if (json && write_json(json, rows, nrows, reps))
		bad = 1;
	holder_stop(&h);
	return bad;
}
