/* SPDX-License-Identifier: MIT */
/* Integration cases: byte streams through the proxy (bulk, ping-pong,
 * half-close both ways, backend reset, slow reader, SIGTERM drain, unix
 * sockets, IPv6). Each case runs per engine and per proxy build; see
 * H_ENGINE_CASES in harness.h.
 *
 * Objects that helper threads or h_fini() may still touch after a failed
 * check (servers, proxies, shared state) are static, never on the stack. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- 1, 11: a stream each way at the same time ----------------------------- */

struct duplex_state {
	uint64_t c2b_seed, b2c_seed, len;
	int64_t deadline;
	struct h_xfer rx, tx; /* the backend's ends */
	_Atomic int sessions;
};

static void duplex_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct duplex_state *d = arg;
	if (atomic_fetch_add(&d->sessions, 1) != 0)
		return; /* only the test's one session is served */
	h_xfer_init(&d->tx, fd, d->b2c_seed, d->len, d->deadline);
	d->tx.shut_wr = 1;
	h_xfer_init(&d->rx, fd, d->c2b_seed, 0, d->deadline);
	d->rx.verify = 1;
	if (h_xfer_start_send(&d->tx) < 0)
		d->tx.err = EAGAIN;
	h_xfer_recv(&d->rx);
	h_xfer_join(&d->tx, 5000);
}

static void duplex(const char *bin, const char *engine, const char *listen, const char *backend,
		   uint64_t len, int budget_ms, const char *const *extra)
{
	static struct duplex_state d;
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer ctx, crx;
	memset(&d, 0, sizeof d);
	int64_t deadline = h_now_ms() + H_T(budget_ms);
	d.c2b_seed = 0xC2B0000000000000ull ^ len;
	d.b2c_seed = 0xB2C0000000000000ull ^ len;
	d.len = len;
	d.deadline = deadline;

	int rc = h_server_start(&srv, backend, 128, duplex_conn, &d);
	H_CHECK(rc == 0, "backend listen on %s: %s", backend, strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, listen, backends, extra);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	h_xfer_init(&ctx, fd, d.c2b_seed, len, deadline);
	ctx.shut_wr = 1;
	h_xfer_init(&crx, fd, d.b2c_seed, 0, deadline);
	crx.verify = 1;
	H_CHECK(h_xfer_start_send(&ctx) == 0, "cannot start the client sender thread");
	h_xfer_recv(&crx);
	H_CHECK(h_xfer_join(&ctx, 5000) == 0, "client sender thread did not finish (sent %llu)",
		(unsigned long long)atomic_load(&ctx.progress));
	H_CHECK(h_server_wait_done(&srv, 1, 10000) == 0,
		"backend session did not finish within 10 s after the client's (accepted %d, "
		"backend received %llu, sent %llu; client received %llu: %s)",
		atomic_load(&srv.accepted), (unsigned long long)atomic_load(&d.rx.progress),
		(unsigned long long)atomic_load(&d.tx.progress), (unsigned long long)crx.bytes,
		crx.err ? strerror(crx.err) : crx.eof ? "EOF" : "no EOF");
	h_check_stream("client->backend", &ctx, &d.rx, len);
	h_check_stream("backend->client", &d.tx, &crx, len);
	H_CHECK(atomic_load(&srv.accepted) == 1, "backend accepted %d connections, expected 1",
		atomic_load(&srv.accepted));
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

static void case_bulk_both_ways(const char *bin, const char *engine)
{
	duplex(bin, engine, "127.0.0.1:0", "127.0.0.1:0", 256 * H_MIB, 40000, NULL);
}

/* Pipes of one page (one slot) and of 64k over Unix sockets (small skbs, so
 * the 16 slots fill long before 64k of bytes): the ambiguous EAGAIN of a
 * slot-full pipe must never lose a readiness edge. With --lowat on top, the
 * tail shorter than the mark must still arrive. */
static void case_bulk_tiny_pipe(const char *bin, const char *engine)
{
	const char *extra[] = { "--pipe-size", "4k", NULL };
	duplex(bin, engine, "127.0.0.1:0", "127.0.0.1:0", 32 * H_MIB + 123, 40000, extra);
}

static void case_unix_small_pipe_lowat(const char *bin, const char *engine)
{
	const char *extra[] = { "--pipe-size", "64k", "--lowat", "100000", NULL };
	char listen[160], backend[160];
	snprintf(listen, sizeof listen, "unix:%s/proxy.sock", h_tmpdir());
	snprintf(backend, sizeof backend, "unix:%s/backend.sock", h_tmpdir());
	duplex(bin, engine, listen, backend, 32 * H_MIB + 4567, 40000, extra);
}

static void case_unix_sockets(const char *bin, const char *engine)
{
	char listen[160], backend[160];
	snprintf(listen, sizeof listen, "unix:%s/proxy.sock", h_tmpdir());
	snprintf(backend, sizeof backend, "unix:%s/backend.sock", h_tmpdir());
	duplex(bin, engine, listen, backend, 32 * H_MIB, 20000, NULL);
}

/* ---- 2: request/response round trips ---------------------------------------- */

static void case_ping_pong(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	h_set_nodelay(fd);
	int64_t t0 = h_now_ms(), deadline = t0 + H_T(30000);
	unsigned char req[64], rep[64];
	for (int i = 0; i < 10000; i++) {
		h_gen(0x9191, (uint64_t)i * 64, req, sizeof req);
		rc = h_send_all(fd, req, sizeof req, deadline);
		H_CHECK(rc == 0, "round trip %d: send: %s", i, strerror(-rc));
		rc = h_recv_exact(fd, rep, sizeof rep, deadline);
		H_CHECK(rc == 0, "round trip %d of 10000: reply: %s (after %lld ms)", i,
			rc == -ENODATA ? "EOF" : strerror(-rc), (long long)(h_now_ms() - t0));
		H_CHECK(memcmp(req, rep, sizeof req) == 0, "round trip %d: reply differs from request",
			i);
	}
	shutdown(fd, SHUT_WR);
	rc = h_expect_eof(fd, h_now_ms() + 5000);
	H_CHECK(rc == 0, "after 10000 round trips and shutdown(SHUT_WR), expected EOF: %s",
		rc == -EPROTO ? "got extra data" : strerror(-rc));
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* ---- 3: the client half-closes first -------------------------------------- */

static const char hc_request[] = "GET /sixteen-mebibytes HTTP/1.0\r\n\r\n";

struct hc1_state {
	uint64_t seed, len;
	int64_t deadline;
	unsigned char got[4096];
	size_t gotlen;
	int eof, err;
	struct h_xfer tx;
	_Atomic int sessions;
};

static void hc1_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct hc1_state *st = arg;
	if (atomic_fetch_add(&st->sessions, 1) != 0)
		return;
	/* The request, then EOF (the client's forwarded FIN) within 5 s. */
	int64_t dl = h_now_ms() + 5000;
	for (;;) {
		if (st->gotlen == sizeof st->got) {
			st->err = EMSGSIZE;
			return;
		}
		ssize_t r = recv(fd, st->got + st->gotlen, sizeof st->got - st->gotlen, 0);
		if (r > 0) {
			st->gotlen += (size_t)r;
		} else if (r == 0) {
			st->eof = 1;
			break;
		} else if (errno == EAGAIN || errno == EINTR) {
			if (h_now_ms() > dl) {
				st->err = ETIMEDOUT;
				return;
			}
		} else {
			st->err = errno;
			return;
		}
	}
	h_xfer_init(&st->tx, fd, st->seed, st->len, st->deadline);
	st->tx.shut_wr = 1;
	h_xfer_send(&st->tx);
}

static void case_half_close_client_first(const char *bin, const char *engine)
{
	static struct hc1_state st;
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer crx;
	memset(&st, 0, sizeof st);
	st.seed = 0x4C1;
	st.len = 16 * H_MIB;
	st.deadline = h_now_ms() + H_T(30000);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, hc1_conn, &st);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	size_t reqlen = sizeof hc_request - 1;
	rc = h_send_all(fd, hc_request, reqlen, h_now_ms() + 5000);
	H_CHECK(rc == 0, "send request: %s", strerror(-rc));
	H_CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown(SHUT_WR): %s", strerror(errno));
	h_xfer_init(&crx, fd, st.seed, 0, st.deadline);
	crx.verify = 1;
	h_xfer_recv(&crx);
	H_CHECK(h_server_wait_done(&srv, 1, 10000) == 0, "backend session did not finish (accepted %d)",
		atomic_load(&srv.accepted));
	H_CHECK(st.eof,
		"backend did not see EOF after the client's request + shutdown(SHUT_WR): %s after "
		"%zu bytes (the FIN was not forwarded?)",
		st.err ? strerror(st.err) : "no EOF", st.gotlen);
	H_CHECK(st.gotlen == reqlen && memcmp(st.got, hc_request, reqlen) == 0,
		"backend got %zu bytes before EOF, expected the %zu-byte request", st.gotlen, reqlen);
	h_check_stream("backend->client after the client's half-close", &st.tx, &crx, st.len);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* ---- 4: the backend half-closes first ------------------------------------- */

static const char hc_greeting[] = "220 splicer-test greeting, now shutting down my side\r\n";

struct hc2_state {
	uint64_t seed;
	int64_t deadline;
	int send_err, shut_err;
	struct h_xfer rx;
	_Atomic int sessions;
};

static void hc2_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct hc2_state *st = arg;
	if (atomic_fetch_add(&st->sessions, 1) != 0)
		return;
	int rc = h_send_all(fd, hc_greeting, sizeof hc_greeting - 1, st->deadline);
	if (rc < 0) {
		st->send_err = -rc;
		return;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		st->shut_err = errno;
	h_xfer_init(&st->rx, fd, st->seed, 0, st->deadline);
	st->rx.verify = 1;
	h_xfer_recv(&st->rx);
}

static void case_half_close_backend_first(const char *bin, const char *engine)
{
	static struct hc2_state st;
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer ctx;
	memset(&st, 0, sizeof st);
	st.seed = 0x4C2;
	st.deadline = h_now_ms() + H_T(30000);
	uint64_t len = 16 * H_MIB;
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, hc2_conn, &st);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	char greet[sizeof hc_greeting];
	size_t glen = sizeof hc_greeting - 1;
	rc = h_recv_exact(fd, greet, glen, h_now_ms() + 5000);
	H_CHECK(rc == 0, "client did not receive the backend's %zu-byte greeting: %s", glen,
		rc == -ENODATA ? "EOF first" : strerror(-rc));
	H_CHECK(memcmp(greet, hc_greeting, glen) == 0, "greeting differs");
	rc = h_expect_eof(fd, h_now_ms() + 5000);
	H_CHECK(rc == 0,
		"after the greeting the client expected EOF (the backend did shutdown(SHUT_WR)): %s",
		rc == -EPROTO ? "got extra data" : strerror(-rc));

	/* The other direction must keep flowing. */
	h_xfer_init(&ctx, fd, st.seed, len, st.deadline);
	ctx.shut_wr = 1;
	h_xfer_send(&ctx);
	H_CHECK(h_server_wait_done(&srv, 1, (int)H_T(15000)) == 0,
		"backend did not finish receiving (got %llu of %llu bytes; client sender: %s)",
		(unsigned long long)atomic_load(&st.rx.progress), (unsigned long long)len,
		ctx.err ? strerror(ctx.err) : "ok");
	H_CHECK(st.send_err == 0 && st.shut_err == 0, "backend greeting/shutdown failed: %s",
		strerror(st.send_err ? st.send_err : st.shut_err));
	h_check_stream("client->backend after the backend's half-close", &ctx, &st.rx, len);
	rc = h_expect_eof(fd, h_now_ms() + 5000);
	H_CHECK(rc == 0, "after both directions finished, the client expected a clean EOF: %s",
		rc == -EPROTO ? "got data" : strerror(-rc));
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* ---- 5: the backend resets mid-stream -------------------------------------- */

struct rst_state {
	uint64_t b2c_seed, read_before, send_len;
	int64_t deadline;
	_Atomic int64_t t_reset_us;
	uint64_t got;
	int err;
	_Atomic int sessions;
};

static void rst_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct rst_state *st = arg;
	if (atomic_fetch_add(&st->sessions, 1) != 0)
		return;
	unsigned char *buf = malloc(64 * 1024);
	if (!buf) {
		st->err = ENOMEM;
		return;
	}
	while (st->got < st->read_before) {
		ssize_t r = recv(fd, buf, 64 * 1024, 0);
		if (r > 0) {
			st->got += (uint64_t)r;
		} else if (r < 0 && (errno == EAGAIN || errno == EINTR) &&
			   h_now_ms() <= st->deadline) {
			continue;
		} else {
			st->err = r == 0 ? ENODATA : errno;
			free(buf);
			return;
		}
	}
	for (uint64_t off = 0; off < st->send_len; off += 64 * 1024) {
		h_gen(st->b2c_seed, off, buf, 64 * 1024);
		int rc = h_send_all(fd, buf, 64 * 1024, st->deadline);
		if (rc < 0) {
			st->err = -rc;
			free(buf);
			return;
		}
	}
	free(buf);
	/* Reset: linger {1, 0}; the harness closes fd right after we return. */
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	atomic_store(&st->t_reset_us, h_now_us());
}

static void case_backend_reset(const char *bin, const char *engine)
{
	static struct rst_state st;
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer ctx, crx;
	memset(&st, 0, sizeof st);
	st.b2c_seed = 0x2E5E7;
	st.read_before = 256 * H_KIB;
	st.send_len = 4 * H_MIB;
	st.deadline = h_now_ms() + H_T(10000);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, rst_conn, &st);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	/* The client keeps sending (up to 256 MiB) and receiving until the end. */
	h_xfer_init(&ctx, fd, 0xC2B5, 256 * H_MIB, h_now_ms() + H_T(15000));
	h_xfer_init(&crx, fd, st.b2c_seed, 0, h_now_ms() + H_T(10000));
	crx.verify = 1;
	H_CHECK(h_xfer_start_send(&ctx) == 0 && h_xfer_start_recv(&crx) == 0, "threads");
	H_CHECK(h_xfer_join(&crx, 3000) == 0, "client receiver thread stuck");
	int64_t t_reset = atomic_load(&st.t_reset_us);
	H_CHECK(t_reset != 0,
		"backend never reached the reset: %s (it got %llu of %llu bytes from the client)",
		st.err ? strerror(st.err) : "?", (unsigned long long)st.got,
		(unsigned long long)st.read_before);
	H_CHECK(crx.eof || crx.err == ECONNRESET || crx.err == EPIPE,
		"after the backend reset, the client's receive ended with %s (after %llu bytes), "
		"expected EOF or ECONNRESET",
		crx.err ? strerror(crx.err) : "?", (unsigned long long)crx.bytes);
	H_CHECK(crx.t_end_us >= t_reset, "the client's receive ended %lld us before the backend reset",
		(long long)(t_reset - crx.t_end_us));
	H_CHECK(crx.t_end_us - t_reset <= 1000000,
		"the client saw the connection end %lld ms after the backend reset (limit 1000 ms)",
		(long long)((crx.t_end_us - t_reset) / 1000));
	H_CHECK(crx.mismatch_at < 0, "data before the reset corrupted at offset %lld",
		(long long)crx.mismatch_at);
	H_CHECK(crx.bytes <= st.send_len, "client received %llu bytes, backend sent only %llu",
		(unsigned long long)crx.bytes, (unsigned long long)st.send_len);
	shutdown(fd, SHUT_RDWR);
	H_CHECK(h_xfer_join(&ctx, 3000) == 0, "client sender thread stuck");
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* ---- 8: a client that stops reading ---------------------------------------- */

#define SLOW_SESSIONS 3 /* two warm-ups, then the stalled one */

struct slow_state {
	uint64_t seed_warm, seed_main, warm_len, main_len;
	int64_t deadline;
	struct h_xfer tx[SLOW_SESSIONS];
	int err[SLOW_SESSIONS];
};

static void slow_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	struct slow_state *st = arg;
	if (index >= SLOW_SESSIONS)
		return;
	char mode;
	int rc = h_recv_exact(fd, &mode, 1, h_now_ms() + 5000);
	if (rc < 0) {
		st->err[index] = -rc;
		return;
	}
	int warm = mode == 'w';
	h_xfer_init(&st->tx[index], fd, warm ? st->seed_warm : st->seed_main,
		    warm ? st->warm_len : st->main_len, st->deadline);
	st->tx[index].shut_wr = 1;
	h_xfer_send(&st->tx[index]);
}

static void case_slow_reader(const char *bin, const char *engine)
{
	static struct slow_state st;
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer crx;
	memset(&st, 0, sizeof st);
	st.seed_warm = 0x3A53;
	st.seed_main = 0x5103;
	st.warm_len = 4 * H_MIB;
	st.main_len = 64 * H_MIB;
	st.deadline = h_now_ms() + H_T(40000);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, slow_conn, &st);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);

	for (int w = 0; w < SLOW_SESSIONS - 1; w++) {
		int fd = h_connect(&p.addr, 2000);
		H_CHECK(fd >= 0, "warm-up %d: connect: %s", w, strerror(errno));
		rc = h_send_all(fd, "w", 1, h_now_ms() + 5000);
		H_CHECK(rc == 0, "warm-up %d: send: %s", w, strerror(-rc));
		h_xfer_init(&crx, fd, st.seed_warm, 0, h_now_ms() + H_T(10000));
		crx.verify = 1;
		h_xfer_recv(&crx);
		close(fd);
		H_CHECK(h_server_wait_done(&srv, w + 1, 5000) == 0, "warm-up %d did not finish", w);
		h_check_stream("warm-up backend->client", &st.tx[w], &crx, st.warm_len);
	}

	long rss0 = h_rss_kib(p.pid);
	H_CHECK(rss0 > 0, "cannot read VmRSS of pid %d", (int)p.pid);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	rc = h_send_all(fd, "m", 1, h_now_ms() + 5000);
	H_CHECK(rc == 0, "send: %s", strerror(-rc));
	h_sleep_ms(2000); /* the client does not read while the backend pushes 64 MiB */
	H_CHECK(h_proxy_alive(&p), "proxy died during the stall");
	long rss1 = h_rss_kib(p.pid);
	uint64_t pushed = atomic_load(&st.tx[2].progress);
	H_CHECK(rss1 > 0 && rss1 - rss0 < 8 * 1024,
		"proxy VmRSS grew by %ld KiB (%ld -> %ld KiB) while the client stalled for 2 s and "
		"the backend had pushed %llu bytes into the proxy; limit 8192 KiB",
		rss1 - rss0, rss0, rss1, (unsigned long long)pushed);

	if (getenv("SPLICER_IT_VERBOSE"))
		fprintf(stderr, "[integ] slow_reader %s: VmRSS %ld -> %ld KiB; backend pushed %llu bytes "
				"during the 2 s stall\n",
			engine, rss0, rss1, (unsigned long long)pushed);
	h_xfer_init(&crx, fd, st.seed_main, 0, st.deadline);
	crx.verify = 1;
	h_xfer_recv(&crx);
	H_CHECK(h_server_wait_done(&srv, SLOW_SESSIONS, 5000) == 0, "backend session did not finish");
	h_check_stream("backend->client after a 2 s stall", &st.tx[2], &crx, st.main_len);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

/* ---- 10: SIGTERM while a transfer runs ------------------------------------- */

struct drain_state {
	uint64_t seed, len;
	int64_t deadline;
	struct h_xfer tx;
	int err;
	_Atomic int sessions;
};

static void drain_conn(struct h_server *s, int fd, int index, void *arg)
{
	(void)s;
	(void)index;
	struct drain_state *st = arg;
	if (atomic_fetch_add(&st->sessions, 1) != 0)
		return;
	char c;
	int rc = h_recv_exact(fd, &c, 1, h_now_ms() + 5000);
	if (rc < 0) {
		st->err = -rc;
		return;
	}
	h_xfer_init(&st->tx, fd, st->seed, st->len, st->deadline);
	st->tx.shut_wr = 1;
	h_xfer_send(&st->tx);
}

static void case_sigterm_drain(const char *bin, const char *engine)
{
	static struct drain_state st;
	static struct h_server srv;
	static struct h_proxy p;
	memset(&st, 0, sizeof st);
	st.seed = 0xD2A1;
	st.len = 64 * H_MIB;
	st.deadline = h_now_ms() + H_T(30000);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, drain_conn, &st);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, NULL);
	pid_t pid = p.pid;

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	rc = h_send_all(fd, "g", 1, h_now_ms() + 5000);
	H_CHECK(rc == 0, "send: %s", strerror(-rc));

	/* Read 64 MiB in 256 KiB steps with a 5 ms pause after each (~1.3 s);
	 * SIGTERM after 8 MiB; probe the listener 300 ms after the signal. */
	static unsigned char buf[64 * 1024];
	struct h_sha sha;
	h_sha_init(&sha);
	uint64_t got = 0;
	int64_t mismatch = -1, t_term = 0;
	size_t paced = 0;
	int eof = 0, err = 0, probed = 0, probe_errno = 0, probe_connected = 0;
	while (!eof && !err) {
		size_t want = sizeof buf;
		if (256 * 1024 - paced < want)
			want = 256 * 1024 - paced;
		ssize_t r = recv(fd, buf, want, 0);
		if (r > 0) {
			h_sha_update(&sha, buf, (size_t)r);
			size_t bad = h_gen_check(st.seed, got, buf, (size_t)r);
			if (bad < (size_t)r && mismatch < 0)
				mismatch = (int64_t)(got + bad);
			got += (uint64_t)r;
			paced += (size_t)r;
			if (paced >= 256 * 1024) {
				paced = 0;
				h_sleep_ms(5);
			}
		} else if (r == 0) {
			eof = 1;
		} else if (errno == EAGAIN || errno == EINTR) {
			if (h_now_ms() > st.deadline)
				err = ETIMEDOUT;
		} else {
			err = errno;
		}
		if (!t_term && got >= 8 * H_MIB) {
			H_CHECK(kill(pid, SIGTERM) == 0, "kill(SIGTERM): %s", strerror(errno));
			t_term = h_now_ms();
		}
		if (t_term && !probed && h_now_ms() - t_term >= 300) {
			int pfd = h_connect(&p.addr, 1000);
			probe_errno = pfd < 0 ? errno : 0;
			probe_connected = pfd >= 0;
			if (pfd >= 0)
				close(pfd);
			probed = 1;
		}
	}
	int64_t t_end = h_now_ms();
	unsigned char digest[32];
	h_sha_final(&sha, digest);
	H_CHECK(t_term, "the transfer ended (%s) after %llu bytes, before SIGTERM could be sent",
		err ? strerror(err) : "EOF", (unsigned long long)got);
	if (!probed) {
		int64_t wait = 300 - (h_now_ms() - t_term);
		if (wait > 0)
			h_sleep_ms((int)wait);
		int pfd = h_connect(&p.addr, 1000);
		probe_errno = pfd < 0 ? errno : 0;
		probe_connected = pfd >= 0;
		if (pfd >= 0)
			close(pfd);
	}
	close(fd); /* our side is done: lets the proxy finish the session */
	H_CHECK(err == 0, "transfer after SIGTERM failed after %llu of %llu bytes: %s",
		(unsigned long long)got, (unsigned long long)st.len, strerror(err));
	H_CHECK(mismatch < 0, "data corrupted at offset %lld", (long long)mismatch);
	H_CHECK(got == st.len, "client received %llu bytes, expected %llu (drain cut the session?)",
		(unsigned long long)got, (unsigned long long)st.len);
	H_CHECK(h_server_wait_done(&srv, 1, 5000) == 0, "backend session did not finish");
	char a[65], b[65];
	H_CHECK(memcmp(digest, st.tx.sha, 32) == 0, "SHA-256 differs: backend sent %s, client got %s",
		h_hex32(st.tx.sha, a), h_hex32(digest, b));
	H_CHECK(!probe_connected && probe_errno == ECONNREFUSED,
		"a new connect() to %s 300 ms after SIGTERM %s, expected ECONNREFUSED", p.addr.text,
		probe_connected ? "succeeded" : strerror(probe_errno));
	int limit = h_slow > 1 ? 10000 : 5000; /* the ASan build's exit runs LeakSanitizer */
	int status = h_proxy_wait(&p, limit);
	H_CHECK(status != -1,
		"proxy still running %d ms after the drained transfer ended (SIGTERM sent %lld ms "
		"before the end)",
		limit, (long long)(t_end - t_term));
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"proxy ended with %s %d after SIGTERM, expected exit status 0",
		WIFEXITED(status) ? "exit status" : "signal",
		WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	const char *prob = h_proxy_log_problem(&p);
	H_CHECK(prob == NULL, "proxy log %s contains a sanitizer report (\"%s\")", p.log, prob);
	h_server_stop(&srv);
}

/* ---- 12: IPv6 listener ------------------------------------------------------ */

static void case_ipv6(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct h_proxy p;
	static struct h_xfer ctx, crx;
	if (!h_ipv6_available())
		cr_skip_test("::1 is not available on this host (cannot bind [::1]:0)");
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, engine, "[::1]:0", backends, NULL);
	H_CHECK(p.addr.ss.ss_family == AF_INET6, "ready line address %s is not IPv6 (line: %s)",
		p.addr.text, p.ready_line);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", p.addr.text, strerror(errno));
	int64_t deadline = h_now_ms() + H_T(20000);
	uint64_t len = 8 * H_MIB;
	h_xfer_init(&ctx, fd, 0x1F6, len, deadline);
	ctx.shut_wr = 1;
	h_xfer_init(&crx, fd, 0x1F6, 0, deadline);
	crx.verify = 1;
	H_CHECK(h_xfer_start_send(&ctx) == 0, "thread");
	h_xfer_recv(&crx);
	H_CHECK(h_xfer_join(&ctx, 5000) == 0, "client sender stuck");
	h_check_stream("client->echo->client over [::1]", &ctx, &crx, len);
	close(fd);
	h_server_stop(&srv);
	h_proxy_down(&p);
}

H_ENGINE_CASES(bulk_both_ways, 150)
H_ENGINE_CASES(ping_pong, 120)
H_ENGINE_CASES(half_close_client_first, 120)
H_ENGINE_CASES(half_close_backend_first, 120)
H_ENGINE_CASES(backend_reset, 120)
H_ENGINE_CASES(slow_reader, 150)
H_ENGINE_CASES(sigterm_drain, 150)
H_ENGINE_CASES(unix_sockets, 120)
H_ENGINE_CASES(ipv6, 120)
H_ENGINE_CASES(bulk_tiny_pipe, 150)
H_ENGINE_CASES(unix_small_pipe_lowat, 150)
H_TINY_CASE(backend_reset, 120)

/* The experimental sockmap engine on the core cases (harness.h). */
H_SOCKMAP_CASES(bulk_both_ways, 150)
H_SOCKMAP_CASES(ping_pong, 120)
H_SOCKMAP_CASES_MAY_FALL_BACK(half_close_client_first, 120)
H_SOCKMAP_CASES_MAY_FALL_BACK(half_close_backend_first, 120)
H_SOCKMAP_CASES(backend_reset, 120)
H_SOCKMAP_CASES(slow_reader, 150)
