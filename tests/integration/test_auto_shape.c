/* SPDX-License-Identifier: MIT */
/* auto chooses by the traffic's shape: a stream moves to splice, pipelined
 * request/response never does (it moves to io_uring, where that runs). A 16 KiB window of 1 KiB requests (the
 * bench's rr 1024 B depth 16) was read 16 KiB at a time, which counted as
 * a stream: 98 % of its bytes went through splice, at 0.77x copy's
 * requests/s (`splicer bench --cases copy,auto,splice --workloads rr`).
 * A one-way stream that arrives in small reads is a stream too (below).
 * Bytes per engine come from /metrics once the session has ended. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define AS_MSG    1024
#define AS_WINDOW 16
#define AS_TOTAL  (8 * 1024 * 1024) /* bytes each way of the pipelined case */

struct as_run {
	struct h_server srv;
	struct h_proxy p;
	struct h_addr stats;
	char log[200]; /* its access log */
};

static void as_up_with(struct as_run *r, const char *bin, h_conn_fn backend)
{
	H_CHECK(h_server_start(&r->srv, "127.0.0.1:0", 16, backend, NULL) == 0, "backend");
	const char *backends[] = { r->srv.addr.text, NULL };
	snprintf(r->log, sizeof r->log, "%s/access.log", h_tmpdir());
	const char *extra[] = { "--stats", "127.0.0.1:0", "--log", r->log, NULL };
	h_proxy_up(&r->p, bin, "auto", "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&r->p, &r->stats) == 0, "no stats address in %s", r->p.log);
}

static void as_up(struct as_run *r, const char *bin)
{
	as_up_with(r, bin, h_echo_conn);
}

/* Bytes each engine moved, once no session is open. */
static void as_engine_bytes(struct as_run *r, long long *copied, long long *spliced)
{
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(20))
		if (h_metric(&r->stats, "splicer_route_sessions_active{route=\"default\"}") == 0)
			break;
	*copied = h_metric(&r->stats, "splicer_engine_bytes_total{engine=\"copy\"}");
	*spliced = h_metric(&r->stats, "splicer_engine_bytes_total{engine=\"splice\"}");
}

static void as_down(struct as_run *r)
{
	h_server_stop(&r->srv);
	h_proxy_down(&r->p);
}

/* One connection keeps AS_WINDOW requests of AS_MSG bytes in flight, a new
 * one for each echo completed, every byte checked. */
static void as_pipelined(const struct h_addr *a)
{
	static char out[AS_MSG * AS_WINDOW], in[AS_MSG * AS_WINDOW];
	uint64_t sent = 0, rcvd = 0;
	int64_t deadline = h_now_ms() + H_T(30000);
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_set_nodelay(fd);
	h_set_timeouts(fd, H_T(5000));
	while (rcvd < AS_TOTAL) {
		/* top the window up to AS_WINDOW whole requests */
		size_t due = (size_t)(rcvd / AS_MSG * AS_MSG + (uint64_t)AS_MSG * AS_WINDOW - sent);
		if (sent + due > AS_TOTAL)
			due = (size_t)(AS_TOTAL - sent);
		if (due) {
			h_gen(7, sent, out, due);
			H_CHECK(h_send_all(fd, out, due, deadline) == 0, "send at %llu",
				(unsigned long long)sent);
			sent += due;
		}
		ssize_t n = recv(fd, in, sizeof(in), 0);
		H_CHECK(n > 0, "recv at %llu of %d: %zd (%s)", (unsigned long long)rcvd, AS_TOTAL, n,
			n < 0 ? strerror(errno) : "EOF");
		H_CHECK(h_gen_check(7, rcvd, in, (size_t)n) == (size_t)n, "wrong bytes at %llu",
			(unsigned long long)rcvd);
		rcvd += (uint64_t)n;
		H_CHECK(h_now_ms() < deadline, "only %llu of %d bytes echoed in time",
			(unsigned long long)rcvd, AS_TOTAL);
	}
	close(fd);
}

/* Pipelined request/response never goes to splice. Where io_uring runs,
 * the session moves whole to it after auto_uring_turns changes of
 * direction (16), with nothing in flight, and stays there: the access log
 * says both directions went by turns. */
static void case_pipelined_moves_to_uring(const char *bin)
{
	static struct as_run r;
	long long copied, spliced, uringed, moves;
	char line[1024];

	as_up(&r, bin);
	as_pipelined(&r.p.addr);
	as_engine_bytes(&r, &copied, &spliced);
	uringed = h_metric(&r.stats, "splicer_engine_bytes_total{engine=\"uring\"}");
	moves = h_metric(&r.stats, "splicer_auto_uring_moves_total");
	cr_log_info("auto, %d requests of %d B pipelined %d deep: copied %lld, spliced %lld, "
		    "io_uring %lld bytes; %lld moves", AS_TOTAL / AS_MSG, AS_MSG, AS_WINDOW, copied,
		    spliced, uringed, moves);
	H_CHECK(spliced == 0 && copied + uringed == 2LL * AS_TOTAL,
		"a %d KiB request window went to splice: copied %lld, spliced %lld, io_uring %lld of "
		"%d each way", AS_MSG * AS_WINDOW / 1024, copied, spliced, uringed, AS_TOTAL);
	H_CHECK(h_file_line(r.log, 3000, line, sizeof line, "event=close", NULL), "no close line");
	if (h_log_lines(&r.p, "request/response sessions stay on copy", NULL) > 0) {
		cr_log_warn("io_uring does not run here: the session stayed on copy");
		H_CHECK(copied == 2LL * AS_TOTAL && moves == 0, "no io_uring, yet %lld moves", moves);
		as_down(&r);
		return;
	}
	H_CHECK(moves == 1 && uringed >= 2LL * AS_TOTAL * 9 / 10,
		"the pipelined session did not move to io_uring: %lld moves, %lld of %d bytes there",
		moves, uringed, 2 * AS_TOTAL);
	H_CHECK(strstr(line, " engine=copy+uring/copy+uring engine_reason=turns/turns"),
		"the access log's close line does not say the session moved by turns: %s", line);
	as_down(&r);
}

/* A short connection (one question, one answer) never moves: copy costs
 * less for it than io_uring's start (doc/performance.md). */
static void case_short_connections_stay(const char *bin)
{
	static struct as_run r;
	char why[256];
	long long copied, spliced;

	as_up(&r, bin);
	/* (the harness's backend serves 64 connections in its life) */
	for (int i = 0; i < 60; i++)
		H_CHECK(h_echo_roundtrip(&r.p.addr, 64, (uint64_t)i, 3000, why, sizeof why) == 0,
			"connection %d: %s", i, why);
	as_engine_bytes(&r, &copied, &spliced);
	H_CHECK(copied == 2LL * 60 * 64 && spliced == 0 &&
			h_metric(&r.stats, "splicer_auto_uring_moves_total") == 0 &&
			h_metric(&r.stats, "splicer_engine_bytes_total{engine=\"uring\"}") == 0,
		"short connections left copy: copied %lld, spliced %lld, %lld moves", copied, spliced,
		h_metric(&r.stats, "splicer_auto_uring_moves_total"));
	as_down(&r);
}

/* auto_uring_turns = 0: request/response stays on copy, as before it. */
static void case_turns_off(const char *bin)
{
	static struct as_run r;
	const char *backends[3] = { NULL, NULL, NULL };
	long long copied, spliced;

	H_CHECK(h_server_start(&r.srv, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "backend");
	backends[0] = r.srv.addr.text;
	snprintf(r.log, sizeof r.log, "%s/access.log", h_tmpdir());
	const char *extra[] = { "--stats", "127.0.0.1:0", "--log", r.log, "--auto-uring-turns", "0",
				NULL };
	h_proxy_up(&r.p, bin, "auto", "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&r.p, &r.stats) == 0, "no stats address in %s", r.p.log);
	as_pipelined(&r.p.addr);
	as_engine_bytes(&r, &copied, &spliced);
	H_CHECK(copied == 2LL * AS_TOTAL && h_metric(&r.stats, "splicer_auto_uring_moves_total") == 0,
		"auto_uring_turns = 0, yet copied %lld of %d each way, %lld moves", copied, AS_TOTAL,
		h_metric(&r.stats, "splicer_auto_uring_moves_total"));
	as_down(&r);
}

static void case_stream_moves_to_splice(const char *bin)
{
	static struct as_run r;
	static struct h_xfer tx, rx;
	const uint64_t len = 64ull * 1024 * 1024;
	int64_t deadline = h_now_ms() + H_T(40000);
	long long copied, spliced;

	as_up(&r, bin);
	int fd = h_connect(&r.p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_xfer_init(&tx, fd, 9, len, deadline);
	tx.shut_wr = 1;
	h_xfer_init(&rx, fd, 9, 0, deadline);
	rx.verify = 1;
	H_CHECK(h_xfer_start_send(&tx) == 0 && h_xfer_start_recv(&rx) == 0, "stream threads");
	H_CHECK(h_xfer_join(&tx, 5000) == 0 && h_xfer_join(&rx, 5000) == 0, "the stream did not end");
	h_check_stream("echoed stream", &tx, &rx, len);
	close(fd);
	as_engine_bytes(&r, &copied, &spliced);
	cr_log_info("auto, a 64 MiB stream echoed: copied %lld, spliced %lld bytes", copied, spliced);
	/* the first reads are copied, then both directions splice */
	H_CHECK(spliced >= (long long)(2 * len * 9 / 10),
		"a stream stayed on copy: spliced %lld, copied %lld of %llu each way", spliced, copied,
		(unsigned long long)len);
	as_down(&r);
}

/* A one-way stream that arrives in small pieces: the proxy keeps up with
 * the sender, so each read takes the few KiB that came since the last one
 * and no run of 32 KiB reads ever forms. 1 MiB one way with nothing coming
 * back makes it a stream all the same (AUTO_STREAM_SOLO). */
#define AS_TRICKLE_LEN   (8u << 20)
#define AS_TRICKLE_CHUNK 4096u

static struct h_xfer trickle_rx;

static void trickle_sink(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	(void)arg;
	h_xfer_init(&trickle_rx, fd, 11, 0, h_now_ms() + H_T(30000));
	trickle_rx.verify = 1;
	h_xfer_recv(&trickle_rx);
}

static void case_trickle_moves_to_splice(const char *bin)
{
	static struct as_run r;
	static unsigned char chunk[AS_TRICKLE_CHUNK];
	int64_t deadline = h_now_ms() + H_T(30000);
	long long copied, spliced;

	as_up_with(&r, bin, trickle_sink);
	int fd = h_connect(&r.p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_set_nodelay(fd);
	for (uint64_t off = 0; off < AS_TRICKLE_LEN; off += AS_TRICKLE_CHUNK) {
		h_gen(11, off, chunk, sizeof chunk);
		H_CHECK(h_send_all(fd, chunk, sizeof chunk, deadline) == 0, "send at %llu: %s",
			(unsigned long long)off, strerror(errno));
		struct timespec pause = { 0, 100000 }; /* 0.1 ms: about 40 MB/s */
		nanosleep(&pause, NULL);
	}
	H_CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
	H_CHECK(h_server_wait_done(&r.srv, 1, 10000) == 0, "the backend did not see the end");
	H_CHECK(trickle_rx.mismatch_at < 0 && trickle_rx.bytes == AS_TRICKLE_LEN && trickle_rx.eof,
		"the backend got %llu of %u bytes (differing at %lld), eof %d",
		(unsigned long long)trickle_rx.bytes, AS_TRICKLE_LEN, (long long)trickle_rx.mismatch_at,
		trickle_rx.eof);
	close(fd);
	as_engine_bytes(&r, &copied, &spliced);
	cr_log_info("auto, an 8 MiB stream in 4 KiB pieces: copied %lld, spliced %lld bytes", copied,
		    spliced);
	H_CHECK(spliced >= (long long)AS_TRICKLE_LEN * 3 / 4,
		"a one-way stream read in small pieces stayed on copy: spliced %lld, copied %lld of %u",
		spliced, copied, AS_TRICKLE_LEN);
	/* the access log says which rule made it a stream: one-way, unless a
	 * loaded machine made the proxy lag and its reads big (stream) */
	char line[1024];
	H_CHECK(h_file_line(r.log, 3000, line, sizeof line, "event=close", NULL) &&
			strstr(line, " engine=copy+splice/none engine_reason=") &&
			(strstr(line, "engine_reason=one-way/not-a-stream") ||
			 strstr(line, "engine_reason=stream/not-a-stream")),
		"the access log's close line does not say why the stream moved: %s", line);
	as_down(&r);
}

Test(integ, auto_trickling_stream_moves_to_splice, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_trickle_moves_to_splice(h_binary(0));
}

Test(integ, auto_pipelined_requests_move_to_uring, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_pipelined_moves_to_uring(h_binary(0));
}

Test(integ, auto_pipelined_requests_move_to_uring_asan, .init = h_init, .fini = h_fini,
     .timeout = 90)
{
	case_pipelined_moves_to_uring(h_binary(1));
}

Test(integ, auto_short_connections_stay_on_copy, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_short_connections_stay(h_binary(0));
}

Test(integ, auto_uring_turns_0_keeps_copy, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_turns_off(h_binary(0));
}

Test(integ, auto_stream_moves_to_splice, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_stream_moves_to_splice(h_binary(0));
}

/* A session auto moved to io_uring keeps copy's ends (semantics.md): its
 * backend answers, then resets the connection; the client gets every byte
 * of the answer, then the reset (as through HAProxy and nginx), not a FIN
 * that would pass a cut stream for a whole one. */
#define AS_RESET_ANSWER (100 * 1024)

static void echo_then_reset(struct h_server *s, int fd, int index, void *arg)
{
	static unsigned char buf[AS_RESET_ANSWER];
	int64_t deadline = h_now_ms() + H_T(20000);
	(void)s;
	(void)index;
	(void)arg;

	for (;;) { /* 64-byte echoes until a request starts with 'R' */
		if (h_recv_exact(fd, buf, 64, deadline))
			return;
		if (buf[0] == 'R')
			break;
		if (h_send_all(fd, buf, 64, deadline))
			return;
	}
	h_gen(0x5E, 0, buf, sizeof buf);
	if (h_send_all(fd, buf, sizeof buf, deadline))
		return;
	h_sleep_ms(50); /* the answer leaves before the reset */
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

static void case_uring_session_backend_reset(const char *bin)
{
	static struct as_run r;
	static struct h_xfer rx;
	unsigned char buf[64];

	as_up_with(&r, bin, echo_then_reset);
	int fd = h_connect(&r.p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_set_nodelay(fd);
	for (int i = 0; i < 40; i++) {
		h_gen(0x5D, (uint64_t)i * 64, buf, 64);
		buf[0] = 'e';
		H_CHECK(h_send_all(fd, buf, 64, h_now_ms() + 3000) == 0 &&
				h_recv_exact(fd, buf, 64, h_now_ms() + 3000) == 0,
			"round trip %d", i);
	}
	int moved = h_metric(&r.stats, "splicer_auto_uring_moves_total") == 1;
	memset(buf, 'R', sizeof buf);
	H_CHECK(h_send_all(fd, buf, 64, h_now_ms() + 3000) == 0, "the last request");
	h_xfer_init(&rx, fd, 0x5E, 0, h_now_ms() + H_T(10000));
	rx.verify = 1;
	h_xfer_recv(&rx);
	close(fd);
	cr_log_info("auto%s, backend answer then reset: client got %llu bytes, then %s",
		    moved ? " on io_uring" : " (io_uring does not run here)",
		    (unsigned long long)rx.bytes, rx.eof ? "EOF" : strerror(rx.err));
	H_CHECK(rx.mismatch_at < 0 && rx.bytes == AS_RESET_ANSWER,
		"the client got %llu of %d bytes of the answer (mismatch at %lld)",
		(unsigned long long)rx.bytes, AS_RESET_ANSWER, (long long)rx.mismatch_at);
	H_CHECK(!rx.eof && rx.err == ECONNRESET,
		"after the backend's reset the client saw %s, not a reset", rx.eof ? "a FIN" : strerror(rx.err));
	as_down(&r);
}

Test(integ, auto_uring_session_passes_a_backend_reset_on, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_uring_session_backend_reset(h_binary(0));
}

Test(integ, auto_uring_session_passes_a_backend_reset_on_asan, .init = h_init, .fini = h_fini,
     .timeout = 90)
{
	case_uring_session_backend_reset(h_binary(1));
}
