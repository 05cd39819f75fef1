/* SPDX-License-Identifier: MIT */
/* What the tests of upgrades share (tests/integration/test_handoff.c and
 * the differential row tests/peer/test_peer_upgrade.c):
 *
 *   - process generations: the new process of an upgrade is the old one's
 *     child and outlives it, so the test process is made a child subreaper
 *     (uu_init), every generation comes back to it, and each one it saw is
 *     killed by pid at the end (uu_fini); the takeover is read from the
 *     shared log ("upgrade: process P serves now") and how long the old
 *     process lives after it is measured by polling /proc/PID every 5 ms;
 *   - a load of sessions that stay open across upgrades (uu_load): each one
 *     a client connection and a backend connection of the test process, on
 *     two epoll loops (a thread for the clients, one for the backends), each
 *     direction a seeded h_gen stream of its own, paced, checked in order
 *     and counted, so a byte lost, repeated or reordered and a session cut,
 *     reset or reconnected are each seen.
 *
 * Helper threads never call Criterion assertions: they count and keep the
 * first reason, the test's main thread checks. Every loop is bounded by an
 * absolute deadline. Exported names start with uu_. */
#ifndef SPLICER_IT_UPGRADE_UTIL_H
#define SPLICER_IT_UPGRADE_UTIL_H

#include "harness.h"

/* ---- process generations ------------------------------------------------- */

/* Criterion .init / .fini of the upgrade tests (h_init / h_fini around them). */
void uu_init(void);
void uu_fini(void);
/* Remembers pid so that uu_fini kills it (up to 64 per test). */
void uu_track(pid_t pid);

/* 1 once pid has exited (reaped, a zombie or gone). p: the harness's own
 * child (the first generation) is reaped through it (p->pid becomes 0);
 * NULL for any other pid. */
int uu_gone(struct h_proxy *p, pid_t pid);
/* Waits up to ms (polls every 5 ms); returns 0 once gone, -1 if not. */
int uu_wait_gone(struct h_proxy *p, pid_t pid, int ms);

/* The pid after `at` on the n-th (1-based) line of the log at path that has
 * mark, then at, then also (NULL: anything); read again every 5 ms for up
 * to ms. 0 when it did not come. */
pid_t uu_log_pid(const char *path, const char *mark, const char *at, const char *also, int n,
		 int ms);
/* The n-th "upgrade: process P serves now" of the shared log (the old
 * process's line once the new one took over): P, or 0 within ms. */
pid_t uu_nth_takeover(const struct h_proxy *p, int n, int ms);

/* One upgrade as the tests measure it. */
struct uu_upgrade {
	pid_t old_pid, new_pid;
	int64_t t_signal;  /* SIGUSR2 sent (h_now_ms) */
	int64_t t_ready;   /* the takeover line seen */
	int64_t t_gone;    /* the old process seen gone; 0 while not */
};
/* SIGUSR2 to old (the n-th upgrade of the test), then the n-th takeover
 * line (15 s at most: asserts), then up to gone_ms for the old process to
 * be gone, polled every 5 ms. The new process is tracked. */
void uu_upgrade(struct h_proxy *p, pid_t old, int n, int gone_ms, struct uu_upgrade *u);
/* How long the old process lived after the takeover line, in ms; -1 while
 * it lives. */
int64_t uu_lifetime(const struct uu_upgrade *u);
/* Waits up to ms for every old process of u[0..n) still alive, filling
 * t_gone as each goes (polled every 5 ms). Returns how many still live. */
int uu_wait_all_gone(struct h_proxy *p, struct uu_upgrade *u, int n, int ms);

/* The old process's account of the hand-over to new_pid:
 * "upgrade: handed N sessions over to process P in X ms; M stay here and
 * drain". Returns 1 with *handed, *stay and *ms filled, or 0 when the log
 * has no such line for P. */
int uu_handed_line(const struct h_proxy *p, pid_t new_pid, long *handed, long *stay, double *ms);

/* 127.0.0.1:port into a (asserts). */
void uu_local(struct h_addr *a, int port);
/* Writes text to path (asserts). */
void uu_write(const char *path, const char *text);
/* `bin ctl -s sock words...`: the exit code (-1: it did not end within
 * 60 s), stdout and stderr in *out and *err (the caller frees them). */
int uu_ctl(const char *bin, const char *sock, char **out, char **err, const char *const *words);
/* One sample of GET /metrics (see h_metric): -1 when absent. */
long long uu_metric(int stats_port, const char *name);

/* ---- sessions across upgrades -------------------------------------------- */

#define UU_MAX_TARGETS 8

/* Where a group of sessions goes: a listener of the proxy and the backend
 * behind it (a listening socket of this process). */
struct uu_target {
	char name[32];           /* the route's name, for messages */
	struct h_addr front;     /* the proxy's listener (set before uu_load_start) */
	struct h_addr back;      /* this target's backend */
	int lfd;                 /* its listening socket (non-blocking) */
	const uint8_t *pre;      /* bytes each client sends before its stream: a
				  * ClientHello, a PROXY header (NULL: none) */
	size_t pre_len;
	int pre_passes;          /* the backend receives pre (a ClientHello does, a
				  * PROXY header is the proxy's) */
	_Atomic int finish;      /* set by the main thread: its sessions end */
	_Atomic int accepted;    /* backend connections accepted */
	int plug_fd;             /* uu_target_plug: the connection that fills its
				  * accept queue (-1: none) */
	_Atomic int released;    /* uu_target_release was called */
	int polled;              /* its listener is in the backend loop's epoll */
};

enum uu_kind {
	UU_FLOW, /* both directions paced until the target finishes */
	UU_HALF, /* the client sends half_len bytes and shuts its write side at once;
		  * the backend's direction runs as UU_FLOW's */
	UU_IDLE, /* nothing either way (not even pre) until the target finishes */
};

/* How a session ended (uu_outcome). */
enum uu_end { UU_RUNNING, UU_DELIVERED, UU_RESET, UU_CUT };

/* One session: its plan, its client end (the client thread's) and its
 * backend end (the backend thread's, once the backend connection said
 * which session it carries). */
struct uu_sess {
	/* the plan, set before uu_load_start */
	uint8_t target;
	uint8_t kind;            /* enum uu_kind */
	uint8_t pre_stage;       /* pre[pre_cut..] waits for this stage */
	uint32_t pre_cut;        /* bytes of pre sent at once (pre_len: all) */
	/* the client end */
	int cfd;
	uint32_t cmask;          /* epoll events armed */
	uint32_t c_pre;          /* bytes of pre + the 8-byte header sent */
	uint64_t c_sent, c_limit; /* stream bytes sent; the final count once known */
	int64_t c_t0;            /* when its stream began (pacing) */
	int c_shut, c_eof;
	_Atomic uint64_t c_got;  /* the backend's stream bytes received, in order */
	_Atomic int c_end;       /* 0 open, 1 done, else -errno of the failure */
	/* the backend end */
	int bconn;               /* its backend connection (index), -1 none yet */
	uint64_t b_sent, b_limit;
	int64_t b_t0;
	int b_shut, b_eof;
	_Atomic uint64_t b_got;  /* the client's stream bytes received, in order */
	_Atomic int b_end;
};

/* A backend connection, before and after it names its session. */
struct uu_bconn {
	int fd;
	uint8_t target;
	uint32_t mask;
	uint32_t pos;            /* bytes of pre + header received */
	uint8_t hdr[8];
	int sess;                /* -1 until the header came */
	int ended;
};

struct uu_load {
	/* inputs */
	struct uu_target tg[UU_MAX_TARGETS];
	int ntg;
	struct uu_sess *s;
	unsigned n;
	uint64_t seed;
	size_t rate;             /* stream bytes per period per direction (paced) */
	int period_ms;
	size_t half_len;         /* UU_HALF: what the client sends before its FIN */
	size_t tail;             /* what each direction sends once it finishes */
	int64_t deadline;        /* absolute (h_now_ms) for everything */
	/* control, set by the main thread */
	_Atomic int stage;       /* upgrades done so far (pre_stage compares with it) */
	_Atomic int stop;
	/* progress */
	_Atomic int connected, accepts, claimed, c_done, b_done;
	_Atomic uint64_t up_bytes, down_bytes; /* received and checked */
	/* failures: each counted once per end, the first reason kept */
	_Atomic int failed, resets, extra;     /* extra: backend connections of no session */
	_Atomic int plugs;                     /* plug connections accepted (not sessions) */
	_Atomic int why_taken;
	char why[320];
	/* the backend thread's table */
	struct uu_bconn *bc;
	unsigned nbc, cap_bc;
	pthread_t ct, bt;
	int started;
};

/* Allocates n sessions (all UU_FLOW on target 0 until planned otherwise). */
void uu_load_init(struct uu_load *l, unsigned n, uint64_t seed);
/* Adds a target and opens its backend's listening socket (asserts); its
 * front is set by the caller before uu_load_start. Returns its index. */
int uu_target_add(struct uu_load *l, const char *name, const uint8_t *pre, size_t pre_len,
		  int pre_passes);
/* Makes target t's backend unreachable for now, without refusing: its
 * accept queue is shrunk to nothing and filled by a connection of this
 * process, so the kernel drops the proxy's SYNs and its connects wait in
 * SYN_SENT, retransmitting (after 1 s, 3 s, 7 s...). Before uu_load_start;
 * only for a target without pre. */
void uu_target_plug(struct uu_load *l, int t);
/* Lets them through: the queue grows back and the backend accepts (and
 * drops the plug); each connect completes at its next SYN. */
void uu_target_release(struct uu_load *l, int t);
/* How many sockets are in SYN_SENT towards target t's backend
 * (/proc/net/tcp). */
int uu_target_syn_sent(const struct uu_load *l, int t);
/* Connects every client (asserts) and starts both loops. */
void uu_load_start(struct uu_load *l);
/* Sets finish on target t (-1: every target). */
void uu_load_finish(struct uu_load *l, int t);
/* Waits until every session of target t (-1: all) has ended, well or not,
 * or ms passed; returns how many are still open. */
int uu_load_wait(struct uu_load *l, int t, int ms);
/* Stops and joins both loops, closes every descriptor left. */
void uu_load_join(struct uu_load *l);
/* Frees what uu_load_init allocated (after uu_load_join). */
void uu_load_free(struct uu_load *l);

/* Copies every session's received counts (client, backend) into c and b. */
void uu_load_snapshot(struct uu_load *l, uint64_t *c, uint64_t *b);
/* Sessions of target t (-1: all) whose every running direction received
 * bytes since the snapshot c, b (uu_load_snapshot), and into *want how
 * many have a running direction (a backend that named its session, not
 * idle, not finished). */
unsigned uu_load_moved(struct uu_load *l, int t, const uint64_t *c, const uint64_t *b,
		       unsigned *want);
/* Waits up to ms until uu_load_moved reaches its want; returns 0, or -1
 * with *moved and *want as last seen. */
int uu_load_wait_moved(struct uu_load *l, int t, const uint64_t *c, const uint64_t *b, int ms,
		       unsigned *moved, unsigned *want);
/* Session i's outcome, after uu_load_join: delivered (both ends done, and
 * each received exactly what the other sent), reset (an ECONNRESET or
 * EPIPE on either end), cut (anything else: an early EOF, a stall). */
enum uu_end uu_outcome(const struct uu_load *l, unsigned i);
/* Checks (main thread, after uu_load_join) that the sessions of target t
 * (-1: all) were delivered, every byte of both directions, with no reset,
 * no failure and no backend connection beyond one per session; `what`
 * names the case in the messages. */
void uu_load_check(const struct uu_load *l, int t, const char *what);

#endif
