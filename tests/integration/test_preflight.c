/* SPDX-License-Identifier: MIT */
/* Issue 14, items 2 and 3: `splicer check` as a preflight (user, log file as
 * that user, listen and stats addresses bound once, unit-less durations,
 * did-you-mean, no follow-on noise) with the proxy refusing to start on the
 * same problems; and names and wildcards: `*:port` on both families, a
 * listen name on every address it resolves to, a backend name as one
 * backend per address. The admin socket's path, directory and holder, and
 * the exit codes splicer.8 documents.
 *
 * This machine's /etc/hosts names localhost 127.0.0.1 only; the name cases
 * run the proxy in a private mount namespace (unshare -m) whose /etc/hosts
 * is a bind mount of a file of the test's, where localhost is 127.0.0.1 and
 * ::1. The real /etc/hosts is never written; without the rights to do
 * that (root, unshare, mount) those cases are skipped. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct pf_run {
	int st;
	char *out, *err;
};

static void pf_run(const char *bin, const char *const *args, struct pf_run *r)
{
	r->out = r->err = NULL;
	r->st = h_run_capture(bin, args, 10000, &r->out, &r->err);
	if (!r->out)
		r->out = strdup("");
	if (!r->err)
		r->err = strdup("");
}

static void pf_free(struct pf_run *r)
{
	free(r->out);
	free(r->err);
}

static int pf_exit(const struct pf_run *r)
{
	return r->st != -1 && WIFEXITED(r->st) ? WEXITSTATUS(r->st) : -1;
}

static const char *pf_write(const char *name, const char *text)
{
	static char path[4][300];
	static int next;
	char *p = path[next++ % 4];
	FILE *f;

	snprintf(p, sizeof path[0], "%s/%s", h_tmpdir(), name);
	H_CHECK((f = fopen(p, "we")) && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", p);
	return p;
}

/* `check -c FILE` fails with exit 1 and stderr is exactly "FILE:" + line
 * + "\n"; then the proxy, started on the same file, refuses with the same
 * line (exit start_code) and binds nothing. */
static void pf_refused(const char *bin, const char *path, const char *line, int start_code)
{
	struct pf_run r;
	char want[1024];
	const char *check[] = { "check", "-c", path, NULL };
	const char *start[] = { "-c", path, "--workers", "1", NULL };

	snprintf(want, sizeof want, "%s:%s\n", path, line);
	pf_run(bin, check, &r);
	H_CHECK(pf_exit(&r) == 1 && !strcmp(r.err, want) && !r.out[0],
		"check -c %s: exit %d, stderr\n%s\nexpected exactly\n%s", path, pf_exit(&r), r.err, want);
	pf_free(&r);
	pf_run(bin, start, &r);
	line = strchr(line, ' ') + 1; /* after "LINE: ": start names the route instead */
	H_CHECK(pf_exit(&r) == start_code && strstr(r.err, line) && !strstr(r.err, "ready:"),
		"start with %s: exit %d (expected %d), stderr\n%s\nexpected a line with\n%s", path,
		pf_exit(&r), start_code, r.err, line);
	pf_free(&r);
}

/* ---- check as a preflight ---------------------------------------------- */

Test(integ, preflight_unknown_user_and_missing_log_dir, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	char text[512], line[512];

	snprintf(text, sizeof text, "[global]\nworkers = 1\nuser = no-such-user-14\n[route r]\n"
		 "listen = 127.0.0.1:0\nbackend = 127.0.0.1:9\n");
	pf_refused(bin, pf_write("user.conf", text), "3: user no-such-user-14: no such user", 2);

	snprintf(text, sizeof text, "[global]\nlog = %s/no-dir/access.log\n[route r]\n"
		 "listen = 127.0.0.1:0\nbackend = 127.0.0.1:9\n", h_tmpdir());
	snprintf(line, sizeof line, "2: access log %s/no-dir/access.log: directory %s/no-dir does not "
		 "exist (No such file or directory)", h_tmpdir(), h_tmpdir());
	pf_refused(bin, pf_write("logdir.conf", text), line, 2);
}

/* As root with `user = nobody`: a log in a directory nobody cannot write is
 * refused for that user (root itself could open it; SIGUSR1 as nobody
 * could not); the same directory given to nobody passes, and the file
 * check had to create is gone again. */
Test(integ, preflight_log_is_opened_as_the_user, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct passwd *pw = getpwnam("nobody");
	char dir[300], text[600], line[1024], log[340];
	struct pf_run r;
	struct stat sb;

	if (geteuid() != 0 || !pw)
		cr_skip_test("needs root and a user nobody");
	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod");
	snprintf(dir, sizeof dir, "%s/logs", h_tmpdir());
	snprintf(log, sizeof log, "%s/access.log", dir);
	H_CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
	snprintf(text, sizeof text, "[global]\nuser = nobody\nlog = %s\n[route r]\n"
		 "listen = 127.0.0.1:0\nbackend = 127.0.0.1:9\n", log);
	const char *path = pf_write("nobody.conf", text);
	snprintf(line, sizeof line, "3: access log %s: Permission denied for user nobody (uid %u): the "
		 "file must be writable for that user, or its directory to create it (install -d -o "
		 "USER %s)", log, (unsigned)pw->pw_uid, dir);
	pf_refused(bin, path, line, 2);

	H_CHECK(chown(dir, pw->pw_uid, pw->pw_gid) == 0, "chown");
	const char *check[] = { "check", "-c", path, NULL };
	pf_run(bin, check, &r);
	H_CHECK(pf_exit(&r) == 0 && strstr(r.out, ": ok: 1 route"), "check with the directory "
		"given to nobody: exit %d, stderr %s", pf_exit(&r), r.err);
	pf_free(&r);
	H_CHECK(stat(log, &sb) != 0 && errno == ENOENT, "check left %s behind", log);
}

/* An address that is not this host's (TEST-NET-1), and one another process
 * listens on: named at the listen line by check, and start refuses. */
Test(integ, preflight_listen_not_on_host_and_in_use, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	char text[512], line[512];
	int port = h_free_port();

	snprintf(text, sizeof text, "[route r]\nlisten = 127.0.0.1:0 192.0.2.1:%d\n"
		 "backend = 127.0.0.1:9\n", port);
	snprintf(line, sizeof line, "2: listen 192.0.2.1:%d: Cannot assign requested address (not an "
		 "address of this host: see `ip addr`; *:PORT listens on every one)", port);
	pf_refused(bin, pf_write("nothost.conf", text), line, 1);

	/* a plain listener (no SO_REUSEPORT) of this test holds the port */
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
			bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(fd, 8) == 0 &&
			getsockname(fd, (struct sockaddr *)&sin, &len) == 0,
		"test listener");
	port = ntohs(sin.sin_port);
	snprintf(text, sizeof text, "[global]\nworkers = 1\n[route r]\nbackend = 127.0.0.1:9\n"
		 "listen = 127.0.0.1:%d\n", port);
	snprintf(line, sizeof line, "5: listen 127.0.0.1:%d: Address already in use (another process "
		 "listens there)", port);
	pf_refused(bin, pf_write("inuse.conf", text), line, 1);

	/* the stats address too, at its [global] line */
	snprintf(text, sizeof text, "[global]\nworkers = 1\nstats = 127.0.0.1:%d\n[route r]\n"
		 "listen = 127.0.0.1:0\nbackend = 127.0.0.1:9\n", port);
	snprintf(line, sizeof line, "3: stats: listen 127.0.0.1:%d: Address already in use (another "
		 "process listens there)", port);
	struct pf_run r;
	const char *path = pf_write("statsinuse.conf", text);
	const char *check[] = { "check", "-c", path, NULL };
	pf_run(bin, check, &r);
	char want[1024];
	snprintf(want, sizeof want, "%s:%s\n", path, line);
	H_CHECK(pf_exit(&r) == 1 && !strcmp(r.err, want), "stats in use: exit %d, stderr\n%s\n"
		"expected\n%s", pf_exit(&r), r.err, want);
	pf_free(&r);
	close(fd);
}

/* A check before a reload: the running splicer holds every address of the
 * file. That is a note (SO_REUSEPORT, same user), not a problem: exit 0. */
Test(integ, preflight_check_beside_the_running_proxy, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	char text[512], err[512], note[300];
	int port = h_free_port(), sport = h_free_port();
	struct pf_run r;

	snprintf(text, sizeof text, "[global]\nworkers = 2\nstats = 127.0.0.1:%d\n[route r]\n"
		 "listen = 127.0.0.1:%d\nbackend = 127.0.0.1:9\n", sport, port);
	const char *path = pf_write("running.conf", text);
	const char *start[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, bin, start, err, sizeof err) == 0, "start: %s", err);
	const char *check[] = { "check", "-c", path, NULL };
	pf_run(bin, check, &r);
	snprintf(note, sizeof note, "%s:5: note: listen 127.0.0.1:%d: in use by listeners that share "
		 "it (SO_REUSEPORT, same user): a running splicer", path, port);
	H_CHECK(pf_exit(&r) == 0 && strstr(r.out, ": ok: 1 route") && strstr(r.err, note) &&
			strstr(r.err, ":3: note: stats: listen 127.0.0.1:"),
		"check beside the running proxy: exit %d, stdout %s, stderr\n%s", pf_exit(&r), r.out,
		r.err);
	pf_free(&r);
	h_proxy_down(&p);
}

/* A number without a unit is refused for a duration, in the file and on
 * the command line (check and start), with both readings; 0 stays "off". */
Test(integ, preflight_unitless_duration_is_refused, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct pf_run r;
	const char *path = pf_write("ok.conf", "[route r]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:9\n");
	const char *want = "splicer: option '--idle-timeout': invalid value '30000': a duration needs "
			   "a unit: 30000ms (30s) or 30000s (500m) (suffixes ms, s, m, h)\n";

	const char *check[] = { "check", "-c", path, "--idle-timeout", "30000", NULL };
	pf_run(bin, check, &r);
	H_CHECK(pf_exit(&r) == 1 && !strcmp(r.err, want), "check --idle-timeout 30000: exit %d, "
		"stderr\n%s", pf_exit(&r), r.err);
	pf_free(&r);
	const char *start[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--idle-timeout", "30000", NULL };
	pf_run(bin, start, &r);
	H_CHECK(pf_exit(&r) == 2 && !strcmp(r.err, want), "start --idle-timeout 30000: exit %d, "
		"stderr\n%s", pf_exit(&r), r.err);
	pf_free(&r);
	const char *zero[] = { "check", "-c", path, "--drain-timeout", "0", NULL };
	pf_run(bin, zero, &r);
	H_CHECK(pf_exit(&r) == 0, "--drain-timeout 0 (off) is refused: %s", r.err);
	pf_free(&r);
}

/* A typo of an option gets the option it is most likely of. */
Test(integ, preflight_option_typo_did_you_mean, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	struct pf_run r;
	const char *args[] = { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--conect-timeout", "1s", NULL };

	pf_run(bin, args, &r);
	H_CHECK(pf_exit(&r) == 2 && !strcmp(r.err, "splicer: unknown option '--conect-timeout' (did "
						  "you mean '--connect-timeout'?)\n"),
		"exit %d, stderr %s", pf_exit(&r), r.err);
	pf_free(&r);
}

/* Every problem of a file in one go, each once: a bad backend line and a
 * bad listen line (no "route has no backend/listen address" after them), a
 * typo, a unit-less duration, an unknown user and a listen address not on
 * this host. */
Test(integ, preflight_every_problem_once, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	char text[600], want[2048];
	struct pf_run r;
	const char *path;

	snprintf(text, sizeof text, "[global]\nuser = no-such-user-14\nidle_timeout = 30\n"
		 "[route a]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1\n"
		 "[route b]\nlisten = 127.0.0.1:70000\nbackend = 127.0.0.1:9\nchek = tcp\n"
		 "[route c]\nlisten = 192.0.2.1:1\nbackend = 127.0.0.1:9\n");
	path = pf_write("every.conf", text);
	snprintf(want, sizeof want,
		 "%1$s:3: idle_timeout: invalid value '30': a duration needs a unit: 30ms or 30s "
		 "(suffixes ms, s, m, h)\n"
		 "%1$s:6: backend '127.0.0.1': address '127.0.0.1': missing ':port' (forms: host:port, "
		 "[v6]:port, :port, *:port, unix:/path)\n"
		 "%1$s:8: listen: address '127.0.0.1:70000': port 70000 out of range 0..65535\n"
		 "%1$s:10: unknown key 'chek' in a route (did you mean 'check'?); expects listen, "
		 "backend, sni, alpn, allow, deny, engine, auto_uring_turns, balance, lowat, connect_timeout, idle_timeout, "
		 "half_close_timeout, proxy_protocol, accept_proxy, proxy_protocol_tlvs, proxy_protocol_pass, "
		 "proxy_timeout, check, check_interval, "
		 "check_timeout, rise, fall, on_backend_down, slowstart, source_max_conns, source_conn_rate, tls_hello_timeout, "
		 "tls_hello_max, queue_timeout, max_session_time, max_session_jitter, client_keepalive, "
		 "backend_keepalive, client_user_timeout, backend_user_timeout, source, mptcp, fastopen, "
		 "mark, tos, defer_accept, interface, backlog, rate_limit_up, rate_limit_down\n"
		 "%1$s:2: user no-such-user-14: no such user\n"
		 "%1$s:12: listen 192.0.2.1:1: Cannot assign requested address (not an address of this "
		 "host: see `ip addr`; *:PORT listens on every one)\n", path);
	const char *check[] = { "check", "-c", path, NULL };
	pf_run(bin, check, &r);
	H_CHECK(pf_exit(&r) == 1 && !strcmp(r.err, want), "exit %d, stderr\n%s\nexpected exactly\n%s",
		pf_exit(&r), r.err, want);
	pf_free(&r);
}

/* ---- the admin socket ---------------------------------------------------- */

/* A config with `admin = VALUE` and one route on a free port. */
static const char *pf_admin_conf(const char *name, const char *value, const char *user)
{
	char text[700];

	snprintf(text, sizeof text, "[global]\nworkers = 1\nadmin = %s\n%s%s%s[route r]\n"
		 "listen = 127.0.0.1:0\nbackend = 127.0.0.1:9\n", value, user ? "user = " : "",
		 user ? user : "", user ? "\n" : "");
	return pf_write(name, text);
}

/* check -c path exits code with exactly "path:" + line on stderr. */
static void pf_check_says(const char *bin, const char *path, int code, const char *line)
{
	struct pf_run r;
	char want[1024];
	const char *check[] = { "check", "-c", path, NULL };

	snprintf(want, sizeof want, "%s:%s\n", path, line);
	pf_run(bin, check, &r);
	H_CHECK(pf_exit(&r) == code && !strcmp(r.err, want), "check -c %s: exit %d (expected %d), "
		"stderr\n%s\nexpected exactly\n%s", path, pf_exit(&r), code, r.err, want);
	pf_free(&r);
}

/* A relative path (a socket in the start's cwd) and an abstract name are
 * refused at the admin line, by check (--syntax-only too) and by start. */
Test(integ, preflight_admin_path_must_be_absolute, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	struct pf_run r;
	const char *path = pf_admin_conf("admin-rel.conf", "run/admin.sock", NULL);

	pf_refused(bin, path, "3: admin run/admin.sock: not an absolute path (the socket would be made "
		   "in whatever directory the proxy starts in): write it from /, e.g. "
		   "/run/splicer/admin.sock", 2);
	const char *syntax[] = { "check", "--syntax-only", "-c", path, NULL };
	pf_run(bin, syntax, &r);
	H_CHECK(pf_exit(&r) == 1 && strstr(r.err, ":3: admin run/admin.sock: not an absolute path"),
		"check --syntax-only: exit %d, stderr %s", pf_exit(&r), r.err);
	pf_free(&r);
	pf_refused(bin, pf_admin_conf("admin-abs.conf", "unix:@splicer-admin", NULL),
		   "3: admin unix:@splicer-admin: needs a file path (an abstract socket has no file mode "
		   "to keep other users out)", 2);
}

/* What start would trip on after binding its listeners: a directory that
 * is not there, a path that is not a socket, another process's live
 * socket; each named at the admin line by check, and start fails (1). A
 * stale socket file is no problem (start replaces it). */
Test(integ, preflight_admin_socket_is_probed, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	char sock[300], line[1024], val[300];
	struct pf_run r;

	snprintf(val, sizeof val, "%s/no-dir/admin.sock", h_tmpdir());
	const char *path = pf_admin_conf("admin-nodir.conf", val, NULL);
	snprintf(line, sizeof line, "3: admin %s: directory %s/no-dir does not exist (No such file or "
		 "directory)", val, h_tmpdir());
	pf_check_says(bin, path, 1, line);
	const char *start[] = { "-c", path, NULL };
	pf_run(bin, start, &r);
	H_CHECK(pf_exit(&r) == 1 && strstr(r.err, "admin: listen unix:") && !strstr(r.err, "ready:"),
		"start with a missing admin directory: exit %d, stderr %s", pf_exit(&r), r.err);
	pf_free(&r);

	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	path = pf_admin_conf("admin.conf", sock, NULL);
	fclose(fopen(sock, "we"));
	snprintf(line, sizeof line, "3: admin: listen unix:%s: the path exists and is not a socket; "
		 "remove it or choose another path", sock);
	pf_check_says(bin, path, 1, line);
	unlink(sock);

	struct h_addr a;
	char text[320];
	snprintf(text, sizeof text, "unix:%s", sock);
	H_CHECK(h_addr_parse(text, &a) == 0, "address %s", text);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a.ss, a.len) == 0, "bind %s", sock);
	/* bound, not listening: a stale socket file */
	pf_run(bin, (const char *[]){ "check", "-c", path, NULL }, &r);
	H_CHECK(pf_exit(&r) == 0 && !r.err[0], "a stale socket file: exit %d, stderr %s", pf_exit(&r),
		r.err);
	pf_free(&r);
	H_CHECK(listen(fd, 4) == 0, "listen %s", sock);
	snprintf(line, sizeof line, "3: admin: listen unix:%s: Address already in use (another process "
		 "listens there)", sock);
	pf_check_says(bin, path, 1, line);
	close(fd);
	unlink(sock);
}

/* A check before a reload: the running splicer's own admin socket is a
 * note, not a problem. */
Test(integ, preflight_admin_socket_of_the_running_proxy, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	char sock[300], note[600], err[512];
	struct pf_run r;

	snprintf(sock, sizeof sock, "%s/admin.sock", h_tmpdir());
	const char *path = pf_admin_conf("admin-running.conf", sock, NULL);
	const char *start[] = { "-c", path, NULL };
	H_CHECK(h_proxy_start(&p, bin, start, err, sizeof err) == 0, "start: %s", err);
	snprintf(note, sizeof note, "%s:3: note: admin %s: the admin socket of a running splicer "
		 "(pid %d), which keeps it across reloads", path, sock, (int)p.pid);
	pf_run(bin, (const char *[]){ "check", "-c", path, NULL }, &r);
	H_CHECK(pf_exit(&r) == 0 && strstr(r.out, ": ok: 1 route") && strstr(r.err, note),
		"check beside the running proxy: exit %d, stdout %s, stderr\n%s\nexpected\n%s",
		pf_exit(&r), r.out, r.err, note);
	pf_free(&r);
	h_proxy_down(&p);
}

/* As root with `user = nobody`: the socket's directory must be writable
 * for nobody (the proxy removes the socket at stop, as that user). */
Test(integ, preflight_admin_dir_is_the_users, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	struct passwd *pw = getpwnam("nobody");
	char dir[300], sock[340], line[1400];

	if (geteuid() != 0 || !pw)
		cr_skip_test("needs root and a user nobody");
	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod");
	snprintf(dir, sizeof dir, "%s/run", h_tmpdir());
	snprintf(sock, sizeof sock, "%s/admin.sock", dir);
	H_CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
	const char *path = pf_admin_conf("admin-nobody.conf", sock, "nobody");
	snprintf(line, sizeof line, "3: admin %s: directory %s is not writable for user nobody (uid %u): "
		 "the proxy makes the socket there as that user, and removes it at stop (install -d -o USER %s)", sock,
		 dir, (unsigned)pw->pw_uid, dir);
	pf_check_says(bin, path, 1, line);
	H_CHECK(chown(dir, pw->pw_uid, pw->pw_gid) == 0, "chown");
	struct pf_run r;
	pf_run(bin, (const char *[]){ "check", "-c", path, NULL }, &r);
	H_CHECK(pf_exit(&r) == 0 && !r.err[0], "the directory given to nobody: exit %d, stderr %s",
		pf_exit(&r), r.err);
	pf_free(&r);
}

/* ---- exit codes (splicer.8 EXIT STATUS) ---------------------------------- */

/* The proxy exits 2 when it refuses the command line or the config before
 * binding anything (everything check finds but the addresses, the user
 * and the log file included), 1 when a socket cannot be bound after that;
 * check exits 1 for problems and 2 for a bad command line. */
Test(integ, preflight_exit_codes_as_documented, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	struct pf_run r;
	char stats[64];
	static const struct {
		const char *what;
		int code;
		const char *args[10];
	} cases[] = {
		{ "an unknown user", 2,
		  { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--user", "no-such-user-14", NULL } },
		{ "an unknown option", 2, { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--bogus", NULL } },
		{ "check: a bad command line", 2, { "check", NULL } },
		{ "check: a problem", 1, { "check", "-c", "/nonexistent/splicer.conf", NULL } },
		{ "a stats address not on this host", 1,
		  { "-l", "127.0.0.1:0", "-b", "127.0.0.1:9", "--workers", "1", "--stats", NULL, NULL } },
	};

	/* the page says so: the user under 2, an address not bound under 1 */
	FILE *f = fopen("doc/splicer.8", "re");
	static char man[65536];
	size_t len = f ? fread(man, 1, sizeof man - 1, f) : 0;
	if (f)
		fclose(f);
	man[len] = '\0';
	const char *st = strstr(man, ".SH EXIT STATUS\n"), *one = st ? strstr(st, ".TP\n1\n") : NULL;
	const char *two = one ? strstr(one, ".TP\n2\n") : NULL, *end = two ? strstr(two, ".PP") : NULL;
	H_CHECK(end, "doc/splicer.8 has no EXIT STATUS entries 1 and 2 (run from the tree's top)");
	H_CHECK(memmem(one, (size_t)(two - one), "stats", 5) && memmem(one, (size_t)(two - one), "bind", 4) &&
			memmem(two, (size_t)(end - two), ".B user", 7),
		"splicer.8 EXIT STATUS: 1 must name the stats address, 2 the user:\n%.*s", (int)(end - st), st);
	snprintf(stats, sizeof stats, "192.0.2.1:%d", h_free_port());
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *args[12];
		int n;
		for (n = 0; cases[i].args[n]; n++)
			args[n] = cases[i].args[n];
		if (n && !strcmp(args[n - 1], "--stats"))
			args[n++] = stats;
		args[n] = NULL;
		pf_run(bin, args, &r);
		H_CHECK(pf_exit(&r) == cases[i].code && !strstr(r.err, "ready:"), "%s: exit %d, not %d; "
			"stderr %s", cases[i].what, pf_exit(&r), cases[i].code, r.err);
		pf_free(&r);
	}
}

/* ---- names and wildcards ------------------------------------------------- */

/* A TCP port free on both 127.0.0.1 and ::1 right now. */
static int pf_port_both(void)
{
	for (int i = 0; i < 50; i++) {
		int port = h_free_port();
		struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
					   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
		int one = 1, fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0 &&
			 bind(fd, (struct sockaddr *)&s6, sizeof s6) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return port;
	}
	H_CHECK(0, "no port free on both 127.0.0.1 and ::1");
	return -1;
}

static void pf_echo_through(const char *where)
{
	struct h_addr a;
	char why[256];

	H_CHECK(h_addr_parse(where, &a) == 0, "address %s", where);
	int rc = h_echo_roundtrip(&a, 1000, 14, 3000, why, sizeof why);
	H_CHECK(rc == 0, "echo through %s: %s", where, why);
}

Test(integ, listen_star_port_is_both_families, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server echo;
	static struct h_proxy p;
	char listen[32], where[64];

	if (!h_ipv6_available())
		cr_skip_test("no IPv6 loopback");
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	int port = pf_port_both();
	snprintf(listen, sizeof listen, "*:%d", port);
	const char *backends[] = { echo.addr.text, NULL };
	h_proxy_up(&p, bin, "auto", listen, backends, NULL);
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	pf_echo_through(where);
	snprintf(where, sizeof where, "[::1]:%d", port);
	pf_echo_through(where);
	H_CHECK(h_log_lines(&p, "ready: listening on 0.0.0.0:", "[::]:", NULL) == 1,
		"the ready line does not name 0.0.0.0 and [::]");
	h_proxy_down(&p);
	h_server_stop(&echo);
}

/* A hosts file where localhost is 127.0.0.1 and ::1, for the proxy and
 * check run through pf_ns_args(); skips the test when a mount namespace
 * cannot be had. */
static const char *pf_hosts(void)
{
	static char path[300];
	struct pf_run r;
	const char *hosts = pf_write("hosts", "127.0.0.1 localhost\n::1 localhost\n");

	if (!h_ipv6_available())
		cr_skip_test("no IPv6 loopback");
	if (access("/usr/bin/unshare", X_OK))
		cr_skip_test("no /usr/bin/unshare");
	snprintf(path, sizeof path, "%s", hosts);
	const char *probe[] = { "-m", "sh", "-c", "mount --bind \"$0\" /etc/hosts && exec getent "
			       "ahostsv6 localhost", path, NULL };
	pf_run("/usr/bin/unshare", probe, &r);
	int ok = pf_exit(&r) == 0 && strstr(r.out, "::1 ");
	pf_free(&r);
	if (!ok)
		cr_skip_test("cannot bind-mount a hosts file in a private mount namespace");
	return path;
}

/* unshare's arguments that run `bin args...` with pf_hosts() as /etc/hosts
 * (exec: the pid is the proxy's). */
static void pf_ns_args(const char **out, const char *hosts, const char *bin, const char *const *args)
{
	int n = 0;

	out[n++] = "-m";
	out[n++] = "sh";
	out[n++] = "-c";
	out[n++] = "mount --bind \"$0\" /etc/hosts && shift && exec \"$@\"";
	out[n++] = hosts;
	out[n++] = "--";
	out[n++] = bin;
	for (int i = 0; args[i]; i++)
		out[n++] = args[i];
	out[n] = NULL;
}

Test(integ, listen_name_binds_every_address, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server echo;
	static struct h_proxy p;
	char listen[32], where[64], err[512];
	const char *argv[32];
	const char *hosts = pf_hosts();

	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	int port = pf_port_both();
	snprintf(listen, sizeof listen, "localhost:%d", port);
	const char *args[] = { "-l", listen, "-b", echo.addr.text, "--workers", "2", NULL };
	pf_ns_args(argv, hosts, bin, args);
	H_CHECK(h_proxy_start(&p, "/usr/bin/unshare", argv, err, sizeof err) == 0, "start: %s", err);
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	pf_echo_through(where);
	snprintf(where, sizeof where, "[::1]:%d", port);
	pf_echo_through(where);
	h_proxy_down(&p);
	h_server_stop(&echo);
}

/* A backend that writes its tag and closes. */
static void pf_tag_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	(void)!write(fd, arg, 1);
}

/* `backend = localhost:PORT weight=2` is two backends (127.0.0.1 and ::1,
 * both with the weight): check counts two, and round robin gives each its
 * share of the sessions. */
Test(integ, backend_name_is_every_address, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server b4, b6;
	static struct h_proxy p;
	static char tag4 = '4', tag6 = '6';
	char text[400], where[64], err[512];
	const char *argv[32];
	const char *hosts = pf_hosts();
	struct pf_run r;
	int port = pf_port_both(), n4 = 0, n6 = 0;

	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	H_CHECK(h_server_start(&b4, where, 64, pf_tag_conn, &tag4) == 0, "backend %s", where);
	snprintf(where, sizeof where, "[::1]:%d", port);
	H_CHECK(h_server_start(&b6, where, 64, pf_tag_conn, &tag6) == 0, "backend %s", where);
	snprintf(text, sizeof text, "[global]\nworkers = 2\n[route r]\nlisten = 127.0.0.1:0\n"
		 "backend = localhost:%d weight=2\n", port);
	const char *path = pf_write("names.conf", text);

	const char *check[] = { "check", "-c", path, NULL };
	pf_ns_args(argv, hosts, bin, check);
	pf_run("/usr/bin/unshare", argv, &r);
	H_CHECK(pf_exit(&r) == 0 && strstr(r.out, ": ok: 1 route, 1 listen address, 2 backends"),
		"check: exit %d, stdout %s, stderr %s", pf_exit(&r), r.out, r.err);
	pf_free(&r);

	const char *args[] = { "-c", path, NULL };
	pf_ns_args(argv, hosts, bin, args);
	H_CHECK(h_proxy_start(&p, "/usr/bin/unshare", argv, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_log_lines(&p, "route r:", "127.0.0.1:", "weight=2", "[::1]:", NULL) == 1,
		"the route line does not list both backends with weight 2");
	for (int i = 0; i < 12; i++) {
		char t = h_tag_of(&p.addr, NULL);
		n4 += t == '4';
		n6 += t == '6';
	}
	H_CHECK(n4 == 6 && n6 == 6, "12 sessions: %d to 127.0.0.1, %d to ::1 (expected 6 and 6)", n4, n6);
	h_proxy_down(&p);
	h_server_stop(&b4);
	h_server_stop(&b6);
}
