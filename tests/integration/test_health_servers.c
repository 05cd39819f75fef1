/* SPDX-License-Identifier: MIT */
/* Protocol health checks (issue 24, item 2) against the real servers, each
 * started by the test on a loopback port in its temp dir and stopped by
 * PID. These take seconds (initdb, replication), so their names put them in
 * the suite's heavy shard (servers_*: tools/run-suite.sh).
 *   - redis-server: `check = redis` passes on a primary and a replica;
 *     `redis-primary` marks the replica down (role:slave). A failover
 *     (REPLICAOF NO ONE on the replica, the old primary made its replica)
 *     is followed: the old primary is marked down, its session is reset
 *     (on_backend_down = close) and the next session writes to the new one.
 *   - postgresql (initdb as user postgres, --no-sync): `check = pgsql`
 *     passes; the same check on a server that is not PostgreSQL fails.
 *   - openssl s_server: `check = tls` passes; an HTTP server answering the
 *     ClientHello with a 400 fails it.
 *   - python3 -m http.server: `http:GET /health 2xx` passes, a missing
 *     path (404) fails with its status. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flag_backend.h"

#define REDIS    "/usr/bin/redis-server"
#define OPENSSL  "/usr/bin/openssl"
#define PYTHON   "/usr/bin/python3"
#define SETPRIV  "/usr/bin/setpriv"
#define PG_BIN   "/usr/lib/postgresql/15/bin"

/* ---- servers as children ------------------------------------------------- */

struct child {
	pid_t pid;
	int port;
	char log[300];
};

/* Starts argv[0] (its output into log name.log in the temp dir) and waits
 * up to 15 s for it to listen on 127.0.0.1:port. */
static void child_start(struct child *c, const char *name, int port, char *const *argv)
{
	int logfd, nullfd;
	pid_t parent = getpid();

	snprintf(c->log, sizeof c->log, "%s/%s.log", h_tmpdir(), name);
	c->port = port;
	logfd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	H_CHECK(logfd >= 0 && nullfd >= 0, "%s: %s", c->log, strerror(errno));
	c->pid = fork();
	if (c->pid == 0)
		h_child_exec(parent, nullfd, logfd, logfd, argv[0], argv);
	close(logfd);
	close(nullfd);
	H_CHECK(c->pid > 0, "fork: %s", strerror(errno));
	for (int64_t deadline = h_now_ms() + 15000; !h_port_listening(port);) {
		H_CHECK(waitpid(c->pid, NULL, WNOHANG) == 0, "%s exited (log %s)", name, c->log);
		H_CHECK(h_now_ms() < deadline, "%s not listening on port %d after 15 s (log %s)", name,
			port, c->log);
		h_sleep_ms(10);
	}
}

static void child_stop(struct child *c)
{
	int64_t deadline = h_now_ms() + 5000;

	if (c->pid <= 0)
		return;
	kill(c->pid, SIGTERM);
	while (waitpid(c->pid, NULL, WNOHANG) == 0) {
		if (h_now_ms() > deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			break;
		}
		h_sleep_ms(10);
	}
	c->pid = 0;
}

/* ---- the proxy and what it says of a backend ------------------------------ */

/* Waits until backend port of route has passed (up) or failed (down) n
 * checks in a row counted from now: n results of that kind and none of
 * the other since the call. */
static void wait_checks(const struct h_proxy *p, const char *route, int port, int up, int n)
{
	long long ok0 = fb_checks(p, route, port, "ok"), bad0 = fb_checks(p, route, port, "failed");
	int64_t end = h_now_ms() + 10000;

	for (;;) {
		long long ok = fb_checks(p, route, port, "ok") - ok0, bad = fb_checks(p, route, port, "failed") - bad0;
		if ((up ? ok : bad) >= n && (up ? bad : ok) == 0)
			return;
		H_CHECK(h_now_ms() < end && (up ? bad : ok) == 0,
			"route %s, backend port %d: %lld checks passed and %lld failed, expected %s", route,
			port, ok, bad, up ? "passes only" : "failures only");
		h_sleep_ms(50);
	}
}

/* ---- redis ----------------------------------------------------------------- */

static void redis_start(struct child *c, const char *name, int port, int replica_of)
{
	char ports[16], dir[300], of[40];
	char *argv[16];
	int n = 0;

	snprintf(ports, sizeof ports, "%d", port);
	snprintf(dir, sizeof dir, "%s/%s", h_tmpdir(), name);
	H_CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
	argv[n++] = REDIS;
	argv[n++] = "--port";
	argv[n++] = ports;
	argv[n++] = "--bind";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--dir";
	argv[n++] = dir;
	argv[n++] = "--save";
	argv[n++] = "";
	argv[n++] = "--appendonly";
	argv[n++] = "no";
	if (replica_of) {
		snprintf(of, sizeof of, "127.0.0.1 %d", replica_of);
		argv[n++] = "--replicaof";
		argv[n++] = of;
	}
	argv[n] = NULL;
	child_start(c, name, port, argv);
}

/* One command (RESP) on fd; its answer's first line into out. Returns 0,
 * or -errno (-ECONNRESET when the session was cut). */
static int redis_cmd(int fd, const char *cmd, char *out, size_t cap)
{
	size_t n = 0;
	int r;

	if ((r = h_send_all(fd, cmd, strlen(cmd), h_now_ms() + 3000)))
		return r;
	while (n + 1 < cap) {
		if ((r = h_recv_exact(fd, out + n, 1, h_now_ms() + 3000)))
			return r;
		if (out[n++] == '\n')
			break;
	}
	out[n] = '\0';
	return 0;
}

static void redis_direct(int port, const char *cmd, const char *want)
{
	struct h_addr a;
	char where[32], ans[256];
	int fd;

	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(where, &a) == 0 && (fd = h_connect(&a, 2000)) >= 0, "connect %s", where);
	H_CHECK(redis_cmd(fd, cmd, ans, sizeof ans) == 0 && strstr(ans, want), "redis %d: %s", port, ans);
	close(fd);
}

#define SET_K "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"

static void case_redis(const char *bin)
{
	struct child r1, r2;
	struct h_proxy p;
	char text[1024], ans[256];
	int p1 = h_free_port(), p2 = h_free_port(), port = h_free_port(), any = h_free_port(), fd;

	redis_start(&r1, "redis1", p1, 0);
	redis_start(&r2, "redis2", p2, p1);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\n\n"
		 "[route db]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = redis-primary\ncheck_interval = 200ms\ncheck_timeout = 1s\nrise = 1\nfall = 1\n"
		 "on_backend_down = close\n\n"
		 "[route any]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = redis\ncheck_interval = 200ms\n",
		 port, p1, p2, any, p1, p2);
	fb_proxy(&p, bin, "hs.conf", text);
	fb_down_because(&p, p2, "not a primary: role:slave");
	wait_checks(&p, "db", p1, 1, 2);
	wait_checks(&p, "any", p1, 1, 2);
	wait_checks(&p, "any", p2, 1, 2); /* PING: a replica answers too */

	/* a write through the proxy lands on the primary */
	fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0 && redis_cmd(fd, SET_K, ans, sizeof ans) == 0 && !strcmp(ans, "+OK\r\n"),
		"SET through the proxy: %s", ans);

	/* failover: the replica becomes the primary, the old primary its replica */
	int64_t t0 = h_now_ms();
	redis_direct(p2, "*3\r\n$9\r\nREPLICAOF\r\n$2\r\nNO\r\n$3\r\nONE\r\n", "+OK");
	char follow[128];
	snprintf(follow, sizeof follow, "*3\r\n$9\r\nREPLICAOF\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%d\r\n",
		 (size_t)snprintf(NULL, 0, "%d", p2), p2);
	redis_direct(p1, follow, "+OK");
	int r = h_expect_eof(fd, t0 + 5000);
	int64_t cut = h_now_ms() - t0;
	H_CHECK(r == -ECONNRESET, "the session on the old primary: %d (%s), not reset", r, strerror(-r));
	fprintf(stderr, "[servers_redis] failover: the old primary's session reset %lld ms after the "
		"promotion (check interval 200 ms)\n", (long long)cut);
	fb_down_because(&p, p1, "not a primary: role:slave");
	close(fd);
	/* the next session writes to the new primary */
	int64_t end = h_now_ms() + 5000;
	do {
		fd = h_connect(&p.addr, 2000);
		ans[0] = 0;
		if (fd >= 0)
			redis_cmd(fd, SET_K, ans, sizeof ans);
		if (fd >= 0)
			close(fd);
		if (!strcmp(ans, "+OK\r\n"))
			break;
		h_sleep_ms(50);
	} while (h_now_ms() < end);
	H_CHECK(!strcmp(ans, "+OK\r\n"), "no write reached the new primary: %s", ans);
	fprintf(stderr, "[servers_redis] failover: writes through the proxy again %lld ms after the "
		"promotion\n", (long long)(h_now_ms() - t0));

	/* a dead server fails `redis` at once (refused) */
	child_stop(&r2);
	fb_down_because(&p, p2, "refused");
	h_proxy_down(&p);
	child_stop(&r1);
}

Test(integ, servers_redis_checks_and_failover, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_redis(h_binary(0));
}

/* ---- postgresql ------------------------------------------------------------ */

/* Runs a PostgreSQL tool as user postgres (initdb refuses root). */
static void as_postgres(const char *tool, const char *const *args, const char *what)
{
	const char *argv[24];
	char path[200], *out = NULL, *err = NULL;
	int n = 0, st;

	snprintf(path, sizeof path, PG_BIN "/%s", tool);
	argv[n++] = "--reuid=postgres";
	argv[n++] = "--regid=postgres";
	argv[n++] = "--clear-groups";
	argv[n++] = path;
	for (int i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	st = h_run_capture(SETPRIV, argv, 60000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d\n%s%s", what, st,
		out ? out : "", err ? err : "");
	free(out);
	free(err);
}

static pid_t pg_pid(const char *dir)
{
	char path[400];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof path, "%s/postmaster.pid", dir);
	if ((f = fopen(path, "re"))) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return (pid_t)pid;
}

static void case_pgsql(const char *bin)
{
	struct passwd *pw = getpwnam("postgres");
	struct h_proxy p;
	char dir[300], opts[400], log[320], text[1024], sock[300];
	int pgport = h_free_port(), other = h_free_port(), port = h_free_port();
	struct h_server not_pg;

	if (!pw || access(PG_BIN "/initdb", X_OK))
		cr_skip_test("PostgreSQL 15 (%s) or its user postgres is not installed", PG_BIN);
	/* the temp dir is root's: postgres may pass through, not read */
	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod %s", h_tmpdir());
	snprintf(dir, sizeof dir, "%s/pgdata", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/pgsock", h_tmpdir());
	snprintf(log, sizeof log, "%s/postgres.log", h_tmpdir());
	H_CHECK(mkdir(dir, 0700) == 0 && chown(dir, pw->pw_uid, pw->pw_gid) == 0 &&
			mkdir(sock, 0700) == 0 && chown(sock, pw->pw_uid, pw->pw_gid) == 0,
		"pg directories: %s", strerror(errno));
	int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	H_CHECK(logfd >= 0 && fchown(logfd, pw->pw_uid, pw->pw_gid) == 0, "log file");
	close(logfd);
	int64_t t0 = h_now_ms();
	const char *init[] = { "-D", dir, "--no-sync", "-A", "trust", "-U", "postgres", "--no-instructions",
			       NULL };
	as_postgres("initdb", init, "initdb");
	snprintf(opts, sizeof opts, "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off "
		 "-c max_connections=20 -c shared_buffers=8MB", pgport, sock);
	const char *start[] = { "-D", dir, "-o", opts, "-l", log, "-w", "-t", "30", "start", NULL };
	as_postgres("pg_ctl", start, "pg_ctl start");
	fprintf(stderr, "[servers_pgsql] initdb and start: %lld ms\n", (long long)(h_now_ms() - t0));
	pid_t pid = pg_pid(dir);
	H_CHECK(pid > 0, "no postmaster.pid");

	/* something else on the other port: an echo server */
	char where[32];
	snprintf(where, sizeof where, "127.0.0.1:%d", other);
	H_CHECK(h_server_start(&not_pg, where, 16, h_echo_conn, NULL) == 0, "echo server");
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n\n"
		 "[route pg]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = pgsql\ncheck_interval = 300ms\ncheck_timeout = 300ms\nrise = 1\nfall = 1\n",
		 port, pgport, other);
	fb_proxy(&p, bin, "hs.conf", text);
	wait_checks(&p, "pg", pgport, 1, 3);
	fb_down_because(&p, other, "not a PostgreSQL answer to the SSLRequest");
	h_proxy_down(&p);
	h_server_stop(&not_pg);
	/* stopped by PID: SIGQUIT is PostgreSQL's immediate shutdown */
	kill(pid, SIGQUIT);
	for (int64_t end = h_now_ms() + 10000; kill(pid, 0) == 0 && h_now_ms() < end;)
		h_sleep_ms(20);
	H_CHECK(kill(pid, 0) != 0, "postgres %d did not stop", (int)pid);
}

Test(integ, servers_pgsql_check, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_pgsql(h_binary(0));
}

/* ---- TLS and HTTP ---------------------------------------------------------- */

static void case_tls_http(const char *bin)
{
	struct child tls, web;
	struct h_proxy p;
	char crt[300], key[300], acc[32], wport[16], text[2048], *out = NULL, *err = NULL;
	int tport = h_free_port(), hport = h_free_port(), pt = h_free_port(), ph = h_free_port(),
	    pm = h_free_port();

	snprintf(crt, sizeof crt, "%s/s.crt", h_tmpdir());
	snprintf(key, sizeof key, "%s/s.key", h_tmpdir());
	const char *gen[] = { "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
			      "-nodes", "-keyout", key, "-out", crt, "-subj", "/CN=check", "-days", "1",
			      NULL };
	int st = h_run_capture(OPENSSL, gen, 20000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && !WEXITSTATUS(st), "openssl req: %s", err ? err : "");
	free(out);
	free(err);
	snprintf(acc, sizeof acc, "127.0.0.1:%d", tport);
	char *targv[] = { OPENSSL, "s_server", "-accept", acc, "-cert", crt, "-key", key, "-www", NULL };
	child_start(&tls, "s_server", tport, targv);
	/* an HTTP server whose /health exists */
	char health[320];
	snprintf(health, sizeof health, "%s/health", h_tmpdir());
	FILE *f = fopen(health, "we");
	H_CHECK(f && fputs("ok\n", f) >= 0 && fclose(f) == 0, "write %s", health);
	snprintf(wport, sizeof wport, "%d", hport);
	char *dirarg = (char *)h_tmpdir();
	char *wargv[] = { PYTHON, "-m", "http.server", "--bind", "127.0.0.1", "--directory", dirarg,
			  wport, NULL };
	child_start(&web, "http.server", hport, wargv);

	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\n\n"
		 "[route t]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d 127.0.0.1:%d\n"
		 "check = tls\ncheck_interval = 300ms\nrise = 1\nfall = 1\n\n"
		 "[route h]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n"
		 "check = http:GET /health 2xx\ncheck_interval = 300ms\nrise = 1\nfall = 1\n\n"
		 "[route m]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n"
		 "check = http:GET /missing 2xx\ncheck_interval = 300ms\nrise = 1\nfall = 1\n",
		 pt, tport, hport, ph, hport, pm, hport);
	fb_proxy(&p, bin, "hs.conf", text);
	wait_checks(&p, "t", tport, 1, 3);
	fb_down_because(&p, hport, "not a TLS answer"); /* http.server answers a 400 to a hello */
	wait_checks(&p, "h", hport, 1, 3);
	fb_down_because(&p, hport, "status 404");
	h_proxy_down(&p);
	child_stop(&tls);
	child_stop(&web);
}

Test(integ, servers_tls_and_http_checks, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_tls_http(h_binary(0));
}
