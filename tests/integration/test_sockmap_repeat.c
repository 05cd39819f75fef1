/* SPDX-License-Identifier: MIT */
/* The sockmap engine and a retransmission that overlaps bytes the proxy
 * already received. The kernel queues such a segment as it came (the overlap
 * included) and recv() skips the overlap, but the verdict is handed whole
 * skbs: without bpf/sockmap.bpf.c's cut the overlap went to the backend a
 * second time (seen under load as 85-130 KB repeated in a 256 MiB stream).
 *
 * A real retransmission is made on demand with TCP_REPAIR, the way CRIU
 * moves a connection: the client's socket is frozen and closed silently,
 * and a new one takes over its connection (same addresses, sequence numbers,
 * options, window and timestamp clock) with its send sequence moved back by
 * OVER bytes, then sends those OVER bytes again followed by NEW ones. The
 * proxy's socket receives one segment that starts OVER bytes before what it
 * has. Twice: the first overlap is the first segment after the hand-off (the
 * program starts from the socket's copied_seq), the second one comes after
 * bytes the program counted itself. The backend must get every byte once,
 * in order, and the proxy must say it cut the repeats. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#define REP_SEED  0x5EC0DDA7Aull
#define REP_FIRST 20000u /* sent before the hand-off settles */
#define REP_OVER  10000u /* resent: more than one bpf_skb_adjust_room step (4095) */
#define REP_NEW   5000u  /* new bytes in the same segment */
#define REP_ROUNDS 2
#define REP_TOTAL (REP_FIRST + REP_ROUNDS * REP_NEW)

static struct h_xfer rep_rx;

static void rep_sink(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	(void)arg;
	h_xfer_init(&rep_rx, fd, REP_SEED, 0, h_now_ms() + H_T(30000));
	rep_rx.verify = 1;
	h_xfer_recv(&rep_rx);
}

/* What a connection needs to go on in another socket. */
struct rep_conn {
	struct sockaddr_storage local;
	socklen_t local_len;
	uint32_t snd_seq, rcv_seq, tsval;
	struct tcp_repair_window win;
	struct tcp_info info;
	int mss;
};

static int repair_on(int fd, int on)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &on, sizeof on);
}

static int queue_seq(int fd, int queue, uint32_t *seq, int set)
{
	socklen_t len = sizeof *seq;
	if (setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &queue, sizeof queue))
		return -1;
	return set ? setsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, seq, sizeof *seq)
		   : getsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, seq, &len);
}

/* Freezes fd's connection into c, leaving fd in repair mode (it closes
 * silently: no FIN, no RST). Everything it sent is acked. */
static void rep_freeze(int fd, struct rep_conn *c)
{
	socklen_t len;
	int outq = -1;
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(5))
		if (!ioctl(fd, SIOCOUTQ, &outq) && outq == 0)
			break;
	H_CHECK(outq == 0, "the proxy did not ack the client's bytes (%d unacked)", outq);
	memset(c, 0, sizeof *c);
	c->local_len = sizeof c->local;
	H_CHECK(!getsockname(fd, (struct sockaddr *)&c->local, &c->local_len), "getsockname");
	len = sizeof c->info;
	H_CHECK(!getsockopt(fd, IPPROTO_TCP, TCP_INFO, &c->info, &len), "TCP_INFO");
	len = sizeof c->mss;
	H_CHECK(!getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &c->mss, &len), "TCP_MAXSEG");
	H_CHECK(repair_on(fd, 1) == 0, "TCP_REPAIR on: %s (needs CAP_NET_ADMIN)", strerror(errno));
	H_CHECK(!queue_seq(fd, TCP_SEND_QUEUE, &c->snd_seq, 0), "send queue seq: %s",
		strerror(errno));
	H_CHECK(!queue_seq(fd, TCP_RECV_QUEUE, &c->rcv_seq, 0), "recv queue seq: %s",
		strerror(errno));
	len = sizeof c->win;
	H_CHECK(!getsockopt(fd, IPPROTO_TCP, TCP_REPAIR_WINDOW, &c->win, &len), "TCP_REPAIR_WINDOW: %s",
		strerror(errno));
	len = sizeof c->tsval;
	H_CHECK(!getsockopt(fd, IPPROTO_TCP, TCP_TIMESTAMP, &c->tsval, &len), "TCP_TIMESTAMP: %s",
		strerror(errno));
}

/* A new socket that carries on c's connection to `to` in place of the
 * frozen `old` (closed here), its next byte sent being `back` bytes before
 * old's. It binds old's address while old still holds it (both have
 * SO_REUSEADDR), so no other socket of the machine can take the port
 * between the two. */
static int rep_thaw(int old, const struct rep_conn *c, const struct h_addr *to, uint32_t back)
{
	int fd = socket(c->local.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	uint32_t snd = c->snd_seq - back, rcv = c->rcv_seq;
	struct tcp_repair_opt opts[4];
	unsigned n = 0;

	H_CHECK(fd >= 0, "socket: %s", strerror(errno));
	H_CHECK(repair_on(fd, 1) == 0, "TCP_REPAIR on: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	H_CHECK(!queue_seq(fd, TCP_SEND_QUEUE, &snd, 1), "set send seq: %s", strerror(errno));
	H_CHECK(!queue_seq(fd, TCP_RECV_QUEUE, &rcv, 1), "set recv seq: %s", strerror(errno));
	/* before connect, which sizes segments from it: a retransmission
	 * spans old and new bytes in one segment only with the MSS it had */
	int mss = c->mss < 32767 ? c->mss : 32767; /* TCP_MAXSEG's ceiling */
	H_CHECK(!setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss), "TCP_MAXSEG: %s",
		strerror(errno));
	H_CHECK(!bind(fd, (const struct sockaddr *)&c->local, c->local_len), "bind: %s",
		strerror(errno));
	close(old);
	H_CHECK(!connect(fd, (const struct sockaddr *)&to->ss, to->len), "repair connect: %s",
		strerror(errno));
	opts[n++] = (struct tcp_repair_opt){ TCPOPT_MAXSEG, (uint32_t)c->mss };
	if (c->info.tcpi_options & TCPI_OPT_WSCALE)
		opts[n++] = (struct tcp_repair_opt){ TCPOPT_WINDOW, c->info.tcpi_snd_wscale |
								    (c->info.tcpi_rcv_wscale << 16) };
	if (c->info.tcpi_options & TCPI_OPT_SACK)
		opts[n++] = (struct tcp_repair_opt){ TCPOPT_SACK_PERMITTED, 0 };
	if (c->info.tcpi_options & TCPI_OPT_TIMESTAMPS)
		opts[n++] = (struct tcp_repair_opt){ TCPOPT_TIMESTAMP, 0 };
	H_CHECK(!setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_OPTIONS, opts, n * sizeof opts[0]),
		"TCP_REPAIR_OPTIONS: %s", strerror(errno));
	if (c->info.tcpi_options & TCPI_OPT_TIMESTAMPS)
		H_CHECK(!setsockopt(fd, IPPROTO_TCP, TCP_TIMESTAMP, &c->tsval, sizeof c->tsval),
			"TCP_TIMESTAMP: %s", strerror(errno));
	H_CHECK(!setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_WINDOW, &c->win, sizeof c->win),
		"set TCP_REPAIR_WINDOW: %s", strerror(errno));
	H_CHECK(repair_on(fd, 0) == 0, "TCP_REPAIR off: %s", strerror(errno));
	return fd;
}

/* The client's first socket. Bound before it connects, so that its port is
 * its own: a port that connect() picks may be shared with other connected
 * sockets of the machine (another destination), and rep_thaw's bind to it
 * would then fail with EADDRINUSE. SO_REUSEADDR: rep_thaw binds beside it. */
static int rep_connect(const struct h_addr *to)
{
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	H_CHECK(fd >= 0, "socket: %s", strerror(errno));
	H_CHECK(!setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), "SO_REUSEADDR");
	H_CHECK(!bind(fd, (struct sockaddr *)&any, sizeof any), "bind: %s", strerror(errno));
	H_CHECK(!connect(fd, (const struct sockaddr *)&to->ss, to->len), "connect to %s: %s",
		to->text, strerror(errno));
	return fd;
}

static void send_stream(int fd, uint64_t off, size_t n)
{
	static unsigned char buf[REP_FIRST + REP_OVER];
	h_gen(REP_SEED, off, buf, n);
	H_CHECK(h_send_all(fd, buf, n, h_now_ms() + 5000) == 0, "send %zu bytes at %llu: %s", n,
		(unsigned long long)off, strerror(errno));
}

static void wait_received(uint64_t n)
{
	for (int64_t end = h_now_ms() + H_T(10000); h_now_ms() < end; h_sleep_ms(5))
		if (atomic_load(&rep_rx.progress) >= n)
			return;
	H_CHECK(0, "the backend got %llu bytes, expected %llu",
		(unsigned long long)atomic_load(&rep_rx.progress), (unsigned long long)n);
}

static void case_retransmit_overlap(const char *bin, const char *engine)
{
	static struct h_server be;
	static struct h_proxy p;
	struct rep_conn c;
	uint64_t sent = REP_FIRST;

	H_CHECK(h_server_start(&be, "127.0.0.1:0", 4, rep_sink, NULL) == 0, "backend");
	const char *backends[] = { be.addr.text, NULL };
	const char *extra[] = { "--workers", "1", "-v", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);

	int fd = rep_connect(&p.addr);
	send_stream(fd, 0, REP_FIRST);
	wait_received(REP_FIRST);
	char line[512];
	H_CHECK(h_file_line(p.log, 5000, line, sizeof line, "both directions in the sockmap", NULL),
		"the session did not move into the sockmap (log %s)", p.log);
	for (int round = 0; round < REP_ROUNDS; round++) {
		rep_freeze(fd, &c);
		fd = rep_thaw(fd, &c, &p.addr, REP_OVER);
		/* what a retransmission carries: the same bytes again (one
		 * segment: OVER + NEW is below the MSS) */
		send_stream(fd, sent - REP_OVER, REP_OVER + REP_NEW);
		sent += REP_NEW;
		wait_received(sent);
	}
	H_CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown: %s", strerror(errno));
	H_CHECK(h_server_wait_done(&be, 1, 10000) == 0, "the backend did not see the end (got %llu)",
		(unsigned long long)atomic_load(&rep_rx.progress));
	char where[160] = "";
	if (rep_rx.mismatch_at >= 0)
		snprintf(where, sizeof where, " (a repeat went out: the stream differs at %lld)",
			 (long long)rep_rx.mismatch_at);
	H_CHECK(rep_rx.mismatch_at < 0 && rep_rx.bytes == REP_TOTAL && rep_rx.eof,
		"the backend got %llu bytes%s, expected %u once each then EOF (log %s)",
		(unsigned long long)rep_rx.bytes, where, REP_TOTAL, p.log);
	close(fd);
	h_proxy_down(&p);
	h_server_stop(&be);
	H_CHECK(h_file_line(p.log, 0, line, sizeof line, "sockmap up: the kernel handed the program",
			    NULL) && strstr(line, " 20000 bytes a second time"),
		"the proxy did not log cutting %u repeated bytes (line \"%s\"; log %s)",
		REP_ROUNDS * REP_OVER, line, p.log);
}
H_SOCKMAP_CASES(retransmit_overlap, 60)
