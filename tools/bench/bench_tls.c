/* SPDX-License-Identifier: MIT */
/* bench_tls: see bench_tls.h. */
#define _GNU_SOURCE
#include "bench_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_proxy.h"
#include "bench_table.h"
#include "bench_traffic.h"
#include "stats.h"

#define SNI_NAME   "bench.example.com"
#define BULK_CHUNK 16384 /* one full TLS record per write */
#define MSG        64    /* the handshake rows' request and reply */

static const struct bench_case splicer_sni = {
	.name = "splicer-sni", .kind = PX_SPLICER, .opts = { "conf:splicer-sni.conf", NULL },
	.what = "splicer (default engine), an sni route and a plain route in one process"
};
static const struct bench_case haproxy_sni = {
	.name = "haproxy-sni", .kind = PX_HAPROXY, .opts = { "conf:haproxy-sni.cfg", NULL },
	.what = "HAProxy routing on req.ssl_sni"
};

/* ---- contexts ------------------------------------------------------------ */

static void ctx_common(SSL_CTX *ctx)
{
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
	SSL_CTX_set1_groups_list(ctx, "X25519");
}

/* A self-signed P-256 certificate (the cheapest signature to make). */
static SSL_CTX *server_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *x = X509_new();
	int ok = ctx && key && x;

	if (ok) {
		ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
		X509_gmtime_adj(X509_getm_notBefore(x), 0);
		X509_gmtime_adj(X509_getm_notAfter(x), 86400);
		X509_set_pubkey(x, key);
		X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
					   (const unsigned char *)SNI_NAME, -1, -1, 0);
		X509_set_issuer_name(x, X509_get_subject_name(x));
		ok = X509_sign(x, key, EVP_sha256()) > 0 && SSL_CTX_use_certificate(ctx, x) == 1 &&
		     SSL_CTX_use_PrivateKey(ctx, key) == 1;
	}
	X509_free(x);
	EVP_PKEY_free(key);
	if (!ok) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	ctx_common(ctx);
	SSL_CTX_set_num_tickets(ctx, 0); /* every connection a full handshake */
	return ctx;
}

static SSL_CTX *client_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx)
		return NULL;
	ctx_common(ctx);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	return ctx;
}

/* The TLS server's listening socket on its fixed port, made anew for each
 * run: closing it drops whatever connections a previous run left queued. */
static int server_listen(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 4096)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int connect_to(const struct sockaddr *sa, socklen_t len, int nonblock)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, sa, len) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static void ssl_why(char *why, size_t len, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[160];

	ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(why, len, "%s: %s", what, e ? buf : strerror(errno));
	ERR_clear_error();
}

/* ---- bulk: one stream, blocking, client here and server in a thread ------ */

struct bulk_srv {
	SSL_CTX *ctx;
	int lfd;
	double deadline;
	_Atomic int stop;        /* the client gave up: stop waiting for it */
	uint64_t got;
	int ok;
	char why[160];
};

/* Accepts the stream (skipping any connection that does not complete a
 * handshake), reads to the client's close_notify, answers its count. */
static void *bulk_srv_main(void *arg)
{
	struct bulk_srv *b = arg;
	static __thread unsigned char buf[65536];

	while (!b->ok && !b->stop && bench_now() < b->deadline) {
		struct pollfd p = { .fd = b->lfd, .events = POLLIN };
		int fd;
		if (poll(&p, 1, 100) <= 0 || (fd = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		struct timeval tv = { .tv_sec = 2 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		SSL *ssl = SSL_new(b->ctx);
		SSL_set_fd(ssl, fd);
		if (SSL_accept(ssl) == 1) {
			int n;
			b->got = 0;
			while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0)
				b->got += (uint64_t)n;
			if (SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN) {
				uint64_t got = b->got;
				b->ok = SSL_write(ssl, &got, sizeof(got)) == sizeof(got);
				SSL_shutdown(ssl);
			} else {
				ssl_why(b->why, sizeof(b->why), "server read");
			}
		}
		SSL_free(ssl);
		close(fd);
		if (b->why[0])
			break;
	}
	return NULL;
}

/* Sends for `seconds`, then close_notify, and reads the server's count.
 * Fills out[TF_RATE] (Gbit/s); returns the bytes, or 0 with why filled. */
static uint64_t bulk_run(struct tls_bench *tb, const struct sockaddr *sa, socklen_t len, double *gbps,
			 char *why, size_t wlen)
{
	struct bulk_srv b = { .ctx = tb->sctx, .deadline = bench_now() + tb->seconds + 10 };
	static unsigned char chunk[BULK_CHUNK];
	uint64_t sent = 0, back = 0;
	pthread_t thr;
	SSL *ssl = NULL;
	double t0, t1;
	int fd = -1;

	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (unsigned char)(i * 131 + 7);
	if ((b.lfd = server_listen(tb->port)) < 0) {
		snprintf(why, wlen, "TLS server on port %d: %s", tb->port, strerror(errno));
		return 0;
	}
	if (pthread_create(&thr, NULL, bulk_srv_main, &b)) {
		close(b.lfd);
		snprintf(why, wlen, "cannot start the TLS server thread");
		return 0;
	}
	if ((fd = connect_to(sa, len, 0)) < 0) {
		snprintf(why, wlen, "connect to the proxy: %s", strerror(errno));
		goto out;
	}
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ssl = SSL_new(tb->cctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, SNI_NAME);
	if (SSL_connect(ssl) != 1) {
		ssl_why(why, wlen, "handshake through the proxy");
		goto out;
	}
	t0 = bench_now();
	do {
		for (int k = 0; k < 16; k++) {
			if (SSL_write(ssl, chunk, sizeof(chunk)) != (int)sizeof(chunk)) {
				ssl_why(why, wlen, "client write");
				goto out;
			}
			sent += sizeof(chunk);
		}
	} while (bench_now() - t0 < tb->seconds);
	SSL_shutdown(ssl);
	if (SSL_read(ssl, &back, sizeof(back)) != (int)sizeof(back)) {
		ssl_why(why, wlen, "no count back from the TLS server");
		goto out;
	}
	t1 = bench_now();
	if (back != sent) {
		snprintf(why, wlen, "the server got %llu bytes of %llu", (unsigned long long)back,
			 (unsigned long long)sent);
		goto out;
	}
	*gbps = (double)sent * 8 / (t1 - t0) / 1e9;
out:
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	b.stop = 1; /* a server still waiting gives up */
	pthread_join(thr, NULL);
	close(b.lfd);
	if (!why[0] && !b.ok)
		snprintf(why, wlen, "TLS server: %s", b.why[0] ? b.why : "no stream");
	return why[0] ? 0 : sent;
}

/* ---- handshakes: client and server ends in one epoll thread ------------- */

enum hs_state { C_CONNECT, C_HANDSHAKE, C_SEND, C_RECV, S_HANDSHAKE, S_RECV, S_SEND, S_EOF };

struct hs_conn {
	int fd;
	SSL *ssl;
	enum hs_state st;
	uint32_t ev;
	int n;                   /* bytes of the message done */
	unsigned char msg[MSG];
	struct hs_conn *prev, *next; /* server ends: the list of those open */
};

struct hs_load {
	struct tls_bench *tb;
	const struct sockaddr *sa;
	socklen_t len;
	int ep, lfd;
	struct hs_conn *cli;
	struct hs_conn srv;      /* head of the server ends' list */
	uint64_t done, failed;
	uint64_t stale;          /* server ends closed in their handshake (hs_step) */
	double seconds;
	char why[160];
};

static const unsigned char req_byte = 'q', resp_byte = 'r';

static void hs_arm(struct hs_load *L, struct hs_conn *c, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = c };

	if (c->ev == ev)
		return;
	epoll_ctl(L->ep, c->ev ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &e);
	c->ev = ev;
}

static void hs_close(struct hs_conn *c)
{
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd); /* leaves the epoll set with it */
	c->ssl = NULL;
	c->fd = -1;
	c->ev = 0;
}

/* A server end is closed and freed; a client's struct is reused. */
static void hs_end(struct hs_conn *c)
{
	hs_close(c);
	if (c->st < S_HANDSHAKE)
		return;
	c->prev->next = c->next;
	c->next->prev = c->prev;
	free(c);
}

static void hs_fail(struct hs_load *L, struct hs_conn *c, const char *what)
{
	if (!L->why[0])
		ssl_why(L->why, sizeof(L->why), what);
	L->failed++;
	hs_end(c);
}

static void hs_client_start(struct hs_load *L, struct hs_conn *c)
{
	c->fd = connect_to(L->sa, L->len, 1);
	c->st = C_CONNECT;
	c->ev = 0;
	c->n = 0;
	if (c->fd < 0) {
		snprintf(L->why, sizeof(L->why), "connect: %s", strerror(errno));
		L->failed++;
		return;
	}
	hs_arm(L, c, EPOLLOUT);
}

/* What an SSL call's result asks for: 1 done, 0 wait (armed), -1 failed. */
static int hs_want(struct hs_load *L, struct hs_conn *c, int r)
{
	if (r > 0)
		return 1;
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ: hs_arm(L, c, EPOLLIN); return 0;
	case SSL_ERROR_WANT_WRITE: hs_arm(L, c, EPOLLOUT); return 0;
	default: return -1;
	}
}

/* Runs a connection as far as it goes without waiting. */
static void hs_step(struct hs_load *L, struct hs_conn *c)
{
	for (;;) {
		int r, err = 0;
		socklen_t el = sizeof(err);
		switch (c->st) {
		case C_CONNECT:
			if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
				errno = err;
				hs_fail(L, c, "connect to the proxy");
				return;
			}
			c->ssl = SSL_new(L->tb->cctx);
			SSL_set_fd(c->ssl, c->fd);
			SSL_set_tlsext_host_name(c->ssl, SNI_NAME);
			SSL_set_connect_state(c->ssl);
			c->st = C_HANDSHAKE;
			break;
		case C_HANDSHAKE:
		case S_HANDSHAKE:
			if ((r = hs_want(L, c, SSL_do_handshake(c->ssl))) <= 0)
				goto wait_or_fail;
			c->st = c->st == C_HANDSHAKE ? C_SEND : S_RECV;
			memset(c->msg, c->st == C_SEND ? req_byte : 0, MSG);
			c->n = 0;
			break;
		case C_SEND:
		case S_SEND:
			if ((r = hs_want(L, c, SSL_write(c->ssl, c->msg, MSG))) <= 0)
				goto wait_or_fail;
			c->st = c->st == C_SEND ? C_RECV : S_EOF;
			c->n = 0;
			break;
		case C_RECV:
		case S_RECV:
			r = SSL_read(c->ssl, c->msg + c->n, MSG - c->n);
			if ((r = r > 0 ? (c->n += r, 1) : hs_want(L, c, r)) <= 0)
				goto wait_or_fail;
			if (c->n < MSG)
				break;
			for (int i = 0; i < MSG; i++)
				if (c->msg[i] != (c->st == C_RECV ? resp_byte : req_byte)) {
					snprintf(L->why, sizeof(L->why), "a message arrived changed");
					L->failed++;
					hs_end(c);
					return;
				}
			if (c->st == S_RECV) {
				memset(c->msg, resp_byte, MSG);
				c->st = S_SEND;
				break;
			}
			L->done++;
			SSL_shutdown(c->ssl); /* close_notify, as clients do; no wait */
			hs_close(c);
			hs_client_start(L, c);
			return;
		case S_EOF: {
			unsigned char b;
			/* the client's close_notify or its EOF: either ends it */
			if ((r = SSL_read(c->ssl, &b, 1)) <= 0 && hs_want(L, c, r) == 0)
				return;
			hs_end(c);
			return;
		}
		}
		continue;
wait_or_fail:
		/* A server end that fails its handshake is not this row's: the
		 * proxy still held sessions of the row before (the same backend
		 * port), whose clients sent a ClientHello and closed when that
		 * row ended, and it forwards the hello and the FIN to whatever
		 * listens there now (integ::bench_baseline_columns failed so in
		 * CI, twice: 2 failed, 0 done, "unexpected eof"). A handshake
		 * the proxy breaks fails on the client's end too. */
		if (r < 0 && c->st == S_HANDSHAKE) {
			L->stale++;
			hs_end(c);
		} else if (r < 0) {
			hs_fail(L, c, c->st == C_HANDSHAKE ? "handshake"
				      : c->st == C_SEND || c->st == S_SEND ? "write" : "read");
		}
		return;
	}
}

static void hs_accept(struct hs_load *L)
{
	int fd;

	while ((fd = accept4(L->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		struct hs_conn *c = calloc(1, sizeof(*c));
		int one = 1;
		if (!c) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->ssl = SSL_new(L->tb->sctx);
		SSL_set_fd(c->ssl, fd);
		SSL_set_accept_state(c->ssl);
		c->st = S_HANDSHAKE;
		c->next = L->srv.next;
		c->prev = &L->srv;
		c->next->prev = c;
		L->srv.next = c;
		hs_step(L, c);
	}
}

static void *hs_main(void *arg)
{
	struct hs_load *L = arg;
	struct epoll_event ev[64], le = { .events = EPOLLIN, .data.ptr = NULL };
	double t0 = bench_now(), end = t0 + L->tb->seconds;

	epoll_ctl(L->ep, EPOLL_CTL_ADD, L->lfd, &le);
	for (unsigned i = 0; i < L->tb->conns; i++)
		hs_client_start(L, &L->cli[i]);
	/* past the workload's seconds only while nothing completed (a loaded
	 * machine, a proxy slow to start), for at most 10 s more */
	while ((bench_now() < end || (!L->done && bench_now() < end + 10)) && L->failed == 0) {
		int n = epoll_wait(L->ep, ev, 64, 50);
		for (int i = 0; i < n; i++) {
			if (!ev[i].data.ptr)
				hs_accept(L);
			else
				hs_step(L, ev[i].data.ptr);
		}
	}
	L->seconds = bench_now() - t0;
	return NULL;
}

static int conn_run(struct tls_bench *tb, const struct sockaddr *sa, socklen_t len, double *rate,
		    uint64_t *done, char *why, size_t wlen)
{
	struct hs_load L = { .tb = tb, .sa = sa, .len = len, .ep = epoll_create1(EPOLL_CLOEXEC) };
	pthread_attr_t attr;
	pthread_t thr;
	cpu_set_t set;
	int rc;

	L.cli = calloc(tb->conns, sizeof(*L.cli));
	L.lfd = server_listen(tb->port);
	if (L.ep < 0 || !L.cli || L.lfd < 0) {
		snprintf(why, wlen, "handshake load: %s", strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < tb->conns; i++)
		L.cli[i].fd = -1;
	L.srv.next = L.srv.prev = &L.srv;
	pthread_attr_init(&attr);
	if (tb->pin >= 0) {
		CPU_ZERO(&set);
		CPU_SET(tb->pin, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	rc = pthread_create(&thr, &attr, hs_main, &L);
	pthread_attr_destroy(&attr);
	if (rc) {
		snprintf(why, wlen, "cannot start the handshake thread");
		goto out;
	}
	pthread_join(thr, NULL);
	for (unsigned i = 0; i < tb->conns; i++)
		hs_close(&L.cli[i]);
	while (L.srv.next != &L.srv)
		hs_end(L.srv.next);
	if (L.stale)
		fprintf(stderr, "splicer bench: tls: %llu connection(s) to the TLS server failed their "
			"handshake on the server's end only (the row before's, forwarded late): not "
			"counted\n", (unsigned long long)L.stale);
	if (L.failed)
		snprintf(why, wlen, "%llu handshakes done, %llu failed: %s", (unsigned long long)L.done,
			 (unsigned long long)L.failed, L.why);
	else if (!L.done)
		snprintf(why, wlen, "no handshake completed in %.1f s", L.seconds);
	else
		*rate = (double)L.done / L.seconds;
	*done = L.done;
out:
	free(L.cli);
	if (L.lfd >= 0)
		close(L.lfd);
	if (L.ep >= 0)
		close(L.ep);
	return why[0] ? -1 : 0;
}

/* ---- rows ---------------------------------------------------------------- */

/* The proxy of rows with proxy index h: 0 this splicer, 1 HAProxy, 2 + b
 * baseline b's splicer. */
static const struct bench_case *proxy_case(const struct tls_bench *tb, int h)
{
	return h == 0 ? &splicer_sni : h == 1 ? &haproxy_sni : &tb->twin[h - 2].c;
}

static int proxy_of(const struct tls_row *r)
{
	return r->base ? 1 + r->base : r->haproxy;
}

static void add_row(struct tls_bench *tb, const char *name, int conn, int haproxy, int plain,
		    const char *what, int base)
{
	struct tls_row *r = &tb->row[tb->nrows++];

	*r = (struct tls_row){ .name = name, .what = what, .conn = conn, .haproxy = haproxy,
			       .plain = plain, .base = base };
	snprintf(r->label, sizeof(r->label), "%s%s%s", name, base ? "@" : "",
		 base ? tb->bases[base - 1].name : "");
	for (int k = 0; k < TLS_MAX_REPS; k++)
		for (int f = 0; f < TF_N; f++)
			r->v[k][f] = NAN;
	r->skip = bench_case_unavailable(proxy_case(tb, proxy_of(r)));
	/* an older build without sni routes cannot read the template */
	if (!r->skip && base && !tb->twin_why[base - 1][0] &&
	    !bench_baseline_knows(&tb->bases[base - 1], "sni"))
		snprintf(tb->twin_why[base - 1], sizeof(tb->twin_why[0]),
			 "the baseline %s (%s) has no sni routes", tb->bases[base - 1].name,
			 tb->bases[base - 1].path);
	if (!r->skip && base && tb->twin_why[base - 1][0])
		r->skip = tb->twin_why[base - 1];
}

int bench_tls_setup(struct tls_bench *tb, double seconds, unsigned workers, unsigned conns, int pin,
		    int with_haproxy, const struct bench_baseline *bases, int nbase)
{
	memset(tb, 0, sizeof(*tb));
	tb->seconds = seconds;
	tb->workers = workers;
	tb->conns = conns;
	tb->pin = pin;
	tb->bases = bases;
	tb->nbase = nbase;
	for (int b = 0; b <= nbase; b++) {
		/* (a reason, if any, stays in twin_why: add_row skips on it) */
		if (b)
			bench_baseline_twin(&tb->twin[b - 1], &splicer_sni, &bases[b - 1],
					    tb->twin_why[b - 1], sizeof(tb->twin_why[0]));
		add_row(tb, "bulk-sni", 0, 0, 0, "one TLS stream through splicer's sni route", b);
		add_row(tb, "bulk-plain", 0, 0, 1, "the same through a plain route of the same splicer", b);
		add_row(tb, "conn-sni", 1, 0, 0, "full handshakes through splicer's sni route", b);
		add_row(tb, "conn-plain", 1, 0, 1, "full handshakes through its plain route", b);
	}
	if (with_haproxy)
		add_row(tb, "conn-haproxy-sni", 1, 1, 0, "full handshakes through HAProxy's req.ssl_sni", 0);
	tb->sctx = server_ctx();
	tb->cctx = client_ctx();
	tb->port = bench_free_port("127.0.0.1");
	if (!tb->sctx || !tb->cctx || tb->port < 0) {
		snprintf(tb->skip, sizeof(tb->skip), "OpenSSL contexts or a port for the TLS server");
		return -1;
	}
	return 0;
}

double bench_tls_work(const struct tls_bench *tb)
{
	double w = 1;

	for (int i = 0; i < tb->nrows; i++)
		w += tb->row[i].skip ? 0 : tb->seconds + 0.2;
	return w;
}

/* One row's run through proxy p: the rate, the proxy's and the machine's
 * CPU per GB or per connection. */
static void row_run(struct tls_bench *tb, struct tls_row *r, const struct bench_proxy *p, int rep)
{
	const struct sockaddr *sa = (const struct sockaddr *)(r->plain ? &p->ss2 : &p->ss);
	socklen_t len = r->plain ? p->len2 : p->len;
	double c0 = bench_tree_cpu(p->pid), b0 = bench_machine_busy(), rate = NAN, per;
	uint64_t n = 0;
	int rc;

	if (r->conn)
		rc = conn_run(tb, sa, len, &rate, &n, r->fail, sizeof(r->fail));
	else
		rc = (n = bulk_run(tb, sa, len, &rate, r->fail, sizeof(r->fail))) ? 0 : -1;
	if (rc)
		return;
	per = r->conn ? 1e6 / (double)n : 1e9 / (double)n; /* per connection (us), per GB (s) */
	r->v[rep][TF_RATE] = rate;
	r->v[rep][TF_PCPU] = (bench_tree_cpu(p->pid) - c0) * per;
	r->v[rep][TF_MCPU] = (bench_machine_busy() - b0) * per;
	r->nrep = rep + 1;
}

int bench_tls_rep(struct tls_bench *tb, int rep)
{
	char backend[32], err[300];
	int failed = 0;

	if (tb->skip[0])
		return -1;
	snprintf(backend, sizeof(backend), "127.0.0.1:%d", tb->port);
	/* this splicer, each baseline's right after it, then HAProxy */
	for (int o = 0; o < 2 + tb->nbase; o++) {
		int h = o == 0 ? 0 : o <= tb->nbase ? o + 1 : 1;
		struct bench_proxy p;
		int any = 0;
		for (int i = 0; i < tb->nrows; i++)
			any |= !tb->row[i].skip && proxy_of(&tb->row[i]) == h;
		if (!any)
			continue;
		if (bench_proxy_start(&p, proxy_case(tb, h), backend, "127.0.0.1", tb->workers, err,
				      sizeof(err))) {
			for (int i = 0; i < tb->nrows; i++)
				if (proxy_of(&tb->row[i]) == h && !tb->row[i].skip)
					snprintf(tb->row[i].fail, sizeof(tb->row[i].fail), "%s", err);
			failed = 1;
			continue;
		}
		/* a proxy's two bulk rows in the opposite order every other
		 * rep: drift spreads */
		for (int k = 0; k < tb->nrows; k++) {
			int i = k;
			if (rep % 2 && !tb->row[k].conn) /* bulk-sni, then bulk-plain: swapped */
				i = tb->row[k].plain ? k - 1 : k + 1;
			struct tls_row *r = &tb->row[i];
			if (r->skip || proxy_of(r) != h)
				continue;
			r->fail[0] = '\0';
			row_run(tb, r, &p, rep);
			if (r->fail[0]) {
				fprintf(stderr, "splicer bench: tls %s, rep %d: %s\n", r->label, rep + 1, r->fail);
				bench_proxy_log_tail(&p, r->label);
				failed = 1;
			}
		}
		bench_proxy_stop(&p);
	}
	return failed ? -1 : 0;
}

void bench_tls_finish(struct tls_bench *tb)
{
	for (int i = 0; i < tb->nrows; i++) {
		struct tls_row *r = &tb->row[i];
		for (int f = 0; f < TF_N; f++) {
			double col[TLS_MAX_REPS];
			int n = 0;
			for (int k = 0; k < r->nrep; k++)
				if (!isnan(r->v[k][f]))
					col[n++] = r->v[k][f];
			r->med[f] = n ? stats_median(col, (size_t)n) : NAN;
			r->lo[f] = n ? stats_min(col, (size_t)n) : NAN;
			r->hi[f] = n ? stats_max(col, (size_t)n) : NAN;
		}
	}
	SSL_CTX_free(tb->sctx);
	SSL_CTX_free(tb->cctx);
	tb->sctx = tb->cctx = NULL;
}

/* ---- output -------------------------------------------------------------- */

/* The row with label name (a twin: "bulk-sni@NAME") that ran, or NULL. */
static const struct tls_row *find_row(const struct tls_bench *tb, const char *name)
{
	for (int i = 0; i < tb->nrows; i++)
		if (!strcmp(tb->row[i].label, name) && !tb->row[i].skip && tb->row[i].nrep)
			return &tb->row[i];
	return NULL;
}

/* r's twin run by baseline b, or NULL (none, or r is a twin). */
static const struct tls_row *twin_row(const struct tls_bench *tb, const struct tls_row *r, int b)
{
	char label[96];

	if (r->base || r->haproxy)
		return NULL;
	snprintf(label, sizeof(label), "%s@%s", r->name, tb->bases[b].name);
	return find_row(tb, label);
}

/* The bulk rows (conn 0) or the handshake rows, with ratios to row `ref`. */
static void tls_table(FILE *f, int md, const struct tls_bench *tb, int conn, const char *title,
		      const char *grp, const char *ref)
{
	static const char *const heads[2][4] = {
		{ "Gbit/s [min-max]", "CPU-s/GB", "busy/GB", "%.3f" },
		{ "conn/s [min-max]", "proxy CPU-us", "machine CPU-us", "%.1f" },
	};
	const struct tls_row *x = find_row(tb, ref);
	struct btable *t = btable_new(title);
	char xref[40], xb[40];

	snprintf(xref, sizeof(xref), "x %s", ref);
	btable_col(t, NULL, "row");
	for (int k = 0; k < 2; k++) {
		btable_col(t, grp, heads[conn][k]);
		btable_col(t, grp, xref);
		for (int b = 0; b < tb->nbase; b++) {
			snprintf(xb, sizeof(xb), "x %s", tb->bases[b].name);
			btable_col(t, grp, xb);
		}
	}
	btable_col(t, grp, heads[conn][2]);
	for (int i = 0; i < tb->nrows; i++) {
		const struct tls_row *r = &tb->row[i];
		int row, col = 1;
		if (r->conn != conn)
			continue;
		if (r->skip || !r->nrep) {
			btable_note_row(t, "%s: %s: %s", r->label, r->skip ? "skipped" : "failed",
					r->skip ? r->skip : r->fail);
			continue;
		}
		row = btable_row(t);
		btable_set(t, row, 0, "%s", r->label);
		for (int k = 0; k < 2; k++) {
			int fig = k ? TF_PCPU : TF_RATE;
			if (k)
				btable_set(t, row, col++, heads[conn][3], r->med[fig]);
			else
				btable_set_range(t, row, col++, conn ? "%.0f" : "%.2f", r->med[fig],
						 r->lo[fig], r->hi[fig], r->nrep);
			if (x)
				btable_set(t, row, col, "%.2fx", stats_ratio(r->med[fig], x->med[fig]));
			col++;
			for (int b = 0; b < tb->nbase; b++, col++) {
				const struct tls_row *tw = twin_row(tb, r, b);
				if (tw)
					btable_set(t, row, col, "%.2fx",
						   stats_ratio(r->med[fig], tw->med[fig]));
			}
		}
		btable_set(t, row, col, heads[conn][3], r->med[TF_MCPU]);
	}
	btable_print(t, f, md);
	btable_free(t);
}

void bench_tls_print(FILE *f, int md, const struct tls_bench *tb)
{
	char title[200], grp[48];

	if (tb->skip[0]) {
		fprintf(f, md ? "\n### TLS passthrough skipped: %s\n" : "\n== TLS passthrough skipped: %s\n",
			tb->skip);
		return;
	}
	fprintf(f, md ? "\n### TLS passthrough\n" : "\n== TLS passthrough (TLS 1.3, AES-128-GCM; "
		"the proxies never decrypt)\n");
	snprintf(grp, sizeof(grp), "handshakes x%u", tb->conns);
	snprintf(title, sizeof(title), "Full TLS handshakes, %u at a time (connect, handshake, 64 B "
		 "each way, close; CPU-us per connection)", tb->conns);
	tls_table(f, md, tb, 0, "One TLS stream (Gbit/s; CPU-s/GB: the proxy's CPU seconds per GB)",
		  "1 TLS stream", "bulk-plain");
	tls_table(f, md, tb, 1, title, grp, "conn-haproxy-sni");
	fprintf(f, "\n");
	for (int i = 0; i < tb->nrows; i++)
		if (!tb->row[i].base)
			fprintf(f, md ? "- `%s`: %s\n" : "  %-18s %s\n", tb->row[i].name, tb->row[i].what);
	for (int b = 0; b < tb->nbase; b++) {
		char label[48];
		snprintf(label, sizeof(label), "ROW@%s", tb->bases[b].name);
		fprintf(f, md ? "- `%s`: the row through the baseline %s's splicer\n"
			      : "  %-18s the row through the baseline %s's splicer\n", label,
			tb->bases[b].name);
	}
	fprintf(f, md ? "\nTLS's record MAC checked every byte end to end; the server's byte count "
		"equalled the client's.\n" : "  TLS's record MAC checked every byte end to end; the "
		"server's byte count equalled the client's.\n");
}

/* "1.01x" or "1.01x (within noise)" when the min-max ranges overlap. */
static void rel(char *buf, size_t len, const struct tls_row *a, const struct tls_row *b, int f)
{
	int overlap = a->nrep > 1 && b->nrep > 1 && !(a->lo[f] > b->hi[f] || a->hi[f] < b->lo[f]);

	snprintf(buf, len, "%.2fx%s", stats_ratio(a->med[f], b->med[f]), overlap ? " (within noise)" : "");
}

void bench_tls_conclusions(FILE *f, int md, const struct tls_bench *tb)
{
	const struct tls_row *s = find_row(tb, "bulk-sni"), *p = find_row(tb, "bulk-plain");
	const struct tls_row *cs = find_row(tb, "conn-sni"), *h = find_row(tb, "conn-haproxy-sni");
	char a[48], b[48];

	if (!(s && p) && !(cs && h) && !tb->nbase)
		return;
	fprintf(f, md ? "\n### Conclusions: TLS passthrough\n\n" : "\nConclusions: TLS passthrough "
		"(medians)\n");
	if (s && p) {
		double xr = stats_ratio(s->med[TF_RATE], p->med[TF_RATE]);
		double xc = stats_ratio(s->med[TF_PCPU], p->med[TF_PCPU]);
		rel(a, sizeof(a), s, p, TF_RATE);
		rel(b, sizeof(b), s, p, TF_PCPU);
		fprintf(f, "%stls bulk, 1 stream: the sni route %s the plain route's throughput, %s "
			"its CPU per GB (goal >= 0.95x, <= 1.05x: %s)\n", md ? "- " : "  ", a, b,
			xr >= 0.95 && xc <= 1.05 ? "met" : "not met");
	}
	if (cs && h) {
		rel(a, sizeof(a), cs, h, TF_RATE);
		rel(b, sizeof(b), cs, h, TF_PCPU);
		fprintf(f, "%stls handshakes, %u at a time: splicer's sni route %s haproxy-sni's "
			"connections/s, %s its proxy CPU per connection\n", md ? "- " : "  ", tb->conns,
			a, b);
	}
	/* this build's sni route against each baseline's */
	for (int k = 0; k < tb->nbase; k++) {
		const struct tls_row *ts = s ? twin_row(tb, s, k) : NULL;
		const struct tls_row *tc = cs ? twin_row(tb, cs, k) : NULL;
		if (ts) {
			rel(a, sizeof(a), s, ts, TF_RATE);
			rel(b, sizeof(b), s, ts, TF_PCPU);
			fprintf(f, "%stls bulk, 1 stream: the sni route %s %s's throughput, %s its CPU per "
				"GB\n", md ? "- " : "  ", a, ts->label, b);
		}
		if (tc) {
			rel(a, sizeof(a), cs, tc, TF_RATE);
			rel(b, sizeof(b), cs, tc, TF_PCPU);
			fprintf(f, "%stls handshakes, %u at a time: the sni route %s %s's connections/s, "
				"%s its proxy CPU per connection\n", md ? "- " : "  ", tb->conns, a,
				tc->label, b);
		}
	}
}

void bench_tls_json(struct json *j, const struct tls_bench *tb)
{
	static const char *const keys[2][TF_N] = {
		{ "gbit_s", "proxy_cpu_s_per_gb", "machine_cpu_s_per_gb" },
		{ "conn_per_s", "proxy_cpu_us", "machine_cpu_us" },
	};

	json_obj_begin(j, "tls");
	json_int(j, "conns", tb->conns);
	if (tb->skip[0])
		json_str(j, "skipped", tb->skip);
	json_arr_begin(j, "rows");
	for (int i = 0; i < tb->nrows; i++) {
		const struct tls_row *r = &tb->row[i];
		json_obj_begin(j, NULL);
		json_str(j, "name", r->label);
		json_str(j, "what", r->what);
		if (r->base)
			json_str(j, "baseline", tb->bases[r->base - 1].name);
		if (r->skip)
			json_str(j, "skipped", r->skip);
		if (r->fail[0])
			json_str(j, "failed", r->fail);
		json_arr_begin(j, "samples");
		for (int k = 0; k < r->nrep; k++) {
			json_obj_begin(j, NULL);
			for (int fi = 0; fi < TF_N; fi++)
				json_num(j, keys[r->conn][fi], r->v[k][fi]);
			json_obj_end(j);
		}
		json_arr_end(j);
		json_obj_begin(j, "median");
		for (int fi = 0; fi < TF_N; fi++)
			json_num(j, keys[r->conn][fi], r->med[fi]);
		json_obj_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}
