/* SPDX-License-Identifier: MIT */
/* bench_real: see bench_real.h. */
#define _GNU_SOURCE
#include "bench_real.h"
#include "bench_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG_BIN "/usr/lib/postgresql/15/bin"

/* Runs argv with stdout+stderr into out (malloc'd, NUL-terminated), for at
 * most timeout_ms; as_user (or NULL) through runuser. Returns the exit
 * status (0..255), or -1 (could not run, killed, timed out). */
static int run_capture(const char *const *argv, const char *as_user, const char *logpath,
		       int timeout_ms, char **out)
{
	const char *full[32];
	int n = 0, st = -1;
	pid_t pid;

	*out = NULL;
	if (as_user) {
		full[n++] = "/usr/sbin/runuser";
		full[n++] = "-u";
		full[n++] = as_user;
		full[n++] = "--";
	}
	for (int i = 0; argv[i] && n < 31; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(full[0], (char *const *)full);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	for (int t = 0; t < timeout_ms / 10; t++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(10000);
		st = -2;
	}
	if (st == -2) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		st = -1;
	}
	FILE *f = fopen(logpath, "re");
	if (f) {
		char *buf = calloc(1, 65536);
		size_t k = buf ? fread(buf, 1, 65535, f) : 0;
		(void)k;
		fclose(f);
		*out = buf;
	}
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A server as a child in its own process group; NULL as_user: as we are. */
static pid_t spawn_server(const char *const *argv, const char *as_user, const char *logpath)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		sigset_t none;
		struct passwd *pw = as_user ? getpwnam(as_user) : NULL;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		/* as the user directly: runuser would stay as a parent that
		 * does not pass SIGTERM on */
		if (as_user && (!pw || setgid(pw->pw_gid) || setuid(pw->pw_uid)))
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static int wait_port(const char *addr, pid_t pid, int ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(addr, ':');

	snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	inet_pton(AF_INET, host, &sin.sin_addr);
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	for (int i = 0; i < ms / 20; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
		ok = fd >= 0 && !connect(fd, (struct sockaddr *)&sin, sizeof(sin));
		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(20000);
	}
	return -1;
}

static void stop_pid(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(-*pid, SIGTERM);
	for (int i = 0; i < 500 && waitpid(*pid, NULL, WNOHANG) != *pid; i++)
		usleep(10000);
	if (kill(*pid, 0) == 0) {
		kill(-*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

static void start_redis(struct bench_real *e, const char *host)
{
	char exe[256], port[16], log[128];
	int p = bench_free_port(host);

	if (!bench_on_path("redis-server", exe, sizeof(exe))) {
		snprintf(e->redis_skip, sizeof(e->redis_skip), "redis-server not installed (make bench-deps)");
		return;
	}
	snprintf(port, sizeof(port), "%d", p);
	snprintf(log, sizeof(log), "%s/redis.log", e->dir);
	const char *argv[] = { exe, "--port", port, "--bind", host, "--save", "", "--appendonly", "no",
			       "--dir", e->dir, "--daemonize", "no", "--maxclients", "1000", NULL };
	snprintf(e->redis_addr, sizeof(e->redis_addr), "%s:%d", host, p);
	e->redis = spawn_server(argv, NULL, log);
	if (e->redis < 0 || wait_port(e->redis_addr, e->redis, 5000)) {
		snprintf(e->redis_skip, sizeof(e->redis_skip), "redis-server did not start (see %s)", log);
		stop_pid(&e->redis);
	}
}

/* initdb into dir/pg as an unprivileged user, postgres on a free port, and
 * pgbench's tables (scale 1). */
static void start_pg(struct bench_real *e, const char *host)
{
	char data[128], log[128], port[16], laddr[96], sockdir[128], *out = NULL;
	const char *user = NULL;
	struct passwd *pw = NULL;
	int p = bench_free_port(host), st;

	if (access(PG_BIN "/initdb", X_OK) || access(PG_BIN "/postgres", X_OK) ||
	    access(PG_BIN "/pgbench", X_OK)) {
		snprintf(e->pg_skip, sizeof(e->pg_skip), "PostgreSQL 15 not installed in " PG_BIN
			 " (make bench-deps)");
		return;
	}
	if (geteuid() == 0) {
		user = getpwnam("postgres") ? "postgres" : "nobody";
		if (!(pw = getpwnam(user)) || access("/usr/sbin/runuser", X_OK)) {
			snprintf(e->pg_skip, sizeof(e->pg_skip), "PostgreSQL needs a non-root user: "
				 "no postgres/nobody user or no runuser");
			return;
		}
		if (chown(e->dir, pw->pw_uid, pw->pw_gid)) {
			snprintf(e->pg_skip, sizeof(e->pg_skip), "chown %s: %s", e->dir, strerror(errno));
			return;
		}
	}
	snprintf(data, sizeof(data), "%s/pg", e->dir);
	snprintf(log, sizeof(log), "%s/initdb.log", e->dir);
	const char *init[] = { PG_BIN "/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync",
			       "-E", "UTF8", NULL };
	st = run_capture(init, user, log, 120000, &out);
	if (st != 0) {
		snprintf(e->pg_skip, sizeof(e->pg_skip), "initdb failed (%d): %.120s", st, out ? out : "");
		free(out);
		return;
	}
	free(out);
	snprintf(port, sizeof(port), "%d", p);
	snprintf(laddr, sizeof(laddr), "listen_addresses=%s", host);
	snprintf(sockdir, sizeof(sockdir), "unix_socket_directories=%s", e->dir);
	snprintf(log, sizeof(log), "%s/postgres.log", e->dir);
	const char *pg[] = { PG_BIN "/postgres", "-D", data, "-p", port, "-c", laddr, "-c", sockdir,
			     "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=300",
			     NULL };
	snprintf(e->pg_addr, sizeof(e->pg_addr), "%s:%d", host, p);
	e->pg = spawn_server(pg, user, log);
	if (e->pg < 0 || wait_port(e->pg_addr, e->pg, 20000)) {
		snprintf(e->pg_skip, sizeof(e->pg_skip), "postgres did not start (see %s)", log);
		stop_pid(&e->pg);
		return;
	}
	snprintf(log, sizeof(log), "%s/pgbench-init.log", e->dir);
	const char *ini[] = { PG_BIN "/pgbench", "-i", "-s", "1", "-q", "-h", host, "-p", port, "-U",
			      "postgres", "postgres", NULL };
	/* postgres accepts before it is ready: retry while it starts up */
	for (int t = 0; t < 50; t++) {
		st = run_capture(ini, NULL, log, 60000, &out);
		if (st == 0 || !out || !strstr(out, "starting up"))
			break;
		free(out);
		out = NULL;
		usleep(100000);
	}
	if (st != 0) {
		snprintf(e->pg_skip, sizeof(e->pg_skip), "pgbench -i failed (%d): %.120s", st, out ? out : "");
		stop_pid(&e->pg);
	}
	free(out);
}

void bench_real_start(struct bench_real *e, const char *host)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "/tmp/splicer-bench-real-XXXXXX");
	if (!mkdtemp(e->dir)) {
		snprintf(e->redis_skip, sizeof(e->redis_skip), "temp dir: %s", strerror(errno));
		snprintf(e->pg_skip, sizeof(e->pg_skip), "temp dir: %s", strerror(errno));
		e->dir[0] = '\0';
		return;
	}
	chmod(e->dir, 0755);
	start_redis(e, host);
	start_pg(e, host);
}

void bench_real_stop(struct bench_real *e)
{
	char cmd[128];

	stop_pid(&e->redis);
	stop_pid(&e->pg);
	if (e->dir[0] && !getenv("SPLICER_BENCH_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
		if (system(cmd)) {
			/* a temp dir left behind is harmless */
		}
	}
}

static void target_text(const struct sockaddr *t, char *host, size_t hlen, char *port, size_t plen)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)t;

	inet_ntop(AF_INET, &sin->sin_addr, host, (socklen_t)hlen);
	snprintf(port, plen, "%d", ntohs(sin->sin_port));
}

int bench_parse_redis_csv(const char *out, double *set_rps, double *get_rps)
{
	const char *s = out ? strstr(out, "\"SET\",\"") : NULL, *g = out ? strstr(out, "\"GET\",\"") : NULL;

	if (!s || !g)
		return -1;
	*set_rps = strtod(s + 7, NULL);
	*get_rps = strtod(g + 7, NULL);
	return *set_rps > 0 && *get_rps > 0 ? 0 : -1;
}

int bench_parse_pgbench(const char *out, double *tps, double *txns)
{
	const char *t = out ? strstr(out, "\ntps = ") : NULL;
	const char *n = out ? strstr(out, "number of transactions actually processed: ") : NULL;

	if (!t || !n)
		return -1;
	*tps = strtod(t + 7, NULL);
	*txns = strtod(n + strlen("number of transactions actually processed: "), NULL);
	return *tps > 0 && *txns > 0 ? 0 : -1;
}

int bench_redis(const struct sockaddr *target, unsigned conns, double seconds,
		struct real_result *r, char *err, size_t len)
{
	char exe[256], host[64], port[16], c[16], num[24], log[] = "/tmp/splicer-bench-redis-XXXXXX";
	char *out = NULL;
	/* about `seconds` per test at the ~40k/s seen through a proxy here */
	long n = (long)(seconds * 40000);
	int st, fd = mkstemp(log);

	memset(r, 0, sizeof(*r));
	if (fd >= 0)
		close(fd);
	if (!bench_on_path("redis-benchmark", exe, sizeof(exe))) {
		snprintf(err, len, "redis-benchmark not installed (make bench-deps)");
		return -1;
	}
	target_text(target, host, sizeof(host), port, sizeof(port));
	snprintf(c, sizeof(c), "%u", conns);
	snprintf(num, sizeof(num), "%ld", n < 2000 ? 2000 : n);
	const char *argv[] = { exe, "-h", host, "-p", port, "-c", c, "-n", num, "-t", "set,get",
			       "--csv", NULL };
	st = run_capture(argv, NULL, log, 300000, &out);
	unlink(log);
	if (st != 0 || bench_parse_redis_csv(out, &r->set_rps, &r->get_rps)) {
		snprintf(err, len, "redis-benchmark failed (%d): %.150s", st, out ? out : "");
		free(out);
		return -1;
	}
	r->requests = 2.0 * (double)atol(num);
	free(out);
	return 0;
}

int bench_pgbench(const struct sockaddr *target, unsigned conns, double seconds,
		  struct real_result *r, char *err, size_t len)
{
	char host[64], port[16], c[16], t[16], log[] = "/tmp/splicer-bench-pgbench-XXXXXX", *out = NULL;
	int st, fd = mkstemp(log);

	memset(r, 0, sizeof(*r));
	if (fd >= 0)
		close(fd);
	target_text(target, host, sizeof(host), port, sizeof(port));
	snprintf(c, sizeof(c), "%u", conns);
	/* -t, transactions per client, not -T: with 50 clients the backends'
	 * start-up alone can outlast a one-second -T on a small box */
	snprintf(t, sizeof(t), "%d", (int)ceil(seconds * 8000 / conns) + 10);
	const char *argv[] = { PG_BIN "/pgbench", "-S", "-n", "-c", c, "-j", "1", "-t", t, "-h", host,
			       "-p", port, "-U", "postgres", "postgres", NULL };
	st = run_capture(argv, NULL, log, 120000 + 10000 * (int)ceil(seconds), &out);
	unlink(log);
	if (st != 0 || bench_parse_pgbench(out, &r->tps, &r->requests)) {
		snprintf(err, len, "pgbench failed (%d): %.150s", st, out ? out : "");
		free(out);
		return -1;
	}
	free(out);
	return 0;
}
