/* SPDX-License-Identifier: MIT */
/* The experimental sockmap engine: a slow client taking a queued answer
 * keeps its session past half_close_timeout (below); no counter of /metrics
 * goes down when a backend resets with bytes still in the redirect queue,
 * and they are not counted (below); and the fallback: when
 * BPF cannot be loaded the proxy says why in one line at start and forwards
 * with splice. For that case the proxy is started without the capabilities
 * BPF needs: through setpriv, dropping CAP_BPF, CAP_SYS_ADMIN, CAP_PERFMON
 * and CAP_NET_ADMIN from the bounding set (so the exec'd root process has
 * none of them), or directly when this process already lacks them. The engine's data-path cases are the
 * H_SOCKMAP_CASES in test_streams.c, test_concurrent.c and test_limits.c. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define SETPRIV "/usr/bin/setpriv"

static void case_fallback(const char *bin)
{
	static struct h_server srv;
	static struct h_proxy p;
	const char *args[32];
	int n = 0;
	char why[256];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *exe = bin;
	if (h_bpf_capable()) {
		if (access(SETPRIV, X_OK) != 0)
			cr_skip_test("%s (util-linux) is missing: cannot drop CAP_BPF for the proxy", SETPRIV);
		exe = SETPRIV;
		args[n++] = "--bounding-set=-bpf,-sys_admin,-perfmon,-net_admin";
		args[n++] = "--inh-caps=-all";
		args[n++] = "--";
		args[n++] = bin;
	}
	args[n++] = "-l";
	args[n++] = "127.0.0.1:0";
	args[n++] = "-b";
	args[n++] = srv.addr.text;
	args[n++] = "--engine";
	args[n++] = "sockmap";
	args[n++] = "--workers";
	args[n++] = "1";
	args[n] = NULL;
	rc = h_proxy_start(&p, exe, args, why, sizeof why);
	H_CHECK(rc == 0, "proxy without BPF capabilities did not start: %s", why);

	H_CHECK(h_log_lines(&p, "warning: sockmap engine unavailable: ", "; using splice", NULL) == 1,
		"expected exactly one line 'sockmap engine unavailable: REASON; using splice' (log %s)",
		p.log);
	H_CHECK(h_log_lines(&p, "sockmap engine unavailable: ", "Operation not permitted", NULL) == 1,
		"the fallback line does not give the kernel's reason (EPERM) (log %s)", p.log);
	H_CHECK(h_log_lines(&p, "BPF program loaded", NULL) == 0, "the program was loaded anyway");
	H_CHECK(h_log_lines(&p, "engine splice;", NULL) == 1,
		"the route does not say it runs on splice (log %s)", p.log);

	/* and it forwards */
	rc = h_echo_roundtrip(&p.addr, 60000, 0x5F0C, 5000, why, sizeof why);
	H_CHECK(rc == 0, "echo through the fallen-back proxy: %s", why);
	h_server_stop(&srv);
	h_proxy_down(&p);
	H_CHECK(h_log_lines(&p, "spliced 0,", NULL) == 0, "the fallback did not splice (log %s)", p.log);
}

Test(integ, sockmap_fallback_logged_when_bpf_refused, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_fallback(h_binary(0));
}


/* ---- a slow client drains the redirect queue past half_close_timeout ---- */

/* The answer is bigger than the sockets between hold, and the client
 * takes it in about 5 s: the backend's FIN comes long before the last
 * bytes leave the kernel's redirect queue, and while they do, the session
 * waits to forward that FIN (sm_drained) with nothing redirected any more. */
#define SLOW_LEN (16 * H_MIB)
#define SLOW_SEED 0x51077ull

static struct h_xfer slow_tx;

/* Sends the whole answer at once, then FIN; holds the connection until the
 * client's end comes through, so the session stays half-closed. */
static void answer_then_fin(struct h_server *s, int fd, int index, void *arg)
{
	char c;

	h_xfer_init(&slow_tx, fd, SLOW_SEED, SLOW_LEN, h_now_ms() + 60000);
	slow_tx.shut_wr = 1;
	h_xfer_send(&slow_tx);
	h_set_timeouts(fd, 1000);
	for (int64_t end = h_now_ms() + 60000; h_now_ms() < end;) {
		ssize_t n = recv(fd, &c, 1, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
}

/* The model: a half-closed session ends after half_close_timeout without
 * a byte either way *or without the peer taking what is left*. A client
 * that keeps taking the answer must get all of it, then the FIN; the copy
 * engine, writing each chunk itself, never times out here. */
static void case_slow_drain(const char *bin, const char *engine)
{
	struct h_server be;
	struct h_proxy p;
	struct h_xfer rx;
	char baddr[64];

	H_CHECK(h_server_start(&be, "127.0.0.1:0", 16, answer_then_fin, NULL) == 0, "backend");
	snprintf(baddr, sizeof baddr, "127.0.0.1:%d", h_addr_port(&be.addr));
	const char *backends[] = { baddr, NULL };
	const char *extra[] = { "--half-close-timeout", "1s", "-v", NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_xfer_init(&rx, fd, SLOW_SEED, 0, h_now_ms() + H_T(60000));
	rx.verify = 1;
	rx.pace_bytes = 64 * H_KIB; /* about 3 MB/s: 16 MiB in 5 s */
	rx.pace_ms = 20;
	h_xfer_recv(&rx);
	H_CHECK(rx.bytes == SLOW_LEN && rx.eof && !rx.err,
		"the client got %llu of %llu bytes (%s) while it kept reading: the session was cut "
		"during the drain (log %s)", (unsigned long long)rx.bytes,
		(unsigned long long)SLOW_LEN, rx.err ? strerror(rx.err) : rx.eof ? "then EOF" : "no EOF",
		p.log);
	close(fd);
	H_CHECK(h_server_wait_done(&be, 1, 5000) == 0, "the backend handler did not end");
	h_check_stream("backend->client", &slow_tx, &rx, SLOW_LEN);
	h_proxy_down(&p);
	h_server_stop(&be);
}
H_SOCKMAP_CASES(slow_drain, 120)

/* ---- counters that never go down: a backend reset with bytes in flight ---- */

/* A scraper of /metrics, in a thread of its own, every few ms: each sample of
 * a counter or histogram family must be at least what the previous scrape
 * said (a Prometheus counter never decreases). Records the first one that
 * went down; the test's thread checks (helper threads never assert). */
#define MONO_SERIES 1024
struct mono_watch {
	struct h_addr stats;
	atomic_int stop;
	int scrapes;
	char bad[600];                 /* the first decrease, "" if none */
	int n;                         /* series seen so far */
	char name[MONO_SERIES][200];   /* name{labels} */
	long double val[MONO_SERIES];  /* its last value (a long double holds any uint64) */
	pthread_t thr;
};

static int mono_find(struct mono_watch *m, const char *name, int hint)
{
	if (hint < m->n && !strcmp(m->name[hint], name))
		return hint; /* scrapes keep their order */
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->name[i], name))
			return i;
	if (m->n == MONO_SERIES)
		return -1;
	snprintf(m->name[m->n], sizeof m->name[0], "%s", name);
	m->val[m->n] = -1;
	return m->n++;
}

static void mono_check(struct mono_watch *m, char *body)
{
	int counter = 0, at = 0;
	char *save = NULL;

	for (char *l = strtok_r(body, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(l, ' '), *end;
		if (!strncmp(l, "# TYPE ", 7)) {
			counter = sp && (!strcmp(sp, " counter") || !strcmp(sp, " histogram"));
			continue;
		}
		if (l[0] == '#' || !counter || !sp)
			continue;
		*sp = '\0';
		long double v = strtold(sp + 1, &end);
		int i = mono_find(m, l, at);
		if (i < 0)
			continue;
		at = i + 1;
		if (v < m->val[i] && !m->bad[0])
			snprintf(m->bad, sizeof m->bad, "%s went down from %.0Lf to %.0Lf (scrape %d)", l,
				 m->val[i], v, m->scrapes);
		m->val[i] = v;
	}
}

static void *mono_main(void *arg)
{
	struct mono_watch *m = arg;
	static char resp[256 * 1024];

	while (!atomic_load(&m->stop)) {
		if (h_metrics_get(&m->stats, resp, sizeof resp, 2000) == 0) {
			char *body = strstr(resp, "\r\n\r\n");
			if (body)
				mono_check(m, body + 4);
			m->scrapes++;
		}
		h_sleep_ms(3);
	}
	return NULL;
}

/* Sum of a family's samples whose line starts with `prefix` (one scrape). */
static long double mono_sum(const struct h_addr *stats, const char *prefix)
{
	static char resp[256 * 1024];
	long double sum = 0;

	H_CHECK(h_metrics_get(stats, resp, sizeof resp, 3000) == 0, "GET /metrics failed");
	char *l = strstr(resp, "\r\n\r\n");
	for (l = l ? l + 4 : NULL; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(l, prefix, strlen(prefix)))
			sum += strtold(strrchr(l, ' ') + 1, NULL);
		l = nl ? nl + 1 : NULL;
	}
	return sum;
}

static long long mono_metric(const struct h_addr *stats, const char *name)
{
	long long v = h_metric(stats, name);

	H_CHECK(v >= 0, "no %s in /metrics", name);
	return v;
}

/* The backend: sends DOWN_LEN bytes to the client and reads nothing, so the
 * client's upload piles up in the kernel's redirect queue (the sockmap
 * engine has no back-pressure), until the test says reset: then it notes
 * what its kernel took (its receive queue: it read nothing) and resets. */
#define MONO_UP_LEN   (32 * H_MIB)
#define MONO_DOWN_LEN (1 * H_MIB)
struct mono_backend {
	atomic_int reset_now;
	atomic_llong got; /* bytes its kernel had received at the reset (-1 before) */
};

static void down_then_reset(struct h_server *s, int fd, int index, void *arg)
{
	struct mono_backend *b = arg;
	struct linger lg = { 1, 0 };
	struct h_xfer tx;
	int q = -1;

	(void)s, (void)index;
	h_xfer_init(&tx, fd, 0xD0A1, MONO_DOWN_LEN, h_now_ms() + 20000);
	h_xfer_send(&tx);
	for (int64_t end = h_now_ms() + 30000; !atomic_load(&b->reset_now) && h_now_ms() < end;)
		h_sleep_ms(5);
	ioctl(fd, FIONREAD, &q);
	atomic_store(&b->got, q);
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* the harness closes: RST */
}

static long long tcp_wmem_max(void)
{
	long long lo = 0, def = 0, max = 4 << 20;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_wmem", "re");

	if (f) {
		if (fscanf(f, "%lld %lld %lld", &lo, &def, &max) != 3)
			max = 4 << 20;
		fclose(f);
	}
	return max;
}

/* The two numbers after `key` ("KEY%lld%*[^0-9]%lld") in the last line of
 * the file at path that holds `needle`; 0 when found. */
static int log_pair(const char *path, const char *needle, const char *key, long long *a,
		    long long *b)
{
	char line[4096], fmt[64];
	int found = 0;
	FILE *f = fopen(path, "re");

	snprintf(fmt, sizeof fmt, "%s%%lld%%*[^0-9]%%lld", key);
	while (f && fgets(line, sizeof line, f)) {
		const char *k = strstr(line, needle) ? strstr(line, key) : NULL;
		if (k && sscanf(k, fmt, a, b) == 2)
			found = 1;
	}
	if (f)
		fclose(f);
	return found ? 0 : -1;
}

/* Issue "sockmap byte counters go backwards": the bytes redirected but not
 * yet on the backend's send queue when it resets are never delivered; they
 * were counted when redirected and subtracted at close, so
 * splicer_route_bytes_total fell (41,943,040 to 2,990,080). Now a byte
 * counts once it is on the destination's send queue: no counter goes down
 * while a scraper watches every few ms, the bytes in flight are not
 * counted, and every count of the session agrees. */
static void case_counters_monotonic(const char *bin, const char *engine)
{
	static struct h_server be;
	static struct h_proxy p;
	static struct mono_watch mw;
	static struct mono_backend mb;
	struct h_xfer up, down;
	char log[300];

	memset(&mw, 0, sizeof mw);
	atomic_store(&mb.reset_now, 0);
	atomic_store(&mb.got, -1);
	H_CHECK(h_server_start(&be, "127.0.0.1:0", 16, down_then_reset, &mb) == 0, "backend");
	snprintf(log, sizeof log, "%s/access.log", h_tmpdir());
	const char *backends[] = { be.addr.text, NULL };
	const char *extra[] = { "--stats", "127.0.0.1:0", "--log", log, NULL };
	h_proxy_up(&p, bin, engine, "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(&p, &mw.stats) == 0, "no stats address in %s", p.log);
	H_CHECK(pthread_create(&mw.thr, NULL, mono_main, &mw) == 0, "scraper thread");

	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	h_xfer_init(&down, fd, 0xD0A1, 0, h_now_ms() + H_T(30000));
	down.verify = 1;
	H_CHECK(h_xfer_start_recv(&down) == 0, "receiver thread");
	/* the upload starts once the session is in the sockmap (a copy engine
	 * would hold it back: the backend reads nothing) */
	long long in = 0;
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end && in < 1; h_sleep_ms(10))
		in = h_metric(&mw.stats, "splicer_sockmap_sessions_total");
	H_CHECK(in == 1, "the session did not move into the sockmap within 5 s (%lld)", in);
	h_xfer_init(&up, fd, 0x0F10, MONO_UP_LEN, h_now_ms() + H_T(20000));
	H_CHECK(h_xfer_start_send(&up) == 0, "sender thread");
	H_CHECK(h_xfer_join(&up, 5000) == 0 && up.bytes == MONO_UP_LEN && !up.err,
		"the client sent %llu of %llu bytes (%s): the redirect queue should take them all",
		(unsigned long long)up.bytes, (unsigned long long)MONO_UP_LEN,
		up.err ? strerror(up.err) : "no error");
	/* a few of the session's timer looks (100 ms) and byte flushes (250
	 * ms): what was counted so far is in /metrics, then the reset */
	h_sleep_ms(800);
	atomic_store(&mb.reset_now, 1);
	H_CHECK(h_xfer_join(&down, 5000) == 0, "the client's receiver did not end");
	H_CHECK(h_server_wait_done(&be, 1, 5000) == 0, "the backend did not end");
	long long active = -1;
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end && active; h_sleep_ms(20))
		active = h_metric(&mw.stats, "splicer_route_sessions_active{route=\"default\"}");
	H_CHECK(active == 0, "the session did not end after the backend's reset");
	h_sleep_ms(500); /* the scraper sees the end's counts a hundred times */
	atomic_store(&mw.stop, 1);
	pthread_join(mw.thr, NULL);
	close(fd);

	H_CHECK(mw.scrapes >= 50, "only %d scrapes of /metrics", mw.scrapes);
	H_CHECK(!mw.bad[0], "a counter went down: %s", mw.bad);

	/* what the client got, all of it: the backend's bytes before its reset */
	long long rup = mono_metric(&mw.stats, "splicer_route_bytes_total{route=\"default\",direction=\"up\"}");
	long long rdown = mono_metric(&mw.stats, "splicer_route_bytes_total{route=\"default\",direction=\"down\"}");
	H_CHECK(down.mismatch_at < 0 && down.bytes == MONO_DOWN_LEN,
		"the client got %llu of the backend's %llu bytes (first bad byte at %lld)",
		(unsigned long long)down.bytes, (unsigned long long)MONO_DOWN_LEN,
		(long long)down.mismatch_at);
	H_CHECK(rdown == (long long)down.bytes, "splicer_route_bytes_total down %lld, the client "
		"got %llu", rdown, (unsigned long long)down.bytes);
	/* up: what the backend's socket took (its kernel had `got` when it
	 * reset; the proxy's send queue holds at most tcp_wmem's max more);
	 * what still waited in the redirect queue was lost, and not counted */
	long long got = atomic_load(&mb.got), wmax = tcp_wmem_max();
	H_CHECK(got >= 0 && rup >= got && rup <= got + wmax + 256 * (long long)H_KIB,
		"splicer_route_bytes_total up %lld: not what the backend's socket took (its kernel "
		"had %lld, the proxy's send queue holds at most %lld more)", rup, got, wmax);
	H_CHECK(rup <= (long long)MONO_UP_LEN / 2, "up %lld of %llu sent: the bytes in flight at the "
		"reset were few (the case needs most of the upload redirected and not sent)", rup,
		(unsigned long long)MONO_UP_LEN);
	fprintf(stderr, "counters_monotonic (%s): %d scrapes; sent up %llu, backend socket took "
		">= %lld, counted up %lld (never redirected-and-lost); down %lld = client got\n",
		bin, mw.scrapes, (unsigned long long)up.bytes, got, rup, rdown);
	/* every count of the session says the same */
	char bl[320];
	snprintf(bl, sizeof bl, "splicer_backend_bytes_total{route=\"default\",backend=\"%s\",direction=",
		 be.addr.text);
	long double eng = mono_sum(&mw.stats, "splicer_engine_bytes_total{");
	H_CHECK(eng == (long double)(rup + rdown), "splicer_engine_bytes_total sums to %.0Lf, the "
		"route's up + down to %lld", eng, rup + rdown);
	H_CHECK(mono_sum(&mw.stats, bl) == (long double)(rup + rdown), "the backend's bytes differ "
		"from the route's");
	H_CHECK(mono_metric(&mw.stats, "splicer_route_session_bytes_sum{route=\"default\",direction=\"up\"}") == rup &&
			mono_metric(&mw.stats, "splicer_route_session_bytes_sum{route=\"default\",direction=\"down\"}") == rdown,
		"the session_bytes histogram's sums differ from the route's bytes");
	h_proxy_down(&p);
	h_server_stop(&be);
	long long lup = -1, ldown = -1, xup = -1, xdown = -1;
	H_CHECK(log_pair(log, "event=close", " up=", &lup, &ldown) == 0 && lup == rup &&
			ldown == rdown,
		"the access log says up=%lld down=%lld, /metrics %lld and %lld", lup, ldown, rup, rdown);
	H_CHECK(log_pair(p.log, "stopped: sessions", "bytes up ", &xup, &xdown) == 0 && xup == rup &&
			xdown == rdown,
		"the exit line says bytes up %lld down %lld, /metrics %lld and %lld", xup, xdown, rup,
		rdown);
}
H_SOCKMAP_CASES(counters_monotonic, 120)
