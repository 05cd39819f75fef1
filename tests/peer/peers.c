/* SPDX-License-Identifier: MIT */
/* The differential suite's machinery; see peers.h. */
#define _GNU_SOURCE
#include "peers.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PR_CHUNK (64 * 1024)
#define PR_STALL_CUT 3 /* consecutive stalls after which a column's other reps are not run */
#define NGINX_STREAM_MODULE "/usr/lib/nginx/modules/ngx_stream_module.so"

/* Static: the backends' threads and pr_fini() may touch them after a failed check. */
static struct pr_col pr_cols[PR_MAX_COLS];
static int pr_ncols;

/* ---- I/O helpers --------------------------------------------------------- */

const char *pr_end_label(int end)
{
	static __thread char buf[PR_LABEL];
	switch (end) {
	case 0: return "fin";
	case -1: return "open";
	case ECONNRESET: return "rst";
	case ETIMEDOUT: return "stall";
	case EPIPE: return "epipe";
	}
	snprintf(buf, sizeof buf, "e%d", end);
	return buf;
}

static int pr_again(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

void pr_duplex(int fd, struct pr_io *io, int64_t deadline_ms)
{
	unsigned char *sbuf = malloc(PR_CHUNK), *rbuf = malloc(PR_CHUNK);
	int send_done = 0, recv_done = io->no_recv;

	io->sent = io->got = 0;
	io->send_err = 0;
	io->recv_end = -1;
	io->bad = 0;
	if (!sbuf || !rbuf) {
		io->send_err = io->recv_end = ENOMEM;
		goto out;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (io->send_len == 0) {
		if (io->shut_wr && shutdown(fd, SHUT_WR) < 0)
			io->send_err = errno;
		send_done = 1;
	}
	while (!send_done || !recv_done) {
		int64_t left = deadline_ms - h_now_ms();
		if (left <= 0) {
			if (!recv_done)
				io->recv_end = ETIMEDOUT;
			if (!send_done)
				io->send_err = ETIMEDOUT;
			break;
		}
		struct pollfd pfd = { .fd = fd, .events = (send_done ? 0 : POLLOUT) |
							  (recv_done ? 0 : POLLIN) };
		poll(&pfd, 1, left < 100 ? (int)left : 100);
		if (!recv_done) {
			ssize_t r = recv(fd, rbuf, PR_CHUNK, 0);
			if (r > 0) {
				uint64_t want = io->recv_expect > io->got ? io->recv_expect - io->got : 0;
				size_t n = (uint64_t)r < want ? (size_t)r : (size_t)want;
				if ((uint64_t)r > want || h_gen_check(io->recv_seed, io->got, rbuf, n) < n)
					io->bad = 1;
				io->got += (uint64_t)r;
			} else if (r == 0 || !pr_again(errno)) {
				io->recv_end = r == 0 ? 0 : errno;
				recv_done = 1;
				if (io->stop_on_recv_end)
					send_done = 1;
			}
		}
		if (!send_done) {
			uint64_t left_b = io->send_len - io->sent;
			size_t n = left_b < PR_CHUNK ? (size_t)left_b : PR_CHUNK;
			h_gen(io->send_seed, io->sent, sbuf, n);
			ssize_t r = send(fd, sbuf, n, MSG_NOSIGNAL);
			if (r > 0)
				io->sent += (uint64_t)r;
			else if (r < 0 && !pr_again(errno)) {
				io->send_err = errno;
				send_done = 1;
			}
			if (!send_done && io->sent == io->send_len) {
				if (io->shut_wr && shutdown(fd, SHUT_WR) < 0)
					io->send_err = errno;
				send_done = 1;
			}
		}
	}
out:
	free(sbuf);
	free(rbuf);
}

void pr_how(char *out, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, PR_LABEL, fmt, ap);
	va_end(ap);
}

int pr_wait_acked(int fd, int64_t deadline_ms)
{
	for (;;) {
		int n = 0;
		if (ioctl(fd, SIOCOUTQ, &n) < 0 || n == 0)
			return 0;
		if (h_now_ms() > deadline_ms)
			return -1;
		h_sleep_ms(1);
	}
}

void pr_linger0(int fd)
{
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

int pr_connect(const struct pr_col *c)
{
	return h_connect(&c->front, 2000);
}

int pr_connect_route(const struct pr_col *c, char tag)
{
	if (c->kind != PR_DIRECT)
		return pr_connect(c);
	for (int i = 0; i < PR_ROUTES; i++)
		if (c->route[i].tag == tag)
			return h_connect(&c->route[i].srv.addr, 2000);
	errno = EINVAL;
	return -1;
}

const struct pr_side *pr_backend_wait(struct pr_col *c, int rep, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	for (;;) {
		int st = atomic_load(&c->started[rep]), fin = atomic_load(&c->finished[rep]);
		if (st > 0 && fin > 0)
			return &c->bk[rep];
		if (h_now_ms() > deadline)
			return NULL;
		h_sleep_ms(1);
	}
}

/* ---- the backends -------------------------------------------------------- */

static void pr_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct pr_col *c = arg;
	struct pr_side side;
	memset(&side, 0, sizeof side);
	side.end = -1;
	if (c->sc->parallel) {
		c->sc->backend(c, fd, &side);
		return;
	}
	int rep = atomic_load(&c->cur_rep);
	int first = atomic_fetch_add(&c->started[rep], 1) == 0;
	c->sc->backend(c, fd, &side);
	if (first) {
		side.ran = 1;
		c->bk[rep] = side;
		atomic_fetch_add(&c->finished[rep], 1);
	}
}

const char pr_route_tags[PR_ROUTES] = { 'a', 'b', 'd' };

/* An SNI scenario's backend: its tag, then an echo of every byte until EOF
 * (or the rep's deadline; h_server_stop's shutdown ends it sooner). */
static void pr_route_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	const struct pr_route *r = arg;
	int64_t deadline = h_now_ms() + r->c->sc->deadline_ms + 1000;
	char buf[16384];

	h_set_nodelay(fd);
	if (h_send_all(fd, &r->tag, 1, deadline) < 0)
		return;
	while (h_now_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && !pr_again(errno)))
			return;
		if (n > 0 && h_send_all(fd, buf, (size_t)n, deadline) < 0)
			return;
	}
}

/* ---- the peers ----------------------------------------------------------- */

/* An executable by name: $envvar, else PATH and the sbin directories (the
 * packages install into /usr/sbin, which a user's PATH may lack). */
static int pr_find(const char *name, const char *envvar, char *out, size_t len)
{
	const char *e = getenv(envvar);
	if (e && *e) {
		snprintf(out, len, "%s", e);
		return access(out, X_OK) == 0;
	}
	char dirs[1024];
	snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/local/sbin:/sbin",
		 getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", d, name);
		if (access(out, X_OK) == 0)
			return 1;
	}
	return 0;
}

/* fork + exec in a process group of its own, stderr to log; dies with us. */
static pid_t pr_spawn(const char *log, char *const *argv)
{
	int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (logfd < 0 || nullfd < 0)
		return -1;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0); /* nginx's workers go with their master, by group */
		h_child_exec(parent, nullfd, nullfd, logfd, argv[0], argv);
	}
	if (pid > 0)
		setpgid(pid, pid); /* also here: no race with a kill of the group */
	close(logfd);
	close(nullfd);
	return pid;
}

/* 1 once a socket listens on 127.0.0.1:port (read from /proc/net/tcp, so
 * that probing opens no connection the backend would count). */
static int pr_listening(int port)
{
	FILE *f = fopen("/proc/net/tcp", "re");
	char line[512];
	int found = 0;
	while (f && !found && fgets(line, sizeof line, f)) {
		unsigned lport, st;
		if (sscanf(line, " %*d: %*8x:%x %*8x:%*x %x", &lport, &st) == 2)
			found = lport == (unsigned)port && st == 0x0A;
	}
	if (f)
		fclose(f);
	return found;
}

void pr_pid_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	int st;
	kill(pid, SIGTERM);
	int64_t deadline = h_now_ms() + 3000;
	while (waitpid(pid, &st, WNOHANG) == 0 && h_now_ms() < deadline)
		h_sleep_ms(5);
	/* the master (or HAProxy) is gone or stuck: nothing of its group survives */
	kill(-pid, SIGKILL);
	waitpid(pid, &st, WNOHANG);
}

static void pr_peer_stop(struct pr_col *c)
{
	pr_pid_stop(c->pid);
	c->pid = 0;
}

static int pr_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* HAProxy's config: its defaults, except the timeouts it warns about when
 * unset; for SNI scenarios the routes as HAProxy's documentation writes
 * them: wait for the ClientHello (inspect-delay, accepted once
 * req.ssl_hello_type says a hello is there), then use_backend on req.ssl_sni
 * (-i: HAProxy compares case-sensitively otherwise) and req.ssl_alpn. */
static void pr_haproxy_conf(const struct pr_col *c, int port, char *conf, size_t len)
{
	int n = snprintf(conf, len,
			 "defaults\n"
			 "    mode tcp\n"
			 "    timeout connect 5s\n"
			 "    timeout client 1m\n"
			 "    timeout server 1m\n"
			 "frontend f\n"
			 "    bind 127.0.0.1:%d\n",
			 port);
	if (!c->sc->sni) {
		snprintf(conf + n, len - (size_t)n,
			 "    default_backend b\n"
			 "backend b\n"
			 "%s"
			 "    server s1 %s\n",
			 c->sc->haproxy_backend ? c->sc->haproxy_backend : "", c->srv.addr.text);
		return;
	}
	snprintf(conf + n, len - (size_t)n,
		 "    tcp-request inspect-delay %ds\n"
		 "    tcp-request content accept if { req.ssl_hello_type 1 }\n"
		 "    use_backend a if { req.ssl_sni -i a.example.com }\n"
		 "    use_backend a if { req.ssl_sni -m end -i .a.example.com }\n"
		 "    use_backend b if { req.ssl_sni -i b.example.com } { req.ssl_alpn h2 }\n"
		 "    default_backend d\n"
		 "backend a\n"
		 "    server s1 %s\n"
		 "backend b\n"
		 "    server s1 %s\n"
		 "backend d\n"
		 "    server s1 %s\n",
		 PR_HELLO_WAIT_S, c->route[0].srv.addr.text, c->route[1].srv.addr.text,
		 c->route[2].srv.addr.text);
}

/* nginx's: stream proxy_pass; for SNI scenarios ssl_preread with a map of
 * $ssl_preread_server_name (hostnames: ".a.example.com" is the name and
 * every name under it; map keys match case-insensitively) and a second map
 * that adds the ALPN condition on $ssl_preread_alpn_protocols. */
static void pr_nginx_conf(const struct pr_col *c, int port, int dynamic, const char *pidf,
			  char *conf, size_t len)
{
	char server[1600];

	if (!c->sc->sni)
		snprintf(server, sizeof server,
			 "    server {\n"
			 "        listen 127.0.0.1:%d;\n"
			 "        proxy_pass %s;\n"
			 "%s%s"
			 "    }\n",
			 port, c->srv.addr.text, c->half_close ? "        proxy_half_close on;\n" : "",
			 c->sc->nginx_server ? c->sc->nginx_server : "");
	else
		snprintf(server, sizeof server,
			 "    map $ssl_preread_server_name $sni_route {\n"
			 "        hostnames;\n"
			 "        .a.example.com a;\n"
			 "        b.example.com b;\n"
			 "        default d;\n"
			 "    }\n"
			 "    map \"$sni_route $ssl_preread_alpn_protocols\" $sni_upstream {\n"
			 "        \"~^a \" %s;\n"
			 "        \"~^b (.*,)?h2(,|$)\" %s;\n"
			 "        default %s;\n"
			 "    }\n"
			 "    server {\n"
			 "        listen 127.0.0.1:%d;\n"
			 "        ssl_preread on;\n"
			 "        preread_timeout %ds;\n"
			 "        proxy_pass $sni_upstream;\n"
			 "    }\n",
			 c->route[0].srv.addr.text, c->route[1].srv.addr.text, c->route[2].srv.addr.text,
			 port, PR_HELLO_WAIT_S);
	snprintf(conf, len,
		 "%s"
		 "daemon off;\n"
		 "pid %s;\n"
		 "error_log %s info;\n"
		 "events {}\n"
		 "stream {\n"
		 "%s"
		 "}\n",
		 dynamic ? "load_module " NGINX_STREAM_MODULE ";\n" : "", pidf, c->log, server);
}

/* Starts HAProxy or nginx for column c on a free port in front of its
 * backend. Fails the test when the peer is not installed. */
static void pr_peer_start(struct pr_col *c)
{
	char exe[512], cfg[320], conf[4096], pidf[320];
	int port = h_free_port(), dynamic = 0;
	const char *dir = h_tmpdir();

	snprintf(c->log, sizeof c->log, "%s/%s.log", dir, c->name);
	snprintf(cfg, sizeof cfg, "%s/%s.conf", dir, c->name);
	if (c->kind == PR_HAPROXY) {
		H_CHECK(pr_find("haproxy", "SPLICER_HAPROXY", exe, sizeof exe),
			"haproxy not found ($SPLICER_HAPROXY, PATH, /usr/sbin): the differential "
			"suite needs it (`make peer-deps` installs haproxy, nginx and "
			"libnginx-mod-stream)");
		pr_haproxy_conf(c, port, conf, sizeof conf);
		H_CHECK(pr_write_file(cfg, conf) == 0, "cannot write %s", cfg);
		char *argv[] = { exe, "-f", cfg, "-db", NULL };
		c->pid = pr_spawn(c->log, argv);
	} else {
		H_CHECK(pr_find("nginx", "SPLICER_NGINX", exe, sizeof exe),
			"nginx not found ($SPLICER_NGINX, PATH, /usr/sbin): the differential suite "
			"needs it (`make peer-deps` installs haproxy, nginx and "
			"libnginx-mod-stream)");
		dynamic = access(NGINX_STREAM_MODULE, R_OK) == 0;
		snprintf(pidf, sizeof pidf, "%s/%s.pid", dir, c->name);
		pr_nginx_conf(c, port, dynamic, pidf, conf, sizeof conf);
		H_CHECK(pr_write_file(cfg, conf) == 0, "cannot write %s", cfg);
		char *argv[] = { exe, "-p", (char *)dir, "-e", c->log, "-c", cfg, NULL };
		c->pid = pr_spawn(c->log, argv);
	}
	H_CHECK(c->pid > 0, "%s: cannot start %s", c->name, exe);
	int64_t deadline = h_now_ms() + 5000;
	while (!pr_listening(port)) {
		int st;
		if (waitpid(c->pid, &st, WNOHANG) == c->pid || h_now_ms() > deadline) {
			c->pid = waitpid(c->pid, &st, WNOHANG) == 0 ? c->pid : 0;
			fprintf(stderr, "[peer] %s (%s -c %s) did not listen on port %d; its log:\n",
				c->name, exe, cfg, port);
			h_print_tail(c->log, 20);
			if (c->kind == PR_NGINX && !dynamic)
				fprintf(stderr, "[peer] (%s is missing: libnginx-mod-stream)\n",
					NGINX_STREAM_MODULE);
			H_CHECK(0, "%s did not start (log %s)", c->name, c->log);
		}
		h_sleep_ms(5);
	}
	char text[64];
	snprintf(text, sizeof text, "127.0.0.1:%d", port);
	h_addr_parse(text, &c->front);
}

/* Waits (5 s) for pid to listen on 127.0.0.1:port; else shows its log,
 * stops it and fails the test. */
static void pr_wait_listening(pid_t pid, const char *name, int port, const char *log)
{
	for (int64_t deadline = h_now_ms() + 5000; !pr_listening(port);) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid || h_now_ms() > deadline) {
			h_print_tail(log, 20);
			pr_pid_stop(pid);
			H_CHECK(0, "%s did not listen on port %d (log %s)", name, port, log);
		}
		h_sleep_ms(5);
	}
}

pid_t pr_haproxy_start(const char *name, const char *conf, int port, char *log, size_t loglen)
{
	char exe[512], cfg[320];
	pid_t pid;

	snprintf(log, loglen, "%s/%s.log", h_tmpdir(), name);
	snprintf(cfg, sizeof cfg, "%s/%s.conf", h_tmpdir(), name);
	H_CHECK(pr_find("haproxy", "SPLICER_HAPROXY", exe, sizeof exe),
		"haproxy not found ($SPLICER_HAPROXY, PATH, /usr/sbin): the differential suite needs "
		"it (`make peer-deps`)");
	H_CHECK(pr_write_file(cfg, conf) == 0, "cannot write %s", cfg);
	char *argv[] = { exe, "-f", cfg, "-db", NULL };
	pid = pr_spawn(log, argv);
	H_CHECK(pid > 0, "%s: cannot start %s", name, exe);
	pr_wait_listening(pid, name, port, log);
	return pid;
}

pid_t pr_nginx_start(const char *name, const char *stream, int port, char *log, size_t loglen)
{
	char exe[512], cfg[320], pidf[320], conf[4096];
	const char *dir = h_tmpdir();
	int dynamic = access(NGINX_STREAM_MODULE, R_OK) == 0;
	pid_t pid;

	snprintf(log, loglen, "%s/%s.log", dir, name);
	snprintf(cfg, sizeof cfg, "%s/%s.conf", dir, name);
	snprintf(pidf, sizeof pidf, "%s/%s.pid", dir, name);
	H_CHECK(pr_find("nginx", "SPLICER_NGINX", exe, sizeof exe),
		"nginx not found ($SPLICER_NGINX, PATH, /usr/sbin): the differential suite needs it "
		"(`make peer-deps`)");
	snprintf(conf, sizeof conf,
		 "%sdaemon off;\npid %s;\nerror_log %s info;\nevents {}\nstream {\n%s}\n",
		 dynamic ? "load_module " NGINX_STREAM_MODULE ";\n" : "", pidf, log, stream);
	H_CHECK(pr_write_file(cfg, conf) == 0, "cannot write %s", cfg);
	char *argv[] = { exe, "-p", (char *)dir, "-e", log, "-c", cfg, NULL };
	pid = pr_spawn(log, argv);
	H_CHECK(pid > 0, "%s: cannot start %s", name, exe);
	pr_wait_listening(pid, name, port, log);
	return pid;
}

void pr_fini(void)
{
	for (int i = 0; i < pr_ncols; i++)
		pr_peer_stop(&pr_cols[i]);
	h_fini();
}

/* ---- columns --------------------------------------------------------------- */

static struct pr_col *pr_add(const char *name, enum pr_kind kind)
{
	struct pr_col *c = &pr_cols[pr_ncols++];
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "%s", name);
	c->kind = kind;
	return c;
}

/* SNI scenarios: one config for every engine, the routes above on one
 * listener, started with --engine. */
static void pr_splicer_sni_start(struct pr_col *c, const char *bin)
{
	char text[1024], path[320], port[32], err[512];
	int lport = h_free_port();

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\n"
		 "[route a]\nlisten = 127.0.0.1:%d\nsni = a.example.com *.a.example.com\n"
		 "backend = %s\ntls_hello_timeout = %ds\n"
		 "[route b]\nlisten = 127.0.0.1:%d\nsni = b.example.com\nalpn = h2\n"
		 "backend = %s\ntls_hello_timeout = %ds\n"
		 "[route d]\nlisten = 127.0.0.1:%d\nbackend = %s\ntls_hello_timeout = %ds\n",
		 lport, c->route[0].srv.addr.text, PR_HELLO_WAIT_S, lport, c->route[1].srv.addr.text,
		 PR_HELLO_WAIT_S, lport, c->route[2].srv.addr.text, PR_HELLO_WAIT_S);
	snprintf(path, sizeof path, "%s/%s-sni.conf", h_tmpdir(), c->name);
	H_CHECK(pr_write_file(path, text) == 0, "cannot write %s", path);
	const char *args[] = { "-c", path, "--engine", c->engine, NULL };
	H_CHECK(h_proxy_start(&c->sp, bin, args, err, sizeof err) == 0, "%s: proxy: %s", c->name, err);
	snprintf(port, sizeof port, "127.0.0.1:%d", lport);
	h_addr_parse(port, &c->front);
}

static void pr_splicer_start(struct pr_col *c, const char *bin)
{
	const char *backends[] = { c->srv.addr.text, NULL };
	if (!strcmp(c->engine, "sockmap") && !h_bpf_capable()) {
		snprintf(c->na, sizeof c->na, "sockmap: BPF not permitted here (no CAP_BPF/CAP_NET_ADMIN)");
		return;
	}
	if (c->sc->sni) {
		pr_splicer_sni_start(c, bin);
	} else {
		h_proxy_up(&c->sp, bin, c->engine, "127.0.0.1:0", backends, c->sc->splicer_args);
		c->front = c->sp.addr;
	}
	/* an engine the kernel refuses falls back: that column would not test it */
	if (h_log_lines(&c->sp, "engine unavailable", NULL) > 0) {
		snprintf(c->na, sizeof c->na, "%s: the proxy fell back (see %s)", c->engine, c->sp.log);
		h_proxy_stop(&c->sp, 5000);
	}
}

/* The column's backends: one, or in SNI scenarios one per route. */
static void pr_backends_start(struct pr_col *c)
{
	int rc;

	if (!c->sc->sni) {
		rc = h_server_start(&c->srv, "127.0.0.1:0", 128, pr_conn, c);
		H_CHECK(rc == 0, "%s: backend: %s", c->name, strerror(-rc));
		return;
	}
	for (int k = 0; k < PR_ROUTES; k++) {
		struct pr_route *r = &c->route[k];
		r->c = c;
		r->tag = pr_route_tags[k];
		rc = h_server_start(&r->srv, "127.0.0.1:0", 128, pr_route_conn, r);
		H_CHECK(rc == 0, "%s: backend %c: %s", c->name, r->tag, strerror(-rc));
	}
}

static void pr_backends_stop(struct pr_col *c)
{
	h_server_stop(&c->srv);
	for (int k = 0; k < PR_ROUTES; k++)
		h_server_stop(&c->route[k].srv);
}

static void pr_setup(const struct pr_scenario *sc)
{
	static const char *const engines[] = { "copy", "splice", "auto", "uring", "sockmap" };
	const char *bin = h_binary(0);
	struct pr_col *c;

	pr_ncols = 0;
	pr_add("direct", PR_DIRECT);
	pr_add("haproxy", PR_HAPROXY);
	pr_add("nginx", PR_NGINX);
	if (!sc->sni) { /* half-close plays no part in routing */
		c = pr_add("nginx-hc", PR_NGINX);
		c->half_close = 1;
	}
	for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
		c = pr_add(engines[i], PR_SPLICER);
		c->engine = engines[i];
	}
	for (int i = 0; i < pr_ncols; i++) {
		c = &pr_cols[i];
		c->sc = sc;
		pr_backends_start(c);
		if (c->kind == PR_DIRECT && sc->direct_na)
			snprintf(c->na, sizeof c->na, "%s", sc->direct_na);
		else if (c->kind == PR_DIRECT)
			c->front = c->srv.addr;
		else if (c->kind == PR_SPLICER)
			pr_splicer_start(c, bin);
		else
			pr_peer_start(c);
	}
}

/* ---- running --------------------------------------------------------------- */

struct pr_job {
	struct pr_col *c;
	int rep;
	pthread_t thr;
};

static void *pr_job_main(void *arg)
{
	struct pr_job *j = arg;
	j->c->sc->client(j->c, j->rep, &j->c->rep[j->rep]);
	j->c->rep[j->rep].ran = 1;
	return NULL;
}

static void pr_run_parallel(const struct pr_scenario *sc)
{
	static struct pr_job jobs[PR_MAX_COLS * PR_MAX_REPS];
	int n = 0;
	for (int i = 0; i < pr_ncols; i++) {
		if (pr_cols[i].na[0])
			continue;
		for (int r = 0; r < sc->reps; r++) {
			jobs[n] = (struct pr_job){ .c = &pr_cols[i], .rep = r };
			H_CHECK(pthread_create(&jobs[n].thr, NULL, pr_job_main, &jobs[n]) == 0,
				"pthread_create");
			n++;
		}
	}
	for (int k = 0; k < n; k++)
		pthread_join(jobs[k].thr, NULL);
}

static void pr_run_sequential(const struct pr_scenario *sc)
{
	for (int i = 0; i < pr_ncols; i++) {
		struct pr_col *c = &pr_cols[i];
		int stalls = 0;
		if (c->na[0])
			continue;
		for (int r = 0; r < sc->reps; r++) {
			if (stalls >= PR_STALL_CUT) {
				c->rep[r].stalled = 1;
				pr_how(c->rep[r].how, "stall");
				c->cut++;
				continue;
			}
			atomic_store(&c->cur_rep, r);
			sc->client(c, r, &c->rep[r]);
			c->rep[r].ran = 1;
			stalls = c->rep[r].stalled ? stalls + 1 : 0;
			/* this rep's backend connection ends before the next rep's starts */
			int64_t deadline = h_now_ms() + 3000;
			while (atomic_load(&c->started[r]) > 0 && atomic_load(&c->finished[r]) == 0 &&
			       h_now_ms() < deadline)
				h_sleep_ms(1);
		}
	}
}

/* Appends to the string in buf. */
static void __attribute__((format(printf, 3, 4))) pr_cat(char *buf, size_t len, const char *fmt, ...)
{
	size_t at = strlen(buf);
	va_list ap;
	va_start(ap, fmt);
	if (at < len)
		vsnprintf(buf + at, len - at, fmt, ap);
	va_end(ap);
}

/* "rst 7, fin 3": the labels of a column's reps, most frequent first. */
static void pr_labels(const struct pr_col *c, int reps, char *out, size_t len)
{
	char names[PR_MAX_REPS][PR_LABEL];
	int counts[PR_MAX_REPS], n = 0;
	for (int r = 0; r < reps; r++) {
		const char *h = c->rep[r].how[0] ? c->rep[r].how : "?";
		int k = 0;
		while (k < n && strcmp(names[k], h))
			k++;
		if (k == n) {
			snprintf(names[n], PR_LABEL, "%s", h);
			counts[n++] = 0;
		}
		counts[k]++;
	}
	out[0] = '\0';
	for (int done = 0; done < n; done++) {
		int best = -1;
		for (int k = 0; k < n; k++)
			if (counts[k] > 0 && (best < 0 || counts[k] > counts[best]))
				best = k;
		pr_cat(out, len, "%s%s %d", done ? ", " : "", names[best], counts[best]);
		counts[best] = -counts[best];
	}
}

static int pr_count(const struct pr_col *c, int reps, int bad)
{
	int n = 0;
	for (int r = 0; r < reps; r++)
		n += bad ? c->rep[r].bad : c->rep[r].ok;
	return n;
}

/* With SPLICER_PEER_TABLE set (make test), the rows also go to that file,
 * under one header, so the whole table can be printed after the run. */
void pr_table_append(const char *head, const char *row)
{
	const char *path = getenv("SPLICER_PEER_TABLE");
	if (!path || !*path)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	char line[1100];
	int n = lseek(fd, 0, SEEK_END) == 0 ? snprintf(line, sizeof line, "%s\n%s\n", head, row)
					    : snprintf(line, sizeof line, "%s\n", row);
	if (n > 0 && write(fd, line, (size_t)n) != n)
		fprintf(stderr, "[peer] cannot append to %s\n", path);
	close(fd);
}

static void pr_report(const struct pr_scenario *sc, int64_t ms)
{
	char head[512] = "", row[512] = "", cell[32], lab[256];
	snprintf(head, sizeof head, "[peer] %-34s", "scenario (delivered/reps)");
	snprintf(row, sizeof row, "[peer] %-34s", sc->name);
	for (int i = 0; i < pr_ncols; i++) {
		const struct pr_col *c = &pr_cols[i];
		pr_cat(head, sizeof head, " %9s", c->name);
		if (c->na[0])
			snprintf(cell, sizeof cell, "n/a");
		else
			snprintf(cell, sizeof cell, "%d/%d%s%s", pr_count(c, sc->reps, 0), sc->reps,
				 pr_count(c, sc->reps, 1) ? "!" : "", c->cut ? "*" : "");
		pr_cat(row, sizeof row, " %9s", cell);
	}
	fprintf(stderr, "%s\n%s\n[peer]   delivered = %s (%lld ms)\n", head, row, sc->delivered,
		(long long)ms);
	pr_table_append(head, row);
	for (int i = 0; i < pr_ncols; i++) {
		const struct pr_col *c = &pr_cols[i];
		if (c->na[0]) {
			fprintf(stderr, "[peer]   %-9s n/a: %s\n", c->name, c->na);
			continue;
		}
		pr_labels(c, sc->reps, lab, sizeof lab);
		fprintf(stderr, "[peer]   %-9s %s%s%s\n", c->name, lab,
			pr_count(c, sc->reps, 1) ? "; ! = wrong bytes delivered" : "",
			c->cut ? "; * = reps after 3 stalls in a row not run, counted as stalls" : "");
	}
}

/* SNI scenarios: whether column c missed a rep that direct delivered (or,
 * where direct has no meaning, any rep: the scenario says what a proxy
 * must do). Routing by name has a right answer of its own, so splicer is
 * held to it, not to the best peer: were HAProxy and nginx both to fail a
 * case, splicer would pass it at 0/10 under the peers' rule. */
static int pr_short_of_direct(const struct pr_scenario *sc, const struct pr_col *c)
{
	const struct pr_col *direct = NULL;

	for (int i = 0; i < pr_ncols; i++)
		if (pr_cols[i].kind == PR_DIRECT && !pr_cols[i].na[0])
			direct = &pr_cols[i];
	for (int r = 0; r < sc->reps; r++)
		if ((!direct || direct->rep[r].ok) && !c->rep[r].ok)
			return 1;
	return 0;
}

void pr_run(const struct pr_scenario *sc)
{
	char fails[2048] = "";
	int64_t t0 = h_now_ms();

	H_CHECK(sc->reps > 0 && sc->reps <= PR_MAX_REPS, "reps %d", sc->reps);
	pr_setup(sc);
	if (sc->parallel)
		pr_run_parallel(sc);
	else
		pr_run_sequential(sc);
	pr_report(sc, h_now_ms() - t0);

	int best = 0;
	const char *best_name = "none";
	for (int i = 0; i < pr_ncols; i++) {
		const struct pr_col *c = &pr_cols[i];
		if ((c->kind == PR_HAPROXY || c->kind == PR_NGINX) && pr_count(c, sc->reps, 0) >= best) {
			best = pr_count(c, sc->reps, 0);
			best_name = c->name;
		}
	}
	for (int i = 0; i < pr_ncols; i++) {
		const struct pr_col *c = &pr_cols[i];
		if (c->kind == PR_DIRECT && !c->na[0] && pr_count(c, sc->reps, 0) != sc->reps)
			pr_cat(fails, sizeof fails,
				 "; direct delivered %d of %d (the scenario itself is unsound)",
				 pr_count(c, sc->reps, 0), sc->reps);
		if (c->kind != PR_SPLICER || c->na[0])
			continue;
		if (pr_count(c, sc->reps, 1))
			pr_cat(fails, sizeof fails, "; %s delivered wrong bytes in %d reps",
				 c->name, pr_count(c, sc->reps, 1));
		else if (sc->sni && pr_short_of_direct(sc, c))
			pr_cat(fails, sizeof fails, "; %s delivered %d/%d, where %s", c->name,
				 pr_count(c, sc->reps, 0), sc->reps,
				 sc->direct_na ? "the scenario defines what a proxy must do"
					       : "direct delivered every rep");
		else if (pr_count(c, sc->reps, 0) < best)
			pr_cat(fails, sizeof fails, "; %s delivered %d/%d, %s %d/%d", c->name,
				 pr_count(c, sc->reps, 0), sc->reps, best_name, best, sc->reps);
	}

	for (int i = 0; i < pr_ncols; i++) {
		struct pr_col *c = &pr_cols[i];
		if (c->kind == PR_SPLICER && c->sp.pid > 0) {
			/* sessions a failing column left open must not hold up its exit */
			pr_backends_stop(c);
			h_proxy_down(&c->sp);
		}
		pr_peer_stop(c);
		pr_backends_stop(c);
	}
	H_CHECK(!fails[0], "%s: splicer delivers less than %s%s", sc->name,
		sc->sni ? "direct (every rep)" : "the best peer", fails);
}
