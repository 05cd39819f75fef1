/* SPDX-License-Identifier: MIT */
/* Socket options of a route, on loopback (issue 24; the cases that need a
 * network of their own are in test_sockets_ns.c):
 *   - source: a pool spreads connections over its addresses (round robin per
 *     worker), a backend's source= wins for its backend, source = client
 *     connects from the client's address;
 *   - every option is on the proxy's sockets: its listener, the client
 *     connection it accepted and its backend connection, read back with
 *     getsockopt on copies of its descriptors (sock_probe.h), the backlog
 *     with ss;
 *   - MPTCP negotiated on both legs; defer_accept holds a silent client;
 *   - check refuses what cannot work, with FILE:LINE;
 *   - a reload applies changed listener options to the kept socket, and
 *     binds a new socket when MPTCP changes;
 *   - the rate limits: the kernel paces the proxy's sends (a generous bound
 *     here; the figures are the bench's), per session and per source, with
 *     the bytes still spliced. */
#define _GNU_SOURCE
#include "harness.h"
#include "sock_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SK_CHUNK (64 * 1024)

#ifndef TCP_IS_MPTCP
#define TCP_IS_MPTCP 43
#endif

/* ---- a backend that remembers who connected --------------------------------- */

struct peers {
	char ip[H_SERVER_MAX_CONNS][INET6_ADDRSTRLEN];
	int port[H_SERVER_MAX_CONNS];
	int mptcp[H_SERVER_MAX_CONNS]; /* TCP_IS_MPTCP on the accepted socket */
};

static void peer_echo(struct h_server *s, int fd, int i, void *arg)
{
	struct peers *p = arg;
	struct sockaddr_storage a;
	socklen_t l = sizeof a;
	int v = 0;
	socklen_t vl = sizeof v;

	if (i < H_SERVER_MAX_CONNS && getpeername(fd, (struct sockaddr *)&a, &l) == 0) {
		struct h_addr h;
		h_addr_from(&h, (struct sockaddr *)&a, l);
		snprintf(p->ip[i], sizeof p->ip[i], "%.*s", (int)(strrchr(h.text, ':') - h.text),
			 h.text);
		p->port[i] = h_addr_port(&h);
		if (getsockopt(fd, IPPROTO_TCP, TCP_IS_MPTCP, &v, &vl) == 0)
			p->mptcp[i] = v;
	}
	h_echo_conn(s, fd, i, NULL);
}

static void proxy_conf(struct h_proxy *p, const char *bin, const char *name, const char *text)
{
	char err[512];
	const char *args[] = { "-c", h_conf_write(name, text), NULL };

	H_CHECK(h_proxy_start(p, bin, args, err, sizeof err) == 0, "proxy with %s:\n%s\n%s", name,
		text, err);
}

static void roundtrips(const struct h_addr *a, int n)
{
	char why[256];

	for (int i = 0; i < n; i++)
		H_CHECK(h_echo_roundtrip(a, 100, (uint64_t)i, 3000, why, sizeof why) == 0,
			"session %d through %s: %s", i, a->text, why);
}

/* source = A B C: each new connection takes the next address (one worker:
 * exactly in turn), so a backend holds a port range per address; a
 * backend's own source= wins. The backend sees the address. */
Test(integ, sockets_source_pool_spreads, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct peers pa, pb;
	struct h_server sa, sb;
	struct h_proxy p;
	struct h_addr second;
	char conf[1024], text[64];
	int port2 = h_free_port(), n[3] = { 0 };

	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, peer_echo, &pa) == 0, "backend a");
	H_CHECK(h_server_start(&sb, "127.0.0.1:0", 64, peer_echo, &pb) == 0, "backend b");
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 1\n"
		 "[route pool]\nlisten = 127.0.0.1:0\nbackend = %s\n"
		 "source = 127.0.0.2 127.0.0.3, 127.0.0.4\n"
		 "[route one]\nlisten = 127.0.0.1:%d\nsource = 127.0.0.2\n"
		 "backend = %s source=127.0.0.9\n",
		 sa.addr.text, port2, sb.addr.text);
	proxy_conf(&p, h_binary(0), "pool.conf", conf);
	roundtrips(&p.addr, 30);
	snprintf(text, sizeof text, "127.0.0.1:%d", port2);
	h_addr_parse(text, &second);
	roundtrips(&second, 5);
	H_CHECK(h_server_wait_done(&sa, 30, 5000) == 0 && h_server_wait_done(&sb, 5, 5000) == 0,
		"backends did not see every session end");
	for (int i = 0; i < 30; i++) {
		int k = !strcmp(pa.ip[i], "127.0.0.2") ? 0 : !strcmp(pa.ip[i], "127.0.0.3") ? 1
			: !strcmp(pa.ip[i], "127.0.0.4") ? 2 : -1;
		H_CHECK(k >= 0, "session %d came from %s, not from the pool", i, pa.ip[i]);
		n[k]++;
	}
	H_CHECK(n[0] == 10 && n[1] == 10 && n[2] == 10,
		"the pool's addresses took %d, %d and %d of 30 sessions; expected 10 each", n[0], n[1],
		n[2]);
	for (int i = 0; i < 5; i++)
		H_CHECK(!strcmp(pb.ip[i], "127.0.0.9"), "backend source=127.0.0.9: session %d came "
			"from %s", i, pb.ip[i]);
	h_proxy_down(&p);
	h_server_stop(&sa);
	h_server_stop(&sb);
}

/* source = client on loopback: the backend sees the client's own address
 * (127.0.0.0/8 is this host's, so no policy routing is needed here; the
 * namespace case shows the real setup). */
Test(integ, sockets_source_client_loopback, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct peers pa;
	struct h_server sa;
	struct h_proxy p;
	char conf[512], buf[4];
	int fd;

	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, peer_echo, &pa) == 0, "backend");
	snprintf(conf, sizeof conf, "[route t]\nlisten = 127.0.0.1:0\nbackend = %s\nsource = client\n",
		 sa.addr.text);
	proxy_conf(&p, h_binary(0), "client.conf", conf);
	fd = h_connect_from(h_addr_port(&p.addr), "127.0.0.7", 3000);
	H_CHECK(h_send_all(fd, "abc", 3, h_now_ms() + 3000) == 0 &&
		h_recv_exact(fd, buf, 3, h_now_ms() + 3000) == 0, "echo through the proxy");
	close(fd);
	H_CHECK(h_server_wait_done(&sa, 1, 5000) == 0, "backend session did not end");
	H_CHECK(!strcmp(pa.ip[0], "127.0.0.7"), "the backend saw %s, not the client's 127.0.0.7",
		pa.ip[0]);
	h_proxy_down(&p);
	h_server_stop(&sa);
}

/* Every option where it belongs, read back from the proxy's own sockets. */
Test(integ, sockets_options_on_the_sockets, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct peers pa;
	struct h_server sa;
	struct h_proxy p;
	char conf[1024], dev[32], buf[4];
	int lport = h_free_port(), fd, l, c, b;

	if (geteuid() != 0)
		cr_skip_test("mark needs CAP_NET_ADMIN, and reading the proxy's sockets ptrace rights");
	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, peer_echo, &pa) == 0, "backend");
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 1\n"
		 "[route o]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "tos = 0x10\nmark = 0x2a\nbacklog = 77\ndefer_accept = 3s\nfastopen = listen\n"
		 "interface = lo\nclient_keepalive = 61s,11s,5\nbackend_keepalive = 31s,7s,3\n"
		 "client_user_timeout = 4s\nbackend_user_timeout = 6s\n"
		 "rate_limit_up = 80mbit\nrate_limit_down = 40mbit\n",
		 lport, sa.addr.text);
	proxy_conf(&p, h_binary(0), "opts.conf", conf);
	fd = h_connect(&p.addr, 3000);
	H_CHECK(fd >= 0 && h_send_all(fd, "abc", 3, h_now_ms() + 3000) == 0 &&
			h_recv_exact(fd, buf, 3, h_now_ms() + 3000) == 0,
		"echo through the proxy");

	l = sp_find(p.pid, lport, 0);
	c = sp_find(p.pid, lport, sp_local_port(fd));
	if (l < 0 && errno == ENOSYS)
		cr_skip_test("no pidfd_getfd in this kernel");
	H_CHECK(l >= 0 && c >= 0, "the proxy's listener (%d) or client connection (%d) not found",
		l, c);
	/* the listener: its own options, and what its connections inherit */
	H_CHECK(sp_int(l, IPPROTO_IP, IP_TOS) == 0x10, "listener IP_TOS");
	H_CHECK(sp_int(l, SOL_SOCKET, SO_MARK) == 0x2a, "listener SO_MARK");
	sp_dev(l, dev, sizeof dev);
	H_CHECK(!strcmp(dev, "lo"), "listener SO_BINDTODEVICE is '%s'", dev);
	H_CHECK(sp_int(l, IPPROTO_TCP, TCP_FASTOPEN) == 77, "listener TCP_FASTOPEN queue %d",
		sp_int(l, IPPROTO_TCP, TCP_FASTOPEN));
	H_CHECK(sp_int(l, IPPROTO_TCP, TCP_DEFER_ACCEPT) >= 3, "listener TCP_DEFER_ACCEPT %d",
		sp_int(l, IPPROTO_TCP, TCP_DEFER_ACCEPT));
	H_CHECK(sp_backlog(lport) == 77, "listener backlog (ss Send-Q) %d", sp_backlog(lport));
	/* the client connection */
	H_CHECK(sp_int(c, IPPROTO_IP, IP_TOS) == 0x10 && sp_int(c, SOL_SOCKET, SO_MARK) == 0x2a,
		"client connection tos/mark");
	H_CHECK(sp_int(c, SOL_SOCKET, SO_KEEPALIVE) == 1 && sp_int(c, IPPROTO_TCP, TCP_KEEPIDLE) == 61 &&
			sp_int(c, IPPROTO_TCP, TCP_KEEPINTVL) == 11 &&
			sp_int(c, IPPROTO_TCP, TCP_KEEPCNT) == 5,
		"client keepalive %d %d/%d/%d", sp_int(c, SOL_SOCKET, SO_KEEPALIVE),
		sp_int(c, IPPROTO_TCP, TCP_KEEPIDLE), sp_int(c, IPPROTO_TCP, TCP_KEEPINTVL),
		sp_int(c, IPPROTO_TCP, TCP_KEEPCNT));
	H_CHECK(sp_int(c, IPPROTO_TCP, TCP_USER_TIMEOUT) == 4000, "client TCP_USER_TIMEOUT %d",
		sp_int(c, IPPROTO_TCP, TCP_USER_TIMEOUT));
	H_CHECK(sp_pacing(c) == 5000000, "client SO_MAX_PACING_RATE %lu (40mbit = 5000000 B/s)",
		sp_pacing(c));
	/* the backend connection: found by its peer, the backend */
	b = sp_find(p.pid, pa.port[0], h_addr_port(&sa.addr));
	H_CHECK(b >= 0, "the proxy's backend connection (local port %d) not found", pa.port[0]);
	H_CHECK(sp_int(b, IPPROTO_IP, IP_TOS) == 0x10 && sp_int(b, SOL_SOCKET, SO_MARK) == 0x2a,
		"backend connection tos/mark");
	sp_dev(b, dev, sizeof dev);
	H_CHECK(!strcmp(dev, "lo"), "backend connection SO_BINDTODEVICE is '%s'", dev);
	H_CHECK(sp_int(b, IPPROTO_TCP, TCP_KEEPIDLE) == 31 && sp_int(b, IPPROTO_TCP, TCP_KEEPINTVL) == 7 &&
			sp_int(b, IPPROTO_TCP, TCP_KEEPCNT) == 3 &&
			sp_int(b, SOL_SOCKET, SO_KEEPALIVE) == 1,
		"backend keepalive");
	H_CHECK(sp_int(b, IPPROTO_TCP, TCP_USER_TIMEOUT) == 6000, "backend TCP_USER_TIMEOUT %d",
		sp_int(b, IPPROTO_TCP, TCP_USER_TIMEOUT));
	H_CHECK(sp_pacing(b) == 10000000, "backend SO_MAX_PACING_RATE %lu (80mbit)", sp_pacing(b));
	close(l), close(c), close(b), close(fd);
	h_proxy_down(&p);
	h_server_stop(&sa);
}

/* mptcp = yes: a client that speaks MPTCP gets it from the proxy, and the
 * proxy speaks it to a backend that does (TCP_IS_MPTCP on both far ends). */
Test(integ, sockets_mptcp_both_legs, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct peers pa;
	struct h_server sa;
	struct h_proxy p;
	char conf[512], buf[4];
	int fd, v = 0, lfd;
	socklen_t vl = sizeof v;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof sin;

	if (!sp_mptcp())
		cr_skip_test("no MPTCP here (net.mptcp.enabled)");
	/* an MPTCP backend: the harness's server on a socket made MPTCP first */
	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, peer_echo, &pa) == 0, "backend");
	lfd = socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	H_CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(lfd, 8) == 0 &&
			getsockname(lfd, (struct sockaddr *)&sin, &sl) == 0,
		"MPTCP backend listener: %s", strerror(errno));
	snprintf(conf, sizeof conf, "[route m]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:%d\nmptcp = yes\n",
		 ntohs(sin.sin_port));
	proxy_conf(&p, h_binary(0), "mptcp.conf", conf);
	fd = socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP);
	h_set_timeouts(fd, 3000);
	H_CHECK(connect(fd, (struct sockaddr *)&p.addr.ss, p.addr.len) == 0, "MPTCP connect: %s",
		strerror(errno));
	H_CHECK(send(fd, "abc", 3, 0) == 3, "send");
	int bfd = accept(lfd, NULL, NULL);
	H_CHECK(bfd >= 0 && recv(bfd, buf, 3, MSG_WAITALL) == 3 && send(bfd, "xyz", 3, 0) == 3 &&
			recv(fd, buf, 3, MSG_WAITALL) == 3 && !memcmp(buf, "xyz", 3),
		"bytes through the proxy");
	H_CHECK(getsockopt(fd, IPPROTO_TCP, TCP_IS_MPTCP, &v, &vl) == 0 && v == 1,
		"client leg: TCP_IS_MPTCP %d (the proxy's listener does not speak MPTCP)", v);
	v = 0;
	H_CHECK(getsockopt(bfd, IPPROTO_TCP, TCP_IS_MPTCP, &v, &vl) == 0 && v == 1,
		"backend leg: TCP_IS_MPTCP %d (the proxy connected with plain TCP)", v);
	close(fd), close(bfd), close(lfd);
	h_proxy_down(&p);
	h_server_stop(&sa);
}

/* defer_accept: a client that connects and says nothing costs no backend
 * connection; its first byte brings one. */
Test(integ, sockets_defer_accept_holds_silent_clients, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct peers pa;
	struct h_server sa;
	struct h_proxy p;
	char conf[512], buf[4];
	int fd;

	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, peer_echo, &pa) == 0, "backend");
	snprintf(conf, sizeof conf, "[route d]\nlisten = 127.0.0.1:0\nbackend = %s\ndefer_accept = 5s\n",
		 sa.addr.text);
	proxy_conf(&p, h_binary(0), "defer.conf", conf);
	fd = h_connect(&p.addr, 3000);
	H_CHECK(fd >= 0, "connect");
	h_sleep_ms(700);
	H_CHECK(sa.accepted == 0, "a silent client made a backend connection (%d)", (int)sa.accepted);
	H_CHECK(h_send_all(fd, "abc", 3, h_now_ms() + 3000) == 0 &&
			h_recv_exact(fd, buf, 3, h_now_ms() + 3000) == 0,
		"its first bytes went nowhere");
	H_CHECK(sa.accepted == 1, "backend connections %d", (int)sa.accepted);
	close(fd);
	h_proxy_down(&p);
	h_server_stop(&sa);
}

/* check: FILE:LINE for each thing that cannot work. */
Test(integ, sockets_check_refuses, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static const struct {
		const char *conf, *want;
	} bad[] = {
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nclient_keepalive = 60,10,5\n",
		  ":4: client_keepalive: idle '60' needs a unit" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nrate_limit_down = 10mbps\n",
		  ":4: rate_limit_down: invalid value '10mbps'" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nsource = 10.0.0.1:80\n",
		  ":4: source: '10.0.0.1:80' is not a numeric IP address" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2 source=10.1.1.1:80\n",
		  ":3: backend 127.0.0.1:2: '10.1.1.1:80' is not a numeric IP address" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = [::1]:2\nsource = 127.0.0.2\n",
		  ":1: route 'a': backend [::1]:2 is IPv6 and source has no IPv6 address" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nsource = 192.0.2.77\n",
		  ":1: route 'a': source 192.0.2.77 is not an address of this host" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nmptcp = backend\n"
		  "backend_user_timeout = 5s\n",
		  ":1: route 'a': mptcp on backend connections cannot take backend_user_timeout" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\ninterface = nosuchdev0\n",
		  ":1: route 'a': interface nosuchdev0: no such device here" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nsni = a.example\n"
		  "[route b]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:3\nbacklog = 100\n",
		  ":6: listen 127.0.0.1:1: route 'b' and route 'a' (line 2) share this address but not "
		  "its backlog" },
		{ "[route a]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\nmax_session_jitter = 150%\n",
		  ":4: max_session_jitter: invalid value '150%'" },
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char name[32], *out = NULL, *err = NULL;
		snprintf(name, sizeof name, "bad%zu.conf", i);
		const char *path = h_conf_write(name, bad[i].conf);
		const char *args[] = { "check", "-c", path, NULL };
		int rc = h_run_capture(h_binary(0), args, 10000, &out, &err);
		H_CHECK(rc != 0 && err && strstr(err, bad[i].want),
			"check of:\n%s\nexited %d and said:\n%s\nexpected a line with '%s'", bad[i].conf,
			rc, err ? err : "(nothing)", bad[i].want);
		free(out);
		free(err);
	}
}

/* A reload applies changed listener options to the socket it keeps (the
 * same socket: its inode), and binds a new one when mptcp changes (a
 * socket's protocol is for good). */
Test(integ, sockets_reload_listener_options, .init = h_init, .fini = h_fini, .timeout = 60)
{
	struct h_server sa;
	struct h_proxy p;
	struct stat st0, st1;
	char conf[512];
	int lport = h_free_port(), l;

	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "backend");
	snprintf(conf, sizeof conf, "[global]\nworkers = 1\n[route r]\nlisten = 127.0.0.1:%d\n"
		 "backend = %s\nbacklog = 50\n", lport, sa.addr.text);
	proxy_conf(&p, h_binary(0), "reload.conf", conf);
	H_CHECK(sp_backlog(lport) == 50, "backlog at start: %d", sp_backlog(lport));
	l = sp_find(p.pid, lport, 0);
	if (l < 0 && errno == ENOSYS)
		cr_skip_test("no pidfd_getfd in this kernel");
	H_CHECK(l >= 0 && fstat(l, &st0) == 0, "the listener");
	close(l);
	snprintf(conf, sizeof conf, "[global]\nworkers = 1\n[route r]\nlisten = 127.0.0.1:%d\n"
		 "backend = %s\nbacklog = 90\ntos = 0x20\n", lport, sa.addr.text);
	h_conf_write("reload.conf", conf);
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
	for (int64_t end = h_now_ms() + 5000;
	     h_log_lines(&p, "SIGHUP: reloaded", NULL) < 1 && h_now_ms() < end;)
		h_sleep_ms(20);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", "listeners kept 1", NULL) == 1,
		"reload 1 did not keep the listener");
	l = sp_find(p.pid, lport, 0);
	H_CHECK(l >= 0 && fstat(l, &st1) == 0 && st1.st_ino == st0.st_ino,
		"the listener was replaced by a backlog change");
	H_CHECK(sp_backlog(lport) == 90 && sp_int(l, IPPROTO_IP, IP_TOS) == 0x20,
		"the kept listener has backlog %d and tos %#x, not the new 90 and 0x20",
		sp_backlog(lport), sp_int(l, IPPROTO_IP, IP_TOS));
	close(l);
	roundtrips(&p.addr, 2);
	if (sp_mptcp()) {
		snprintf(conf, sizeof conf, "[global]\nworkers = 1\n[route r]\nlisten = 127.0.0.1:%d\n"
			 "backend = %s\nbacklog = 90\nmptcp = listen\n", lport, sa.addr.text);
		h_conf_write("reload.conf", conf);
		H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP");
		for (int64_t end = h_now_ms() + 5000;
		     h_log_lines(&p, "SIGHUP: reloaded", NULL) < 2 && h_now_ms() < end;)
			h_sleep_ms(20);
		H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", "opened 1, closed 1", NULL) == 1,
			"reload 2 (mptcp) did not bind a new listener");
		l = sp_find(p.pid, lport, 0);
		H_CHECK(l >= 0 && sp_int(l, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_MPTCP,
			"the listener after mptcp = listen is not MPTCP");
		close(l);
		roundtrips(&p.addr, 2);
	}
	h_proxy_down(&p);
	h_server_stop(&sa);
}

/* ---- rate limits ----------------------------------------------------------- */

/* A backend that sends `len` bytes and then waits for the client's end. */
struct sender {
	uint64_t len;
};

static void send_conn(struct h_server *s, int fd, int i, void *arg)
{
	const struct sender *sd = arg;
	char *buf = malloc(SK_CHUNK), c;

	(void)s, (void)i;
	for (uint64_t sent = 0; buf && sent < sd->len;) {
		size_t n = sd->len - sent < SK_CHUNK ? (size_t)(sd->len - sent) : SK_CHUNK;
		h_gen(7, sent, buf, n);
		if (h_send_all(fd, buf, n, h_now_ms() + 30000))
			break;
		sent += n;
	}
	h_set_timeouts(fd, 30000);
	(void)!recv(fd, &c, 1, 0);
	free(buf);
}

struct reader {
	const struct h_addr *a;
	uint64_t len;
	double secs;
	int ok;
	_Atomic uint64_t got; /* so far */
	_Atomic int stop;     /* give up now */
	uint64_t mark;        /* bytes after which the steady rate is measured */
	double steady;        /* bytes per second from mark to the end */
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	char *buf = malloc(SK_CHUNK);
	int fd = h_connect(r->a, 3000);
	int64_t t0 = h_now_us(), end = h_now_ms() + 30000, tm = 0;
	uint64_t got = 0, gm = 0;

	h_set_timeouts(fd, 200);
	while (buf && fd >= 0 && got < r->len && h_now_ms() < end && !r->stop) {
		ssize_t n = recv(fd, buf, SK_CHUNK, 0);
		if (n > 0) {
			r->got = got += (uint64_t)n;
			if (got >= r->mark && !tm)
				tm = h_now_us(), gm = got;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	r->secs = (double)(h_now_us() - t0) / 1e6;
	r->ok = got == r->len;
	if (tm && h_now_us() > tm)
		r->steady = (double)(got - gm) * 1e6 / (double)(h_now_us() - tm);
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* rate_limit_down: the proxy's sends to the client are paced by the kernel;
 * the splice engine still moves the bytes. 6 MB at 40 mbit/s take 1.2 s.
 * The rate is measured after the first MB: TCP's initial window (10
 * segments, 640 KB on loopback's 64 KiB MTU) leaves unpaced. The bound is
 * wide (a loaded machine is slower, never faster). */
static void case_rate_down(const char *bin, const char *engine)
{
	static struct sender sd = { 6000000 };
	struct h_server sa;
	struct h_proxy p;
	struct h_addr stats;
	struct reader r = { .len = 6000000, .mark = 1000000 };
	char conf[512], key[128];

	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, send_conn, &sd) == 0, "backend");
	snprintf(conf, sizeof conf, "[global]\nstats = 127.0.0.1:0\n[route r]\nlisten = 127.0.0.1:0\n"
		 "backend = %s\nengine = %s\nrate_limit_down = 40mbit\n", sa.addr.text, engine);
	proxy_conf(&p, bin, "rate.conf", conf);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats address");
	r.a = &p.addr;
	read_all(&r);
	H_CHECK(r.ok, "the client did not get its 6 MB");
	double mbit = r.steady * 8 / 1e6;
	fprintf(stderr, "[sockets] %s: 6 MB under rate_limit_down = 40mbit: %.2f mbit/s after the "
		"first MB, %.2f in all\n", engine, mbit, (double)r.len * 8 / r.secs / 1e6);
	H_CHECK(mbit < 40 * 1.1 && mbit > 40 * 0.5,
		"6 MB through rate_limit_down = 40mbit came at %.1f mbit/s", mbit);
	snprintf(key, sizeof key, "splicer_engine_bytes_total{engine=\"%s\"}",
		 strcmp(engine, "auto") ? engine : "splice");
	H_CHECK(h_metric(&stats, key) > 5000000, "%s is %lld: the bytes were not %s", key,
		h_metric(&stats, key), strcmp(engine, "auto") ? engine : "spliced");
	h_proxy_down(&p);
	h_server_stop(&sa);
}

Test(integ, sockets_rate_limit_down_splice, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_rate_down(h_binary(0), "splice");
}

Test(integ, sockets_rate_limit_down_auto, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_rate_down(h_binary(0), "auto");
}

/* rate_limit_down = RATE/source: two sessions of one client address share
 * the rate (each gets half; a session looks at its share again every
 * second, so the rate is measured from 1.5 s to 3 s). Without the share
 * they would move twice as much. */
Test(integ, sockets_rate_limit_per_source_share, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct sender sd = { 40000000 };
	struct h_server sa;
	struct h_proxy p;
	static struct reader r[2];
	pthread_t t[2];
	char conf[512];
	uint64_t at1 = 0, at2 = 0;

	H_CHECK(h_server_start(&sa, "127.0.0.1:0", 64, send_conn, &sd) == 0, "backend");
	snprintf(conf, sizeof conf, "[route r]\nlisten = 127.0.0.1:0\nbackend = %s\n"
		 "engine = splice\nrate_limit_down = 32mbit/source\n", sa.addr.text);
	proxy_conf(&p, h_binary(0), "share.conf", conf);
	int64_t t0 = h_now_ms();
	for (int i = 0; i < 2; i++) {
		r[i].a = &p.addr;
		r[i].len = sd.len;
		pthread_create(&t[i], NULL, read_all, &r[i]);
	}
	h_sleep_ms((int)(t0 + 1500 - h_now_ms()));
	at1 = r[0].got + r[1].got;
	h_sleep_ms((int)(t0 + 3000 - h_now_ms()));
	at2 = r[0].got + r[1].got;
	for (int i = 0; i < 2; i++) {
		r[i].stop = 1;
		pthread_join(t[i], NULL);
	}
	double total = (double)(at2 - at1) * 8 / 1.5 / 1e6;
	fprintf(stderr, "[sockets] two sessions of one source under 32mbit/source: %.2f mbit/s "
		"together\n", total);
	H_CHECK(r[0].got && r[1].got && total < 32 * 1.15 && total > 32 * 0.45,
		"two sessions of one source under 32mbit/source moved %.1f mbit/s together "
		"(%llu and %llu bytes in all)", total, (unsigned long long)r[0].got,
		(unsigned long long)r[1].got);
	h_proxy_down(&p);
	h_server_stop(&sa);
}
