/* SPDX-License-Identifier: MIT */
/* The privilege boundary (doc/security.md), attacked by the run-as user:
 * started as root with `user = nobody`, nothing nobody can put in its own
 * directories (a symlink, a swapped file) makes root open, create or chown
 * a file, and a SIGUSR2 that nobody sends starts a process with nobody's
 * identity and CAP_NET_BIND_SERVICE alone, from a binary nobody cannot
 * write.
 *
 * Each case runs only as root (it needs a second user), and keeps its
 * files in a temp dir whose directories nobody owns where the config says
 * so. Upgrades leave generations that are not our children: this process
 * is a child subreaper, and every pid it learns is killed at the end. */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PV_MAX_PIDS 32
static pid_t pv_pids[PV_MAX_PIDS];
static int pv_npids;

static void pv_init(void)
{
	h_init();
	pv_npids = 0;
	prctl(PR_SET_CHILD_SUBREAPER, 1);
}

static void pv_fini(void)
{
	for (int i = 0; i < pv_npids; i++)
		if (kill(pv_pids[i], SIGKILL) == 0)
			waitpid(pv_pids[i], NULL, 0);
	h_fini();
}

static struct passwd *pv_nobody(void)
{
	struct passwd *pw = getpwnam("nobody");

	if (geteuid() != 0 || !pw)
		cr_skip_test("needs root and a user nobody");
	return pw;
}

/* A directory under the temp dir that nobody owns (the package's
 * /var/log/splicer and /run/splicer). The temp dir itself lets anyone in. */
static void pv_user_dir(const struct passwd *pw, const char *name, char *out, size_t len)
{
	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod %s", h_tmpdir());
	snprintf(out, len, "%s/%s", h_tmpdir(), name);
	H_CHECK(mkdir(out, 0755) == 0 && chown(out, pw->pw_uid, pw->pw_gid) == 0, "mkdir %s", out);
}

/* The binary the run-as user's upgrades execute: a root-owned copy in a
 * directory everyone may search. The checkout may not be: a clone made in
 * `mktemp -d` is 0700, and the spawner keeps no power to read past that
 * (the upgrade failed with EACCES there, the test with it). */
static const char *pv_user_binary(void)
{
	static char path[320];
	char dir[300];
	const char *src = h_binary(0);
	int in, out;
	char buf[1 << 16];
	ssize_t n;

	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod %s", h_tmpdir());
	snprintf(dir, sizeof dir, "%s/bin", h_tmpdir());
	snprintf(path, sizeof path, "%s/splicer", dir);
	if (access(path, X_OK) == 0)
		return path;
	H_CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s", dir);
	in = open(src, O_RDONLY | O_CLOEXEC);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	H_CHECK(in >= 0 && out >= 0, "copy %s to %s", src, path);
	while ((n = read(in, buf, sizeof buf)) > 0)
		H_CHECK(write(out, buf, (size_t)n) == n, "write %s", path);
	H_CHECK(n == 0 && fchmod(out, 0755) == 0 && close(out) == 0, "copy %s", path);
	close(in);
	return path;
}

/* A root-owned file: mode, group and content given. */
static void pv_root_file(const char *path, mode_t mode, gid_t gid, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	H_CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) &&
			fchown(fd, 0, gid) == 0 && fchmod(fd, mode) == 0,
		"write %s", path);
	close(fd);
}

/* Sends sig to pid as uid (a child that becomes it first). */
static void pv_kill_as(uid_t uid, gid_t gid, pid_t pid, int sig)
{
	pid_t c = fork();
	int st;

	H_CHECK(c >= 0, "fork");
	if (c == 0) {
		if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
			_exit(2);
		_exit(kill(pid, sig) ? 1 : 0);
	}
	H_CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"kill(%d, %d) as uid %u failed", (int)pid, sig, (unsigned)uid);
}

/* The n-th upgrade outcome in the log, waiting up to ms: the new pid of an
 * "upgrade: process PID serves now" line, -1 for an upgrade that failed
 * ("serving on unchanged"), 0 when none came. */
static pid_t pv_outcome(const struct h_proxy *p, int n, int ms)
{
	for (int64_t end = h_now_ms() + ms;; h_sleep_ms(10)) {
		FILE *f = fopen(p->log, "r");
		char line[1024];
		int seen = 0;
		pid_t pid = 0;

		while (f && !pid && fgets(line, sizeof line, f)) {
			const char *k = strstr(line, "upgrade: process ");
			if (k && strstr(k, " serves now") && ++seen == n)
				pid = (pid_t)atoi(k + strlen("upgrade: process "));
			else if (strstr(line, "serving on unchanged") && ++seen == n)
				pid = -1;
		}
		if (f)
			fclose(f);
		if (pid || h_now_ms() > end) {
			if (pid > 0 && pv_npids < PV_MAX_PIDS)
				pv_pids[pv_npids++] = pid;
			return pid;
		}
	}
}

/* 1 when path is still root's, with its mode and content. */
static int pv_unchanged(const char *path, mode_t mode, const char *text)
{
	char buf[256];
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0 || stat(path, &sb))
		return 0;
	buf[n] = '\0';
	return sb.st_uid == 0 && (sb.st_mode & 07777) == mode && !strcmp(buf, text);
}

/* The access log path is a symlink nobody planted to a root-owned file
 * that its group may write (so the preflight, done as nobody, passes).
 * Before the fix root opened it through the link and chowned it to
 * nobody, at start and again at every upgrade nobody asked for with
 * SIGUSR2. Now the log is opened as nobody and nothing is chowned: the
 * file stays root's, whatever nobody does with its directory. */
Test(hostile, access_log_symlink_never_makes_root_chown_a_file, .init = pv_init, .fini = pv_fini,
     .timeout = 60)
{
	struct passwd *pw = pv_nobody();
	const char *bin = pv_user_binary();
	static struct h_server be;
	static struct h_proxy p;
	char logs[300], link_path[320], target[320], secret[320], conf[1024], err[512];
	static const char text[] = "root's\n";

	pv_user_dir(pw, "logs", logs, sizeof logs);
	snprintf(link_path, sizeof link_path, "%s/access.log", logs);
	snprintf(target, sizeof target, "%s/group-writable", h_tmpdir());
	snprintf(secret, sizeof secret, "%s/secret", h_tmpdir());
	pv_root_file(target, 0660, pw->pw_gid, text);
	pv_root_file(secret, 0600, 0, text);
	H_CHECK(symlink(target, link_path) == 0, "symlink");
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "backend");
	snprintf(conf, sizeof conf, "[global]\nuser = nobody\nlog = %s\n[route r]\n"
		 "listen = 127.0.0.1:%d\nbackend = %s\n", link_path, h_free_port(), be.addr.text);
	const char *args[] = { "-c", h_conf_write("pv.conf", conf), "--workers", "1", NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_echo_roundtrip(&p.addr, 64, 1, 3000, err, sizeof err) == 0, "session: %s", err);
	struct stat sb;
	H_CHECK(stat(target, &sb) == 0 && sb.st_uid == 0,
		"root chowned the file the log's symlink names to uid %u at start", (unsigned)sb.st_uid);

	/* nobody points the link at root's secret and upgrades, over and over:
	 * before the fix a race between the preflight and root's open made
	 * the secret nobody's within a few tries */
	pid_t pid = p.pid;
	for (int n = 1; n <= 4; n++) {
		H_CHECK(unlink(link_path) == 0 && symlink(n % 2 ? secret : target, link_path) == 0,
			"swap the link");
		pv_kill_as(pw->pw_uid, pw->pw_gid, pid, SIGUSR2);
		pid_t np = pv_outcome(&p, n, 10000);
		H_CHECK(np != 0, "upgrade %d: no outcome within 10 s; log %s", n, p.log);
		if (np > 0)
			pid = np; /* refused ones (the secret is not nobody's) serve on */
		H_CHECK(pv_unchanged(secret, 0600, text), "upgrade %d changed the root-only secret", n);
		H_CHECK(stat(target, &sb) == 0 && sb.st_uid == 0,
			"upgrade %d: the group-writable file became uid %u's", n, (unsigned)sb.st_uid);
	}
	H_CHECK(kill(pid, 0) == 0, "no process serves after the upgrades");
	H_CHECK(h_echo_roundtrip(&p.addr, 64, 2, 3000, err, sizeof err) == 0, "session: %s", err);
	kill(pid, SIGTERM);
	h_server_stop(&be);
}

/* What a SIGUSR2 from the run-as user starts: before the fix, a root
 * process (the spawner was root, and so was each new generation until it
 * dropped). Now the spawner is nobody with CAP_NET_BIND_SERVICE alone, and
 * so is the new process from its first instruction; it still binds a port
 * below 1024 and joins the listening socket's SO_REUSEPORT group with the
 * worker the new config adds. The admin socket and the log are nobody's,
 * made so without a chown. */
Test(hostile, upgrade_from_the_user_starts_no_root_process, .init = pv_init, .fini = pv_fini,
     .timeout = 60)
{
	struct passwd *pw = pv_nobody();
	const char *bin = pv_user_binary();
	static struct h_server be;
	static struct h_proxy p;
	char run[300], conf[1024], err[512], v[128], sock[320], logf[320];
	int port = 0;

	pv_user_dir(pw, "run", run, sizeof run);
	snprintf(sock, sizeof sock, "%s/admin.sock", run);
	snprintf(logf, sizeof logf, "%s/access.log", run);
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "backend");
	/* a port below 1024 that nothing uses */
	for (int cand = 1000; cand > 900 && !port; cand--) {
		struct h_addr a;
		char t[32];
		snprintf(t, sizeof t, "127.0.0.1:%d", cand);
		h_addr_parse(t, &a);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&a.ss, a.len) == 0)
			port = cand;
		close(fd);
	}
	H_CHECK(port, "no free port below 1024");
	const char *fmt = "[global]\nuser = nobody\nworkers = %d\nadmin = %s\nlog = %s\n[route r]\n"
			  "listen = 127.0.0.1:%d\nbackend = %s\n";
	snprintf(conf, sizeof conf, fmt, 1, sock, logf, port, be.addr.text);
	const char *path = h_conf_write("up.conf", conf);
	const char *args[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	struct stat sb;
	H_CHECK(lstat(sock, &sb) == 0 && sb.st_uid == pw->pw_uid && (sb.st_mode & 0777) == 0600,
		"admin socket: uid %u mode %o", (unsigned)sb.st_uid, sb.st_mode & 0777);
	H_CHECK(lstat(logf, &sb) == 0 && sb.st_uid == pw->pw_uid, "log: uid %u", (unsigned)sb.st_uid);

	snprintf(conf, sizeof conf, fmt, 2, sock, logf, port, be.addr.text);
	h_conf_write("up.conf", conf);
	pv_kill_as(pw->pw_uid, pw->pw_gid, p.pid, SIGUSR2);
	pid_t np = pv_outcome(&p, 1, 10000);
	H_CHECK(np > 0, "no new process took over; log %s", p.log);
	h_proc_status(np, "Uid:", v, sizeof v);
	H_CHECK(atoi(v) == (int)pw->pw_uid, "the new process runs as uid %s", v);
	h_proc_status(np, "CapEff:", v, sizeof v);
	H_CHECK(!strcmp(v, "0000000000000400"), "the new process holds capabilities %s", v);
	h_proc_status(np, "CapBnd:", v, sizeof v);
	H_CHECK(!strcmp(v, "0000000000000400"), "the new process may regain capabilities %s", v);
	/* its own spawner, for the next upgrade: its only child */
	char kids[64] = "";
	snprintf(v, sizeof v, "/proc/%d/task/%d/children", (int)np, (int)np);
	FILE *f = fopen(v, "re");
	H_CHECK(f && fgets(kids, sizeof kids, f), "no spawner under the new process");
	fclose(f);
	pid_t spawner = (pid_t)atoi(kids);
	h_proc_status(spawner, "Uid:", v, sizeof v);
	H_CHECK(spawner > 1 && v[0] && atoi(v) == (int)pw->pw_uid,
		"the new process's spawner %d runs as uid %s", (int)spawner, v);
	h_proc_status(spawner, "CapEff:", v, sizeof v);
	H_CHECK(!strcmp(v, "0000000000000400"), "the spawner holds capabilities %s", v);
	/* both workers of the new process serve on the low port */
	struct h_addr a;
	char t[32];
	snprintf(t, sizeof t, "127.0.0.1:%d", port);
	h_addr_parse(t, &a);
	for (int i = 0; i < 20; i++)
		H_CHECK(h_echo_roundtrip(&a, 64, (uint64_t)i, 3000, err, sizeof err) == 0,
			"session %d after the upgrade: %s", i, err);
	H_CHECK(lstat(sock, &sb) == 0 && sb.st_uid == pw->pw_uid, "admin socket: uid %u",
		(unsigned)sb.st_uid);
	kill(np, SIGTERM);
	h_server_stop(&be);
}

/* A binary that others may write is not run with privileges: whoever
 * could replace it would otherwise get the spawner's capabilities at the
 * next SIGUSR2. The upgrade is refused with the reason, the proxy serves
 * on. */
Test(hostile, upgrade_refuses_a_binary_others_may_write, .init = pv_init, .fini = pv_fini,
     .timeout = 60)
{
	struct passwd *pw = pv_nobody();
	const char *bin = h_binary(0);
	static struct h_server be;
	static struct h_proxy p;
	char copy[300], run[300], sock[320], conf[1024], err[512];

	pv_user_dir(pw, "run", run, sizeof run);
	snprintf(sock, sizeof sock, "%s/admin.sock", run);
	snprintf(copy, sizeof copy, "%s/splicer", h_tmpdir());
	const char *cp[] = { bin, copy, NULL };
	char *o = NULL, *e = NULL;
	int st = h_run_capture("/bin/cp", cp, 10000, &o, &e);
	free(o);
	free(e);
	H_CHECK(st == 0 && chmod(copy, 0777) == 0, "copy the binary");
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "backend");
	snprintf(conf, sizeof conf, "[global]\nuser = nobody\nadmin = %s\n[route r]\n"
		 "listen = 127.0.0.1:0\nbackend = %s\n", sock, be.addr.text);
	const char *args[] = { "-c", h_conf_write("w.conf", conf), "--workers", "1", NULL };
	H_CHECK(h_proxy_start(&p, copy, args, err, sizeof err) == 0, "start: %s", err);
	const char *ctl[] = { "ctl", "-s", sock, "upgrade", NULL };
	st = h_run_capture(bin, ctl, 20000, &o, &e);
	H_CHECK(st != 0 && e && strstr(e, "nobody else may write"),
		"ctl upgrade of a world-writable binary: status %d, stdout %s, stderr %s", st, o, e);
	free(o);
	free(e);
	H_CHECK(h_proxy_alive(&p) && h_echo_roundtrip(&p.addr, 64, 3, 3000, err, sizeof err) == 0,
		"the proxy does not serve on after the refusal: %s", err);
	h_proxy_down(&p);
	h_server_stop(&be);
}

/* A backend for many short sessions (h_server keeps 64): one thread
 * echoes each connection until EOF, one at a time. */
struct pv_echo {
	int lfd;
	_Atomic int stop;
	pthread_t thr;
	struct h_addr addr;
};

static void *pv_echo_main(void *arg)
{
	struct pv_echo *e = arg;
	char buf[4096];

	while (!e->stop) {
		struct pollfd pf = { .fd = e->lfd, .events = POLLIN };
		if (poll(&pf, 1, 50) <= 0)
			continue;
		int fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		h_set_timeouts(fd, 1000);
		for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;)
			if (h_send_all(fd, buf, (size_t)n, h_now_ms() + 2000))
				break;
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	return NULL;
}

static void pv_echo_start(struct pv_echo *e)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	e->stop = 0;
	h_addr_parse("127.0.0.1:0", &e->addr);
	e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(e->lfd >= 0 && bind(e->lfd, (struct sockaddr *)&e->addr.ss, e->addr.len) == 0 &&
			listen(e->lfd, 128) == 0 &&
			getsockname(e->lfd, (struct sockaddr *)&ss, &len) == 0,
		"echo backend");
	h_addr_from(&e->addr, (struct sockaddr *)&ss, len);
	H_CHECK(pthread_create(&e->thr, NULL, pv_echo_main, e) == 0, "echo thread");
}

static void pv_echo_stop(struct pv_echo *e)
{
	e->stop = 1;
	pthread_join(e->thr, NULL);
	close(e->lfd);
}

/* Every splicer process (comm "splicer") whose parent chain reaches this
 * test process: pids into out (at most max); returns how many. */
static int pv_ours(pid_t *out, int max)
{
	int n = 0;
	DIR *d;
	struct dirent *e;

	while (waitpid(-1, NULL, WNOHANG) > 0)
		; /* generations that ended and came back to this subreaper */
	d = opendir("/proc");

	while (d && (e = readdir(d)) && n < max) {
		int pid = atoi(e->d_name);
		char path[64], comm[32] = "", v[32];
		if (pid <= 1)
			continue;
		snprintf(path, sizeof path, "/proc/%d/comm", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(comm, sizeof comm, f))
			comm[0] = '\0';
		fclose(f);
		if (strcmp(comm, "splicer\n"))
			continue;
		/* ours: an ancestor is this test process (the subreaper) */
		for (pid_t p = pid; p > 1;) {
			h_proc_status(p, "PPid:", v, sizeof v);
			p = (pid_t)atoi(v);
			if (p == getpid()) {
				out[n++] = pid;
				break;
			}
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* A storm of SIGUSR2 from the run-as user, 20 a second for 5 s, at every
 * splicer process it can see, while a client runs round trips and a load
 * balancer probes /health: no round trip fails, /health answers within
 * 100 ms each time (a 300 ms bound on this shared machine), at most one
 * upgrade runs at a time, no process of the chain runs as root once the
 * first has handed over, and no file in the user's directory changes
 * owner. */
Test(hostile, sigusr2_storm_from_the_user, .init = pv_init, .fini = pv_fini, .timeout = 90)
{
	struct passwd *pw = pv_nobody();
	const char *bin = pv_user_binary();
	static struct pv_echo be;
	static struct h_proxy p;
	char run[300], conf[1024], err[512], logf[320], stats[320];
	struct h_addr sa;

	pv_user_dir(pw, "run", run, sizeof run);
	snprintf(logf, sizeof logf, "%s/access.log", run);
	snprintf(stats, sizeof stats, "unix:%s/stats.sock", run);
	pv_echo_start(&be);
	snprintf(conf, sizeof conf, "[global]\nuser = nobody\nworkers = 1\nlog = %s\nstats = %s\n"
		 "drain_timeout = 2s\nlameduck = 0\n[route r]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
		 logf, stats, h_free_port(), be.addr.text);
	const char *args[] = { "-c", h_conf_write("storm.conf", conf), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_stats_addr(&p, &sa) == 0, "stats address");
	pid_t first = p.pid;
	int trips = 0, slow = 0, worst = 0, signals = 0;

	for (int64_t end = h_now_ms() + 5000, next = 0; h_now_ms() < end;) {
		if (h_now_ms() >= next) {
			pid_t all[64];
			int n = pv_ours(all, 64);
			for (int i = 0; i < n; i++) {
				char v[32];
				h_proc_status(all[i], "Uid:", v, sizeof v);
				if (atoi(v) == (int)pw->pw_uid) {
					pv_kill_as(pw->pw_uid, pw->pw_gid, all[i], SIGUSR2);
					signals++;
				}
			}
			next = h_now_ms() + 50;
		}
		H_CHECK(h_echo_roundtrip(&p.addr, 256, (uint64_t)trips, 3000, err, sizeof err) == 0,
			"round trip %d during the storm: %s", trips, err);
		trips++;
		int64_t t0 = h_now_ms();
		char body[4096];
		int fd = h_connect(&sa, 1000);
		H_CHECK(fd >= 0, "connect to /health at %s: %s", sa.text, strerror(errno));
		H_CHECK(h_send_all(fd, "GET /health HTTP/1.0\r\n\r\n", 24, t0 + 1000) == 0, "send");
		h_recv_all(fd, body, sizeof body, t0 + 2000);
		close(fd);
		int ms = (int)(h_now_ms() - t0);
		worst = ms > worst ? ms : worst;
		slow += ms > 300;
		H_CHECK(strstr(body, " 200 ") || strstr(body, " 503 "), "/health answered: %s", body);
	}
	H_CHECK(slow == 0, "/health took over 300 ms %d times (worst %d ms)", slow, worst);
	/* the chain now: no root process left, a bounded number of them */
	pid_t all[64];
	h_sleep_ms(2500); /* draining ones have drain_timeout 2 s */
	int n = pv_ours(all, 64);
	for (int i = 0; i < n; i++) {
		char v[32];
		h_proc_status(all[i], "Uid:", v, sizeof v);
		H_CHECK(all[i] == first || atoi(v) == (int)pw->pw_uid,
			"process %d of the chain runs as uid %s", (int)all[i], v);
		if (pv_npids < PV_MAX_PIDS)
			pv_pids[pv_npids++] = all[i];
	}
	H_CHECK(n <= 4, "%d splicer processes after the storm (a server, its spawner and what "
		"still drains): processes pile up", n);
	struct stat sb;
	H_CHECK(lstat(logf, &sb) == 0 && sb.st_uid == pw->pw_uid && lstat(run, &sb) == 0 &&
			sb.st_uid == pw->pw_uid, "a file in the user's directory changed owner");
	cr_log_info("SIGUSR2 storm: %d signals, %d round trips, /health worst %d ms, %d processes "
		    "after", signals, trips, worst, n);
	fprintf(stderr, "[hostile] SIGUSR2 storm: %d signals from nobody, %d round trips ok, "
		"/health worst %d ms, %d processes after\n", signals, trips, worst, n);
	for (int i = 0; i < n; i++)
		kill(all[i], SIGTERM);
	pv_echo_stop(&be);
}

/* ---- CAP_NET_ADMIN for transparent mode and marks ------------------------ */

static char pv_seen[160]; /* the peer address the backend saw last */

static void pv_whois(struct h_server *s, int fd, int i, void *arg)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof a;
	struct h_addr h;

	(void)arg;
	if (getpeername(fd, (struct sockaddr *)&a, &l) == 0) {
		h_addr_from(&h, (struct sockaddr *)&a, l);
		snprintf(pv_seen, sizeof pv_seen, "%s", h.text);
	}
	h_echo_conn(s, fd, i, NULL);
}

/* Started as root with `user = nobody`, the proxy keeps CAP_NET_ADMIN only
 * when a route needs it at run time (source = client: IP_TRANSPARENT at
 * each backend connect), and its seccomp list lets the setsockopt through;
 * without such a route it keeps CAP_NET_BIND_SERVICE alone, and a reload
 * that brings one in is refused with the reason (the capability is gone
 * for good). */
Test(hostile, transparent_keeps_net_admin_only_when_configured, .init = pv_init, .fini = pv_fini,
     .timeout = 60)
{
	struct passwd *pw = pv_nobody();
	static struct h_server be;
	static struct h_proxy p;
	char conf[512], err[512], v[128], b[3];
	const char *path;

	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod %s", h_tmpdir());
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 64, pv_whois, NULL) == 0, "backend");
	snprintf(conf, sizeof conf, "[global]\nuser = nobody\n[route t]\nlisten = 127.0.0.1:0\n"
		 "backend = %s\nsource = client\n", be.addr.text);
	path = h_conf_write("tp.conf", conf);
	const char *args[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "start: %s", err);
	h_proc_status(p.pid, "Uid:", v, sizeof v);
	H_CHECK(atoi(v) == (int)pw->pw_uid, "the proxy runs as uid %s", v);
	h_proc_status(p.pid, "CapEff:", v, sizeof v);
	H_CHECK(!strcmp(v, "0000000000001400"), "with source = client the proxy holds %s, not "
		"CAP_NET_BIND_SERVICE and CAP_NET_ADMIN (0x1400)", v);
	int fd = h_connect_from(h_addr_port(&p.addr), "127.0.0.7", 3000);
	H_CHECK(h_send_all(fd, "abc", 3, h_now_ms() + 3000) == 0 &&
			h_recv_exact(fd, b, 3, h_now_ms() + 3000) == 0,
		"a session with source = client as nobody, sandboxed, failed (log %s)", p.log);
	close(fd);
	H_CHECK(!strncmp(pv_seen, "127.0.0.7:", 10), "the backend saw %s", pv_seen);
	h_proxy_down(&p);

	snprintf(conf, sizeof conf, "[global]\nuser = nobody\n[route t]\nlisten = 127.0.0.1:0\n"
		 "backend = %s\n", be.addr.text);
	path = h_conf_write("tp.conf", conf);
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "start: %s", err);
	h_proc_status(p.pid, "CapEff:", v, sizeof v);
	H_CHECK(!strcmp(v, "0000000000000400"), "without source = client the proxy holds %s", v);
	snprintf(conf, sizeof conf, "[global]\nuser = nobody\n[route t]\nlisten = 127.0.0.1:0\n"
		 "backend = %s\nsource = client\n", be.addr.text);
	h_conf_write("tp.conf", conf);
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
	for (int64_t end = h_now_ms() + 5000;
	     !h_log_lines(&p, "needs CAP_NET_ADMIN", "keeping the running config", NULL) &&
	     h_now_ms() < end;)
		h_sleep_ms(20);
	H_CHECK(h_log_lines(&p, "needs CAP_NET_ADMIN", "keeping the running config", NULL) == 1,
		"a reload that needs CAP_NET_ADMIN was not refused with the reason (log %s)", p.log);
	h_proxy_down(&p);
	h_server_stop(&be);
}
