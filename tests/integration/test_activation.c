/* SPDX-License-Identifier: MIT */
/* systemd socket activation (src/ctl/admin/activation.h): the test plays
 * systemd. It binds and listens itself, starts splicer with the sockets as
 * descriptors 3.. and LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES (h_activate),
 * and keeps its own copies, as systemd does: a splicer that bound the
 * address itself instead would fail (the address is in use), and after
 * splicer stops the sockets must still take connections (no SYN filter
 * left on them, no path removed) for the next process. Routes take the
 * sockets by address and by name; an unknown name is an error at its line;
 * a socket no route takes refuses the start; the names survive a reload
 * and an upgrade (SIGUSR2). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* A listening socket on text ("127.0.0.1:0", "[::1]:0", "unix:/path"),
 * as a .socket unit's ListenStream= makes it; its address into a. */
static int sd_listen(const char *text, struct h_addr *a)
{
	struct h_addr want;
	int fd;

	H_CHECK(h_addr_parse(text, &want) == 0, "address %s", text);
	fd = socket(want.ss.ss_family, SOCK_STREAM, 0);
	H_CHECK(fd >= 0, "socket: %s", strerror(errno));
	if (want.ss.ss_family == AF_UNIX)
		unlink(((struct sockaddr_un *)&want.ss)->sun_path);
	if (want.ss.ss_family == AF_INET6) {
		int one = 1;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	}
	H_CHECK(bind(fd, (struct sockaddr *)&want.ss, want.len) == 0 && listen(fd, 128) == 0,
		"bind/listen %s: %s", text, strerror(errno));
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	H_CHECK(getsockname(fd, (struct sockaddr *)&ss, &len) == 0, "getsockname");
	h_addr_from(a, (struct sockaddr *)&ss, len);
	return fd;
}

static void echo_through(const struct h_addr *a, size_t n, const char *what)
{
	char why[256];
	int r = h_echo_roundtrip(a, n, 0x5d0 + n, 5000, why, sizeof why);

	H_CHECK(r == 0, "%s (%s): %zu bytes did not echo back through splicer: %s", what, a->text, n,
		why);
}

static const char *conf_file(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static const char *conf_file(const char *name, const char *fmt, ...)
{
	char text[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	return h_conf_write(name, text);
}

static void start_activated(struct h_proxy *p, const char *bin, const char *conf, const int *fds,
			    unsigned n, const char *names)
{
	const char *args[] = { "-c", conf, NULL };
	char err[512];

	h_activate(fds, n, names);
	int r = h_proxy_start(p, bin, args, err, sizeof err);
	h_activate_clear();
	H_CHECK(r == 0, "splicer with %u systemd sockets: %s", n, err);
}

/* The test's copy of a socket (systemd's) still takes a connection after
 * splicer is gone, and nothing waits in it. */
static void still_systemds(const struct h_addr *a, const char *what)
{
	int c = h_connect(a, 2000);

	H_CHECK(c >= 0, "%s %s: after splicer stopped, systemd's socket refuses or drops "
		"connections (%s): a SYN filter or an unlinked path was left on it", what, a->text,
		strerror(errno));
	close(c);
}

static void case_by_address(const char *bin)
{
	static struct h_server echo;
	static struct h_proxy p, again;
	struct h_addr tcp, un;
	char path[200];
	int fds[2];

	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo server");
	snprintf(path, sizeof path, "unix:%s/sd.sock", h_tmpdir());
	fds[0] = sd_listen("127.0.0.1:0", &tcp);
	fds[1] = sd_listen(path, &un);
	const char *conf = conf_file("by-address.conf",
				     "[global]\nworkers = 2\n"
				     "[route tcp]\nlisten = %s\nbackend = %s\n"
				     "[route unix]\nlisten = %s\nbackend = %s\n",
				     tcp.text, echo.addr.text, un.text, echo.addr.text);
	start_activated(&p, bin, conf, fds, 2, "tcpsock:unixsock");
	H_CHECK(h_log_lines(&p, "the socket systemd passed as 'tcpsock'", NULL) == 1 &&
			h_log_lines(&p, "the socket systemd passed as 'unixsock'", NULL) == 1,
		"splicer did not say it took both systemd sockets");
	echo_through(&tcp, 65536, "TCP socket by address");
	echo_through(&un, 65536, "Unix socket by address");
	/* a reload keeps them (the same addresses) */
	kill(p.pid, SIGHUP);
	for (int i = 0; i < 300 && h_log_lines(&p, "SIGHUP: reloaded", NULL) < 1; i++)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1, "no reload");
	echo_through(&tcp, 4096, "TCP socket after a reload");
	/* a reload that drops the Unix route, then one that brings it back
	 * (by name this time): systemd still holds the socket, so binding it
	 * anew would fail; splicer takes systemd's again */
	char cpath[512];
	snprintf(cpath, sizeof cpath, "%s", conf);
	FILE *f = fopen(cpath, "w");
	H_CHECK(f && fprintf(f, "[global]\nworkers = 2\n[route tcp]\nlisten = %s\nbackend = %s\n",
			     tcp.text, echo.addr.text) > 0 && fclose(f) == 0, "rewrite %s", cpath);
	kill(p.pid, SIGHUP);
	for (int i = 0; i < 300 && h_log_lines(&p, "SIGHUP: reloaded", NULL) < 2; i++)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 2, "no second reload");
	f = fopen(cpath, "w");
	H_CHECK(f && fprintf(f, "[global]\nworkers = 2\n[route tcp]\nlisten = %s\nbackend = %s\n"
			     "[route unix]\nlisten = systemd:unixsock\nbackend = %s\n", tcp.text,
			     echo.addr.text, echo.addr.text) > 0 && fclose(f) == 0, "rewrite %s", cpath);
	kill(p.pid, SIGHUP);
	for (int i = 0; i < 300 && h_log_lines(&p, "SIGHUP: reloaded", NULL) < 3; i++)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 3,
		"a reload bringing back the route of systemd's Unix socket failed");
	echo_through(&un, 65536, "Unix socket dropped and taken again by reloads");
	echo_through(&tcp, 4096, "TCP socket after three reloads");
	h_proxy_down(&p);
	struct stat st;
	H_CHECK(stat(un.text + 5, &st) == 0 && S_ISSOCK(st.st_mode),
		"splicer removed the path of systemd's Unix socket at stop");
	still_systemds(&tcp, "TCP");
	still_systemds(&un, "Unix");
	/* systemd starts the service again with the same sockets: it serves */
	conf = conf_file("by-address-2.conf",
			 "[global]\nworkers = 2\n"
			 "[route tcp]\nlisten = %s\nbackend = %s\n"
			 "[route unix]\nlisten = %s\nbackend = %s\n",
			 tcp.text, echo.addr.text, un.text, echo.addr.text);
	start_activated(&again, bin, conf, fds, 2, NULL); /* no LISTEN_FDNAMES */
	H_CHECK(h_log_lines(&again, "the socket systemd passed as 'unknown'", NULL) == 2,
		"without LISTEN_FDNAMES, a socket's name is not systemd's 'unknown'");
	echo_through(&tcp, 65536, "TCP socket, second process");
	echo_through(&un, 4096, "Unix socket, second process");
	h_proxy_down(&again);
	close(fds[0]);
	close(fds[1]);
	h_server_stop(&echo);
}

Test(integ, socket_activation_takes_systemd_sockets_by_address, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_by_address(h_binary(0));
}

/* the same under ASan+UBSan: the descriptors, names and reloads' dups */
Test(integ, socket_activation_takes_systemd_sockets_by_address_asan, .init = h_init,
     .fini = h_fini, .timeout = 90)
{
	case_by_address(h_binary(1));
}

/* ---- by name, across an upgrade -------------------------------------------- */

#define MAX_GEN 8
static pid_t gens[MAX_GEN];
static int ngens;

static void sub_init(void)
{
	h_init();
	ngens = 0;
	prctl(PR_SET_CHILD_SUBREAPER, 1); /* an upgrade's new process comes back here */
}

static void sub_fini(void)
{
	for (int i = 0; i < ngens; i++)
		if (kill(gens[i], SIGKILL) == 0)
			waitpid(gens[i], NULL, 0);
	h_fini();
}

/* The pid in the n-th "upgrade: process PID serves now" line, or 0. */
static pid_t takeover(const struct h_proxy *p, int n, int ms)
{
	for (int64_t end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(10)) {
		char *log = h_read_file(p->log, NULL), *k = log;
		int seen = 0;
		pid_t pid = 0;
		while (k && (k = strstr(k, "upgrade: process ")) && !pid) {
			k += strlen("upgrade: process ");
			if (strstr(k, " serves now") && ++seen == n)
				pid = (pid_t)atoi(k);
		}
		free(log);
		if (pid)
			return pid;
	}
	return 0;
}

Test(integ, socket_activation_takes_systemd_sockets_by_name_across_upgrade, .init = sub_init,
     .fini = sub_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	static struct h_server echo;
	static struct h_proxy p;
	struct h_addr web4, web6, api;
	int fds[3], n = 0, v6 = h_ipv6_available();

	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo server");
	/* two sockets of one name (as two ListenStream= under one
	 * FileDescriptorName=), one of another */
	fds[n++] = sd_listen("127.0.0.1:0", &web4);
	if (v6)
		fds[n++] = sd_listen("[::1]:0", &web6);
	fds[n++] = sd_listen("127.0.0.1:0", &api);
	const char *conf = conf_file("by-name.conf",
				     "[global]\nworkers = 2\n"
				     "[route web]\nlisten = systemd:web\nbackend = %s\n"
				     "[route api]\nlisten = systemd:api\nbackend = %s\n",
				     echo.addr.text, echo.addr.text);
	start_activated(&p, bin, conf, fds, (unsigned)n, v6 ? "web:web:api" : "web:api");
	echo_through(&web4, 65536, "systemd:web (IPv4)");
	if (v6)
		echo_through(&web6, 65536, "systemd:web (IPv6)");
	echo_through(&api, 65536, "systemd:api");
	H_CHECK(h_log_lines(&p, "the socket systemd passed as 'web'", NULL) == (v6 ? 2 : 1),
		"not every socket named web was taken");

	/* an upgrade: the new process has no LISTEN_FDS, yet systemd:web is
	 * the same socket there, and in its reloads */
	pid_t old = p.pid;
	H_CHECK(kill(old, SIGUSR2) == 0, "SIGUSR2");
	pid_t np = takeover(&p, 1, 15000);
	H_CHECK(np > 0, "no new process took over after SIGUSR2; log %s", p.log);
	if (ngens < MAX_GEN)
		gens[ngens++] = np;
	H_CHECK(h_proxy_wait(&p, 15000) != -1, "the old process did not exit");
	echo_through(&web4, 65536, "systemd:web after the upgrade");
	if (v6)
		echo_through(&web6, 4096, "systemd:web (IPv6) after the upgrade");
	echo_through(&api, 65536, "systemd:api after the upgrade");
	H_CHECK(kill(np, SIGHUP) == 0, "SIGHUP to the new process");
	for (int i = 0; i < 300 && h_log_lines(&p, "SIGHUP: reloaded", NULL) < 1; i++)
		h_sleep_ms(10);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1,
		"the new process did not reload a config of systemd:NAME listeners");
	echo_through(&api, 4096, "systemd:api after the upgrade and a reload");
	/* stopped: systemd's sockets take connections for the next process */
	kill(np, SIGTERM);
	for (int i = 0; i < 1000 && kill(np, 0) == 0; i++) {
		waitpid(np, NULL, WNOHANG);
		h_sleep_ms(10);
	}
	still_systemds(&web4, "systemd:web");
	still_systemds(&api, "systemd:api");
	for (int i = 0; i < n; i++)
		close(fds[i]);
	h_server_stop(&echo);
}

/* ---- what is refused ------------------------------------------------------- */

static int run_activated(const char *bin, const char *const *args, const int *fds, unsigned n,
			 const char *names, char **out, char **err)
{
	h_activate(fds, n, names);
	int st = h_run_capture(bin, args, 10000, out, err);
	h_activate_clear();
	return st;
}

Test(integ, socket_activation_unknown_name_is_an_error_at_its_line, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct h_addr web, extra;
	char want[1024], *out = NULL, *err = NULL;
	int fds[2];

	fds[0] = sd_listen("127.0.0.1:0", &web);
	const char *conf = conf_file("unknown-name.conf",
				     "[global]\nworkers = 1\n"
				     "[route web]\n"
				     "listen = systemd:webb\n"
				     "backend = 127.0.0.1:9\n");
	snprintf(want, sizeof want, "%s:4: listen systemd:webb: systemd passed no socket named "
		 "'webb' (FileDescriptorName= in the .socket unit); it passed web (%s)\n", conf,
		 web.text);
	/* in check, and at start: the same line */
	const char *check[] = { "check", "-c", conf, NULL };
	int st = run_activated(bin, check, fds, 1, "web", &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err && !strcmp(err, want),
		"check: status %d, stderr:\n%s\nexpected:\n%s", st, err ? err : "", want);
	free(out);
	free(err);
	const char *start[] = { "-c", conf, NULL };
	st = run_activated(bin, start, fds, 1, "web", &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && err && strstr(err, want),
		"start: status %d, stderr:\n%s\nexpected:\n%s", st, err ? err : "", want);
	free(out);
	free(err);

	/* without any socket from systemd: check notes it (ExecStartPre= gets
	 * none), start refuses */
	st = h_run_capture(bin, check, 10000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && err &&
			strstr(err, ":4: note: listen systemd:webb: a socket systemd passes at start"),
		"check without LISTEN_FDS: status %d, stderr: %s", st, err ? err : "");
	free(out);
	free(err);
	st = h_run_capture(bin, start, 10000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && err &&
			strstr(err, ":4: listen systemd:webb: systemd passed no sockets (LISTEN_FDS is "
				    "not set for this process)"),
		"start without LISTEN_FDS: status %d, stderr: %s", st, err ? err : "");
	free(out);
	free(err);

	/* a socket no route takes: the start is refused, naming it */
	fds[1] = sd_listen("127.0.0.1:0", &extra);
	const char *conf2 = conf_file("unmatched.conf",
				      "[global]\nworkers = 1\n"
				      "[route web]\nlisten = systemd:web\nbackend = 127.0.0.1:9\n");
	const char *start2[] = { "-c", conf2, NULL };
	snprintf(want, sizeof want, "splicer: systemd passed the socket 'extra' (%s), which no route "
		 "listens on: give a route listen = systemd:extra or listen = %s, or remove it from "
		 "the .socket unit\n", extra.text, extra.text);
	st = run_activated(bin, start2, fds, 2, "web:extra", &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && err && strstr(err, want),
		"unmatched socket: status %d, stderr:\n%s\nexpected:\n%s", st, err ? err : "", want);
	free(out);
	free(err);
	/* and a bad name */
	const char *conf3 = conf_file("bad-name.conf",
				      "[route web]\nlisten = systemd:\nbackend = 127.0.0.1:9\n");
	const char *check3[] = { "check", "--syntax-only", "-c", conf3, NULL };
	st = run_activated(bin, check3, fds, 1, "web", &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err &&
			strstr(err, ":2: listen systemd:: expects systemd:NAME"),
		"empty name: status %d, stderr: %s", st, err ? err : "");
	free(out);
	free(err);
	close(fds[0]);
	close(fds[1]);
}

/* ---- systemd's own launcher ------------------------------------------------- */

struct first_client {
	struct h_addr addr;
	int rc;
	char why[256];
	pthread_t thr;
};

/* systemd-socket-activate starts its command at the first connection: this
 * is that connection, a round trip through splicer once it runs. */
static void *first_client_main(void *arg)
{
	struct first_client *c = arg;

	h_sleep_ms(200);
	c->rc = h_echo_roundtrip(&c->addr, 65536, 99, 8000, c->why, sizeof c->why);
	return NULL;
}

Test(integ, socket_activation_by_systemd_socket_activate, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0), *sa = h_which("systemd-socket-activate");
	static struct h_server echo;
	static struct h_proxy p;
	static struct first_client c;
	char listen[64], err[512];

	if (!sa)
		cr_skip_test("systemd-socket-activate is not installed (Debian package systemd)");
	char launcher[512];
	snprintf(launcher, sizeof launcher, "%s", sa);
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo server");
	snprintf(listen, sizeof listen, "127.0.0.1:%d", h_free_port());
	H_CHECK(h_addr_parse(listen, &c.addr) == 0, "address");
	const char *conf = conf_file("sa.conf", "[global]\nworkers = 2\n"
					       "[route web]\nlisten = systemd:web\nbackend = %s\n",
				     echo.addr.text);
	const char *args[] = { "-l", listen, "--fdname=web", bin, "-c", conf, NULL };
	H_CHECK(pthread_create(&c.thr, NULL, first_client_main, &c) == 0, "client thread");
	int r = h_proxy_start(&p, launcher, args, err, sizeof err);
	pthread_join(c.thr, NULL);
	H_CHECK(r == 0, "systemd-socket-activate ... splicer: %s", err);
	H_CHECK(c.rc == 0, "the first connection, queued before splicer ran, did not echo: %s", c.why);
	H_CHECK(h_log_lines(&p, "the socket systemd passed as 'web'", NULL) == 1,
		"splicer did not take systemd's socket named web");
	echo_through(&c.addr, 65536, "systemd-socket-activate's socket");
	h_proxy_down(&p);
	h_server_stop(&echo);
}
