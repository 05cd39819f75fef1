/* SPDX-License-Identifier: MIT */
/* The differential row of issue 25: 200 sessions mid-transfer in both
 * directions (160 flowing, 20 half-closed by the client, 20 idle) through
 * a reload of HAProxy and through an upgrade of splicer, the same load
 * (upgrade_util.h) in each.
 *
 * HAProxy runs in master-worker mode (-W); SIGUSR2 to the master reloads
 * it: a new worker takes the listeners, the old one stops accepting and
 * keeps its sessions until they end, or until `hard-stop-after` (5 s here:
 * unset, it would wait for them forever), which closes what is left. HAProxy
 * passes listening sockets only, so its sessions cannot move. splicer's old
 * process hands its sessions to the new one (drain_timeout 60 s, so a
 * drain is seen).
 *
 * Each column holds the sessions until its old process is gone (8 s at
 * most), lets them run on, then ends them; the row says, for each, how many
 * were delivered whole (every byte both ways, in order, ends closed by
 * FIN), reset, or cut (an early EOF, a stall), and how long the old process
 * lived after the new one was ready. Only splicer's outcome is asserted
 * (every session delivered, no reset, old process gone within 1 s), and
 * that HAProxy's figures were measured: its sessions all reached the
 * backend before the reload and its old worker was seen to exit. */
#define _GNU_SOURCE
#include "peers.h"
#include "upgrade_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PU_N        200
#define PU_HALF     20
#define PU_IDLE     20
#define PU_HOLD_MS  8000 /* the longest wait for the old process, sessions held */
#define PU_HARD_S   5    /* HAProxy's hard-stop-after */

static pid_t pu_haproxy; /* the master: stopped, with its group, by pr_pid_stop */
static struct uu_load pu_load[2];

static void pu_fini(void)
{
	pr_pid_stop(pu_haproxy);
	pu_haproxy = 0;
	uu_fini();
}

struct pu_result {
	const char *name;
	int delivered, reset, cut;
	int reached;       /* sessions that named themselves to the backend before the reload */
	pid_t old_pid, new_pid;
	int64_t life;      /* ms the old process lived after the new one was ready; -1: not seen gone */
	uint64_t up, down; /* bytes checked */
};

/* The load: 160 flowing, 20 half-closed, 20 idle, on one target. */
static struct uu_load *pu_plan(int col, uint64_t seed)
{
	struct uu_load *l = &pu_load[col];

	uu_load_init(l, PU_N, seed);
	uu_target_add(l, col ? "splicer" : "haproxy", NULL, 0, 0);
	for (unsigned i = 0; i < PU_N; i++)
		l->s[i].kind = i < PU_N - PU_HALF - PU_IDLE ? UU_FLOW
			       : i < PU_N - PU_IDLE         ? UU_HALF
							    : UU_IDLE;
	return l;
}

/* Every session in its phase: all at the backend, all but the idle ones
 * named, and moving. */
static void pu_ready(struct uu_load *l, const char *name)
{
	static uint64_t c[PU_N], b[PU_N];
	unsigned moved, want;
	int64_t end = h_now_ms() + 10000;

	while ((l->accepts < PU_N || l->claimed < PU_N - PU_IDLE) && !l->failed && h_now_ms() < end)
		h_sleep_ms(10);
	H_CHECK(l->accepts == PU_N && l->claimed == PU_N - PU_IDLE, "%s: %d backend connections "
		"(want %d), %d named their session (want %d); failures %d: %s", name,
		(int)l->accepts, PU_N, (int)l->claimed, PU_N - PU_IDLE, (int)l->failed,
		l->why[0] ? l->why : "-");
	uu_load_snapshot(l, c, b);
	H_CHECK(uu_load_wait_moved(l, -1, c, b, 5000, &moved, &want) == 0, "%s: %u of %u sessions "
		"moved bytes before the reload", name, moved, want);
}

/* After the old process went (or the hold ran out): what still runs runs
 * a moment more (no check: in HAProxy's column nothing may), then every
 * session is told to finish; the outcomes. */
static void pu_finish(struct uu_load *l, struct pu_result *r)
{
	static uint64_t c[PU_N], b[PU_N];
	unsigned moved, want;

	uu_load_snapshot(l, c, b);
	uu_load_wait_moved(l, -1, c, b, 2000, &moved, &want);
	uu_load_finish(l, -1);
	uu_load_wait(l, -1, 15000);
	uu_load_join(l);
	for (unsigned i = 0; i < l->n; i++)
		switch (uu_outcome(l, i)) {
		case UU_DELIVERED: r->delivered++; break;
		case UU_RESET: r->reset++; break;
		default: r->cut++; break;
		}
	r->up = l->up_bytes;
	r->down = l->down_bytes;
}

/* Lines of the file at path that hold needle. */
static int pu_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	int n = 0;

	while (f && fgets(line, sizeof line, f))
		n += strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return n;
}

/* HAProxy: $SPLICER_HAPROXY, PATH, or /usr/sbin (the package's place,
 * which a user's PATH may lack). */
static const char *pu_haproxy_exe(void)
{
	const char *e = getenv("SPLICER_HAPROXY");
	if (e && *e)
		return access(e, X_OK) == 0 ? e : NULL;
	if ((e = h_which("haproxy")))
		return e;
	return access("/usr/sbin/haproxy", X_OK) == 0 ? "/usr/sbin/haproxy" : NULL;
}

static void pu_haproxy_run(struct pu_result *r)
{
	char conf[1024], cfg[320], log[320];
	int port = h_free_port();
	struct uu_load *l = pu_plan(0, 0xAA9A0000ull);
	const char *exe = pu_haproxy_exe();

	H_CHECK(exe, "haproxy not found ($SPLICER_HAPROXY, PATH, /usr/sbin): the differential "
		"suite needs it (`make peer-deps`)");
	snprintf(conf, sizeof conf,
		 "global\n    hard-stop-after %ds\n"
		 "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1m\n"
		 "    timeout server 1m\n"
		 "frontend f\n    bind 127.0.0.1:%d\n    default_backend b\n"
		 "backend b\n    server s1 %s\n", PU_HARD_S, port, l->tg[0].back.text);
	snprintf(cfg, sizeof cfg, "%s/haproxy-upgrade.conf", h_tmpdir());
	snprintf(log, sizeof log, "%s/haproxy-upgrade.log", h_tmpdir());
	uu_write(cfg, conf);

	/* its own process group, as pr_spawn makes it: pr_pid_stop ends the
	 * master and then the group, workers included */
	int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	H_CHECK(logfd >= 0 && nullfd >= 0, "open %s: %s", log, strerror(errno));
	char *argv[] = { (char *)exe, "-W", "-db", "-f", cfg, NULL };
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		h_child_exec(parent, nullfd, nullfd, logfd, exe, argv);
	}
	H_CHECK(pid > 0, "fork: %s", strerror(errno));
	setpgid(pid, pid);
	pu_haproxy = pid;
	close(logfd);
	close(nullfd);
	for (int64_t end = h_now_ms() + 5000; !h_port_listening(port);) {
		H_CHECK(h_now_ms() < end && waitpid(pid, NULL, WNOHANG) == 0, "HAProxy did not listen "
			"on %d (log %s)", port, log);
		h_sleep_ms(5);
	}
	r->old_pid = uu_log_pid(log, "New worker (", "New worker (", NULL, 1, 5000);
	H_CHECK(r->old_pid > 0, "HAProxy's master named no worker (log %s)", log);

	uu_local(&l->tg[0].front, port);
	uu_load_start(l);
	pu_ready(l, "haproxy");
	r->reached = l->claimed;

	/* the reload: ready once the master says so a second time */
	H_CHECK(kill(pid, SIGUSR2) == 0, "SIGUSR2 to HAProxy's master: %s", strerror(errno));
	int64_t end = h_now_ms() + 10000;
	while (pu_lines(log, "Loading success.") < 2 && h_now_ms() < end)
		h_sleep_ms(5);
	int64_t t_ready = h_now_ms();
	H_CHECK(pu_lines(log, "Loading success.") >= 2, "HAProxy did not reload within 10 s (log "
		"%s)", log);
	r->new_pid = uu_log_pid(log, "New worker (", "New worker (", NULL, 2, 1000);
	H_CHECK(r->new_pid > 0 && r->new_pid != r->old_pid, "HAProxy's new worker: %d (old %d)",
		(int)r->new_pid, (int)r->old_pid);
	r->life = uu_wait_gone(NULL, r->old_pid, PU_HOLD_MS) == 0 ? h_now_ms() - t_ready : -1;
	pu_finish(l, r);
	pr_pid_stop(pu_haproxy);
	pu_haproxy = 0;
	uu_load_free(l);
}

static void pu_splicer_run(const char *bin, struct pu_result *r)
{
	static struct h_proxy p;
	struct uu_upgrade u;
	char conf[512], why[256];
	int port = h_free_port();
	struct uu_load *l = pu_plan(1, 0x5B11CE00ull);

	snprintf(conf, sizeof conf, "[global]\nworkers = 2\ndrain_timeout = 60s\n"
		 "half_close_timeout = 5m\n[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n", port,
		 l->tg[0].back.text);
	const char *args[] = { "-c", h_conf_write("peer-upgrade.conf", conf), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, why, sizeof why) == 0, "proxy: %s", why);
	uu_local(&l->tg[0].front, port);
	uu_load_start(l);
	pu_ready(l, "splicer");
	r->reached = l->claimed;

	uu_upgrade(&p, p.pid, 1, PU_HOLD_MS, &u);
	r->old_pid = u.old_pid;
	r->new_pid = u.new_pid;
	pu_finish(l, r);
	uu_wait_all_gone(&p, &u, 1, 10000);
	r->life = uu_lifetime(&u);
	kill(u.new_pid, SIGTERM);
	H_CHECK(uu_wait_gone(&p, u.new_pid, 10000) == 0, "splicer's new process did not stop");
	uu_load_free(l);
}

Test(peer, upgrade_with_sessions_mid_transfer, .init = uu_init, .fini = pu_fini, .timeout = 120)
{
	struct pu_result res[2] = { { .name = "haproxy" }, { .name = "splicer" } };
	char head[512], row[512], cell[96];

	pu_haproxy_run(&res[0]);
	pu_splicer_run(h_binary(0), &res[1]);

	snprintf(head, sizeof head, "[peer] %-34s", "upgrade, 200 sessions mid-transfer");
	snprintf(row, sizeof row, "[peer] %-34s", "upgrade_with_sessions");
	for (int i = 0; i < 2; i++) {
		size_t k = strlen(head), m = strlen(row);
		snprintf(head + k, sizeof head - k, " %40s", res[i].name);
		snprintf(cell, sizeof cell, "%d ok, %d rst, %d cut; old %lld ms", res[i].delivered,
			 res[i].reset, res[i].cut, (long long)res[i].life);
		snprintf(row + m, sizeof row - m, " %40s", cell);
	}
	fprintf(stderr, "%s\n%s\n", head, row);
	fprintf(stderr, "[peer]   ok: every byte both ways, in order; old: how long the old process "
		"(HAProxy's old worker, hard-stop-after %ds; splicer's old process, drain_timeout "
		"60 s) lived after the new one was ready (-1: still there %d s later)\n", PU_HARD_S,
		PU_HOLD_MS / 1000);
	for (int i = 0; i < 2; i++)
		fprintf(stderr, "[peer]   %-8s old %d, new %d; bytes up %llu, down %llu\n",
			res[i].name, (int)res[i].old_pid, (int)res[i].new_pid,
			(unsigned long long)res[i].up, (unsigned long long)res[i].down);
	pr_table_append(head, row);

	/* HAProxy really ran: its sessions were there, its old worker went */
	H_CHECK(res[0].reached == PU_N - PU_IDLE && res[0].life >= 0 &&
		res[0].delivered + res[0].reset + res[0].cut == PU_N, "HAProxy's figures were not "
		"measured: %d sessions reached the backend, old worker lifetime %lld ms",
		res[0].reached, (long long)res[0].life);
	H_CHECK(res[1].delivered == PU_N && res[1].reset == 0, "splicer delivered %d of %d "
		"sessions whole across the upgrade, %d reset, %d cut", res[1].delivered, PU_N,
		res[1].reset, res[1].cut);
	H_CHECK(res[1].life >= 0 && res[1].life <= 1000, "splicer's old process lived %lld ms after "
		"'serves now' (want at most 1000 ms: its sessions handed over)",
		(long long)res[1].life);
}
