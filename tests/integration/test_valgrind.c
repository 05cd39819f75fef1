/* SPDX-License-Identifier: MIT */
/* Integration case: the plain proxy under valgrind memcheck. One proxy with
 * a route per engine (copy, splice, auto) carries, on each route, streams
 * both ways at once, request/response rounds, a half-close, a backend reset
 * and a client reset (a fourth route, splice with lowat, a stream); then a
 * SIGHUP reload, a SIGUSR1 reopen, a /metrics scrape and SIGTERM. memcheck
 * must report no error and no definitely lost byte. ASan+UBSan runs the rest of the suite; memcheck adds reads of
 * uninitialised memory (ASan does not see them) and a leak check at exit.
 *
 * valgrind is the Debian package of that name (/usr/bin/valgrind). No
 * suppression file: memcheck models every syscall the proxy makes (splice,
 * epoll, accept4, pipe2, F_SETPIPE_SZ, SO_RCVLOWAT, SIOCINQ) and reports
 * nothing on it. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define VG_DOWN 0xD0D0D0D0D0D0D0D0ull /* the down stream's seed is the up one's ^ this */
#define VG_STREAM (3 * H_MIB)         /* each way, per route */
#define VG_HALF_UP (256 * H_KIB)
#define VG_HALF_DOWN H_MIB
#define VG_RESET_DOWN (100 * H_KIB)

/* What the backend did with one session, found by the session's seed. */
struct vg_slot {
	char mode;
	uint64_t seed, len;
	struct h_xfer tx, rx;
	int rounds;
	int err;
	_Atomic int finished;
};

static struct vg_slot vg_slots[H_SERVER_MAX_CONNS];

/* The first 17 bytes of every session say what the backend does:
 *   S seed len  a stream each way at once: verify seed up to EOF, send len
 *               bytes of seed ^ VG_DOWN, then FIN
 *   H seed len  half-close: read seed to EOF, only then send len bytes
 *   Q seed 0    request/response: [4-byte length][bytes], echoed, until EOF
 *   R seed len  send len bytes, then reset (SO_LINGER 0)
 *   E seed 0    echo until EOF or error (the client resets) */
static void vg_conn(struct h_server *s, int fd, int index, void *arg)
{
	struct vg_slot *c = &vg_slots[index];
	unsigned char hdr[17];
	int64_t deadline = h_now_ms() + H_T(60000);
	(void)s;
	(void)arg;

	if (h_recv_exact(fd, hdr, sizeof hdr, deadline)) {
		c->err = EPROTO;
		atomic_store(&c->finished, 1);
		return;
	}
	c->mode = (char)hdr[0];
	memcpy(&c->seed, hdr + 1, 8);
	memcpy(&c->len, hdr + 9, 8);
	switch (c->mode) {
	case 'S':
		h_xfer_init(&c->tx, fd, c->seed ^ VG_DOWN, c->len, deadline);
		c->tx.shut_wr = 1;
		h_xfer_init(&c->rx, fd, c->seed, 0, deadline);
		c->rx.verify = 1;
		if (h_xfer_start_send(&c->tx) < 0)
			c->tx.err = EAGAIN;
		h_xfer_recv(&c->rx);
		h_xfer_join(&c->tx, 5000);
		break;
	case 'H':
		h_xfer_init(&c->rx, fd, c->seed, 0, deadline);
		c->rx.verify = 1;
		h_xfer_recv(&c->rx);
		h_xfer_init(&c->tx, fd, c->seed ^ VG_DOWN, c->len, deadline);
		if (c->rx.eof) /* only after the client's FIN came through */
			h_xfer_send(&c->tx);
		break;
	case 'Q':
		for (;;) {
			static __thread unsigned char buf[65536];
			uint32_t n;
			int rc = h_recv_exact(fd, &n, 4, deadline);
			if (rc == -ENODATA)
				break;
			if (rc || (n = ntohl(n)) > sizeof buf || h_recv_exact(fd, buf, n, deadline) ||
			    h_send_all(fd, buf, n, deadline)) {
				c->err = rc ? -rc : EPROTO;
				break;
			}
			c->rounds++;
		}
		break;
	case 'R': {
		struct linger lg = { 1, 0 };
		h_xfer_init(&c->tx, fd, c->seed ^ VG_DOWN, c->len, deadline);
		h_xfer_send(&c->tx);
		h_sleep_ms(50); /* the bytes leave before the reset */
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		break;
	}
	case 'E':
		for (;;) {
			char buf[16384];
			ssize_t n = recv(fd, buf, sizeof buf, 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR) && h_now_ms() < deadline)
				continue;
			if (n <= 0 || h_send_all(fd, buf, (size_t)n, deadline))
				break;
			c->len += (uint64_t)n;
		}
		break;
	default:
		c->err = EPROTO;
	}
	atomic_store(&c->finished, 1);
}

/* The backend's record of the session with this seed, once it finished. */
static struct vg_slot *vg_slot_of(uint64_t seed, const char *what)
{
	for (int64_t end = h_now_ms() + 20000; h_now_ms() < end; h_sleep_ms(10))
		for (int i = 0; i < H_SERVER_MAX_CONNS; i++)
			if (atomic_load(&vg_slots[i].finished) && vg_slots[i].seed == seed)
				return &vg_slots[i];
	H_CHECK(0, "%s: the backend did not finish the session within 20 s", what);
	return NULL;
}

static int vg_open(const struct h_addr *a, char mode, uint64_t seed, uint64_t len)
{
	unsigned char hdr[17] = { (unsigned char)mode };
	int fd = h_connect(a, 5000);

	H_CHECK(fd >= 0, "connect to %s: %s", a->text, strerror(errno));
	memcpy(hdr + 1, &seed, 8);
	memcpy(hdr + 9, &len, 8);
	H_CHECK(h_send_all(fd, hdr, sizeof hdr, h_now_ms() + 5000) == 0, "session header to %s",
		a->text);
	return fd;
}

static uint64_t vg_bytes; /* moved through the proxy, both ways, all routes */

static void vg_streams(const struct h_addr *a, const char *route, uint64_t seed)
{
	static struct h_xfer tx, rx;
	char what[64];
	int64_t deadline = h_now_ms() + H_T(60000);
	int fd = vg_open(a, 'S', seed, VG_STREAM);

	h_xfer_init(&tx, fd, seed, VG_STREAM, deadline);
	tx.shut_wr = 1;
	h_xfer_init(&rx, fd, seed ^ VG_DOWN, 0, deadline);
	rx.verify = 1;
	H_CHECK(h_xfer_start_send(&tx) == 0, "sender thread");
	h_xfer_recv(&rx);
	H_CHECK(h_xfer_join(&tx, 5000) == 0, "%s: the client's sender did not finish", route);
	close(fd);
	struct vg_slot *b = vg_slot_of(seed, route);
	snprintf(what, sizeof what, "route %s, client->backend", route);
	h_check_stream(what, &tx, &b->rx, VG_STREAM);
	snprintf(what, sizeof what, "route %s, backend->client", route);
	h_check_stream(what, &b->tx, &rx, VG_STREAM);
	vg_bytes += 2 * VG_STREAM;
}

static void vg_requests(const struct h_addr *a, const char *route, uint64_t seed, int rounds)
{
	static unsigned char out[4096], back[4096];
	uint64_t off = 0;
	int fd = vg_open(a, 'Q', seed, 0);

	h_set_nodelay(fd);
	for (int i = 0; i < rounds; i++) {
		uint32_t n = (uint32_t)(1 + (i * 397) % 3000), be = htonl(n);
		h_gen(seed, off, out, n);
		int rc = h_send_all(fd, &be, 4, h_now_ms() + 10000);
		if (!rc)
			rc = h_send_all(fd, out, n, h_now_ms() + 10000);
		if (!rc)
			rc = h_recv_exact(fd, back, n, h_now_ms() + 10000);
		H_CHECK(rc == 0 && !memcmp(out, back, n), "route %s, request %d (%u bytes): %s", route, i,
			n, rc ? strerror(-rc) : "the response differs");
		off += n;
	}
	shutdown(fd, SHUT_WR);
	H_CHECK(h_expect_eof(fd, h_now_ms() + 10000) == 0, "route %s: no EOF after the requests",
		route);
	close(fd);
	struct vg_slot *b = vg_slot_of(seed, route);
	H_CHECK(b->rounds == rounds && !b->err, "route %s: the backend answered %d of %d requests (%s)",
		route, b->rounds, rounds, strerror(b->err));
	vg_bytes += 2 * off;
}

static void vg_half_close(const struct h_addr *a, const char *route, uint64_t seed)
{
	static struct h_xfer tx, rx;
	char what[64];
	int64_t deadline = h_now_ms() + H_T(60000);
	int fd = vg_open(a, 'H', seed, VG_HALF_DOWN);

	h_xfer_init(&tx, fd, seed, VG_HALF_UP, deadline);
	tx.shut_wr = 1;
	h_xfer_send(&tx); /* then the FIN: the backend answers only after it */
	h_xfer_init(&rx, fd, seed ^ VG_DOWN, 0, deadline);
	rx.verify = 1;
	h_xfer_recv(&rx);
	close(fd);
	struct vg_slot *b = vg_slot_of(seed, route);
	snprintf(what, sizeof what, "route %s, half-close, up", route);
	h_check_stream(what, &tx, &b->rx, VG_HALF_UP);
	snprintf(what, sizeof what, "route %s, half-close, down after the client's FIN", route);
	h_check_stream(what, &b->tx, &rx, VG_HALF_DOWN);
	vg_bytes += VG_HALF_UP + VG_HALF_DOWN;
}

static void vg_backend_reset(const struct h_addr *a, const char *route, uint64_t seed)
{
	static struct h_xfer rx;
	int fd = vg_open(a, 'R', seed, VG_RESET_DOWN);

	h_xfer_init(&rx, fd, seed ^ VG_DOWN, 0, h_now_ms() + H_T(20000));
	rx.verify = 1;
	h_xfer_recv(&rx);
	close(fd);
	H_CHECK(rx.eof || rx.err == ECONNRESET, "route %s: after a backend reset the client saw %s, "
						"expected EOF or a reset", route, strerror(rx.err));
	H_CHECK(rx.mismatch_at < 0 && rx.bytes <= VG_RESET_DOWN,
		"route %s: before the backend reset the client got %llu bytes (mismatch at %lld)", route,
		(unsigned long long)rx.bytes, (long long)rx.mismatch_at);
	vg_slot_of(seed, route);
	vg_bytes += rx.bytes;
}

static void vg_client_reset(const struct h_addr *a, const char *route, uint64_t seed)
{
	static unsigned char buf[64 * 1024];
	struct linger lg = { 1, 0 };
	int fd = vg_open(a, 'E', seed, 0);

	h_gen(seed, 0, buf, sizeof buf);
	H_CHECK(h_send_all(fd, buf, sizeof buf, h_now_ms() + 10000) == 0 &&
			h_recv_exact(fd, buf, 1024, h_now_ms() + 10000) == 0,
		"route %s: echo before the client reset", route);
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
	/* the proxy must close the backend side too: the echo handler ends */
	vg_slot_of(seed, route);
	vg_bytes += sizeof buf + 1024;
}

static void vg_traffic(const struct h_addr *a, const char *route, uint64_t salt)
{
	vg_streams(a, route, salt ^ 0x5100);
	vg_requests(a, route, salt ^ 0x5200, 100);
	vg_half_close(a, route, salt ^ 0x5300);
	vg_backend_reset(a, route, salt ^ 0x5400);
	vg_client_reset(a, route, salt ^ 0x5500);
}

static const char *vg_path(void)
{
	static char path[256];
	const char *env = getenv("PATH");
	char dirs[1024];

	snprintf(dirs, sizeof dirs, "%s", env && *env ? env : "/usr/bin:/bin");
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, sizeof path, "%s/valgrind", d);
		if (access(path, X_OK) == 0)
			return path;
	}
	return NULL;
}


/* The number after `key` in text ("81,130" style), or -1 if key is absent. */
static long long vg_number(const char *text, const char *key)
{
	const char *s = strstr(text, key);
	long long v = 0;

	if (!s)
		return -1;
	for (s += strlen(key); *s == ' '; s++)
		;
	if (*s < '0' || *s > '9')
		return -1;
	for (; (*s >= '0' && *s <= '9') || *s == ','; s++)
		if (*s != ',')
			v = v * 10 + (*s - '0');
	return v;
}

static char *vg_read(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	if (!f)
		return NULL;
	do {
		if (len + 4096 + 1 > cap && !(buf = realloc(buf, cap = 2 * cap + 8192)))
			break;
		n = fread(buf + len, 1, 4096, f);
		len += n;
	} while (n > 0);
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

Test(integ, valgrind_memcheck_clean, .init = h_init, .fini = h_fini, .timeout = 240)
{
	const char *bin = h_binary(0);
	const char *vg = vg_path();
	static struct h_server srv;
	static struct h_proxy p;
	char conf[300], vlog[300], alog[300], text[1200], logarg[320], err[512];
	int port[4] = { h_free_port(), h_free_port(), h_free_port(), h_free_port() };
	static const char *const routes[4] = { "copy", "splice", "auto", "lowat" };
	struct h_addr addr[4];

	H_CHECK(vg, "valgrind not found in PATH: install the Debian package valgrind");
	h_slow = 3; /* memcheck runs the proxy some 20 times slower: wider deadlines */
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, vg_conn, NULL);
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
	snprintf(conf, sizeof conf, "%s/vg.conf", h_tmpdir());
	snprintf(vlog, sizeof vlog, "%s/valgrind.log", h_tmpdir());
	snprintf(alog, sizeof alog, "%s/access.log", h_tmpdir());
	/* a fourth route, splice with lowat, runs the tail scan (SIOCINQ) on a
	 * stream; small requests on it would wait a scan period (100 ms) each.
	 * auto keeps its request/response sessions on copy here: memcheck does
	 * not model io_uring (what the kernel writes into provided buffers, and
	 * its sessions stalled under it), as for the uring engine itself; the
	 * ASan runs cover auto's move to it (test_auto_shape.c, test_limits.c). */
	int n = snprintf(text, sizeof text, "[global]\nworkers = 2\nstats = 127.0.0.1:0\nlog = %s\n",
			 alog);
	for (int i = 0; i < 4; i++)
		n += snprintf(text + n, sizeof text - (size_t)n,
			      "\n[route %s]\nlisten = 127.0.0.1:%d\nbackend = %s\nengine = %s\n%s",
			      routes[i], port[i], srv.addr.text, i < 3 ? routes[i] : "splice",
			      i == 3 ? "lowat = 16k\n" : i == 2 ? "auto_uring_turns = 0\n" : "");
	FILE *f = fopen(conf, "we");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", conf);

	snprintf(logarg, sizeof logarg, "--log-file=%s", vlog);
	const char *args[16] = { "--tool=memcheck", "--error-exitcode=99", "--leak-check=full",
				 "--errors-for-leak-kinds=definite", "--track-fds=no", logarg };
	int na = 6;
	args[na++] = bin;
	args[na++] = "-c";
	args[na++] = conf;
	args[na++] = "-v";
	args[na] = NULL;
	int64_t t0 = h_now_ms();
	H_CHECK(h_proxy_start(&p, vg, args, err, sizeof err) == 0, "the proxy under valgrind: %s", err);
	fprintf(stderr, "valgrind: proxy ready after %lld ms\n", (long long)(h_now_ms() - t0));
	for (int i = 0; i < 4; i++) {
		char a[64];
		snprintf(a, sizeof a, "127.0.0.1:%d", port[i]);
		H_CHECK(h_addr_parse(a, &addr[i]) == 0, "address %s", a);
	}

	for (int i = 0; i < 3; i++)
		vg_traffic(&addr[i], routes[i], 0x7A16000000ull * (uint64_t)(i + 1));
	vg_streams(&addr[3], routes[3], 0x7A16000000ull * 4);

	/* a reload (the old config retired, then freed), a log reopen, a scrape */
	kill(p.pid, SIGHUP);
	for (int64_t end = h_now_ms() + 20000; h_now_ms() < end; h_sleep_ms(20))
		if (h_log_lines(&p, "SIGHUP: reloaded", NULL))
			break;
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", "listeners kept 4", NULL) == 1,
		"no 'SIGHUP: reloaded ... listeners kept 4' line in %s", p.log);
	kill(p.pid, SIGUSR1);
	for (int i = 0; i < 3; i++)
		vg_requests(&addr[i], routes[i], 0x7A17000000ull * (uint64_t)(i + 1), 10);
	{
		char sa[160] = "", line[512];
		struct h_addr stats;
		FILE *lf = fopen(p.log, "re");
		while (lf && fgets(line, sizeof line, lf))
			if (strstr(line, "stats: listening on "))
				sscanf(strstr(line, "stats: listening on ") + 20, "%159s", sa);
		if (lf)
			fclose(lf);
		H_CHECK(sa[0] && h_addr_parse(sa, &stats) == 0, "no stats address in %s", p.log);
		int fd = h_connect(&stats, 5000);
		char resp[256] = "";
		H_CHECK(fd >= 0 && h_send_all(fd, "GET /metrics HTTP/1.0\r\n\r\n", 25,
					      h_now_ms() + 5000) == 0 &&
				h_recv_exact(fd, resp, 17, h_now_ms() + 10000) == 0,
			"GET /metrics under valgrind");
		close(fd);
		H_CHECK(!strncmp(resp, "HTTP/1.1 200 OK\r\n", 17), "GET /metrics: '%.40s'", resp);
	}

	int64_t t1 = h_now_ms();
	pid_t pid = p.pid;
	int st = h_proxy_stop(&p, 60000);
	H_CHECK(st != -1, "the proxy under valgrind (pid %d) did not exit within 60 s of SIGTERM",
		(int)pid);
	fprintf(stderr, "valgrind: %llu bytes moved through the proxy; stopped %lld ms after "
			"SIGTERM; whole run %lld ms\n", (unsigned long long)vg_bytes,
		(long long)(h_now_ms() - t1), (long long)(h_now_ms() - t0));

	char *v = vg_read(vlog);
	H_CHECK(v, "cannot read the valgrind log %s", vlog);
	long long errors = vg_number(v, "ERROR SUMMARY:");
	long long definite = vg_number(v, "definitely lost:");
	long long blocks = -1, inuse = vg_number(v, "in use at exit:");
	const char *dl = strstr(v, "definitely lost:");
	if (dl && (dl = strstr(dl, " in ")))
		blocks = vg_number(dl, " in ");
	int summary = strstr(v, "HEAP SUMMARY:") != NULL;
	fprintf(stderr, "valgrind: ERROR SUMMARY %lld errors; definitely lost %lld bytes in %lld "
			"blocks; in use at exit %lld bytes (-1: not in the log)\n", errors,
		definite < 0 ? 0 : definite, blocks < 0 ? 0 : blocks, inuse);
	if (errors != 0 || definite > 0)
		fprintf(stderr, "valgrind log %s:\n%s\n", vlog, v);
	free(v);
	H_CHECK(summary && errors >= 0, "the valgrind log %s has no HEAP SUMMARY / ERROR SUMMARY: "
					"memcheck did not run to the end", vlog);
	H_CHECK(errors == 0, "memcheck reported %lld errors (log %s)", errors, vlog);
	H_CHECK(definite <= 0, "memcheck: %lld bytes definitely lost (log %s)", definite, vlog);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"the proxy under valgrind ended with %s %d (99: memcheck errors); log %s",
		WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
		p.log);
	H_CHECK(h_log_lines(&p, "SIGUSR1: access log", "reopened", NULL) == 1,
		"no 'SIGUSR1: access log ... reopened' line in %s", p.log);
	h_server_stop(&srv);
}
