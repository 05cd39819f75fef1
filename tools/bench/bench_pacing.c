/* SPDX-License-Identifier: MIT */
/* bench_pacing: see bench_pacing.h. */
#define _GNU_SOURCE
#include "bench_pacing.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_proxy.h"
#include "json.h"
#include "sockopt.h"

#define PC_MAX_RATES 8
#define PC_WARMUP_S  1.0 /* TCP's initial window goes out unpaced: not measured */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the sender: every connection gets bytes without end -------------------- */

struct sender {
	int lfd;
	volatile int stop;
	pthread_t thr;
	char addr[64];
};

static void *send_conn(void *arg)
{
	static char buf[1 << 20];
	int fd = (int)(intptr_t)arg;

	while (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) > 0)
		;
	close(fd);
	return NULL;
}

static void *accept_loop(void *arg)
{
	struct sender *s = arg;

	while (!s->stop) {
		pthread_t t;
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (pthread_create(&t, NULL, send_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
	return NULL;
}

static int sender_start(struct sender *s)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t l = sizeof(sin);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(s->lfd, 16) ||
	    getsockname(s->lfd, (struct sockaddr *)&sin, &l))
		return -1;
	snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%d", ntohs(sin.sin_port));
	return pthread_create(&s->thr, NULL, accept_loop, s) ? -1 : 0;
}

/* ---- one row -------------------------------------------------------------- */

struct row {
	char proxy[16];     /* "splicer", "nginx" */
	uint64_t limit;     /* bytes/s; 0: unlimited */
	double rate;        /* achieved after the warm-up, bytes/s */
	double cpu_per_gb;  /* proxy CPU seconds per 10^9 bytes */
	int cpu_below;      /* no CPU measured: cpu_per_gb is one clock tick's, a bound */
	char err[200];      /* why the row did not run */
};

/* Reads through the proxy for warm-up + seconds; the rate and the CPU of
 * the proxy's processes over the measured part. */
static int measure(const struct bench_proxy *p, double seconds, struct row *r)
{
	static char buf[1 << 20];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = 1 };
	double t0, t1 = 0, cpu1 = 0;
	uint64_t got = 0, got1 = 0;

	if (fd < 0 || connect(fd, (const struct sockaddr *)&p->ss, p->len)) {
		snprintf(r->err, sizeof(r->err), "connect: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	t0 = now_s();
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		double t = now_s();
		if (n <= 0) {
			snprintf(r->err, sizeof(r->err), "the stream ended: %s",
				 n ? strerror(errno) : "EOF");
			close(fd);
			return -1;
		}
		got += (uint64_t)n;
		if (!t1 && t - t0 >= PC_WARMUP_S) {
			t1 = t;
			got1 = got;
			cpu1 = bench_tree_cpu(p->pid);
		}
		if (t1 && t - t1 >= seconds) {
			r->rate = (double)(got - got1) / (t - t1);
			double cpu = bench_tree_cpu(p->pid) - cpu1;
			/* nothing measured (a kernel without the process CPU
			 * clock counts in 10 ms ticks): one tick is a bound */
			r->cpu_below = cpu <= 0;
			r->cpu_per_gb = (r->cpu_below ? 0.01 : cpu) / ((double)(got - got1) / 1e9);
			break;
		}
	}
	close(fd);
	return 0;
}

static void run_row(const struct sender *s, enum proxy_kind kind, uint64_t limit, double seconds,
		    struct row *r)
{
	char rate[32], bytes[32], err[512];
	struct bench_case c = { .kind = kind };
	struct bench_proxy p;
	const char *why;

	memset(r, 0, sizeof(*r));
	r->limit = limit;
	snprintf(r->proxy, sizeof(r->proxy), "%s", kind == PX_NGINX ? "nginx" : "splicer");
	sockopt_format_rate(limit, rate, sizeof(rate));
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)limit);
	c.name = r->proxy;
	if (kind == PX_SPLICER) {
		c.opts[0] = "--engine";
		c.opts[1] = "splice";
		c.opts[2] = limit ? "--rate-limit-down" : NULL;
		c.opts[3] = limit ? rate : NULL;
	} else if (limit) {
		c.opts[0] = "conf:nginx-rate.conf";
		c.opts[1] = bytes; /* proxy_download_rate: bytes per second */
	}
	if ((why = bench_case_unavailable(&c))) {
		snprintf(r->err, sizeof(r->err), "%s", why);
		return;
	}
	if (bench_proxy_start(&p, &c, s->addr, "127.0.0.1", 1, err, sizeof(err))) {
		snprintf(r->err, sizeof(r->err), "%.199s", err);
		return;
	}
	measure(&p, seconds, r);
	bench_proxy_stop(&p);
}

static void usage(void)
{
	fprintf(stderr, "usage: splicer bench --pacing [--rates LIST] [--seconds S] "
		"[--peers nginx|none] [--json FILE]\n"
		"  --rates LIST   rates to limit to (default 10mbit,100mbit,500mbit,1gbit)\n"
		"  --seconds S    measured per row, after a second of warm-up (default 4)\n"
		"  --peers LIST   nginx (proxy_download_rate) beside splicer, or none (default nginx)\n"
		"  --json FILE    the rows as JSON too\n");
}

static void print_row(const struct row *r)
{
	char lim[32];

	if (r->limit)
		sockopt_format_rate(r->limit, lim, sizeof(lim));
	else
		snprintf(lim, sizeof(lim), "none");
	if (r->err[0]) {
		printf("| %-8s | %-9s | not run: %s |\n", r->proxy, lim, r->err);
		return;
	}
	char err[32] = "-", cpu[32];
	if (r->limit)
		snprintf(err, sizeof(err), "%+.2f %%", (r->rate / (double)r->limit - 1) * 100);
	snprintf(cpu, sizeof(cpu), "%s%.3f", r->cpu_below ? "< " : "", r->cpu_per_gb);
	printf("| %-8s | %-9s | %10.2f | %9s | %9s |\n", r->proxy, lim, r->rate * 8 / 1e6, err, cpu);
}

int bench_pacing_main(int argc, char **argv)
{
	uint64_t rates[PC_MAX_RATES] = { 1250000, 12500000, 62500000, 125000000 };
	unsigned nrates = 4, nrows = 0;
	double seconds = 4;
	int peers = 1, bad = 0;
	const char *json = NULL;
	static struct row rows[2 * (PC_MAX_RATES + 1)];
	struct sender s = { .lfd = -1 };

	for (int i = 2; i < argc; i++) { /* splicer bench ... */
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char why[256], list[512], *save, *t;
		if (!strcmp(a, "--pacing")) {
			continue;
		} else if (!strcmp(a, "--seconds") && v) {
			seconds = atof(v), i++;
			if (seconds < 0.5 || seconds > 600) {
				fprintf(stderr, "splicer bench: --seconds %s: 0.5 to 600\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--rates") && v) {
			snprintf(list, sizeof(list), "%s", v), i++;
			nrates = 0;
			for (t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				why[0] = '\0';
				if (nrates == PC_MAX_RATES)
					snprintf(why, sizeof(why), "at most %d rates", PC_MAX_RATES);
				else if (!sockopt_parse_rate(t, &rates[nrates], why, sizeof(why)) &&
					 (!rates[nrates] || (rates[nrates] & SOCKOPT_RATE_PER_SOURCE)))
					snprintf(why, sizeof(why), "'%s': a rate per session, not 0 or /source", t);
				if (why[0]) {
					fprintf(stderr, "splicer bench: --rates: %s\n", why);
					return 2;
				}
				nrates++;
			}
		} else if (!strcmp(a, "--peers") && v) {
			if (strcmp(v, "nginx") && strcmp(v, "none")) {
				fprintf(stderr, "splicer bench: --peers %s: nginx or none\n", v);
				return 2;
			}
			peers = !strcmp(v, "nginx"), i++;
		} else if (!strcmp(a, "--json") && v) {
			json = v, i++;
		} else {
			usage();
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (sender_start(&s)) {
		fprintf(stderr, "splicer bench: the sender: %s\n", strerror(errno));
		return 1;
	}
	/* unlimited first: the CPU per GB the limited rows stand beside */
	for (int k = 0; k <= peers; k++) {
		enum proxy_kind kind = k ? PX_NGINX : PX_SPLICER;
		run_row(&s, kind, 0, seconds, &rows[nrows++]);
		for (unsigned i = 0; i < nrates; i++)
			run_row(&s, kind, rates[i], seconds, &rows[nrows++]);
	}
	printf("Rate limits on loopback, one stream, %.0f s measured after %.0f s of warm-up "
	       "(splicer: rate_limit_down with the splice engine, kernel pacing; nginx: "
	       "proxy_download_rate)\n\n", seconds, PC_WARMUP_S);
	printf("| proxy    | limit     | achieved Mbit/s | error | proxy CPU s/GB |\n"
	       "|---|---|---|---|---|\n");
	for (unsigned i = 0; i < nrows; i++) {
		print_row(&rows[i]);
		bad |= rows[i].proxy[0] == 's' && rows[i].err[0];
	}
	if (json) {
		FILE *f = fopen(json, "we");
		struct json j;
		if (!f) {
			fprintf(stderr, "splicer bench: %s: %s\n", json, strerror(errno));
			return 1;
		}
		json_init(&j, f);
		json_obj_begin(&j, NULL);
		json_num(&j, "seconds", seconds);
		json_arr_begin(&j, "rows");
		for (unsigned i = 0; i < nrows; i++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "proxy", rows[i].proxy);
			json_int(&j, "limit_bytes_per_s", (long long)rows[i].limit);
			if (rows[i].err[0]) {
				json_str(&j, "error", rows[i].err);
			} else {
				json_num(&j, "achieved_bytes_per_s", rows[i].rate);
				json_num(&j, "cpu_s_per_gb", rows[i].cpu_per_gb);
				json_bool(&j, "cpu_is_upper_bound", rows[i].cpu_below);
			}
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_obj_end(&j);
		bad |= json_finish(&j) != 0;
		fclose(f);
	}
	s.stop = 1;
	shutdown(s.lfd, SHUT_RDWR);
	pthread_join(s.thr, NULL);
	close(s.lfd);
	return bad;
}
