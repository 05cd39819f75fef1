/* SPDX-License-Identifier: MIT */
/* bench_proxy: the proxies `splicer bench` measures, started as children on
 * a free loopback port in front of the sink: splicer itself (any engine and
 * options), HAProxy, nginx stream and socat, plus the CPU and memory of each
 * process tree, read from /proc. */
#ifndef SPLICER_BENCH_PROXY_H
#define SPLICER_BENCH_PROXY_H
#include <sys/socket.h>
#include <sys/types.h>

enum proxy_kind { PX_DIRECT, PX_SPLICER, PX_HAPROXY, PX_NGINX, PX_SOCAT };

struct bench_case {
	const char *name;        /* "splice-256k", "haproxy", ... */
	enum proxy_kind kind;
	const char *opts[8];     /* splicer: its options; haproxy: config lines; either:
				    "conf:NAME", bench/NAME as the config template in place
				    of haproxy.cfg or of splicer's -l/-b (splicer runs with
				    -c and its other options) */
	const char *what;        /* one line for the legend */
	const char *exe;         /* splicer: the binary to run (a --baseline build), NULL: this one */
	const char *base;        /* that baseline's name, or NULL */
	const struct bench_case *of; /* the case this one runs with the baseline's binary, or NULL */
};

struct bench_proxy {
	pid_t pid;                    /* 0 for direct */
	struct sockaddr_storage ss;   /* where clients connect */
	socklen_t len;
	struct sockaddr_storage ss2;  /* a second listener, @LISTEN2@ of a conf template */
	socklen_t len2;
	char dir[64];                 /* temp dir for configs, pid files, logs */
};

/* Prints the end of p's log (its stderr) to stderr, for a row that failed:
 * the proxy's own account of it, before bench_proxy_stop removes the dir. */
void bench_proxy_log_tail(const struct bench_proxy *p, const char *row);

/* Why a case cannot run here ("haproxy not installed"), or NULL. */
const char *bench_case_unavailable(const struct bench_case *c);

/* Starts the case's proxy on a free port of `host` (an IPv4 address of
 * the calling thread's namespace) in front of `backend` ("IPV4:PORT") with
 * `threads` workers and waits until it accepts. For direct, just points at
 * the backend. Returns 0 or -1 with err filled. */
int bench_proxy_start(struct bench_proxy *p, const struct bench_case *c, const char *backend,
		      const char *host, unsigned threads, char *err, unsigned errlen);
void bench_proxy_stop(struct bench_proxy *p);

/* Whether prog is in the usual bin dirs (out: its path). */
int bench_on_path(const char *prog, char *out, size_t len);
/* A port free on host (IPv4 text) a moment ago, or -1. */
int bench_free_port(const char *host);

/* user+sys CPU seconds of pid and all its descendants, alive or reaped. */
double bench_tree_cpu(pid_t pid);
/* "PID,CHILD,..." of pid and its live descendants (perf -p's list). */
void bench_tree_pids(pid_t pid, char *out, size_t len);
/* Keeps every thread of pid and its live descendants off CPU `cpu` (the
 * load thread's), or lets them run on every CPU again (cpu < 0). */
void bench_tree_avoid_cpu(pid_t pid, int cpu);
/* Keeps every thread of pid and its live descendants on CPU `cpu` (undone
 * by bench_tree_avoid_cpu(pid, -1)). */
void bench_tree_on_cpu(pid_t pid, int cpu);
/* Peak RSS (VmHWM) of pid and its live descendants, in KiB. */
long bench_tree_peak_rss_kib(pid_t pid);
/* Resident set (VmRSS) of pid and its live descendants now, in KiB. */
long bench_tree_rss_kib(pid_t pid);
/* Busy CPU seconds of the whole machine (all CPUs, /proc/stat). */
double bench_machine_busy(void);

#endif
