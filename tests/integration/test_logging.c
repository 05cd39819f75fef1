/* SPDX-License-Identifier: MIT */
/* Integration cases for logging and the proxy's process hygiene (issue 12):
 * a log sink that stops reading never stalls forwarding (stderr and the
 * access log into a pipe nobody reads, a FIFO as the access log), fds 0-2
 * closed at start never carry log lines into a client's stream, `user =`
 * can reopen its access log after a rotation, network bytes in log lines
 * are escaped, the copy buffer pool gives memory back after a burst, and
 * the small ones: SIGUSR1 says "reopened" only when it reopened something,
 * HEAD /metrics has GET's Content-Length. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- processes started without the harness (own stdout/stderr) --------- */

static pid_t lg_pids[8];
static int lg_npids;

static void lg_fini(void)
{
	for (int i = 0; i < lg_npids; i++)
		if (lg_pids[i] > 0) {
			kill(lg_pids[i], SIGKILL);
			waitpid(lg_pids[i], NULL, 0);
		}
	lg_npids = 0;
	h_fini();
}

/* Starts bin with stdin from /dev/null and stdout/stderr on out/err; err
 * -1 starts it with fd 2 closed. */
static pid_t lg_spawn(const char *bin, const char *const *args, int out, int err)
{
	const char *argv[32] = { bin };
	int n = 1;
	pid_t parent = getpid(), pid;

	for (; args[n - 1] && n < 31; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(null, 0);
		dup2(out, 1);
		if (err >= 0)
			dup2(err, 2);
		else
			close(2);
		if (null > 2)
			close(null);
		execv(bin, (char **)argv);
		_exit(127);
	}
	H_CHECK(pid > 0, "fork: %s", strerror(errno));
	lg_pids[lg_npids++] = pid;
	return pid;
}

/* Waits up to ms for pid to exit; returns its status, or -1. */
static int lg_wait(pid_t pid, int ms)
{
	int64_t end = h_now_ms() + ms;
	int st;

	do {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			for (int i = 0; i < lg_npids; i++)
				if (lg_pids[i] == pid)
					lg_pids[i] = 0;
			return st;
		}
		h_sleep_ms(10);
	} while (h_now_ms() < end);
	return -1;
}

/* Reads fd (non-blocking) into buf until needle shows or ms pass. */
static int lg_read_until(int fd, char *buf, size_t cap, size_t *len, const char *needle, int ms)
{
	int64_t end = h_now_ms() + ms;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		buf[*len] = '\0';
		if (strstr(buf, needle))
			return 1;
		if (h_now_ms() >= end || poll(&p, 1, 50) < 0)
			return 0;
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		if (*len + 1 >= cap) { /* full: keep a tail, so a needle read in two parts is found */
			size_t keep = cap / 4;
			memmove(buf, buf + *len - keep, keep);
			*len = keep;
		}
		ssize_t k = read(fd, buf + *len, cap - 1 - *len);
		if (k <= 0 && !(k < 0 && errno == EAGAIN))
			return strstr(buf, needle) != NULL;
		if (k > 0)
			*len += (size_t)k;
	}
}

static char *lg_read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = calloc(1, 1 << 20);
	size_t n = 0;

	H_CHECK(buf, "out of memory");
	if (f) {
		n = fread(buf, 1, (1 << 20) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int lg_count_lines(const char *path)
{
	char *t = lg_read_file(path);
	int n = 0;

	for (char *c = t; *c; c++)
		n += *c == '\n';
	free(t);
	return n;
}

static void lg_wait_lines(const char *path, int n)
{
	int64_t end = h_now_ms() + 5000;

	while (lg_count_lines(path) < n && h_now_ms() < end)
		h_sleep_ms(20);
	H_CHECK(lg_count_lines(path) == n, "%s has %d lines, expected %d", path,
		lg_count_lines(path), n);
}

/* ---- backends ------------------------------------------------------------- */

/* Unlimited: greets each connection with 16 bytes (inline), or echoes it
 * until EOF (a detached thread per connection). */
struct lg_backend {
	int lfd, echo;
	struct h_addr addr;
	pthread_t thr;
	_Atomic int stop;
};

static void *lg_echo_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t k;
	int64_t end = h_now_ms() + 20000;

	h_set_timeouts(fd, 200);
	while (h_now_ms() < end) {
		k = recv(fd, buf, sizeof buf, 0);
		if (k == 0 || (k < 0 && errno != EAGAIN))
			break;
		if (k > 0 && send(fd, buf, (size_t)k, MSG_NOSIGNAL) != k)
			break;
	}
	shutdown(fd, SHUT_WR);
	close(fd);
	return NULL;
}

static void *lg_backend_main(void *arg)
{
	struct lg_backend *b = arg;

	while (!b->stop) {
		struct pollfd p = { .fd = b->lfd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		int fd = accept(b->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		h_set_timeouts(fd, 1000);
		if (!b->echo) {
			send(fd, "0123456789abcdef", 16, MSG_NOSIGNAL);
			close(fd);
		} else {
			pthread_t t;
			if (pthread_create(&t, NULL, lg_echo_main, (void *)(intptr_t)fd) == 0)
				pthread_detach(t);
			else
				close(fd);
		}
	}
	return NULL;
}

static void lg_backend_start(struct lg_backend *b, int echo)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;

	memset(b, 0, sizeof *b);
	b->echo = echo;
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(b->lfd >= 0 && bind(b->lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
			listen(b->lfd, 512) == 0 &&
			getsockname(b->lfd, (struct sockaddr *)&a, &len) == 0,
		"backend socket: %s", strerror(errno));
	h_addr_from(&b->addr, (struct sockaddr *)&a, len);
	H_CHECK(pthread_create(&b->thr, NULL, lg_backend_main, b) == 0, "pthread_create");
}

static void lg_backend_stop(struct lg_backend *b)
{
	b->stop = 1;
	pthread_join(b->thr, NULL);
	close(b->lfd);
}

/* One session with the greeting backend: 16 bytes, then EOF. */
static int lg_greeted(const struct h_addr *proxy)
{
	char buf[32];
	int fd = h_connect(proxy, 2000), ok;

	if (fd < 0)
		return 0;
	ok = h_recv_exact(fd, buf, 16, h_now_ms() + H_T(2000)) == 0 &&
	     !memcmp(buf, "0123456789abcdef", 16) && h_expect_eof(fd, h_now_ms() + H_T(2000)) == 0;
	close(fd);
	return ok;
}

static void lg_addr(struct h_addr *a, const char *text)
{
	H_CHECK(h_addr_parse(text, a) == 0, "address %s", text);
}

/* GET or HEAD of path on the stats endpoint: the whole answer. */
static size_t lg_http(const struct h_addr *stats, const char *method, const char *path, char *buf,
		      size_t cap)
{
	char req[128];
	int fd = h_connect(stats, 2000);
	size_t n;

	H_CHECK(fd >= 0, "connect to the stats endpoint: %s", strerror(errno));
	n = (size_t)snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\n\r\n", method, path);
	H_CHECK(h_send_all(fd, req, n, h_now_ms() + 2000) == 0, "send the request");
	n = h_recv_all(fd, buf, cap, h_now_ms() + 3000);
	close(fd);
	return n;
}

/* ---- defect 3: a log sink that stops reading ------------------------------ */

/* stderr (-v: a line per session) and the access log (`--log -`, stdout)
 * into one pipe of 4 KiB that the test stops reading after the ready line:
 * before the fix, the worker blocked in write() after a few dozen sessions
 * and every later session timed out, while /health said 200. */
Test(integ, log_pipe_that_stops_reading_never_stalls_forwarding, .init = h_init, .fini = lg_fini,
     .timeout = 180)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	static char out[256 * 1024];
	char listen[64], stats[64], ans[4096];
	struct h_addr proxy, st;
	size_t len = 0;
	int pfd[2], good = 0;

	lg_backend_start(&be, 0);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", h_free_port());
	snprintf(stats, sizeof stats, "127.0.0.1:%d", h_free_port());
	lg_addr(&proxy, listen);
	lg_addr(&st, stats);
	H_CHECK(pipe2(pfd, O_CLOEXEC) == 0, "pipe");
	fcntl(pfd[1], F_SETPIPE_SZ, 4096);
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	const char *args[] = { "-l", listen, "-b", be.addr.text, "--workers", "2", "-v", "--log", "-",
			       "--stats", stats, NULL };
	pid_t pid = lg_spawn(bin, args, pfd[1], pfd[1]);
	close(pfd[1]);
	H_CHECK(lg_read_until(pfd[0], out, sizeof out, &len, "ready: listening on", 10000),
		"no ready line; output: %s", out);

	/* the reader stops here */
	for (int i = 0; i < 1200; i++) {
		good += lg_greeted(&proxy);
		H_CHECK(good == i + 1, "session %d of 1200 did not complete while the log pipe was "
			"not read", i + 1);
	}
	lg_http(&st, "GET", "/health", ans, sizeof ans);
	H_CHECK(!strncmp(ans, "HTTP/1.1 200", 12) && strstr(ans, "\r\n\r\nok\n"),
		"/health while every worker turns: %.200s", ans);
	long long de = h_metric(&st, "splicer_log_lines_dropped_total{log=\"error\"}");
	long long da = h_metric(&st, "splicer_log_lines_dropped_total{log=\"access\"}");
	H_CHECK(de > 0 && da > 0, "dropped lines in /metrics: error %lld, access %lld", de, da);

	/* reading again: the proxy says what it dropped */
	len = 0;
	H_CHECK(lg_read_until(pfd[0], out, sizeof out, &len, "dropped (the log could not keep up", 10000),
		"no \"N line(s) dropped\" note once the pipe was read again");
	kill(pid, SIGTERM);
	int64_t end = h_now_ms() + 10000;
	int status = -1;
	while (status < 0 && h_now_ms() < end) {
		lg_read_until(pfd[0], out, sizeof out, &len, "\x01", 50); /* keep it flowing */
		status = lg_wait(pid, 10);
	}
	H_CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"SIGTERM: status %d", status);
	close(pfd[0]);
	lg_backend_stop(&be);
}

/* A FIFO as the access log: without a reader, start-up fails at once with
 * the reason (before the fix: open() blocked with SIGTERM blocked, for
 * good). With a reader that stops reading: sessions flow, and SIGTERM ends
 * the proxy although its access log writer is stuck. */
Test(integ, log_fifo_never_blocks_start_or_stop, .init = h_init, .fini = lg_fini, .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	static struct h_proxy p;
	char fifo[300], errpath[300], listen[64];
	struct h_addr proxy;

	lg_backend_start(&be, 0);
	snprintf(fifo, sizeof fifo, "%s/access.fifo", h_tmpdir());
	snprintf(errpath, sizeof errpath, "%s/fifo-start.err", h_tmpdir());
	snprintf(listen, sizeof listen, "127.0.0.1:%d", h_free_port());
	lg_addr(&proxy, listen);
	H_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));

	int efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const char *args[] = { "-l", listen, "-b", be.addr.text, "--log", fifo, NULL };
	pid_t pid = lg_spawn(bin, args, efd, efd);
	close(efd);
	int st = lg_wait(pid, H_T(5000));
	if (st < 0) { /* still blocked: SIGTERM must end it */
		kill(pid, SIGTERM);
		int st2 = lg_wait(pid, 3000);
		H_CHECK(0, "a FIFO without a reader: start-up still running after 5 s (SIGTERM %s)",
			st2 < 0 ? "ignored too" : "ended it");
	}
	char *err = lg_read_file(errpath);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(err, "a FIFO with no reader"),
		"a FIFO without a reader: status %d, stderr: %s", st, err);
	free(err);

	/* a reader that never reads, on a 4 KiB FIFO */
	int rfd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	H_CHECK(rfd >= 0, "open the FIFO for reading: %s", strerror(errno));
	fcntl(rfd, F_SETPIPE_SZ, 4096);
	const char *extra[] = { "--log", fifo, NULL };
	const char *backends[] = { be.addr.text, NULL };
	h_proxy_up(&p, bin, "auto", listen, backends, extra);
	for (int i = 0; i < 300; i++)
		H_CHECK(lg_greeted(&proxy), "session %d of 300 did not complete (FIFO not read)", i + 1);
	kill(p.pid, SIGTERM);
	int status = h_proxy_wait(&p, 10000);
	H_CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"SIGTERM with the access log's reader stalled: status %d", status);
	close(rfd);
	lg_backend_stop(&be);
}

/* ---- defect 4: started with fd 2 closed ------------------------------------ */

/* `splicer ... 2>&-`: the first listener took fd 2. After a reload moved
 * the route to another port, the old listener's fd 2 was closed and the
 * next accepted client got it: every -v line went into its stream. */
Test(integ, closed_stderr_never_sends_log_lines_to_a_client, .init = h_init, .fini = lg_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	char conf[300], text[512], l1[64], l2[64], buf[8192];
	struct h_addr a1, a2;
	FILE *f;

	lg_backend_start(&be, 1);
	snprintf(conf, sizeof conf, "%s/fd2.conf", h_tmpdir());
	snprintf(l1, sizeof l1, "127.0.0.1:%d", h_free_port());
	snprintf(l2, sizeof l2, "127.0.0.1:%d", h_free_port());
	lg_addr(&a1, l1);
	lg_addr(&a2, l2);
	snprintf(text, sizeof text, "[route r]\nlisten = %s\nbackend = %s\n", l1, be.addr.text);
	H_CHECK((f = fopen(conf, "we")) && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", conf);
	int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
	const char *args[] = { "-c", conf, "--workers", "1", "-vv", NULL };
	pid_t pid = lg_spawn(bin, args, nul, -1);
	close(nul);
	int fd = -1;
	for (int64_t end = h_now_ms() + 5000; fd < 0 && h_now_ms() < end; h_sleep_ms(20))
		fd = h_connect(&a1, 500);
	H_CHECK(fd >= 0, "the proxy does not listen on %s", l1);
	close(fd);

	/* the route moves: the first listener is closed */
	snprintf(text, sizeof text, "[route r]\nlisten = %s\nbackend = %s\n", l2, be.addr.text);
	H_CHECK((f = fopen(conf, "we")) && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", conf);
	kill(pid, SIGHUP);
	fd = -1;
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20)) {
		int old = h_connect(&a1, 500);
		if (old >= 0) {
			close(old);
			continue;
		}
		if ((fd = h_connect(&a2, 500)) >= 0)
			break;
	}
	H_CHECK(fd >= 0, "after SIGHUP: %s still accepts or %s does not", l1, l2);

	/* fd is a long session; other sessions open and close meanwhile */
	for (int i = 0; i < 20; i++) {
		int k = h_connect(&a2, 2000);
		H_CHECK(k >= 0, "session %d", i);
		H_CHECK(h_send_all(k, "ping", 4, h_now_ms() + 2000) == 0 &&
				h_recv_exact(k, buf, 4, h_now_ms() + 2000) == 0,
			"echo through session %d", i);
		close(k);
	}
	h_gen(0xfd2, 0, buf, 100);
	H_CHECK(h_send_all(fd, buf, 100, h_now_ms() + 2000) == 0, "send");
	shutdown(fd, SHUT_WR);
	char back[8192];
	size_t n = h_recv_all(fd, back, sizeof back, h_now_ms() + 5000);
	close(fd);
	H_CHECK(n == 100 && h_gen_check(0xfd2, 0, back, 100) == 100,
		"the client got %zu bytes for its 100 (log text in its stream?): %.*s", n,
		(int)(n > 300 ? 300 : n), back);
	kill(pid, SIGTERM);
	int st = lg_wait(pid, 10000);
	H_CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
	lg_backend_stop(&be);
}

/* ---- defect 5: user = and the access log ----------------------------------- */

/* One echo session of 8 bytes through p. */
static void lg_session(const struct h_addr *a)
{
	char buf[8];
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0 && h_send_all(fd, "12345678", 8, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, buf, 8, h_now_ms() + 2000) == 0,
		"session through the proxy");
	close(fd);
}

/* As root with `user = nobody`: the file belongs to nobody, so after a
 * logrotate that recreates it with the old file's owner and mode, SIGUSR1
 * reopens it (before the fix: root:0640, EACCES, lines kept going to the
 * rotated file). In a directory nobody cannot write, a rotation that leaves
 * no file makes SIGUSR1 fail with a clear reason, and the old file stays in
 * use. */
Test(integ, access_log_of_user_reopens_after_rotation, .init = h_init, .fini = lg_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	static struct h_proxy p;
	char dir[300], path[320], rot1[330], rot2[330], conf[300], text[1024];
	struct passwd *pw = getpwnam("nobody");
	struct stat sb;
	FILE *f;

	if (geteuid() != 0 || !pw)
		cr_skip_test("needs root and a user nobody");
	lg_backend_start(&be, 1);
	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod");
	snprintf(dir, sizeof dir, "%s/logs", h_tmpdir());
	snprintf(path, sizeof path, "%s/access.log", dir);
	snprintf(rot1, sizeof rot1, "%s.1", path);
	snprintf(rot2, sizeof rot2, "%s.2", path);
	snprintf(conf, sizeof conf, "%s/user.conf", h_tmpdir());
	H_CHECK(mkdir(dir, 0755) == 0 && chown(dir, pw->pw_uid, pw->pw_gid) == 0, "mkdir %s", dir);
	snprintf(text, sizeof text, "[global]\nuser = nobody\nlog = %s\n[route r]\nlisten = 127.0.0.1:0\n"
		 "backend = %s\n", path, be.addr.text);
	H_CHECK((f = fopen(conf, "we")) && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", conf);
	const char *args[] = { "-c", conf, "--workers", "1", NULL };
	char err[512];
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);

	lg_session(&p.addr);
	lg_wait_lines(path, 1);
	H_CHECK(stat(path, &sb) == 0 && sb.st_uid == pw->pw_uid, "%s belongs to uid %u, not nobody",
		path, (unsigned)sb.st_uid);

	/* logrotate's `create` (no arguments): a new file, the old owner and mode */
	H_CHECK(rename(path, rot1) == 0, "rename");
	int nf = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, sb.st_mode & 07777);
	H_CHECK(nf >= 0 && fchown(nf, sb.st_uid, sb.st_gid) == 0 && fchmod(nf, sb.st_mode & 07777) == 0,
		"create the new log");
	close(nf);
	kill(p.pid, SIGUSR1);
	for (int64_t end = h_now_ms() + 3000; !h_log_lines(&p, "access log", "reopened", NULL) &&
					       !h_log_lines(&p, "SIGUSR1:", NULL) && h_now_ms() < end;)
		h_sleep_ms(20);
	lg_session(&p.addr);
	lg_wait_lines(path, 1);
	H_CHECK(lg_count_lines(rot1) == 1, "the rotated file got more lines: %d", lg_count_lines(rot1));

	/* a directory nobody cannot write, and no file left behind */
	H_CHECK(chown(dir, 0, 0) == 0, "chown");
	H_CHECK(rename(path, rot2) == 0, "rename");
	kill(p.pid, SIGUSR1);
	for (int64_t end = h_now_ms() + 3000; !h_log_lines(&p, "SIGUSR1:", "Permission denied", NULL) &&
					       h_now_ms() < end;)
		h_sleep_ms(20);
	H_CHECK(h_log_lines(&p, "SIGUSR1:", "Permission denied", "its directory to create it", NULL) == 1,
		"no clear reason logged for the failed reopen");
	lg_session(&p.addr);
	lg_wait_lines(rot2, 2);
	H_CHECK(h_proxy_alive(&p), "the proxy died");
	h_proxy_down(&p);
	lg_backend_stop(&be);
}

/* ---- defect 10: network bytes in log lines -------------------------------- */

/* A PROXY v2 header whose AF_UNIX source path holds "\n route=forged": one
 * access log line for the session, the newline escaped. Such headers are
 * accepted (as HAProxy does: Unix paths are bytes), only logged escaped. */
Test(integ, proxy_v2_unix_path_cannot_forge_log_lines, .init = h_init, .fini = lg_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	static struct h_proxy p;
	char path[300], hdr[16 + 216], buf[8];
	static const char sig[12] = "\r\n\r\n\0\r\nQUIT\n";
	static const char src[] = "/tmp/c\n2026-01-01T00:00:00.000Z route=forged \"\\\x7f\xff";

	lg_backend_start(&be, 1);
	snprintf(path, sizeof path, "%s/access.log", h_tmpdir());
	const char *extra[] = { "--log", path, "--accept-proxy", "yes", "-v", NULL };
	const char *backends[] = { be.addr.text, NULL };
	h_proxy_up(&p, bin, "copy", "127.0.0.1:0", backends, extra);

	memset(hdr, 0, sizeof hdr);
	memcpy(hdr, sig, 12);
	hdr[12] = 0x21; /* v2, PROXY */
	hdr[13] = 0x31; /* AF_UNIX, STREAM */
	hdr[14] = 0;
	hdr[15] = (char)216;
	memcpy(hdr + 16, src, sizeof src - 1);
	memcpy(hdr + 16 + 108, "/tmp/d", 6);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0 && h_send_all(fd, hdr, sizeof hdr, h_now_ms() + 2000) == 0 &&
			h_send_all(fd, "abcd", 4, h_now_ms() + 2000) == 0 &&
			h_recv_exact(fd, buf, 4, h_now_ms() + 2000) == 0 && !memcmp(buf, "abcd", 4),
		"session with a PROXY v2 Unix header");
	close(fd);
	lg_wait_lines(path, 1);
	char *t = lg_read_file(path);
	H_CHECK(strstr(t, " client=unix:/tmp/c\\x0a2026-01-01T00:00:00.000Z\\x20route=forged\\x20"
			  "\\x22\\x5c\\x7f\\xff backend="),
		"the client field is not escaped as access_log.h says: %s", t);
	free(t);
	h_proxy_down(&p);
	/* the error log (-v close line) escapes it too: no line starts forged */
	H_CHECK(h_log_lines(&p, "client=unix:/tmp/c\\x0a2026", NULL) == 1 &&
			h_log_lines(&p, "route=forged", NULL) == 1,
		"the -v close line is not escaped");
	lg_backend_stop(&be);
}

/* ---- defect 11: the copy buffer pool shrinks ------------------------------ */

/* 120 sessions each fill a 1 MiB copy buffer toward a backend that never
 * reads; all close; the pool gives the memory back (before the fix RSS
 * stayed at its peak for good). */
Test(integ, copy_buffers_are_given_back_after_a_burst, .init = h_init, .fini = lg_fini,
     .timeout = 120)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	struct h_addr ba;
	int small = 4096, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), cl[120];
	static char chunk[256 * 1024];

	/* a backend that never accepts nor reads: small windows, data stays in the proxy */
	H_CHECK(lfd >= 0 && setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0 &&
			bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 512) == 0 &&
			getsockname(lfd, (struct sockaddr *)&a, &alen) == 0,
		"backend: %s", strerror(errno));
	h_addr_from(&ba, (struct sockaddr *)&a, alen);
	const char *extra[] = { "--buffer-size", "1m", "--max-conns", "1000", NULL };
	const char *backends[] = { ba.text, NULL };
	h_proxy_up(&p, bin, "copy", "127.0.0.1:0", backends, extra);
	h_sleep_ms(200); /* settle: the baseline after start-up */
	long base = h_rss_kib(p.pid);

	for (int i = 0; i < 120; i++) {
		cl[i] = h_connect(&p.addr, 2000);
		H_CHECK(cl[i] >= 0, "connect %d", i);
		fcntl(cl[i], F_SETFL, O_NONBLOCK);
	}
	/* push until each session's buffer is full (sends stop moving) */
	long peak = 0;
	for (int64_t end = h_now_ms() + 20000; h_now_ms() < end;) {
		ssize_t moved = 0;
		for (int i = 0; i < 120; i++) {
			ssize_t k = send(cl[i], chunk, sizeof chunk, MSG_NOSIGNAL);
			moved += k > 0 ? k : 0;
		}
		peak = h_rss_kib(p.pid);
		if (!moved && peak > base + 100 * 1024)
			break;
		h_sleep_ms(20);
	}
	H_CHECK(peak > base + 100 * 1024, "120 full 1 MiB buffers did not show in RSS: %ld -> %ld KiB",
		base, peak);
	for (int i = 0; i < 120; i++) {
		struct linger lg = { 1, 0 };
		setsockopt(cl[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		close(cl[i]);
	}
	close(lfd); /* the backend side goes too */
	long now = peak;
	for (int64_t end = h_now_ms() + 40000; h_now_ms() < end && now > base + 20 * 1024;) {
		h_sleep_ms(200);
		now = h_rss_kib(p.pid);
	}
	H_CHECK(now <= base + 20 * 1024, "RSS after every session closed: %ld KiB (start %ld, peak %ld)",
		now, base, peak);
	h_proxy_down(&p);
}

/* ---- issue 12 item 17 ----------------------------------------------------- */

/* SIGUSR1 with the access log on stdout reopens nothing, and says nothing
 * (before: "access log - reopened"). SIGUSR1 is handled before the SIGTERM
 * sent after it (lower signal numbers first), so the absence is checked
 * after the proxy has ended. */
Test(integ, sigusr1_says_reopened_only_for_files, .init = h_init, .fini = lg_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	static struct h_proxy p;

	lg_backend_start(&be, 1);
	const char *extra[] = { "--log", "-", NULL };
	const char *backends[] = { be.addr.text, NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	kill(p.pid, SIGUSR1);
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "reopened", NULL) == 0, "\"reopened\" logged for --log -");
	lg_backend_stop(&be);
}

static long long lg_content_length(const char *ans)
{
	const char *k = strstr(ans, "Content-Length: ");
	return k ? atoll(k + 16) : -1;
}

/* HEAD /metrics: GET's head, Content-Length included, and no body. */
Test(integ, head_metrics_has_the_content_length_of_get, .init = h_init, .fini = lg_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct lg_backend be;
	static struct h_proxy p;
	static char ans[256 * 1024];
	char stats[64];
	struct h_addr st;

	lg_backend_start(&be, 1);
	snprintf(stats, sizeof stats, "127.0.0.1:%d", h_free_port());
	lg_addr(&st, stats);
	const char *extra[] = { "--stats", stats, NULL };
	const char *backends[] = { be.addr.text, NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	size_t n = lg_http(&st, "GET", "/metrics", ans, sizeof ans);
	long long get = lg_content_length(ans);
	const char *body = strstr(ans, "\r\n\r\n");
	H_CHECK(get > 1000 && body && (long long)(n - (size_t)(body + 4 - ans)) == get,
		"GET /metrics: Content-Length %lld, %zu bytes in all", get, n);
	n = lg_http(&st, "HEAD", "/metrics", ans, sizeof ans);
	long long head = lg_content_length(ans);
	body = strstr(ans, "\r\n\r\n");
	H_CHECK(!strncmp(ans, "HTTP/1.1 200", 12) && head == get && body && body + 4 == ans + n,
		"HEAD /metrics: Content-Length %lld (GET: %lld), %zu bytes after the head", head, get,
		body ? n - (size_t)(body + 4 - ans) : n);
	h_proxy_down(&p);
	lg_backend_stop(&be);
}
