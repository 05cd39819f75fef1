/* SPDX-License-Identifier: MIT */
/* bench_upgrade: see bench_upgrade.h. */
#define _GNU_SOURCE
#include "bench_upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_proxy.h"
#include "bench_sessions.h"
#include "bench_traffic.h"
#include "json.h"
#include "stats.h"

#define UP_MAX_SIZES 4
#define UP_MAX_CASES 4
#define UP_MAX_REPS  9
#define UP_WAIT_S    30 /* the longest any step may take before the row fails */

struct up_case {
	const char *name;
	int drain; /* upgrade_sessions = drain: the reference */
	struct bench_case c;
};

/* max_conns as --idle's: 8,000 sessions in every engine within ulimit -n */
#define UP_OPTS(engine) "conf:splicer-upgrade.conf", "--engine", engine, "--max-conns", "8500"
static const struct up_case known[] = {
	{ "auto", 0, { .name = "auto", .kind = PX_SPLICER, .opts = { UP_OPTS("auto"), NULL } } },
	{ "copy", 0, { .name = "copy", .kind = PX_SPLICER, .opts = { UP_OPTS("copy"), NULL } } },
	{ "splice", 0, { .name = "splice", .kind = PX_SPLICER, .opts = { UP_OPTS("splice"), NULL } } },
	{ "drain", 1, { .name = "drain", .kind = PX_SPLICER,
			.opts = { UP_OPTS("auto"), "--upgrade-sessions", "drain", NULL } } },
};
#define NKNOWN (sizeof(known) / sizeof(known[0]))

struct up_fig {
	double ctl_ms;      /* `ctl upgrade` run to its answer */
	double ready_ms;    /* ctl run to the new process's "serving in place" line */
	double notice_ms;   /* that line to the old process's "serves now" */
	double handover_ms; /* X of the old process's "handed N sessions ... in X ms" */
	double lived_ms;    /* "serves now" to the old process's exit (NAN: it drains) */
	double handed, kept;   /* the old process's counts */
	double closed;         /* the new process's outcome="closed" */
	double rss_mib, cpu_ms; /* the new process once it adopted them */
	double failed;         /* sessions whose round trip failed afterwards */
};

struct up_row {
	const struct up_case *uc;
	unsigned sessions;
	int nrep;
	struct up_fig rep[UP_MAX_REPS];
	struct up_fig med;
	double failed;       /* summed over the repetitions */
	char err[300];       /* why a repetition did not run */
	char fail[300];      /* the first session that failed */
};

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the proxy's log -------------------------------------------------------- */

struct up_log {
	double new_ready, serves, taken; /* wall seconds of those lines; 0: not seen */
	double x_ms;
	unsigned handed, kept;
};

/* "2026-12-06T05:19:18.910Z splicer[PID] ..." to wall seconds, and PID. */
static int log_stamp(const char *line, double *t, int *pid)
{
	struct tm tm = { 0 };
	int ms;

	if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ splicer[%d]", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, pid) != 8)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*t = (double)timegm(&tm) + ms / 1e3;
	return 0;
}

static void log_read(const char *dir, pid_t old, pid_t new, struct up_log *l)
{
	char path[128], line[1024];
	FILE *f;

	memset(l, 0, sizeof(*l));
	l->x_ms = NAN;
	snprintf(path, sizeof(path), "%s/proxy.log", dir);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		double t;
		int pid;
		const char *m;
		unsigned long long x;
		if (log_stamp(line, &t, &pid))
			continue;
		if (pid == new && strstr(line, "upgrade: serving in place of the old process"))
			l->new_ready = t;
		else if (pid == new && strstr(line, "sessions taken over from the old process"))
			l->taken = t;
		else if (pid == old && strstr(line, "serves now; this one"))
			l->serves = t;
		else if (pid == old && (m = strstr(line, "upgrade: handed ")) &&
			 sscanf(m, "upgrade: handed %u sessions over to process %*d in %llu ms; %u stay",
				&l->handed, &x, &l->kept) == 3)
			l->x_ms = (double)x;
	}
	fclose(f);
}

/* ---- the upgrade -------------------------------------------------------------- */

/* The new process's splicer_upgrade_sessions_total{outcome="closed"} from
 * its stats endpoint, or NAN. */
static double metric_closed(const struct bench_proxy *p)
{
	static char buf[1 << 17];
	size_t n = 0;
	ssize_t r;
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	const char *req = "GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n", *m;

	if (fd < 0)
		return NAN;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)&p->ss2, p->len2) ||
	    send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		close(fd);
		return NAN;
	}
	while (n < sizeof(buf) - 1 && (r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = '\0';
	m = strstr(buf, "splicer_upgrade_sessions_total{outcome=\"closed\"} ");
	return m ? strtod(strchr(m, ' ') + 1, NULL) : NAN;
}

/* Runs `splicer ctl -s ADMIN upgrade` (this binary), polling every
 * millisecond for its end and for the old process's: the old process is
 * the bench's child, so it is gone when waitpid reaps it (a zombie still
 * has its /proc entry). *gone: wall seconds of its exit, 0 if it lives. */
static int run_ctl(const char *admin, pid_t old, char *ans, size_t len, double *t0, double *t1,
		   double *gone)
{
	int pfd[2], st = -1, ctl_done = 0;
	size_t n = 0;
	pid_t ctl;

	*gone = 0;
	if (pipe2(pfd, O_CLOEXEC))
		return -1;
	*t0 = wall_now();
	if ((ctl = fork()) == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execl("/proc/self/exe", "splicer", "ctl", "-s", admin, "upgrade", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (ctl < 0) {
		close(pfd[0]);
		return -1;
	}
	for (double end = bench_now() + UP_WAIT_S; bench_now() < end && !(ctl_done && *gone);) {
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
		ssize_t r;
		if (!*gone && waitpid(old, NULL, WNOHANG) == old)
			*gone = wall_now();
		if (!ctl_done && waitpid(ctl, &st, WNOHANG) == ctl) {
			*t1 = wall_now();
			ctl_done = 1;
		}
		if (poll(&pf, 1, 1) > 0 && (r = read(pfd[0], ans + n, len - 1 - n)) > 0)
			n += (size_t)r;
		ans[n] = '\0';
		/* draining: the old process lives on with its sessions */
		if (ctl_done && !*gone && strstr(ans, " 0 sessions handed over"))
			break;
	}
	while (n < len - 1 && read(pfd[0], ans + n, len - 1 - n) > 0)
		n = strlen(ans);
	ans[n] = '\0';
	close(pfd[0]);
	if (!ctl_done) {
		kill(ctl, SIGKILL);
		waitpid(ctl, NULL, 0);
		return -1;
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* One round trip of every session, bytes of its own, checked. Returns how
 * many failed; the first is described in why. */
static unsigned verify(int *fds, unsigned n, char *why, size_t len)
{
	unsigned bad = 0;

	for (unsigned b = 0; b < n; b += 100) {
		unsigned e = b + 100 < n ? b + 100 : n;
		int ok[100];
		char msg[24], back[24];
		for (unsigned i = b; i < e; i++) {
			snprintf(msg, sizeof(msg), "session %08u\n", i);
			ok[i - b] = send(fds[i], msg, 17, MSG_NOSIGNAL) == 17;
			if (!ok[i - b] && !bad++)
				snprintf(why, len, "session %u: send: %s", i + 1, strerror(errno));
		}
		for (unsigned i = b; i < e; i++) {
			size_t got = 0;
			ssize_t r = 1;
			if (!ok[i - b])
				continue;
			snprintf(msg, sizeof(msg), "session %08u\n", i);
			while (got < 17 && (r = recv(fds[i], back + got, 17 - got, 0)) > 0)
				got += (size_t)r;
			if (got == 17 && !memcmp(back, msg, 17))
				continue;
			if (!bad++)
				snprintf(why, len, "session %u of %u: %s", i + 1, n,
					 got == 17 ? "wrong bytes back" : r == 0 ? "closed" : strerror(errno));
		}
	}
	return bad;
}

/* One repetition of one row: splicer up, n sessions, ctl upgrade, the
 * figures, every session checked, all closed, both processes down. */
static int measure(struct up_row *row, struct bench_holder *h, struct up_fig *f)
{
	struct bench_proxy p;
	struct up_log lg;
	char err[512], admin[128], ans[1024] = "";
	int *fds = calloc(row->sessions, sizeof(int)), r = -1;
	double t0 = 0, t1 = 0, gone = 0;
	pid_t old, new = 0;

	if (!fds) {
		snprintf(row->err, sizeof(row->err), "out of memory");
		return -1;
	}
	if (bench_proxy_start(&p, &row->uc->c, h->addr, "127.0.0.1", 1, err, sizeof(err))) {
		snprintf(row->err, sizeof(row->err), "%.250s", err);
		free(fds);
		return -1;
	}
	old = p.pid;
	snprintf(admin, sizeof(admin), "%s/admin.sock", p.dir);
	if (bench_sessions_open(&p.ss, p.len, row->sessions, fds, row->err, sizeof(row->err)))
		goto out;
	if (run_ctl(admin, old, ans, sizeof(ans), &t0, &t1, &gone) ||
	    sscanf(ans, "ok: upgraded: process %d serves now", &new) != 1) {
		ans[strcspn(ans, "\n")] = '\0';
		snprintf(row->err, sizeof(row->err), "ctl upgrade: %.250s", ans[0] ? ans : "no answer");
		goto out;
	}
	p.pid = new; /* the bench is its reaper (PR_SET_CHILD_SUBREAPER) */
	/* the figures once the new process has adopted them (its last line of it) */
	for (double end = bench_now() + UP_WAIT_S; bench_now() < end; bench_sleep_ms(5)) {
		log_read(p.dir, old, new, &lg);
		if (lg.taken && lg.serves && !isnan(lg.x_ms))
			break;
	}
	if (!lg.taken || !lg.serves || !lg.new_ready || isnan(lg.x_ms)) {
		snprintf(row->err, sizeof(row->err), "the log lacks the upgrade's lines (%s/proxy.log)",
			 p.dir);
		goto out;
	}
	f->rss_mib = (double)bench_tree_rss_kib(new) / 1024;
	f->cpu_ms = bench_tree_cpu(new) * 1e3;
	f->ctl_ms = (t1 - t0) * 1e3;
	f->ready_ms = (lg.new_ready - t0) * 1e3;
	f->notice_ms = (lg.serves - lg.new_ready) * 1e3;
	f->handover_ms = lg.x_ms;
	f->handed = lg.handed;
	f->kept = lg.kept;
	f->lived_ms = gone ? (gone - lg.serves) * 1e3 : NAN;
	if (!gone && !row->uc->drain) {
		snprintf(row->err, sizeof(row->err), "the old process %d still lives %d s after ctl "
			 "answered", (int)old, UP_WAIT_S);
		goto out;
	}
	f->closed = metric_closed(&p);
	f->failed = verify(fds, row->sessions, row->fail[0] ? err : row->fail,
			   row->fail[0] ? sizeof(err) : sizeof(row->fail));
	r = 0;
out:
	bench_sessions_close(fds, row->sessions, h);
	if (new && !gone) { /* drain: the old process ends with its last session */
		for (double end = bench_now() + 10; bench_now() < end && waitpid(old, NULL, WNOHANG) != old;)
			bench_sleep_ms(5);
		if (kill(old, 0) == 0) {
			kill(old, SIGKILL);
			waitpid(old, NULL, 0);
		}
	}
	bench_proxy_stop(&p);
	while (waitpid(-1, NULL, WNOHANG) > 0) /* the old process's spawner, reparented here */
		;
	free(fds);
	return r;
}

/* ---- the run ---------------------------------------------------------------- */

static double med_of(const struct up_row *r, size_t off)
{
	return stats_median_field(r->rep, sizeof(r->rep[0]), (size_t)r->nrep, off);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: splicer bench --upgrade [--sessions N[,N...]] [--cases LIST] [--reps N] [--json FILE]\n"
		"  --sessions LIST  sessions held through the upgrade (default 100,1000,8000; at most\n"
		"                   9000: each takes two descriptors in the bench)\n"
		"  --cases LIST     among auto,copy,splice (default: all three); drain (auto with\n"
		"                   upgrade_sessions = drain, no hand-over) is always run\n"
		"  --reps N         repetitions, interleaved (default 3)\n"
		"  --json FILE      the rows as JSON too\n");
}

static const struct up_case *find_case(const char *name)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (!strcmp(known[i].name, name))
			return &known[i];
	return NULL;
}

static void cell(double v, const char *fmt)
{
	if (isnan(v))
		printf(" - |");
	else
		printf(fmt, v);
}

static void print_table(const struct up_row *rows, unsigned nrows)
{
	printf("| case | sessions | ctl upgrade ms | new ready ms | noticed ms | hand-over ms | "
	       "old lived after ready ms | handed | drain there | new RSS MiB | new CPU ms | "
	       "failed after |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned i = 0; i < nrows; i++) {
		const struct up_row *r = &rows[i];
		if (!r->nrep) {
			printf("| %s | %u | not run: %s |\n", r->uc->name, r->sessions, r->err);
			continue;
		}
		printf("| %s | %u |", r->uc->name, r->sessions);
		cell(r->med.ctl_ms, " %.1f |");
		cell(r->med.ready_ms, " %.0f |");
		cell(r->med.notice_ms, " %.0f |");
		cell(r->med.handover_ms, " %.0f |");
		if (r->uc->drain)
			printf(" drains |");
		else
			cell(r->med.lived_ms, " %.0f |");
		cell(r->med.handed, " %.0f |");
		cell(r->med.kept, " %.0f |");
		cell(r->med.rss_mib, " %.1f |");
		cell(r->med.cpu_ms, " %.0f |");
		printf(" %.0f of %u |\n", r->failed, r->sessions * (unsigned)r->nrep);
	}
}

static int write_json(const char *path, const struct up_row *rows, unsigned nrows, int reps)
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
		const struct up_row *r = &rows[i];
		json_obj_begin(&j, NULL);
		json_str(&j, "case", r->uc->name);
		json_int(&j, "sessions", r->sessions);
		if (!r->nrep) {
			json_str(&j, "error", r->err);
		} else {
			json_num(&j, "ctl_upgrade_ms", r->med.ctl_ms);
			json_num(&j, "new_ready_ms", r->med.ready_ms);
			json_num(&j, "noticed_ms", r->med.notice_ms);
			json_num(&j, "handover_ms", r->med.handover_ms);
			if (isnan(r->med.lived_ms))
				json_null(&j, "old_lived_after_ready_ms");
			else
				json_num(&j, "old_lived_after_ready_ms", r->med.lived_ms);
			json_num(&j, "handed", r->med.handed);
			json_num(&j, "drained", r->med.kept);
			json_num(&j, "closed", r->med.closed);
			json_num(&j, "new_rss_mib", r->med.rss_mib);
			json_num(&j, "new_cpu_ms", r->med.cpu_ms);
			json_num(&j, "failed", r->failed);
			if (r->fail[0])
				json_str(&j, "first_failure", r->fail);
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	int bad = json_finish(&j) != 0;
	fclose(f);
	return bad ? -1 : 0;
}

int bench_upgrade_main(int argc, char **argv)
{
	unsigned sizes[UP_MAX_SIZES] = { 100, 1000, 8000 }, nsizes = 3, nrows = 0, ncases = 0;
	const struct up_case *cases[UP_MAX_CASES];
	int reps = 3, bad = 0, tty = isatty(STDERR_FILENO);
	const char *json = NULL, *list = "auto,copy,splice";
	static struct up_row rows[UP_MAX_SIZES * UP_MAX_CASES];
	struct bench_holder h;
	char copy[512], *save, *t;

	for (int i = 2; i < argc; i++) { /* splicer bench ... */
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--upgrade")) {
			continue;
		} else if (!strcmp(a, "--sessions") && v) {
			int k = bench_sessions_parse(v, sizes, UP_MAX_SIZES);
			if (k < 0)
				return 2;
			nsizes = (unsigned)k, i++;
		} else if (!strcmp(a, "--cases") && v) {
			list = v, i++;
		} else if (!strcmp(a, "--reps") && v) {
			char *end;
			reps = (int)strtol(v, &end, 10), i++;
			if (*end || reps < 1 || reps > UP_MAX_REPS) {
				fprintf(stderr, "splicer bench: --reps %s: 1 to %d\n", v, UP_MAX_REPS);
				return 2;
			}
		} else if (!strcmp(a, "--json") && v) {
			json = v, i++;
		} else {
			usage();
			return 2;
		}
	}
	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const struct up_case *c = find_case(t);
		if (!c) {
			fprintf(stderr, "splicer bench: --cases: unknown case '%s' for --upgrade\n", t);
			usage();
			return 2;
		}
		if (!c->drain && ncases < UP_MAX_CASES - 1)
			cases[ncases++] = c;
	}
	cases[ncases++] = find_case("drain"); /* the reference, always */
	unsigned most = 0;
	for (unsigned s = 0; s < nsizes; s++)
		most = sizes[s] > most ? sizes[s] : most;
	if (bench_sessions_fit(most, "--upgrade"))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	/* the new process's parent is the old one's spawner, which ends with
	 * it: the bench adopts it, to reap it when it stops it */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (bench_holder_start(&h)) {
		fprintf(stderr, "splicer bench: the backend: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned s = 0; s < nsizes; s++)
		for (unsigned c = 0; c < ncases; c++) {
			rows[nrows].uc = cases[c];
			rows[nrows].sessions = sizes[s];
			nrows++;
		}
	/* interleaved: every row once per repetition, so drift spreads */
	for (int rep = 0; rep < reps; rep++)
		for (unsigned i = 0; i < nrows; i++) {
			struct up_row *r = &rows[i];
			struct up_fig *f = &r->rep[r->nrep];
			if (tty)
				fprintf(stderr, "\r\033[Kupgrade: rep %d/%d, %s, %u sessions", rep + 1, reps,
					r->uc->name, r->sessions);
			else
				fprintf(stderr, "splicer bench: upgrade: rep %d/%d, %s, %u sessions\n",
					rep + 1, reps, r->uc->name, r->sessions);
			if (measure(r, &h, f) == 0) {
				r->failed += f->failed;
				r->nrep++;
			} else {
				fprintf(stderr, "%ssplicer bench: upgrade: %s, %u sessions, rep %d: %s\n",
					tty ? "\r\033[K" : "", r->uc->name, r->sessions, rep + 1, r->err);
				bad = 1;
			}
		}
	if (tty)
		fprintf(stderr, "\r\033[K");
	for (unsigned i = 0; i < nrows; i++) {
		struct up_row *r = &rows[i];
		static const size_t offs[] = {
			offsetof(struct up_fig, ctl_ms), offsetof(struct up_fig, ready_ms),
			offsetof(struct up_fig, notice_ms), offsetof(struct up_fig, handover_ms),
			offsetof(struct up_fig, lived_ms), offsetof(struct up_fig, handed),
			offsetof(struct up_fig, kept), offsetof(struct up_fig, closed),
			offsetof(struct up_fig, rss_mib), offsetof(struct up_fig, cpu_ms),
			offsetof(struct up_fig, failed) };
		for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++)
			*(double *)((char *)&r->med + offs[k]) = med_of(r, offs[k]);
		bad |= r->failed > 0;
	}
	printf("An upgrade (`splicer ctl upgrade`) with N established sessions on loopback, each "
	       "having carried %d bytes each way; median of %d interleaved repetitions. new ready: "
	       "ctl's start to the new process's ready line; noticed: from there to the old "
	       "process's \"serves now\" (its main loop's tick); hand-over: what the old process "
	       "reports; old lived: from its \"serves now\" to its exit; new RSS and CPU: the new "
	       "process once it adopted them (CPU from its process clock, its start included: drain is "
	       "the same without sessions to adopt); failed after: sessions whose round trip "
	       "after the upgrade failed, over all repetitions.\n\n",
	       BENCH_SESSION_MSG, reps);
	print_table(rows, nrows);
	for (unsigned i = 0; i < nrows; i++) {
		if (rows[i].failed)
			printf("\nFAILED: %s, %u sessions: %.0f sessions did not survive the upgrade; "
			       "first: %s\n", rows[i].uc->name, rows[i].sessions, rows[i].failed,
			       rows[i].fail);
		if (rows[i].nrep && !isnan(rows[i].med.closed) && rows[i].med.closed > 0)
			printf("\n%s, %u sessions: the new process closed %.0f sessions handed to it "
			       "(outcome=\"closed\")\n", rows[i].uc->name, rows[i].sessions,
			       rows[i].med.closed);
	}
	if (json && write_json(json, rows, nrows, reps))
		bad = 1;
	bench_holder_stop(&h);
	return bad;
}
