/* SPDX-License-Identifier: MIT */
/* Integration cases for operating the proxy: the access log (a line per
 * session matching the traffic, SIGUSR1 reopening the file after a rotation)
 * and systemd's readiness protocol (READY=1, STOPPING=1 on NOTIFY_SOCKET). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* One echo session of n bytes; returns the client's port. */
static int echo_session(const struct h_addr *proxy, size_t n, uint64_t seed)
{
	char buf[4096], back[4096];
	struct sockaddr_in me;
	socklen_t len = sizeof me;
	int fd = h_connect(proxy, 2000);

	H_CHECK(fd >= 0 && n <= sizeof buf, "connect to the proxy: %s", strerror(errno));
	h_gen(seed, 0, buf, n);
	H_CHECK(getsockname(fd, (struct sockaddr *)&me, &len) == 0, "getsockname");
	H_CHECK(h_send_all(fd, buf, n, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, back, n, h_now_ms() + 2000) == 0 && !memcmp(buf, back, n),
		"echo of %zu bytes through the proxy failed", n);
	close(fd);
	return ntohs(me.sin_port);
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void wait_lines(const char *path, int n)
{
	int64_t end = h_now_ms() + 3000;
	while (count_lines(path) < n && h_now_ms() < end)
		h_sleep_ms(20);
	H_CHECK(count_lines(path) == n, "%s has %d lines, expected %d", path, count_lines(path), n);
}

struct log_entry {
	char route[64], client[128], backend[128], reason[32];
	unsigned long long up, down, ms;
	int time_ok;
};

static int read_entries(const char *path, struct log_entry *e, int max)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	int n = 0;

	H_CHECK(f, "cannot open %s", path);
	while (n < max && fgets(line, sizeof line, f)) {
		struct log_entry *x = &e[n];
		int k = sscanf(line, "%*s route=%63s client=%127s backend=%127s up=%llu down=%llu "
				     "duration_ms=%llu reason=%31s", x->route, x->client, x->backend,
			       &x->up, &x->down, &x->ms, x->reason);
		H_CHECK(k == 7, "access log line does not parse (%d fields): %s", k, line);
		/* 2026-12-03T08:30:00.123Z */
		x->time_ok = strlen(line) > 24 && line[4] == '-' && line[10] == 'T' && line[19] == '.' &&
			     line[23] == 'Z' && line[24] == ' ';
		n++;
	}
	fclose(f);
	return n;
}

Test(integ, access_log_lines_match_sessions_and_reopen, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	char path[300], rotated[320];
	struct log_entry e[8];
	int ports[7];

	snprintf(path, sizeof path, "%s/access.log", h_tmpdir());
	snprintf(rotated, sizeof rotated, "%s.1", path);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--log", path, NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);

	for (int i = 0; i < 5; i++)
		ports[i] = echo_session(&p.addr, 100 * (size_t)(i + 1), 0xA10 + (uint64_t)i);
	wait_lines(path, 5);
	int n = read_entries(path, e, 8);
	for (int i = 0; i < n; i++) {
		char want[64];
		int found = -1;
		for (int k = 0; k < 5; k++) {
			snprintf(want, sizeof want, "127.0.0.1:%d", ports[k]);
			if (!strcmp(e[i].client, want))
				found = k;
		}
		H_CHECK(found >= 0, "line %d: client %s is none of the sessions'", i + 1, e[i].client);
		H_CHECK(e[i].time_ok && !strcmp(e[i].route, "default") &&
				!strcmp(e[i].backend, srv.addr.text) &&
				e[i].up == 100ull * (unsigned)(found + 1) && e[i].down == e[i].up &&
				!strcmp(e[i].reason, "done") && e[i].ms < 5000,
			"line %d (session %d, %d bytes each way): route=%s backend=%s up=%llu down=%llu "
			"duration_ms=%llu reason=%s time_ok=%d", i + 1, found + 1, 100 * (found + 1),
			e[i].route, e[i].backend, e[i].up, e[i].down, e[i].ms, e[i].reason, e[i].time_ok);
	}

	/* logrotate: move the file, SIGUSR1, and the next lines go to a new one */
	H_CHECK(rename(path, rotated) == 0, "rename: %s", strerror(errno));
	kill(p.pid, SIGUSR1);
	int64_t end = h_now_ms() + 3000;
	while (access(path, F_OK) != 0 && h_now_ms() < end)
		h_sleep_ms(20);
	H_CHECK(access(path, F_OK) == 0, "SIGUSR1 did not create a new %s", path);
	ports[5] = echo_session(&p.addr, 600, 0xA20);
	ports[6] = echo_session(&p.addr, 700, 0xA21);
	wait_lines(path, 2);
	H_CHECK(count_lines(rotated) == 5, "the rotated file has %d lines, expected its 5",
		count_lines(rotated));
	n = read_entries(path, e, 8);
	H_CHECK(n == 2 && e[0].up + e[1].up == 1300, "after reopen: %d lines, up %llu + %llu", n,
		e[0].up, e[1].up);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* Receives one datagram from fd within ms; returns it (static) or "". */
static const char *notify_recv(int fd, int ms)
{
	static char buf[512];
	h_set_timeouts(fd, ms);
	ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

Test(integ, sd_notify_ready_and_stopping, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s/notify.sock", h_tmpdir());
	H_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sun, sizeof sun) == 0, "notify socket: %s",
		strerror(errno));
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	setenv("NOTIFY_SOCKET", sun.sun_path, 1);
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, NULL);
	unsetenv("NOTIFY_SOCKET");
	const char *m = notify_recv(fd, 2000);
	H_CHECK(strstr(m, "READY=1"), "expected READY=1 on NOTIFY_SOCKET once listening, got '%s'", m);
	char why[256];
	H_CHECK(h_echo_roundtrip(&p.addr, 500, 0xB1, 3000, why, sizeof why) == 0,
		"the proxy did not forward after READY=1: %s", why);
	h_proxy_down(&p);
	m = notify_recv(fd, 2000);
	H_CHECK(strstr(m, "STOPPING=1"), "expected STOPPING=1 after SIGTERM, got '%s'", m);
	close(fd);
	h_server_stop(&srv);
}

/* Sends req (n bytes) to addr and reads the whole answer until the server
 * closes; returns it (static). */
static const char *http(const struct h_addr *addr, const void *req, size_t n)
{
	static char resp[65536];
	int fd = h_connect(addr, 2000);

	H_CHECK(fd >= 0, "connect to the stats endpoint %s: %s", addr->text, strerror(errno));
	if (n)
		h_send_all(fd, req, n, h_now_ms() + 2000);
	h_recv_all(fd, resp, sizeof resp, h_now_ms() + 4000);
	close(fd);
	return resp;
}

static void expect_metric(const char *body, const char *line)
{
	char want[400];
	snprintf(want, sizeof want, "\n%s\n", line);
	H_CHECK(strstr(body, want), "/metrics lacks the line '%s':\n%s", line, body);
}

Test(integ, metrics_match_traffic_and_bad_http_is_refused, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	struct h_addr stats;
	char line[400];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--stats", "127.0.0.1:0", NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no 'stats: listening on' line in %s", p.log);
	for (int i = 1; i <= 3; i++)
		echo_session(&p.addr, 100 * (size_t)i, 0xC0 + (uint64_t)i);
	/* sessions count their bytes when they close, just after the client's */
	const char *body = "";
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(20)) {
		body = http(&stats, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
		if (strstr(body, "\nsplicer_route_sessions_active{route=\"default\"} 0\n"))
			break;
	}
	H_CHECK(!strncmp(body, "HTTP/1.1 200 OK\r\n", 17) &&
			strstr(body, "Content-Type: text/plain; version=0.0.4"),
		"GET /metrics: %.200s", body);
	expect_metric(body, "splicer_route_sessions_total{route=\"default\"} 3");
	expect_metric(body, "splicer_route_sessions_active{route=\"default\"} 0");
	expect_metric(body, "splicer_route_bytes_total{route=\"default\",direction=\"up\"} 600");
	expect_metric(body, "splicer_route_bytes_total{route=\"default\",direction=\"down\"} 600");
	snprintf(line, sizeof line, "splicer_backend_bytes_total{route=\"default\",backend=\"%s\","
				    "direction=\"up\"} 600", srv.addr.text);
	expect_metric(body, line);
	snprintf(line, sizeof line, "splicer_backend_sessions_total{route=\"default\",backend=\"%s\"} 3",
		 srv.addr.text);
	expect_metric(body, line);
	snprintf(line, sizeof line, "splicer_backend_up{route=\"default\",backend=\"%s\"} 1",
		 srv.addr.text);
	expect_metric(body, line);
	expect_metric(body, "splicer_route_connect_errors_total{route=\"default\"} 0");

	const char *r = http(&stats, "GET /health HTTP/1.0\r\n\r\n", 24);
	H_CHECK(!strncmp(r, "HTTP/1.1 200 OK", 15) && strstr(r, "\r\n\r\nok\n"), "GET /health: %s", r);

	/* bad requests: each answered with its status and closed */
	static char big[6000];
	memset(big, 'a', sizeof big);
	memcpy(big, "GET /metrics HTTP/1.1\r\nX-Long: ", 31);
	const struct { const char *req; size_t n; const char *status; } bad[] = {
		{ "garbage\r\n\r\n", 11, "HTTP/1.1 400 " },
		{ "GET /nope HTTP/1.1\r\n\r\n", 22, "HTTP/1.1 404 " },
		{ "DELETE /metrics HTTP/1.1\r\n\r\n", 28, "HTTP/1.1 405 " },
		{ "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 15, "HTTP/1.1 400 " },
		{ big, sizeof big, "HTTP/1.1 431 " },
		{ "GET /metrics HTTP/1.1\r\n", 23, "HTTP/1.1 408 " }, /* never finished */
	};
	for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
		r = http(&stats, bad[i].req, bad[i].n);
		H_CHECK(!strncmp(r, bad[i].status, strlen(bad[i].status)),
			"bad request %u: expected '%s...', got '%.80s'", i, bad[i].status, r);
	}
	/* forwarding was not disturbed */
	echo_session(&p.addr, 1000, 0xC9);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

Test(integ, user_drops_root_and_limits_are_named, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;

	if (geteuid() != 0)
		cr_skip_test("needs root to drop privileges");
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--user", "nobody", "--max-pipes", "100000", NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	echo_session(&p.addr, 3000, 0xD1);
	char path[64], line[256];
	unsigned uid = 0, euid = 0, suid = 0;
	snprintf(path, sizeof path, "/proc/%d/status", (int)p.pid);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "Uid:", 4))
			sscanf(line + 4, "%u %u %u", &uid, &euid, &suid);
	if (f)
		fclose(f);
	H_CHECK(uid == 65534 && euid == 65534 && suid == 65534,
		"the proxy runs as uid %u/%u/%u, expected nobody (65534) in all three", uid, euid, suid);
	h_server_stop(&srv);
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "fs.pipe-user-pages-soft", NULL),
		"max-pipes 100000 as nobody: no warning naming fs.pipe-user-pages-soft");

	const char *args[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--user", "no-such-user-x", NULL };
	char *out = NULL, *err = NULL;
	int st = h_run_capture(bin, args, 5000, &out, &err);
	/* refused by the config's checks (exit 2), before anything is bound */
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && err &&
			strstr(err, "user no-such-user-x: no such user"),
		"unknown user: status %d, stderr %s", st, err ? err : "");
	free(out);
	free(err);
}
