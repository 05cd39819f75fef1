/* SPDX-License-Identifier: MIT */
/* Fault matrix: what the network and the peers can do to a session, and what
 * splicer must still guarantee.
 *
 * Every case runs on real TCP over veth pairs between three network
 * namespaces the test creates (tools/bench/bench_link.c: client 198.18.0.1 --
 * 198.18.0.2 proxy 198.18.1.2 -- 198.18.1.1 backend) and deletes, because
 * faults are injected with iptables inside a namespace (this kernel has no
 * tc netem): random loss with `-m statistic`, resets with `REJECT
 * --reject-with tcp-reset` after N bytes (`-m connbytes`), delay with an
 * NFQUEUE helper (tests/tools/nfq_delay.c). The test process's main thread
 * lives in the proxy's namespace, so the proxy it starts does too; client and
 * backend sockets are made after switching the thread into their namespace
 * (a socket stays in the namespace it was created in).
 *
 * What each case asserts (the "expected"):
 *   - whatever arrived is intact: each receiver checks every byte against the
 *     sender's generated stream, and where nothing was reset, both ends'
 *     SHA-256 and byte counts are equal;
 *   - the session ends within its timeout (idle 3 s, connect 1 s), on both
 *     ends, with EOF or a reset, never a hang;
 *   - the proxy keeps serving: a fresh session afterwards moves its data
 *     intact;
 *   - nothing leaks: no session and no pipe in use, and the proxy's open fds
 *     equal those at start plus the pipes resting in its pools (the ASan
 *     build of the auto cases also checks for leaked memory at exit).
 * Each fault is checked to have happened (iptables counters, the delay seen
 * by a connect, the kill), so a broken injection fails instead of passing. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "netns.h"

#define IDLE_TIMEOUT_S 3
/* Above a SYN's first retransmit (initial RTO 1 s): under 5 % loss a lost SYN
 * or SYN-ACK is a slow connect, not a failed one. At 1000 ms the test passed
 * only while timeouts were checked by a 100 ms scan that fired late; timers
 * that fire on time (issue 13) failed it one run in ten. */
#define CONNECT_TIMEOUT_MS 1500
#define BULK_LEN (4 * H_MIB)   /* each way, for the cases that must deliver everything */
#define ENDLESS (256 * H_MIB)  /* "keeps sending until the session dies" */
#define RST_AFTER (1 * H_MIB)  /* bytes before the injected reset */
#define NFQ_NUM 7

static pid_t children[4];
static int nchildren;

static void f_init(void)
{
	h_init();
	nchildren = 0;
}

static void f_fini(void)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0) {
			kill(children[i], SIGTERM); /* the delay helper then logs its counts */
			h_sleep_ms(200);
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
		}
	nchildren = 0;
	h_fini();
	net_down();
}

/* ---- the proxy and its counters ------------------------------------------ */

struct fproxy {
	struct h_proxy p;
	struct h_addr stats;
	int base_fds;
};

static void proxy_up(struct fproxy *fp, const char *bin, const char *engine,
		     const char *const *backends)
{
	char idle[16], ct[16];
	snprintf(idle, sizeof idle, "%ds", IDLE_TIMEOUT_S);
	snprintf(ct, sizeof ct, "%dms", CONNECT_TIMEOUT_MS);
	/* SPLICER_FAULT_VERBOSE=1 logs every session's end in the proxy logs. */
	const char *extra[] = { "--idle-timeout", idle, "--connect-timeout", ct,
				"--stats", "127.0.0.1:0",
				getenv("SPLICER_FAULT_VERBOSE") ? "-vv" : NULL, NULL };
	h_proxy_up(&fp->p, bin, engine, "198.18.0.2:0", backends, extra);
	H_CHECK(h_stats_addr(&fp->p, &fp->stats) == 0, "no 'stats: listening on' in %s", fp->p.log);
	fp->base_fds = h_fd_count(fp->p.pid);
}

static long long metric(struct fproxy *fp, const char *name)
{
	return h_metric(&fp->stats, name);
}

/* No session, no pipe in use, and no descriptor beyond those at start and the
 * pipes resting in the pools (two each), within 3 s. */
static void check_no_leak(struct fproxy *fp, const char *when)
{
	long long act = -1, in_use = -1, pfree = -1;
	int fds = -1;

	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(50)) {
		fds = h_fd_count(fp->p.pid);
		act = metric(fp, "splicer_route_sessions_active{route=\"default\"}");
		in_use = metric(fp, "splicer_pipes{state=\"in_use\"}");
		pfree = metric(fp, "splicer_pipes{state=\"free\"}");
		if (act == 0 && in_use == 0 && pfree >= 0 && fds == fp->base_fds + 2 * pfree)
			return;
	}
	H_CHECK(0,
		"%s: leak: %lld sessions active, %lld pipes in use, %d fds open (at start %d, "
		"+%lld free pipes x 2)",
		when, act, in_use, fds, fp->base_fds, pfree);
}

/* ---- backends ------------------------------------------------------------ */

enum bmode { B_BULK, B_NOREAD };

#define MAXC 8
struct backend {
	enum bmode mode;
	uint64_t c2b_seed, b2c_seed, b2c_len;
	int64_t deadline;
	struct h_xfer rx[MAXC], tx[MAXC];
	_Atomic int done[MAXC];
	_Atomic int64_t t_closed_us[MAXC]; /* B_NOREAD: when the proxy closed it */
};

/* B_BULK: receive and check the client's stream until EOF or error while
 * sending b2c_len bytes; B_NOREAD: read nothing, send nothing, and wait for
 * the proxy to close the connection. */
static void backend_conn(struct h_server *s, int fd, int i, void *arg)
{
	struct backend *b = arg;
	if (i >= MAXC)
		return;
	if (b->mode == B_NOREAD) {
		struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };
		while (h_now_ms() < b->deadline)
			if (poll(&pfd, 1, 100) > 0 && (pfd.revents & (POLLRDHUP | POLLERR | POLLHUP))) {
				atomic_store(&b->t_closed_us[i], h_now_us());
				break;
			}
		atomic_store(&b->done[i], 1);
		return;
	}
	h_xfer_init(&b->tx[i], fd, b->b2c_seed, b->b2c_len, b->deadline);
	b->tx[i].shut_wr = 1;
	h_xfer_init(&b->rx[i], fd, b->c2b_seed, 0, b->deadline);
	b->rx[i].verify = 1;
	int started = h_xfer_start_send(&b->tx[i]) == 0;
	h_xfer_recv(&b->rx[i]);
	if (b->rx[i].err)
		shutdown(fd, SHUT_RDWR); /* a dead session: stop the sender too */
	if (started)
		h_xfer_join(&b->tx[i], 3000);
	atomic_store(&b->done[i], 1);
}

static void backend_start(struct h_server *srv, struct backend *b, enum bmode mode,
			  uint64_t b2c_len)
{
	memset(b, 0, sizeof *b);
	b->mode = mode;
	b->c2b_seed = 0xC11E47;
	b->b2c_seed = 0xBAC4E5D;
	b->b2c_len = b2c_len;
	b->deadline = h_now_ms() + H_T(60000);
	enter(LINK_SINK);
	int rc = h_server_start(srv, "198.18.1.1:0", 128, backend_conn, b);
	home();
	H_CHECK(rc == 0, "backend: %s", strerror(-rc));
}

/* ---- clients ------------------------------------------------------------- */

struct flow {
	int fd;
	int64_t t_connect_us; /* how long the connect took */
	struct h_xfer tx, rx;
};

static int client_connect(struct fproxy *fp)
{
	enter(LINK_CLIENT);
	int fd = h_connect(&fp->p.addr, 5000);
	int e = errno;
	home();
	H_CHECK(fd >= 0, "connect to the proxy at %s: %s", fp->p.addr.text, strerror(e));
	return fd;
}

/* Connects and starts sending len bytes (shutting down the write side after
 * them) and receiving until EOF, both checked against the backend's seeds. */
static void flow_start(struct flow *f, struct fproxy *fp, const struct backend *b, uint64_t len,
		       int timeout_ms)
{
	int64_t t0 = h_now_us();
	f->fd = client_connect(fp);
	f->t_connect_us = h_now_us() - t0;
	h_xfer_init(&f->tx, f->fd, b->c2b_seed, len, h_now_ms() + timeout_ms);
	f->tx.shut_wr = 1;
	h_xfer_init(&f->rx, f->fd, b->b2c_seed, 0, h_now_ms() + timeout_ms);
	f->rx.verify = 1;
	H_CHECK(h_xfer_start_send(&f->tx) == 0 && h_xfer_start_recv(&f->rx) == 0, "threads");
}

/* Joins the receiver, then gives the sender 5 s more to finish by itself (a
 * live session drains; a dead one fails its sends) before shutting the
 * socket down under it. */
static void flow_join(struct flow *f)
{
	struct timespec ts;

	H_CHECK(h_xfer_join(&f->rx, 5000) == 0, "client receiver stuck");
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	if (pthread_timedjoin_np(f->tx.thr, NULL, &ts) == 0)
		f->tx.started = 0;
	else
		shutdown(f->fd, SHUT_RDWR);
	H_CHECK(h_xfer_join(&f->tx, 5000) == 0, "client sender stuck");
	close(f->fd);
}

/* A whole session that must deliver everything both ways. */
static void full_session(struct fproxy *fp, struct h_server *srv, struct backend *b, int idx,
			 uint64_t len, int timeout_ms, const char *what)
{
	static struct flow f;
	char dir[96];

	flow_start(&f, fp, b, len, timeout_ms);
	flow_join(&f);
	H_CHECK(h_server_wait_done(srv, idx + 1, 5000) == 0, "%s: backend handler %d did not end",
		what, idx);
	snprintf(dir, sizeof dir, "%s: client->backend", what);
	h_check_stream(dir, &f.tx, &b->rx[idx], len);
	snprintf(dir, sizeof dir, "%s: backend->client", what);
	h_check_stream(dir, &b->tx[idx], &f.rx, b->b2c_len);
}

/* The end of every case: faults removed, a fresh session moves its data
 * intact, and nothing leaked. */
static void serves_after(struct fproxy *fp, struct h_server *srv, struct backend *b, int idx)
{
	ns_sh(LINK_CLIENT, "iptables -F");
	ns_sh(LINK_SINK, "iptables -F");
	full_session(fp, srv, b, idx, BULK_LEN, H_T(20000), "the session after the fault");
	check_no_leak(fp, "after the fault");
}

/* A receive that ended because the session died: EOF or a reset, not a
 * timeout, and every byte before that intact. */
static void check_cut(const char *what, const struct h_xfer *rx)
{
	H_CHECK(rx->eof || rx->err == ECONNRESET || rx->err == EPIPE,
		"%s: receive ended with %s after %llu bytes; expected EOF or a reset", what,
		rx->err ? strerror(rx->err) : "no error and no EOF", (unsigned long long)rx->bytes);
	H_CHECK(rx->mismatch_at < 0, "%s: data corrupted at offset %lld", what,
		(long long)rx->mismatch_at);
}

/* splice, auto (copy, then splice) and auto under ASan: the copy engine's
 * paths run in auto's first bytes and in every small-message test */
#define FAULT_CASES(name, tmo)                                                              \
	Test(integ, fault_##name##_splice, .init = f_init, .fini = f_fini, .timeout = tmo)   \
	{ case_##name(h_binary(0), "splice"); }                                              \
	Test(integ, fault_##name##_auto, .init = f_init, .fini = f_fini, .timeout = tmo)     \
	{ case_##name(h_binary(0), "auto"); }                                                \
	Test(integ, fault_##name##_auto_asan, .init = f_init, .fini = f_fini, .timeout = tmo) \
	{ case_##name(h_binary(1), "auto"); }

/* ---- 1, 2: 5 % packet loss on the client link, on the backend link -------- */

static void loss_case(const char *bin, const char *engine, enum link_end side)
{
	static struct h_server srv;
	static struct backend b;
	static struct fproxy fp;

	net_up();
	backend_start(&srv, &b, B_BULK, BULK_LEN);
	const char *backends[] = { srv.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);
	for (const char *chain = "INPUT"; chain; chain = strcmp(chain, "INPUT") ? NULL : "OUTPUT")
		ns_sh(side, "iptables -A %s -p tcp -m statistic --mode random --probability 0.05 -j DROP",
		      chain);
	full_session(&fp, &srv, &b, 0, BULK_LEN, H_T(60000), "under 5% loss");
	unsigned long long lost = ipt_hits(side, "INPUT", "DROP") + ipt_hits(side, "OUTPUT", "DROP");
	H_CHECK(lost > 0, "no packet was dropped: the fault was not injected");
	fprintf(stderr, "[fault] 5%% loss on the %s link (%s): %llu packets dropped, %llu MiB each way intact\n",
		side == LINK_CLIENT ? "client" : "backend", engine, lost, BULK_LEN / H_MIB);
	serves_after(&fp, &srv, &b, 1);
	h_server_stop(&srv);
	h_proxy_down(&fp.p);
}

static void case_loss_client_link(const char *bin, const char *engine)
{
	loss_case(bin, engine, LINK_CLIENT);
}

static void case_loss_backend_link(const char *bin, const char *engine)
{
	loss_case(bin, engine, LINK_SINK);
}

/* ---- 3: 20 ms delay on the client link ----------------------------------- */

static void case_delay_20ms(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct backend b;
	static struct fproxy fp;
	static struct flow f;
	const char *nfq = getenv("SPLICER_NFQ_DELAY");

	if (!nfq || access(nfq, X_OK))
		cr_skip_test("SPLICER_NFQ_DELAY (the NFQUEUE delay helper) is not set: make test builds it");
	net_up();
	backend_start(&srv, &b, B_BULK, BULK_LEN);
	const char *backends[] = { srv.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);

	/* Everything that reaches the client's namespace waits 20 ms. On INPUT,
	 * not OUTPUT: a packet held in the sender's own OUTPUT chain still counts
	 * against its socket, and TCP small queues then let only ~2 packets out
	 * per delay (0.3 MB/s measured), which is not what a long link does. */
	ns_sh(LINK_CLIENT, "iptables -A INPUT -p tcp -j NFQUEUE --queue-num %d --queue-bypass", NFQ_NUM);
	char log[300];
	snprintf(log, sizeof log, "%s/nfq_delay.log", h_tmpdir());
	pid_t pid = fork();
	H_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		execl("/usr/sbin/ip", "ip", "netns", "exec", ns_of(LINK_CLIENT), nfq, "7", "20", "90",
		      (char *)NULL);
		_exit(127);
	}
	children[nchildren++] = pid;
	int ready = 0;
	for (int64_t end = h_now_ms() + 5000; !ready && h_now_ms() < end; h_sleep_ms(20)) {
		FILE *lf = fopen(log, "re");
		for (char l[256]; lf && fgets(l, sizeof l, lf);)
			ready |= strstr(l, "nfq_delay: ready") != NULL;
		if (lf)
			fclose(lf);
	}
	H_CHECK(ready, "the NFQUEUE delay helper did not start (see %s)", log);

	int64_t t_start = h_now_us();
	flow_start(&f, &fp, &b, BULK_LEN, H_T(60000));
	flow_join(&f);
	H_CHECK(f.t_connect_us >= 19000,
		"connect through the delayed link took %lld us: the delay was not applied",
		(long long)f.t_connect_us);
	H_CHECK(h_server_wait_done(&srv, 1, 5000) == 0, "backend handler did not end");
	h_check_stream("20 ms delay: client->backend", &f.tx, &b.rx[0], BULK_LEN);
	h_check_stream("20 ms delay: backend->client", &b.tx[0], &f.rx, BULK_LEN);
	fprintf(stderr, "[fault] 20 ms delay (%s): connect %lld us, %llu MiB each way intact in %lld ms\n",
		engine, (long long)f.t_connect_us, BULK_LEN / H_MIB,
		(long long)((f.rx.t_end_us - t_start) / 1000));
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	nchildren--;
	serves_after(&fp, &srv, &b, 1);
	h_server_stop(&srv);
	h_proxy_down(&fp.p);
}

/* ---- 4, 5: a reset injected after 1 MiB on the client / backend link ------ */

/* The network resets the proxy's socket on one side while both ends keep
 * sending: the proxy must end the other side promptly, and both ends must
 * hold only intact prefixes. */
static void rst_case(const char *bin, const char *engine, enum link_end side)
{
	static struct h_server srv;
	static struct backend b;
	static struct fproxy fp;
	static struct flow f;

	net_up();
	backend_start(&srv, &b, B_BULK, ENDLESS);
	const char *backends[] = { srv.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);
	/* The rule drops the packet that crosses RST_AFTER bytes and answers the
	 * proxy with a reset in the peer's name (never a reset to a reset). */
	if (side == LINK_CLIENT)
		ns_sh(side,
		      "iptables -A INPUT -p tcp --sport %d ! --tcp-flags RST RST -m connbytes "
		      "--connbytes %llu: --connbytes-dir reply --connbytes-mode bytes -j REJECT "
		      "--reject-with tcp-reset",
		      h_addr_port(&fp.p.addr), RST_AFTER);
	else
		ns_sh(side,
		      "iptables -A INPUT -p tcp --dport %d ! --tcp-flags RST RST -m connbytes "
		      "--connbytes %llu: --connbytes-dir original --connbytes-mode bytes -j REJECT "
		      "--reject-with tcp-reset",
		      h_addr_port(&srv.addr), RST_AFTER);

	int64_t t0 = h_now_us();
	flow_start(&f, &fp, &b, ENDLESS, H_T(30000));
	flow_join(&f);
	H_CHECK(h_server_wait_done(&srv, 1, 5000) == 0, "backend handler did not end");
	H_CHECK(ipt_hits(side, "INPUT", "REJECT") > 0, "the reset was never injected");
	check_cut("client", &f.rx);
	check_cut("backend", &b.rx[0]);
	int64_t last = f.rx.t_end_us > b.rx[0].t_end_us ? f.rx.t_end_us : b.rx[0].t_end_us;
	H_CHECK(last - t0 < (IDLE_TIMEOUT_S + 2) * 1000000LL,
		"the session took %lld ms to end on both sides after the reset",
		(long long)((last - t0) / 1000));
	fprintf(stderr,
		"[fault] reset on the %s link (%s): client got %llu B, backend got %llu B, intact; "
		"both ends closed %lld ms after the start\n",
		side == LINK_CLIENT ? "client" : "backend", engine, (unsigned long long)f.rx.bytes,
		(unsigned long long)b.rx[0].bytes, (long long)((last - t0) / 1000));
	b.b2c_len = BULK_LEN;
	serves_after(&fp, &srv, &b, 1);
	h_server_stop(&srv);
	h_proxy_down(&fp.p);
}

static void case_rst_client_link(const char *bin, const char *engine)
{
	rst_case(bin, engine, LINK_CLIENT);
}

static void case_rst_backend_link(const char *bin, const char *engine)
{
	rst_case(bin, engine, LINK_SINK);
}

/* ---- 6: the backend process is SIGKILLed mid-transfer ------------------- */

/* The child's whole life: accept one connection, then send the stream and
 * discard what arrives, until it is killed. Only syscalls and h_gen (pure)
 * after fork, so it is safe in a threaded parent. */
static void doomed_backend(int lfd, uint64_t seed)
{
	static char out[64 * 1024], in[64 * 1024];
	uint64_t off = 0;
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		_exit(1);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT };
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if (pfd.revents & POLLIN && recv(fd, in, sizeof in, MSG_DONTWAIT) == 0)
			_exit(0);
		if (pfd.revents & POLLOUT) {
			h_gen(seed, off, out, sizeof out);
			ssize_t n = send(fd, out, sizeof out, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				off += (uint64_t)n;
			/* the next chunk regenerates from off, so a partial send is fine */
		}
		if (pfd.revents & (POLLERR | POLLHUP))
			_exit(0);
	}
}

static void case_backend_killed(const char *bin, const char *engine)
{
	static struct h_server srv;
	static struct backend b;
	static struct fproxy fp;
	static struct flow f;
	struct h_addr da;

	net_up();
	backend_start(&srv, &b, B_BULK, BULK_LEN);
	/* The doomed backend is listed first: round-robin gives it the first session. */
	enter(LINK_SINK);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(h_addr_parse("198.18.1.1:0", &da) == 0, "addr");
	int rc = lfd < 0 ? -1 : bind(lfd, (struct sockaddr *)&da.ss, da.len);
	rc = rc ? rc : listen(lfd, 16);
	home();
	H_CHECK(rc == 0, "doomed backend listen: %s", strerror(errno));
	struct sockaddr_storage bound;
	socklen_t sl = sizeof bound;
	getsockname(lfd, (struct sockaddr *)&bound, &sl);
	h_addr_from(&da, (struct sockaddr *)&bound, sl);
	pid_t pid = fork();
	H_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		doomed_backend(lfd, b.b2c_seed);
	children[nchildren++] = pid;
	close(lfd);

	const char *backends[] = { da.text, srv.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);
	flow_start(&f, &fp, &b, ENDLESS, H_T(30000));
	while (atomic_load(&f.rx.progress) < 1 * H_MIB && h_now_ms() < f.rx.deadline_ms)
		h_sleep_ms(1);
	H_CHECK(atomic_load(&f.rx.progress) >= 1 * H_MIB, "the doomed backend never sent 1 MiB");
	kill(pid, SIGKILL);
	int64_t t_kill = h_now_us();
	waitpid(pid, NULL, 0);
	nchildren--;
	flow_join(&f);
	check_cut("client", &f.rx);
	H_CHECK(f.rx.t_end_us - t_kill < 1000000,
		"the client saw its session end %lld ms after the backend died (limit 1000 ms)",
		(long long)((f.rx.t_end_us - t_kill) / 1000));
	fprintf(stderr, "[fault] backend SIGKILLed (%s): client got %llu B intact, closed %lld ms later\n",
		engine, (unsigned long long)f.rx.bytes, (long long)((f.rx.t_end_us - t_kill) / 1000));
	/* The next session goes to the live backend (or falls through to it:
	 * the dead one refuses). */
	serves_after(&fp, &srv, &b, 0);
	h_server_stop(&srv);
	h_proxy_down(&fp.p);
}

/* ---- 7, 8: the client vanishes: closes with unread data, or with SO_LINGER 0 */

static void vanish_case(const char *bin, const char *engine, int linger0)
{
	static struct h_server srv;
	static struct backend b;
	static struct fproxy fp;

	net_up();
	backend_start(&srv, &b, B_BULK, ENDLESS);
	const char *backends[] = { srv.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);

	int fd = client_connect(&fp);
	static char buf[64 * 1024];
	/* Some data each way, then gone while the backend is still sending. */
	for (uint64_t off = 0; off < 1 * H_MIB; off += sizeof buf) {
		h_gen(b.c2b_seed, off, buf, sizeof buf);
		H_CHECK(h_send_all(fd, buf, sizeof buf, h_now_ms() + 10000) == 0, "client send");
	}
	H_CHECK(h_recv_exact(fd, buf, sizeof buf, h_now_ms() + 10000) == 0, "client recv");
	H_CHECK(h_gen_check(b.b2c_seed, 0, buf, sizeof buf) == sizeof buf, "first 64 KiB corrupted");
	while (atomic_load(&b.rx[0].progress) < 1 * H_MIB && h_now_ms() < b.deadline)
		h_sleep_ms(1);
	if (linger0) {
		struct linger lg = { 1, 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	}
	int64_t t_close = h_now_us();
	close(fd); /* unread data (or linger 0): the kernel sends a reset */
	H_CHECK(h_server_wait_done(&srv, 1, 5000) == 0, "backend handler did not end");
	check_cut("backend", &b.rx[0]);
	H_CHECK(b.rx[0].bytes == 1 * H_MIB, "backend got %llu of the client's %llu bytes",
		(unsigned long long)b.rx[0].bytes, 1 * H_MIB);
	H_CHECK(b.rx[0].t_end_us - t_close < 1000000,
		"the backend saw the session end %lld ms after the client vanished (limit 1000 ms)",
		(long long)((b.rx[0].t_end_us - t_close) / 1000));
	H_CHECK(b.tx[0].err != 0 || b.tx[0].bytes < ENDLESS, "backend sender did not notice");
	fprintf(stderr, "[fault] client vanished%s (%s): backend closed %lld ms later\n",
		linger0 ? " (SO_LINGER 0)" : " (unread data)", engine,
		(long long)((b.rx[0].t_end_us - t_close) / 1000));
	b.b2c_len = BULK_LEN;
	serves_after(&fp, &srv, &b, 1);
	h_server_stop(&srv);
	h_proxy_down(&fp.p);
}

static void case_client_vanishes_unread(const char *bin, const char *engine)
{
	vanish_case(bin, engine, 0);
}

static void case_client_vanishes_linger0(const char *bin, const char *engine)
{
	vanish_case(bin, engine, 1);
}

/* ---- 9: the backend accepts but never reads ------------------------------ */

static void case_backend_never_reads(const char *bin, const char *engine)
{
	static struct h_server srv, good;
	static struct backend b, gb;
	static struct fproxy fp;
	static struct flow f;

	net_up();
	backend_start(&srv, &b, B_NOREAD, 0);
	backend_start(&good, &gb, B_BULK, BULK_LEN);
	const char *backends[] = { srv.addr.text, good.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);
	int64_t t0 = h_now_us();
	flow_start(&f, &fp, &b, ENDLESS, H_T(30000));
	flow_join(&f);
	/* Buffers fill, then nothing moves: the idle timeout must end it. */
	H_CHECK(f.rx.eof || f.rx.err == ECONNRESET, "client receive ended with %s, expected EOF",
		f.rx.err ? strerror(f.rx.err) : "?");
	H_CHECK(f.tx.bytes < ENDLESS && f.tx.err, "the client's sends never stalled");
	int64_t took = f.rx.t_end_us - t0;
	H_CHECK(took >= (IDLE_TIMEOUT_S - 1) * 1000000LL && took < (IDLE_TIMEOUT_S + 3) * 1000000LL,
		"a stalled session ended after %lld ms (idle timeout %d s)", (long long)(took / 1000),
		IDLE_TIMEOUT_S);
	H_CHECK(h_server_wait_done(&srv, 1, 3000) == 0 && atomic_load(&b.t_closed_us[0]) > 0,
		"the proxy never closed the silent backend's connection");
	fprintf(stderr, "[fault] backend never reads (%s): client sent %llu B before the stall, "
		"session closed after %lld ms\n", engine, (unsigned long long)f.tx.bytes,
		(long long)(took / 1000));
	/* The next session goes to the reading backend. */
	serves_after(&fp, &good, &gb, 0);
	h_server_stop(&srv);
	h_server_stop(&good);
	h_proxy_down(&fp.p);
}

/* ---- 10: the backend never accepts (its backlog is full) ----------------- */

static void case_backend_never_accepts(const char *bin, const char *engine)
{
	static struct h_server good;
	static struct backend gb;
	static struct fproxy fp;
	struct h_addr sa;
	int fill[3];

	net_up();
	backend_start(&good, &gb, B_BULK, BULK_LEN);
	/* Listen with backlog 0 (a queue of one) and fill it from the backend's
	 * own namespace; further SYNs are dropped, so connects hang. */
	enter(LINK_SINK);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(h_addr_parse("198.18.1.1:0", &sa) == 0, "addr");
	int rc = bind(lfd, (struct sockaddr *)&sa.ss, sa.len) || listen(lfd, 0);
	struct sockaddr_storage bound;
	socklen_t sl = sizeof bound;
	getsockname(lfd, (struct sockaddr *)&bound, &sl);
	h_addr_from(&sa, (struct sockaddr *)&bound, sl);
	for (int i = 0; i < 3; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		connect(fill[i], (struct sockaddr *)&sa.ss, sa.len);
	}
	home();
	H_CHECK(rc == 0, "stuck backend listen: %s", strerror(errno));
	h_sleep_ms(100);

	const char *backends[] = { sa.text, good.addr.text, NULL };
	proxy_up(&fp, bin, engine, backends);
	/* The first session tries the stuck backend first, gives up after the
	 * connect timeout and is served by the next. */
	static struct flow f;
	int64_t t0 = h_now_us();
	flow_start(&f, &fp, &gb, BULK_LEN, H_T(30000));
	flow_join(&f);
	H_CHECK(h_server_wait_done(&good, 1, 5000) == 0, "backend handler did not end");
	h_check_stream("past a stuck backend: client->backend", &f.tx, &gb.rx[0], BULK_LEN);
	h_check_stream("past a stuck backend: backend->client", &gb.tx[0], &f.rx, BULK_LEN);
	int64_t took = f.rx.t_end_us - t0;
	long long errs = metric(&fp, "splicer_route_connect_errors_total{route=\"default\"}");
	H_CHECK(errs == 1, "connect errors counted: %lld, expected 1 (the stuck backend)", errs);
	H_CHECK(took >= (CONNECT_TIMEOUT_MS - 100) * 1000LL,
		"the session was served after %lld ms: the stuck backend was not tried",
		(long long)(took / 1000));
	fprintf(stderr, "[fault] backend never accepts (%s): session served by the next backend "
		"after %lld ms, intact\n", engine, (long long)(took / 1000));
	serves_after(&fp, &good, &gb, 1);
	for (int i = 0; i < 3; i++)
		close(fill[i]);
	close(lfd);
	h_server_stop(&good);
	h_proxy_down(&fp.p);
}

FAULT_CASES(loss_client_link, 150)
FAULT_CASES(loss_backend_link, 150)
FAULT_CASES(delay_20ms, 150)
FAULT_CASES(rst_client_link, 90)
FAULT_CASES(rst_backend_link, 90)
FAULT_CASES(backend_killed, 90)
FAULT_CASES(client_vanishes_unread, 90)
FAULT_CASES(client_vanishes_linger0, 90)
FAULT_CASES(backend_never_reads, 90)
FAULT_CASES(backend_never_accepts, 90)
