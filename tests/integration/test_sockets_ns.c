/* SPDX-License-Identifier: MIT */
/* Socket options that only a network of their own can show (issue 24), in
 * the fault matrix's namespaces (netns.h: client 198.18.0.1 -- 198.18.0.2
 * proxy 198.18.1.2 -- 198.18.1.1 sink):
 *   - a dead peer (iptables DROP in its namespace) ends the session within
 *     the bound keepalive or the user timeout sets, and
 *     splicer_dead_peers_total says which side;
 *   - transparent mode (source = client) with the policy routing
 *     doc/operations.md gives: the backend sees the client's address;
 *   - mark and tos are on the packets (iptables counts them);
 *   - interface binds the listener and the backend connections to a device;
 *   - Fast Open on both legs (the kernels' TFO counters). */
#define _GNU_SOURCE
#include "harness.h"
#include "netns.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void ns_fini(void)
{
	h_fini();
	net_down();
}

struct nsp {
	struct h_proxy p;
	struct h_addr stats;
};

static void ns_proxy(struct nsp *x, const char *name, const char *text)
{
	char err[512];
	const char *args[] = { "-c", h_conf_write(name, text), NULL };

	H_CHECK(h_proxy_start(&x->p, h_binary(0), args, err, sizeof err) == 0, "proxy:\n%s\n%s",
		text, err);
	if (strstr(text, "stats"))
		H_CHECK(h_stats_addr(&x->p, &x->stats) == 0, "stats address");
}

static int client_connect(const struct h_addr *a)
{
	enter(LINK_CLIENT);
	int fd = h_connect(a, 3000), e = errno;
	home();
	H_CHECK(fd >= 0, "connect to %s from the client: %s", a->text, strerror(e));
	return fd;
}

static void server_in(enum link_end e, struct h_server *s, const char *where, h_conn_fn fn,
		      void *arg)
{
	enter(e);
	int rc = h_server_start(s, where, 16, fn, arg);
	home();
	H_CHECK(rc == 0, "server at %s: %s", where, strerror(-rc));
}

static void echo_once(int fd)
{
	char b[3];

	H_CHECK(h_send_all(fd, "abc", 3, h_now_ms() + 3000) == 0 &&
			h_recv_exact(fd, b, 3, h_now_ms() + 3000) == 0 && !memcmp(b, "abc", 3),
		"echo through the proxy");
}

/* Waits for fd's end (EOF or an error); returns ms from t0, or -1. */
static int64_t wait_end(int fd, int64_t t0, int timeout_ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	char buf[65536];

	for (int64_t end = h_now_ms() + timeout_ms; h_now_ms() < end;) {
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return h_now_ms() - t0;
	}
	return -1;
}

static long long metric_wait(struct nsp *x, const char *name, long long want, int ms)
{
	long long v = -1;

	for (int64_t end = h_now_ms() + ms; (v = h_metric(&x->stats, name)) != want && h_now_ms() < end;)
		h_sleep_ms(50);
	return v;
}

/* backend_keepalive = 1s,1s,2: a backend whose packets are dropped is found
 * dead 1 + 1 x 2 = 3 s after the last byte (the proxy's probes go
 * unanswered), not at idle_timeout (60 s). */
Test(integ, sockets_ns_backend_keepalive_dead_peer, .init = h_init, .fini = ns_fini, .timeout = 90)
{
	struct h_server sa;
	struct nsp x;
	int64_t t0, at;
	int fd;

	net_up();
	server_in(LINK_SINK, &sa, "198.18.1.1:0", h_echo_conn, NULL);
	char conf[512];
	snprintf(conf, sizeof conf, "[global]\nstats = 127.0.0.1:0\n[route k]\nlisten = 198.18.0.2:0\n"
		 "backend = %s\nidle_timeout = 60s\nbackend_keepalive = 1s,1s,2\n", sa.addr.text);
	ns_proxy(&x, "ka.conf", conf);
	fd = client_connect(&x.p.addr);
	echo_once(fd);
	ns_sh(LINK_SINK, "iptables -A INPUT -p tcp -j DROP");
	ns_sh(LINK_SINK, "iptables -A OUTPUT -p tcp -j DROP");
	t0 = h_now_ms();
	at = wait_end(fd, t0, 15000);
	fprintf(stderr, "[sockets-ns] a dropped backend with keepalive 1s,1s,2: session ended after "
		"%lld ms\n", (long long)at);
	H_CHECK(at >= 0 && at < 7000, "the session with a dead backend ended after %lld ms (keepalive "
		"1s,1s,2 bounds it near 3 s)", (long long)at);
	H_CHECK(ipt_hits(LINK_SINK, "INPUT", "DROP") >= 2, "no keepalive probe reached the backend's "
		"namespace (%llu dropped)", ipt_hits(LINK_SINK, "INPUT", "DROP"));
	H_CHECK(metric_wait(&x, "splicer_dead_peers_total{side=\"backend\"}", 1, 3000) == 1,
		"splicer_dead_peers_total{side=\"backend\"} is %lld",
		h_metric(&x.stats, "splicer_dead_peers_total{side=\"backend\"}"));
	close(fd);
	h_proxy_down(&x.p);
	h_server_stop(&sa);
}

/* A backend that sends without end. */
static void flood_conn(struct h_server *s, int fd, int i, void *arg)
{
	static char buf[65536];

	(void)s, (void)i, (void)arg;
	h_set_timeouts(fd, 200);
	for (int64_t end = h_now_ms() + 30000; h_now_ms() < end;)
		if (send(fd, buf, sizeof buf, MSG_NOSIGNAL) < 0 && errno != EAGAIN && errno != EINTR)
			break;
}

/* client_user_timeout = 2s: a client that vanished (its packets dropped)
 * while the backend sends is found dead once the proxy's bytes go 2 s
 * unacknowledged (checked at the retransmissions: about 3 s), not after the
 * kernel's 15 minutes of retries. */
Test(integ, sockets_ns_client_user_timeout_dead_peer, .init = h_init, .fini = ns_fini,
     .timeout = 90)
{
	struct h_server sa;
	struct nsp x;
	char conf[512], buf[65536];
	int fd;

	net_up();
	server_in(LINK_SINK, &sa, "198.18.1.1:0", flood_conn, NULL);
	snprintf(conf, sizeof conf, "[global]\nstats = 127.0.0.1:0\n[route u]\nlisten = 198.18.0.2:0\n"
		 "backend = %s\nidle_timeout = 60s\nclient_user_timeout = 2s\n", sa.addr.text);
	ns_proxy(&x, "ut.conf", conf);
	fd = client_connect(&x.p.addr);
	H_CHECK(h_recv_exact(fd, buf, sizeof buf, h_now_ms() + 3000) == 0, "the flood through the proxy");
	ns_sh(LINK_CLIENT, "iptables -A INPUT -p tcp -j DROP");
	ns_sh(LINK_CLIENT, "iptables -A OUTPUT -p tcp -j DROP");
	int64_t t0 = h_now_ms();
	long long v = metric_wait(&x, "splicer_dead_peers_total{side=\"client\"}", 1, 12000);
	fprintf(stderr, "[sockets-ns] a dropped client with user timeout 2s: counted after %lld ms\n",
		(long long)(h_now_ms() - t0));
	H_CHECK(v == 1 && h_now_ms() - t0 < 8000,
		"splicer_dead_peers_total{side=\"client\"} is %lld after %lld ms (user timeout 2s)", v,
		(long long)(h_now_ms() - t0));
	H_CHECK(metric_wait(&x, "splicer_route_sessions_active{route=\"u\"}", 0, 3000) == 0,
		"the session is still open");
	close(fd);
	h_proxy_down(&x.p);
	h_server_stop(&sa);
}

/* A backend that answers with the address it sees, then echoes. */
static void whois_conn(struct h_server *s, int fd, int i, void *arg)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof a;
	struct h_addr h;
	char line[200];

	(void)arg;
	if (getpeername(fd, (struct sockaddr *)&a, &l) == 0) {
		h_addr_from(&h, (struct sockaddr *)&a, l);
		snprintf(line, sizeof line, "%s\n", h.text);
		h_send_all(fd, line, strlen(line), h_now_ms() + 3000);
	}
	h_echo_conn(s, fd, i, NULL);
}

/* The peer address a whois backend reports through fd. */
static void whois_read(int fd, char *out, size_t len)
{
	size_t n = 0;

	while (n + 1 < len && h_recv_exact(fd, out + n, 1, h_now_ms() + 3000) == 0 && out[n] != '\n')
		n++;
	out[n] = '\0';
}

/* source = client: the backend sees the client's address. The return
 * path: the sink routes the client's network through the proxy, and the
 * proxy's namespace delivers the answers to its transparent sockets
 * (doc/operations.md: the fwmark of -m socket, a rule, a local route). */
Test(integ, sockets_ns_transparent_source_client, .init = h_init, .fini = ns_fini, .timeout = 90)
{
	struct h_server sa;
	struct nsp x;
	char conf[512], who[160];
	int fd;

	net_up();
	ns_sh(LINK_PROXY, "iptables -t mangle -A PREROUTING -p tcp -m socket --transparent "
			  "-j MARK --set-mark 1");
	ns_sh(LINK_PROXY, "ip rule add fwmark 1 lookup 100");
	ns_sh(LINK_PROXY, "ip route add local 0.0.0.0/0 dev lo table 100");
	server_in(LINK_SINK, &sa, "198.18.1.1:0", whois_conn, NULL);
	snprintf(conf, sizeof conf, "[route t]\nlisten = 198.18.0.2:0\nbackend = %s\nsource = client\n",
		 sa.addr.text);
	ns_proxy(&x, "tp.conf", conf);
	fd = client_connect(&x.p.addr);
	whois_read(fd, who, sizeof who);
	H_CHECK(!strncmp(who, "198.18.0.1:", 11), "the backend saw '%s', not the client 198.18.0.1",
		who);
	echo_once(fd);
	H_CHECK(ipt_hits(LINK_PROXY, "PREROUTING -t mangle", "MARK") > 0,
		"no answer took the policy route");
	close(fd);
	h_proxy_down(&x.p);
	h_server_stop(&sa);
}

/* mark and tos on the packets both ways: the proxy namespace's iptables
 * counts the marked packets with that TOS to the client and to the backend. */
Test(integ, sockets_ns_mark_and_tos_on_the_wire, .init = h_init, .fini = ns_fini, .timeout = 90)
{
	struct h_server sa;
	struct nsp x;
	char conf[512];
	int fd, lport = h_free_port();

	net_up();
	server_in(LINK_SINK, &sa, "198.18.1.1:0", h_echo_conn, NULL);
	ns_sh(LINK_PROXY, "iptables -N TOCLIENT");
	ns_sh(LINK_PROXY, "iptables -N TOBACKEND");
	ns_sh(LINK_PROXY, "iptables -A OUTPUT -p tcp --sport %d -m mark --mark 0x2a -m tos --tos 0x10 "
			  "-j TOCLIENT", lport);
	ns_sh(LINK_PROXY, "iptables -A OUTPUT -p tcp --dport %d -m mark --mark 0x2a -m tos --tos 0x10 "
			  "-j TOBACKEND", h_addr_port(&sa.addr));
	snprintf(conf, sizeof conf, "[route m]\nlisten = 198.18.0.2:%d\nbackend = %s\nmark = 42\n"
		 "tos = 0x10\n", lport, sa.addr.text);
	ns_proxy(&x, "mark.conf", conf);
	fd = client_connect(&x.p.addr);
	echo_once(fd);
	close(fd);
	H_CHECK(ipt_hits(LINK_PROXY, "OUTPUT", "TOCLIENT") > 0, "no packet to the client had mark "
		"0x2a and tos 0x10");
	H_CHECK(ipt_hits(LINK_PROXY, "OUTPUT", "TOBACKEND") > 0, "no packet to the backend had "
		"mark 0x2a and tos 0x10");
	h_proxy_down(&x.p);
	h_server_stop(&sa);
}

/* The device of an address of the proxy's namespace ("sb123ap0"). */
static void dev_of(const char *ip, char *out, size_t len)
{
	char cmd[200];
	FILE *f;

	snprintf(cmd, sizeof cmd, "ip -n %s -o -4 addr show to %s", ns_of(LINK_PROXY), ip);
	f = popen(cmd, "r");
	H_CHECK(f && fscanf(f, "%*d: %31s", out) == 1, "no device has %s", ip);
	pclose(f);
	(void)len;
}

/* interface = the client-facing device: the listener takes its clients only
 * from it (the sink, whose packets come in through the other device, is
 * refused), and backend connections leave through it: a backend reached
 * through it answers, one behind the other device is unreachable. */
Test(integ, sockets_ns_interface_binds_both_sides, .init = h_init, .fini = ns_fini, .timeout = 90)
{
	struct h_server near, far;
	struct nsp x;
	struct h_addr second;
	char conf[768], dev[32], text[64];
	int fd, port2 = h_free_port();

	net_up();
	dev_of("198.18.0.2", dev, sizeof dev);
	server_in(LINK_CLIENT, &near, "198.18.0.1:0", h_echo_conn, NULL);
	server_in(LINK_SINK, &far, "198.18.1.1:0", h_echo_conn, NULL);
	snprintf(conf, sizeof conf, "[global]\nstats = 127.0.0.1:0\n"
		 "[route near]\nlisten = 198.18.0.2:0\nbackend = %s\ninterface = %s\n"
		 "[route far]\nlisten = 198.18.0.2:%d\nbackend = %s\ninterface = %s\n",
		 near.addr.text, dev, port2, far.addr.text, dev);
	ns_proxy(&x, "dev.conf", conf);
	fd = client_connect(&x.p.addr);
	echo_once(fd);
	close(fd);
	enter(LINK_SINK); /* the same address, reached through the other device */
	fd = h_connect(&x.p.addr, 2000);
	home();
	H_CHECK(fd < 0, "a connection through the sink's device reached a listener bound to %s", dev);
	snprintf(text, sizeof text, "198.18.0.2:%d", port2);
	h_addr_parse(text, &second);
	fd = client_connect(&second);
	H_CHECK(wait_end(fd, h_now_ms(), 5000) >= 0, "the session to a backend behind the other "
		"device did not end");
	close(fd);
	H_CHECK(h_metric(&x.stats, "splicer_route_no_backend_total{route=\"far\"}") == 1,
		"the backend behind the other device was reached through %s", dev);
	h_proxy_down(&x.p);
	h_server_stop(&near);
	h_server_stop(&far);
}

static unsigned long long nstat(enum link_end e, const char *name)
{
	char cmd[256], line[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(cmd, sizeof cmd, "ip netns exec %s nstat -asz %s 2>/dev/null", ns_of(e), name);
	if (!(f = popen(cmd, "r")))
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, name, strlen(name)))
			sscanf(line + strlen(name), "%llu", &v);
	pclose(f);
	return v;
}

/* fastopen = yes with defer_accept: a client's data rides in its SYN to
 * the proxy, and the proxy's backend SYN carries it on (once each side has
 * its cookie: the first connection fetches them). */
Test(integ, sockets_ns_fastopen_both_legs, .init = h_init, .fini = ns_fini, .timeout = 90)
{
	struct h_server sa;
	struct nsp x;
	char conf[512], b[5];
	int q = 16;

	net_up();
	ns_sh(LINK_PROXY, "sysctl -qw net.ipv4.tcp_fastopen=3");
	ns_sh(LINK_SINK, "sysctl -qw net.ipv4.tcp_fastopen=3");
	server_in(LINK_SINK, &sa, "198.18.1.1:0", h_echo_conn, NULL);
	H_CHECK(setsockopt(sa.lfd, IPPROTO_TCP, TCP_FASTOPEN, &q, sizeof q) == 0, "backend TFO");
	snprintf(conf, sizeof conf, "[route f]\nlisten = 198.18.0.2:0\nbackend = %s\nfastopen = yes\n"
		 "defer_accept = 2s\n", sa.addr.text);
	ns_proxy(&x, "tfo.conf", conf);
	for (int i = 0; i < 3; i++) {
		enter(LINK_CLIENT);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		home();
		h_set_timeouts(fd, 3000);
		H_CHECK(sendto(fd, "hello", 5, MSG_FASTOPEN, (struct sockaddr *)&x.p.addr.ss,
			       x.p.addr.len) == 5, "sendto(MSG_FASTOPEN): %s", strerror(errno));
		H_CHECK(h_recv_exact(fd, b, 5, h_now_ms() + 3000) == 0 && !memcmp(b, "hello", 5),
			"echo %d", i);
		close(fd);
	}
	unsigned long long in_proxy = nstat(LINK_PROXY, "TcpExtTCPFastOpenPassive");
	unsigned long long out_proxy = nstat(LINK_PROXY, "TcpExtTCPFastOpenActive");
	unsigned long long in_sink = nstat(LINK_SINK, "TcpExtTCPFastOpenPassive");
	fprintf(stderr, "[sockets-ns] fastopen: proxy took %llu TFO SYNs, sent %llu; the backend "
		"took %llu\n", in_proxy, out_proxy, in_sink);
	H_CHECK(in_proxy >= 1, "the proxy's listener took no data in a SYN");
	H_CHECK(out_proxy >= 1 && in_sink >= 1, "the proxy's backend connections carried no data "
		"in their SYN (sent %llu, the backend took %llu)", out_proxy, in_sink);
	h_proxy_down(&x.p);
	h_server_stop(&sa);
}
