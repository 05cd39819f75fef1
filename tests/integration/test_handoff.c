/* SPDX-License-Identifier: MIT */
/* Upgrades that hand established sessions to the new process (issue 25):
 * on SIGUSR2 or `splicer ctl upgrade`, once the new process is ready, the
 * old one passes it every session it can (sockets, pipes, unsent copy
 * bytes, state) and exits at once instead of draining for drain_timeout.
 *
 * The interface these cases hold the implementation to:
 *   - `upgrade_sessions = handover | drain` ([global], default handover;
 *     drain: the old process keeps every session, as before);
 *   - the old process logs, once per upgrade, "upgrade: handed N sessions
 *     over to process P in X ms; M stay here and drain";
 *   - `ctl upgrade` answers "ok: upgraded: process P serves now; N sessions
 *     handed over in X ms, M drain here";
 *   - the new process counts splicer_upgrade_sessions_total{outcome=
 *     "handed|drained|closed"} for the upgrade that started it;
 *   - sessions of routes on engine copy, splice and auto move in every
 *     phase; those on uring and sockmap, and those whose route, backend or
 *     listener the new config lacks, stay in the old process and drain.
 *
 * Every case runs sessions of this process through the proxy (upgrade_util:
 * a seeded stream each way, paced, each byte checked in order) and measures
 * how long the old process lives after "upgrade: process P serves now"
 * by polling /proc/PID every 5 ms. drain_timeout is 60 s everywhere, so a
 * process that drains instead of handing over is seen. */
#define _GNU_SOURCE
#include "harness.h"
#include "tls_hello_gen.h"
#include "upgrade_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HF_HANDED  "splicer_upgrade_sessions_total{outcome=\"handed\"}"
#define HF_DRAINED "splicer_upgrade_sessions_total{outcome=\"drained\"}"
#define HF_CLOSED  "splicer_upgrade_sessions_total{outcome=\"closed\"}"

/* The load of a case, static: its threads may still run when a check fails. */
static struct uu_load hf;

/* The global keys of every case: 60 s of drain (which the 1 s bound tells
 * from a hand-over), and every wait of a session phase long enough to span
 * the case. */
#define HF_GLOBAL                                                              \
	"workers = 2\ndrain_timeout = 60s\nhalf_close_timeout = 5m\nqueue_timeout = 5m\n" \
	"tls_hello_timeout = 5m\nproxy_timeout = 5m\n"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Plans sessions [from, from + count) on target t as kind. */
static void hf_plan(unsigned from, unsigned count, int t, enum uu_kind kind)
{
	for (unsigned i = from; i < from + count; i++) {
		hf.s[i].target = (uint8_t)t;
		hf.s[i].kind = (uint8_t)kind;
	}
}

/* Every session with a running direction moves bytes in it again (after
 * an upgrade): the wait is bounded by ms, and the message says which case
 * and moment. */
static void hf_all_move(int t, int ms, const char *when)
{
	static uint64_t c[1024], b[1024];
	unsigned moved, want;

	H_CHECK(hf.n <= 1024, "snapshot room");
	uu_load_snapshot(&hf, c, b);
	if (uu_load_wait_moved(&hf, t, c, b, ms, &moved, &want) == 0)
		return;
	/* which routes stood still */
	char by[512] = "";
	for (int k = 0; k < hf.ntg; k++) {
		unsigned km, kw;
		size_t len = strlen(by);
		km = uu_load_moved(&hf, k, c, b, &kw);
		snprintf(by + len, sizeof by - len, "%s%s %u/%u", k ? ", " : "", hf.tg[k].name, km,
			 kw);
	}
	for (unsigned i = 0, shown = 0; i < hf.n && shown < 3; i++) {
		const struct uu_sess *x = &hf.s[i];
		if ((t >= 0 && x->target != t) || x->kind == UU_IDLE || x->bconn < 0 ||
		    atomic_load(&hf.tg[x->target].finish) || atomic_load(&x->c_end) ||
		    (atomic_load(&x->c_got) > c[i] &&
		     (x->kind == UU_HALF || atomic_load(&x->b_got) > b[i])))
			continue;
		shown++;
		fprintf(stderr, "[handoff] %s: session %u (%s) stood still: the client received "
			"%llu bytes (%llu before), the backend %llu (%llu before)\n", when, i,
			hf.tg[x->target].name, (unsigned long long)atomic_load(&x->c_got),
			(unsigned long long)c[i], (unsigned long long)atomic_load(&x->b_got),
			(unsigned long long)b[i]);
	}
	H_CHECK(0, "%s: %u of %u sessions with a running direction moved bytes within %d ms (by "
		"route: %s; failures %d: %s)", when, moved, want, ms, by, (int)hf.failed,
		hf.why[0] ? hf.why : "-");
}

/* Stops the last generation (SIGTERM, 10 s) and checks the shared log for
 * sanitizer reports. */
static void hf_stop_last(struct h_proxy *p, pid_t pid)
{
	H_CHECK(kill(pid, SIGTERM) == 0, "SIGTERM to the last process %d", (int)pid);
	H_CHECK(uu_wait_gone(p, pid, 10000) == 0, "the last process %d did not stop", (int)pid);
	const char *prob = h_proxy_log_problem(p);
	H_CHECK(prob == NULL, "sanitizer report in %s: %s", p->log, prob);
}

/* ---- 1,000 sessions through 20 upgrades ------------------------------------ */

/* The targets of the big case, in the order of the config. */
enum { T_COPY, T_SPLICE, T_AUTO, T_QUEUE, T_SNI, T_PP, T_CONN, T_N };
#define HF_N         1000
#define HF_UPGRADES  20
#define HF_MAXCONN   4
#define HF_CONN_AT   3  /* the upgrade after which the unreachable backend accepts */
#define HF_HELLO_AT  7  /* the upgrade after which the cut ClientHellos are completed */
#define HF_PROXY_AT  13 /* and the cut PROXY headers */

/* 1,000 sessions at once, each mid-transfer, through 20 upgrades in a row:
 * routes on copy, splice and auto (some of their sessions half-closed by
 * the client, some idle until the end), a backend at its maxconn with the
 * other clients of its route waiting in the queue, an sni listener where
 * some clients sent half their ClientHello (the rest after upgrade 7),
 * an accept_proxy listener where some sent half their PROXY header (the
 * rest after upgrade 13), and a backend whose full accept queue drops the
 * proxy's SYNs, so its sessions are connecting until upgrade 3. Every session runs both ways at 20 KiB/s
 * (2 KiB per 100 ms each way) from before the first upgrade to after the
 * last one, and moves again after each upgrade before the next. Then
 * every byte arrived once, in order, no end was reset, each session had
 * one client and one backend connection, and each old process was gone
 * within 1 s of saying the new one serves: with a drain it would live
 * until its sessions end. */
Test(integ, upgrade_hands_over_1000_sessions_through_20_upgrades, .init = uu_init,
     .fini = uu_fini, .timeout = 200)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static struct uu_upgrade up[HF_UPGRADES];
	static const char *const names[T_N] = { "copy", "splice", "auto", "queue", "sni", "pp",
						"connect" };
	static const char *const engines[T_N] = { "copy", "splice", "auto", "auto", "splice",
						  "copy", "auto" };
	static uint8_t hello[4096];
	static char pp[128], conf[4096];
	char why[256];
	int port[T_N], sport = h_free_port();
	int64_t t0 = h_now_ms();

	size_t hello_len = tls_make_hello("a.example.com", NULL, 0, hello, sizeof hello);
	for (int t = 0; t < T_N; t++)
		port[t] = h_free_port();
	snprintf(pp, sizeof pp, "PROXY TCP4 127.0.0.9 127.0.0.1 40000 %d\r\n", port[T_PP]);

	uu_load_init(&hf, HF_N, 0x4A11D0FFull);
	hf.deadline = t0 + 170000;
	for (int t = 0; t < T_N; t++)
		uu_target_add(&hf, names[t], t == T_SNI ? hello : t == T_PP ? (uint8_t *)pp : NULL,
			      t == T_SNI ? hello_len : t == T_PP ? strlen(pp) : 0, t == T_SNI);

	/* copy, splice, auto: 240 each (200 flowing, 20 half-closed, 20 idle);
	 * queue: 40 (4 served, 36 waiting); sni: 140 (50 with half a hello);
	 * pp: 60 (30 with half a header); connect: 40 (the proxy's connects
	 * wait in SYN_SENT until upgrade 3) */
	unsigned i = 0;
	for (int t = T_COPY; t <= T_AUTO; t++) {
		hf_plan(i, 200, t, UU_FLOW);
		hf_plan(i + 200, 20, t, UU_HALF);
		hf_plan(i + 220, 20, t, UU_IDLE);
		i += 240;
	}
	hf_plan(i, 40, T_QUEUE, UU_FLOW);
	i += 40;
	hf_plan(i, 140, T_SNI, UU_FLOW);
	for (unsigned k = i + 90; k < i + 140; k++) {
		hf.s[k].pre_cut = (uint32_t)(hello_len / 2);
		hf.s[k].pre_stage = HF_HELLO_AT;
	}
	i += 140;
	hf_plan(i, 60, T_PP, UU_FLOW);
	for (unsigned k = i + 30; k < i + 60; k++) {
		hf.s[k].pre_cut = (uint32_t)(strlen(pp) / 2);
		hf.s[k].pre_stage = HF_PROXY_AT;
	}
	i += 60;
	hf_plan(i, 40, T_CONN, UU_FLOW);
	i += 40;
	uu_target_plug(&hf, T_CONN);
	H_CHECK(i == HF_N, "the plan covers %u sessions", i);

	char maxconn[32];
	snprintf(maxconn, sizeof maxconn, " maxconn=%d", HF_MAXCONN);
	int n = snprintf(conf, sizeof conf, "[global]\n" HF_GLOBAL "stats = 127.0.0.1:%d\n",
			 sport);
	for (int t = 0; t < T_N; t++)
		n += snprintf(conf + n, sizeof conf - (size_t)n,
			      "\n[route %s]\nlisten = 127.0.0.1:%d\nbackend = %s%s\nengine = %s\n%s",
			      names[t], port[t], hf.tg[t].back.text,
			      t == T_QUEUE ? maxconn : "", engines[t],
			      t == T_SNI ? "sni = a.example.com\n" :
			      t == T_PP ? "accept_proxy = yes\n" :
			      t == T_CONN ? "connect_timeout = 1m\n" : "");
	H_CHECK(n > 0 && (size_t)n < sizeof conf, "config size");
	const char *args[] = { "-c", h_conf_write("handoff.conf", conf), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	for (int t = 0; t < T_N; t++)
		uu_local(&hf.tg[t].front, port[t]);
	uu_load_start(&hf);

	/* The premise: every session in its phase before the first upgrade.
	 * Backends: all but the idle ones named their session (copy, splice,
	 * auto, 4 of the queue, the sni and pp clients that sent all); the idle
	 * ones were accepted, nothing more; 36 clients wait for a slot; the
	 * proxy's 40 connects to the plugged backend wait in SYN_SENT. */
	const int reach = 3 * 240 + HF_MAXCONN + 90 + 30, named = reach - 60;
	int64_t end = h_now_ms() + 20000;
	while ((hf.accepts < reach || hf.claimed < named) && !hf.failed && h_now_ms() < end)
		h_sleep_ms(10);
	H_CHECK(hf.accepts == reach && hf.claimed == named, "before the upgrades: %d backend "
		"connections (want %d), %d named their session (want %d); failures %d: %s",
		(int)hf.accepts, reach, (int)hf.claimed, named, (int)hf.failed,
		hf.why[0] ? hf.why : "-");
	hf_all_move(-1, 5000, "before the upgrades");
	long long queued = -1;
	for (end = h_now_ms() + 5000; queued != 40 - HF_MAXCONN && h_now_ms() < end; h_sleep_ms(20))
		queued = uu_metric(sport, "splicer_route_queue_length{route=\"queue\"}");
	H_CHECK(queued == 40 - HF_MAXCONN, "clients waiting in the queue before the upgrades: %lld, "
		"want %d", queued, 40 - HF_MAXCONN);
	int syn_sent = 0;
	for (end = h_now_ms() + 5000; syn_sent != 40 && h_now_ms() < end; h_sleep_ms(20))
		syn_sent = uu_target_syn_sent(&hf, T_CONN);
	H_CHECK(syn_sent == 40 && hf.tg[T_CONN].accepted == 0, "the proxy's connects to the "
		"plugged backend: %d in SYN_SENT (want 40), %d accepted (want 0)", syn_sent,
		(int)hf.tg[T_CONN].accepted);
	for (unsigned k = 200; k < 220; k++) /* the client of each half-closed one shut down */
		H_CHECK(atomic_load(&hf.s[k].b_got) == hf.half_len, "half-closed session %u: %llu "
			"bytes before its FIN", k, (unsigned long long)atomic_load(&hf.s[k].b_got));
	int64_t t_ready = h_now_ms() - t0;

	uint64_t up_at[HF_UPGRADES + 1], down_at[HF_UPGRADES + 1];
	up_at[0] = hf.up_bytes;
	down_at[0] = hf.down_bytes;
	pid_t pid = p.pid;
	int64_t t_up0 = h_now_ms();
	for (int k = 1; k <= HF_UPGRADES; k++) {
		char when[64];
		uu_upgrade(&p, pid, k, 1000, &up[k - 1]);
		pid = up[k - 1].new_pid;
		atomic_store(&hf.stage, k);
		if (k == HF_CONN_AT || k == HF_HELLO_AT || k == HF_PROXY_AT) {
			/* the rest of the hello (header) is out, the backend accepts:
			 * those sessions reach their backends now (a connect at its
			 * next SYN: 7 s after the first at most), and flow through
			 * the upgrades left */
			int more = k == HF_CONN_AT ? 40 : k == HF_HELLO_AT ? 50 : 30;
			int want = (int)hf.claimed + more;
			if (k == HF_CONN_AT)
				uu_target_release(&hf, T_CONN);
			for (end = h_now_ms() + 10000; hf.claimed < want && h_now_ms() < end;)
				h_sleep_ms(5);
			H_CHECK(hf.claimed == want, "upgrade %d: %d of the %d sessions %s reached "
				"their backend (failures %d: %s)", k, more - (want - (int)hf.claimed),
				more, k == HF_CONN_AT ? "whose connect waited in SYN_SENT" :
				k == HF_HELLO_AT ? "whose ClientHello was completed" :
				"whose PROXY header was completed", (int)hf.failed,
				hf.why[0] ? hf.why : "-");
		}
		snprintf(when, sizeof when, "after upgrade %d", k);
		hf_all_move(-1, 5000, when);
		up_at[k] = hf.up_bytes;
		down_at[k] = hf.down_bytes;
	}
	int64_t t_loop = h_now_ms() - t_up0;
	long long queued_after = uu_metric(sport, "splicer_route_queue_length{route=\"queue\"}");

	uu_load_finish(&hf, -1);
	int open = uu_load_wait(&hf, -1, 60000);
	uu_load_join(&hf);
	int alive = uu_wait_all_gone(&p, up, HF_UPGRADES, 15000);

	/* the summary first: it is the figure the issue asks for, pass or fail */
	int64_t life[HF_UPGRADES], sorted[HF_UPGRADES];
	int late = 0;
	char lives[512] = "";
	for (int k = 0; k < HF_UPGRADES; k++) {
		life[k] = uu_lifetime(&up[k]);
		sorted[k] = life[k] < 0 ? INT64_MAX : life[k];
		if (life[k] < 0 || life[k] > 1000) {
			size_t m = strlen(lives);
			snprintf(lives + m, sizeof lives - m, "%s#%d %lld ms", late++ ? ", " : "", k + 1,
				 (long long)life[k]);
		}
	}
	qsort(sorted, HF_UPGRADES, sizeof sorted[0], cmp_i64);
	fprintf(stderr, "handoff: %u sessions (%d reached a backend, %d backend connections), %d "
		"upgrades in %lld ms (ready after %lld ms); bytes up %llu, down %llu; old process "
		"after 'serves now': min %lld ms, median %lld ms, max %lld ms; queue length after "
		"the last upgrade %lld; failures %d, resets %d\n", hf.n, (int)hf.claimed,
		(int)(hf.accepts - hf.plugs), HF_UPGRADES, (long long)t_loop, (long long)t_ready,
		(unsigned long long)hf.up_bytes, (unsigned long long)hf.down_bytes,
		(long long)sorted[0], (long long)(sorted[HF_UPGRADES / 2 - 1] +
						  sorted[HF_UPGRADES / 2]) / 2,
		(long long)sorted[HF_UPGRADES - 1], queued_after, (int)hf.failed, (int)hf.resets);

	H_CHECK(open == 0, "%d sessions still open 60 s after they were told to finish", open);
	uu_load_check(&hf, -1, "1,000 sessions through 20 upgrades");
	for (int k = 1; k <= HF_UPGRADES; k++)
		H_CHECK(up_at[k] > up_at[k - 1] && down_at[k] > down_at[k - 1], "no byte moved "
			"between upgrades %d and %d (up %llu -> %llu, down %llu -> %llu)", k - 1, k,
			(unsigned long long)up_at[k - 1], (unsigned long long)up_at[k],
			(unsigned long long)down_at[k - 1], (unsigned long long)down_at[k]);
	H_CHECK(late == 0, "the old process lived more than 1000 ms after 'upgrade: process P "
		"serves now' in %d of %d upgrades (%s%s): it kept sessions to drain instead of "
		"handing them over", late, HF_UPGRADES, lives,
		alive ? "; -1: still alive 15 s after the sessions ended" : "");
	for (int k = 0; k < HF_UPGRADES; k++) {
		long handed = -1, stay = -1;
		double ms = -1;
		H_CHECK(uu_handed_line(&p, up[k].new_pid, &handed, &stay, &ms), "upgrade %d: no "
			"line 'upgrade: handed N sessions over to process %d in X ms; M stay here "
			"and drain' in %s", k + 1, (int)up[k].new_pid, p.log);
		H_CHECK(handed == HF_N && stay == 0, "upgrade %d: handed %ld, %ld stay (want %d and "
			"0: every session was open and on copy, splice or auto)", k + 1, handed, stay,
			HF_N);
	}
	long long h = uu_metric(sport, HF_HANDED), d = uu_metric(sport, HF_DRAINED),
		  c = uu_metric(sport, HF_CLOSED);
	H_CHECK(h == HF_N && d == 0 && c == 0, "the last process counts handed %lld, drained %lld, "
		"closed %lld (want %d, 0, 0)", h, d, c, HF_N);
	hf_stop_last(&p, pid);
	uu_load_free(&hf);
}

/* ---- upgrade_sessions = drain ----------------------------------------------- */

/* With `upgrade_sessions = drain` the old process keeps its sessions, as
 * before: they run on in it after the new one serves (it is still there
 * 1.5 s later, while they move), end there intact, and then it exits.
 * A binary from before issue 25 has no such key and always drains: the case
 * runs there without it. */
Test(integ, upgrade_sessions_drain_keeps_the_old_behaviour, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	struct uu_upgrade u;
	char conf[1024], why[256];
	int port = h_free_port(), sport = h_free_port();

	uu_load_init(&hf, 3, 0xD5A1ull);
	int t = uu_target_add(&hf, "r", NULL, 0, 0);
	hf_plan(0, 2, t, UU_FLOW);
	hf_plan(2, 1, t, UU_HALF);
	snprintf(conf, sizeof conf, "[global]\n" HF_GLOBAL "stats = 127.0.0.1:%d\n%s\n"
		 "[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n", sport,
		 "upgrade_sessions = drain", port, hf.tg[t].back.text);
	const char *args[] = { "-c", h_conf_write("drain.conf", conf), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	uu_local(&hf.tg[t].front, port);
	uu_load_start(&hf);
	hf_all_move(-1, 5000, "before the upgrade");

	pid_t old = p.pid;
	uu_upgrade(&p, old, 1, 0, &u);
	/* the sessions move on, and the old process is still there: they are
	 * its own */
	for (int round = 1; h_now_ms() - u.t_ready < 1500; round++) {
		char when[64];
		snprintf(when, sizeof when, "after the upgrade (round %d)", round);
		hf_all_move(-1, 3000, when);
		H_CHECK(!uu_gone(&p, old), "the old process %d exited %lld ms after the new one took "
			"over, with its sessions open (upgrade_sessions = drain)", (int)old,
			(long long)(h_now_ms() - u.t_ready));
	}
	uu_load_finish(&hf, -1);
	H_CHECK(uu_load_wait(&hf, -1, 10000) == 0, "sessions not ended 10 s after the finish");
	uu_load_join(&hf);
	uu_load_check(&hf, -1, "sessions drained by the old process");
	int st = h_proxy_wait(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the old process once its "
		"sessions ended: status %d", st);
	fprintf(stderr, "handoff, drain: the old process lived %lld ms after the takeover, until "
		"its 3 sessions ended\n", (long long)(h_now_ms() - u.t_ready));
	long handed = -1, stay = -1;
	double ms;
	H_CHECK(uu_handed_line(&p, u.new_pid, &handed, &stay, &ms) && handed == 0 && stay == 3,
		"the old process's account: handed %ld, %ld stay (want 0 and 3); log %s", handed,
		stay, p.log);
	long long h = uu_metric(sport, HF_HANDED), d = uu_metric(sport, HF_DRAINED);
	H_CHECK(h == 0 && d == 3, "the new process counts handed %lld, drained %lld (want 0 and 3)",
		h, d);
	hf_stop_last(&p, u.new_pid);
	uu_load_free(&hf);
}

/* ---- the counts ------------------------------------------------------------ */

/* 20 sessions on copy, 20 on splice, 5 on a route the new config removes:
 * `ctl upgrade` answers that 40 were handed over and 5 drain here; the new
 * process counts handed 40, drained 5; the 5 end intact in the old process,
 * which then exits while the 40 still run, in the new one, to their end. */
Test(integ, upgrade_hand_over_reports_counts, .init = uu_init, .fini = uu_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	char conf[256], sock[256], text[2048], why[256], *out = NULL, *err = NULL;
	int pc = h_free_port(), ps = h_free_port(), pg = h_free_port(), sport = h_free_port();

	uu_load_init(&hf, 45, 0xC0C0ull);
	int tc = uu_target_add(&hf, "c", NULL, 0, 0), ts = uu_target_add(&hf, "s", NULL, 0, 0);
	int tg = uu_target_add(&hf, "gone", NULL, 0, 0);
	hf_plan(0, 20, tc, UU_FLOW);
	hf_plan(20, 20, ts, UU_FLOW);
	hf_plan(40, 5, tg, UU_FLOW);
	snprintf(conf, sizeof conf, "%s/counts.conf", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	const char *fmt = "[global]\n" HF_GLOBAL "stats = 127.0.0.1:%d\nadmin = %s\n"
			  "[route c]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = copy\n"
			  "[route s]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = splice\n";
	int n = snprintf(text, sizeof text, fmt, sport, sock, pc, hf.tg[tc].back.text, ps,
			 hf.tg[ts].back.text);
	snprintf(text + n, sizeof text - (size_t)n, "[route gone]\nlisten = 127.0.0.1:%d\n"
		 "backend = %s\n", pg, hf.tg[tg].back.text);
	uu_write(conf, text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	uu_local(&hf.tg[tc].front, pc);
	uu_local(&hf.tg[ts].front, ps);
	uu_local(&hf.tg[tg].front, pg);
	uu_load_start(&hf);
	hf_all_move(-1, 5000, "before the upgrade");

	/* the new config: route gone is gone */
	text[n] = '\0';
	uu_write(conf, text);
	pid_t old = p.pid;
	int64_t t_ctl = h_now_ms();
	int rc = uu_ctl(bin, sock, &out, &err, (const char *const[]){ "upgrade", NULL });
	t_ctl = h_now_ms() - t_ctl;
	pid_t np = uu_nth_takeover(&p, 1, 2000);
	int64_t t_ready = h_now_ms();
	H_CHECK(rc == 0 && np > 0, "ctl upgrade: exit %d, stdout '%s', stderr '%s'", rc,
		out ? out : "", err ? err : "");
	uu_track(np);
	hf_all_move(-1, 5000, "after the upgrade");

	/* the 5 of the removed route end where they are */
	uu_load_finish(&hf, tg);
	H_CHECK(uu_load_wait(&hf, tg, 10000) == 0, "the removed route's sessions did not end");
	uu_load_check(&hf, tg, "the 5 sessions of the removed route");

	char want[128];
	snprintf(want, sizeof want, "ok: upgraded: process %d serves now; 40 sessions handed over "
		 "in ", (int)np);
	H_CHECK(out && strstr(out, want) && strstr(out, " ms, 5 drain here"), "ctl upgrade "
		"answered '%s' (want '%s... ms, 5 drain here')", out ? out : "", want);
	long long h = uu_metric(sport, HF_HANDED), d = uu_metric(sport, HF_DRAINED),
		  c = uu_metric(sport, HF_CLOSED);
	H_CHECK(h == 40 && d == 5 && c == 0, "the new process counts handed %lld, drained %lld, "
		"closed %lld (want 40, 5, 0)", h, d, c);
	/* the 40 run on; the old process has nothing left */
	H_CHECK(uu_wait_gone(&p, old, 5000) == 0, "the old process %d is still there 5 s after its "
		"5 sessions ended, with the 40 it handed over running", (int)old);
	int64_t life = h_now_ms() - t_ready;
	hf_all_move(-1, 5000, "with the old process gone");
	uu_load_finish(&hf, -1);
	H_CHECK(uu_load_wait(&hf, -1, 10000) == 0, "sessions not ended 10 s after the finish");
	uu_load_join(&hf);
	uu_load_check(&hf, -1, "40 handed over, 5 drained");
	fprintf(stderr, "handoff, counts: ctl upgrade answered in %lld ms: %s; the old process "
		"lived %lld ms after the takeover (its 5 sessions)\n", (long long)t_ctl,
		out ? out : "", (long long)life);
	free(out);
	free(err);
	hf_stop_last(&p, np);
	uu_load_free(&hf);
}

/* ---- a new binary of another format ------------------------------------------- */

/* A new binary that reads another hand-over format (the tests' variable
 * SPLICER_TEST_HANDOFF_VERSION makes this one say 2): the old process
 * sends nothing it could misread, says why, keeps every session to drain,
 * and the new one counts them as drained. */
Test(integ, upgrade_to_another_hand_over_format_drains, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	struct uu_upgrade u;
	char conf[1024], why[256];
	int port = h_free_port(), sport = h_free_port();

	uu_load_init(&hf, 3, 0xF0A2ull);
	int t = uu_target_add(&hf, "r", NULL, 0, 0);
	hf_plan(0, 3, t, UU_FLOW);
	snprintf(conf, sizeof conf, "[global]\n" HF_GLOBAL "stats = 127.0.0.1:%d\n"
		 "[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n", sport, port,
		 hf.tg[t].back.text);
	const char *args[] = { "-c", h_conf_write("format.conf", conf), NULL };
	setenv("SPLICER_TEST_HANDOFF_VERSION", "2", 1); /* inherited by every generation */
	int started = h_proxy_start(&p, bin, args, why, sizeof why);
	unsetenv("SPLICER_TEST_HANDOFF_VERSION");
	H_CHECK(started == 0, "proxy: %s", why);
	uu_local(&hf.tg[t].front, port);
	uu_load_start(&hf);
	hf_all_move(-1, 5000, "before the upgrade");

	pid_t old = p.pid;
	uu_upgrade(&p, old, 1, 0, &u);
	hf_all_move(-1, 5000, "after the upgrade");
	H_CHECK(!uu_gone(&p, old), "the old process exited with its 3 sessions open");
	H_CHECK(h_log_lines(&p, "reads hand-over format 2, this one writes 1: every session "
			    "drains here", NULL) == 1, "the old process did not say why it keeps its "
		"sessions; log %s", p.log);
	long handed = -1, stay = -1;
	double ms;
	H_CHECK(uu_handed_line(&p, u.new_pid, &handed, &stay, &ms) && handed == 0 && stay == 3,
		"the old process's account: handed %ld, %ld stay (want 0 and 3)", handed, stay);
	long long h = uu_metric(sport, HF_HANDED), d = uu_metric(sport, HF_DRAINED);
	H_CHECK(h == 0 && d == 3, "the new process counts handed %lld, drained %lld (want 0 and 3)",
		h, d);
	uu_load_finish(&hf, -1);
	H_CHECK(uu_load_wait(&hf, -1, 10000) == 0, "sessions not ended 10 s after the finish");
	uu_load_join(&hf);
	uu_load_check(&hf, -1, "sessions drained by the old process");
	H_CHECK(h_proxy_wait(&p, 10000) != -1, "the old process did not exit once they ended");
	hf_stop_last(&p, u.new_pid);
	uu_load_free(&hf);
}

/* ---- engines that keep their sessions ---------------------------------------- */

/* A route on engine (uring or sockmap) and one on copy: the copy sessions
 * are handed over, the engine's stay in the old process by rule and drain
 * there; it lives while they run and exits once they end, every byte
 * delivered; the new process counts handed 2, drained 3. */
static void case_drain_by_rule(const char *bin, const char *engine)
{
	static struct h_proxy p;
	struct uu_upgrade u;
	char conf[1024], why[256], line[512];
	int pe = h_free_port(), pc = h_free_port(), sport = h_free_port();

	uu_load_init(&hf, 5, 0xE6E6ull ^ (uint64_t)engine[0]);
	int te = uu_target_add(&hf, engine, NULL, 0, 0), tc = uu_target_add(&hf, "c", NULL, 0, 0);
	hf_plan(0, 3, te, UU_FLOW);
	hf_plan(3, 2, tc, UU_FLOW);
	snprintf(conf, sizeof conf, "[global]\n" HF_GLOBAL "stats = 127.0.0.1:%d\n"
		 "[route e]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = %s\n"
		 "[route c]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = copy\n", sport, pe,
		 hf.tg[te].back.text, engine, pc, hf.tg[tc].back.text);
	const char *args[] = { "-c", h_conf_write("rule.conf", conf), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	snprintf(why, sizeof why, "%s engine unavailable", engine);
	if (h_file_line(p.log, 0, line, sizeof line, why, NULL))
		cr_skip_test("the %s engine does not run here; the proxy said: %s", engine, line);
	if (!strcmp(engine, "sockmap"))
		H_CHECK(h_log_lines(&p, "sockmap engine (experimental): BPF program loaded", NULL) == 1,
			"the proxy did not log that the sockmap program was loaded (log %s)", p.log);
	uu_local(&hf.tg[te].front, pe);
	uu_local(&hf.tg[tc].front, pc);
	uu_load_start(&hf);
	hf_all_move(-1, 5000, "before the upgrade");

	pid_t old = p.pid;
	uu_upgrade(&p, old, 1, 0, &u);
	hf_all_move(-1, 5000, "after the upgrade");
	/* the copy sessions end (wherever they are); the engine's hold the old
	 * process */
	uu_load_finish(&hf, tc);
	H_CHECK(uu_load_wait(&hf, tc, 10000) == 0, "the copy route's sessions did not end");
	hf_all_move(te, 5000, "with the copy sessions over");
	H_CHECK(!uu_gone(&p, old), "the old process exited with the %s sessions open: they were "
		"handed over or cut", engine);
	uu_load_finish(&hf, te);
	H_CHECK(uu_load_wait(&hf, -1, 10000) == 0, "sessions not ended 10 s after the finish");
	uu_load_join(&hf);
	char what[64];
	snprintf(what, sizeof what, "%s sessions drained, copy handed over", engine);
	uu_load_check(&hf, -1, what);
	int st = h_proxy_wait(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the old process once the %s "
		"sessions ended: status %d", engine, st);
	long long h = uu_metric(sport, HF_HANDED), d = uu_metric(sport, HF_DRAINED),
		  c = uu_metric(sport, HF_CLOSED);
	H_CHECK(h == 2 && d == 3 && c == 0, "the new process counts handed %lld, drained %lld, "
		"closed %lld (want 2: the copy route's; 3: the %s route's; 0)", h, d, c, engine);
	long handed = -1, stay = -1;
	double ms;
	H_CHECK(uu_handed_line(&p, u.new_pid, &handed, &stay, &ms) && handed == 2 && stay == 3,
		"the old process's account: handed %ld, %ld stay (want 2 and 3); log %s", handed,
		stay, p.log);
	hf_stop_last(&p, u.new_pid);
	uu_load_free(&hf);
}

Test(integ, upgrade_uring_sessions_drain_by_rule, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	case_drain_by_rule(h_binary(0), "uring");
}

Test(integ, upgrade_sockmap_sessions_drain_by_rule, .init = uu_init, .fini = uu_fini,
     .timeout = 60)
{
	if (!h_bpf_capable())
		cr_skip_test("sockmap engine: BPF is not permitted here (this process lacks CAP_BPF "
			     "or CAP_SYS_ADMIN, or CAP_NET_ADMIN)");
	case_drain_by_rule(h_binary(0), "sockmap");
}
