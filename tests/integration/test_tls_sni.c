/* SPDX-License-Identifier: MIT */
/* TLS passthrough routed by SNI, on real sockets: ClientHellos made by
 * OpenSSL (with the names, ALPN and sizes each case needs), sent whole, one
 * byte per segment, in three pieces, or re-framed into two TLS records;
 * plain TCP, garbage and silence; and a 64 MiB TLS stream between an
 * OpenSSL client and an OpenSSL server through an sni route, checked end
 * to end. Backends are tag servers (each writes its letter), so the byte a
 * client reads says which route took it; in the case with real tools on
 * both ends (openssl s_client, curl --resolve, Python ssl to openssl
 * s_server), the certificate that answers says it. */
#define _GNU_SOURCE
#include "harness.h"
#include "tls_hello_gen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Connects to a from source address src ("127.0.0.2"; NULL: any). */
static int connect_from(const struct h_addr *a, const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (src) {
		inet_pton(AF_INET, src, &sin.sin_addr);
		H_CHECK(bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0, "bind %s: %s", src,
			strerror(errno));
	}
	h_set_timeouts(fd, 3000);
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len)) {
		close(fd);
		return -1;
	}
	h_set_nodelay(fd);
	return fd;
}

/* Sends buf in pieces of `piece` bytes (0: at once), a pause between, and
 * returns the tag the backend answers with (0: none, closed or reset). */
static char route_of(const struct h_addr *a, const uint8_t *buf, size_t n, size_t piece)
{
	int fd = connect_from(a, NULL);
	char tag = 0;

	H_CHECK(fd >= 0, "connect to the proxy: %s", strerror(errno));
	for (size_t off = 0; off < n;) {
		size_t k = piece && n - off > piece ? piece : n - off;
		H_CHECK(send(fd, buf + off, k, MSG_NOSIGNAL) == (ssize_t)k, "send: %s", strerror(errno));
		off += k;
		if (piece && off < n)
			h_sleep_ms(piece == 1 ? 2 : 30);
	}
	if (recv(fd, &tag, 1, 0) != 1)
		tag = 0;
	close(fd);
	return tag;
}

struct sni_env {
	struct h_tag_server a, b, d;
	struct h_proxy p;
	struct h_addr addr;
};

static void sni_env_up(struct sni_env *e, const char *bin, const char *extra_default)
{
	char text[2048], port[16];
	const char *path;
	int lport = h_free_port();

	h_tag_start(&e->a, 'a', 0, 0);
	h_tag_start(&e->b, 'b', 0, 0);
	h_tag_start(&e->d, 'd', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\n"
		 "[route a]\nlisten = 127.0.0.1:%d\nsni = a.example.com *.a.example.com\n"
		 "backend = 127.0.0.1:%d\ntls_hello_timeout = 1s\n"
		 "[route b]\nlisten = 127.0.0.1:%d\nsni = b.example.com api.a.example.com\nalpn = h2\n"
		 "backend = 127.0.0.1:%d\n"
		 "[route other]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n%s",
		 lport, e->a.port, lport, e->b.port, lport, e->d.port, extra_default ? extra_default : "");
	path = h_conf_write("sni.conf", text);
	const char *args[] = { "-c", path, NULL };
	char err[256];
	H_CHECK(h_proxy_start(&e->p, bin, args, err, sizeof err) == 0, "proxy: %s", err);
	snprintf(port, sizeof port, "%d", lport);
	H_CHECK(h_addr_parse("127.0.0.1:0", &e->addr) == 0, "addr");
	((struct sockaddr_in *)&e->addr.ss)->sin_port = htons((uint16_t)lport);
}

static void sni_env_down(struct sni_env *e)
{
	h_proxy_down(&e->p);
	h_tag_stop(&e->a);
	h_tag_stop(&e->b);
	h_tag_stop(&e->d);
}

/* Names, wildcards, case, ALPN, no SNI, plain TCP, and every way of cutting
 * a hello: each case reaches the route it names. */
Test(integ, sni_routes_by_name_wildcard_case_and_alpn, .init = h_init, .fini = h_fini, .timeout = 90)
{
	struct sni_env e;
	uint8_t h[8192], h2[8192];
	size_t n;

	sni_env_up(&e, h_binary(1), NULL);
	static const struct {
		const char *sni, *alpn;
		char want;
	} cases[] = {
		{ "a.example.com", NULL, 'a' },
		{ "A.Example.COM", NULL, 'a' },      /* names are case-insensitive */
		{ "x.a.example.com", NULL, 'a' },    /* one label under the wildcard */
		{ "x.y.a.example.com", NULL, 'a' },  /* or more */
		{ "b.example.com", "h2,http/1.1", 'b' },
		{ "b.example.com", "http/1.1", 'd' }, /* alpn not met: the default */
		{ "b.example.com", NULL, 'd' },
		{ "api.a.example.com", "h2", 'b' },  /* an exact name before the wildcard */
		/* its alpn not met: the default, not route a's *.a.example.com */
		{ "api.a.example.com", "http/1.1", 'd' },
		{ "c.example.com", "h2", 'd' },      /* no route for the name */
		{ "example.com", NULL, 'd' },        /* the wildcard needs a label */
		{ NULL, "h2", 'd' },                  /* no SNI */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		n = tls_make_hello(cases[i].sni, cases[i].alpn, 0, h, sizeof h);
		char got = route_of(&e.addr, h, n, 0);
		H_CHECK(got == cases[i].want, "sni %s alpn %s: route %c, expected %c",
			cases[i].sni ? cases[i].sni : "(none)", cases[i].alpn ? cases[i].alpn : "(none)",
			got ? got : '-', cases[i].want);
	}
	/* plain TCP: the default route */
	H_CHECK(route_of(&e.addr, (const uint8_t *)"PING\r\n", 6, 0) == 'd', "plain TCP");
	/* one byte per segment */
	n = tls_make_hello("a.example.com", NULL, 0, h, sizeof h);
	H_CHECK(route_of(&e.addr, h, n, 1) == 'a', "a hello sent one byte per segment");
	/* over 2,000 bytes (a post-quantum hello's size) in three pieces */
	n = tls_make_hello("x.a.example.com", NULL, 20, h, sizeof h);
	H_CHECK(n > 2000, "big hello is %zu bytes", n);
	H_CHECK(route_of(&e.addr, h, n, n / 3 + 1) == 'a', "a %zu-byte hello in three pieces", n);
	/* split across two TLS records, the cut inside the handshake header */
	n = tls_make_hello("b.example.com", "h2", 0, h, sizeof h);
	size_t n2 = tls_two_records(h, n, 2, h2);
	H_CHECK(route_of(&e.addr, h2, n2, 0) == 'b', "a hello in two records (cut at 2)");
	n2 = tls_two_records(h, n, n / 2, h2);
	H_CHECK(route_of(&e.addr, h2, n2, 7) == 'b', "a hello in two records, in 7-byte pieces");
	sni_env_down(&e);
}

/* What reaches the backend is every byte the client sent, the hello first:
 * 16 KiB of garbage goes to the default route byte for byte, a silent
 * client is closed after tls_hello_timeout, a listener without a default
 * closes what no name takes, 16 KiB of garbage behind a TLS record header
 * and a name with a trailing dot are malformed hellos (closed, not sent to
 * the default), and each is counted. */
static void echo_check(const struct h_addr *a, const uint8_t *buf, size_t n)
{
	uint8_t *back = malloc(n);
	int fd = connect_from(a, NULL);

	H_CHECK(fd >= 0 && back, "connect");
	H_CHECK(h_send_all(fd, buf, n, h_now_ms() + 5000) == 0, "send");
	H_CHECK(h_recv_exact(fd, back, n, h_now_ms() + 5000) == 0, "echo of %zu bytes", n);
	H_CHECK(!memcmp(back, buf, n), "the echo differs from what was sent");
	close(fd);
	free(back);
}

/* Sends buf; the proxy must close the connection (FIN, or RST for the
 * bytes it left unread) without a byte back. */
static void closed_unanswered(const struct h_addr *a, const uint8_t *buf, size_t n,
			      const char *what)
{
	int fd = connect_from(a, NULL);

	H_CHECK(fd >= 0, "connect");
	H_CHECK(h_send_all(fd, buf, n, h_now_ms() + 5000) == 0, "%s: send", what);
	int rc = h_expect_eof(fd, h_now_ms() + 3000);
	H_CHECK(rc == 0 || rc == -ECONNRESET, "%s: %s, expected the proxy to close it", what,
		rc == -EPROTO ? "bytes came back" : strerror(-rc));
	close(fd);
}

Test(integ, sni_forwards_every_byte_and_closes_the_silent, .init = h_init, .fini = h_fini,
     .timeout = 90)
{
	struct h_server echo;
	struct h_tag_server a;
	struct h_proxy p;
	struct h_addr dflt, only, stats;
	char text[2048], err[256];
	uint8_t junk[16384], h[4096];
	int pd = h_free_port(), po = h_free_port();

	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo");
	h_tag_start(&a, 'a', 0, 0);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 1\nstats = 127.0.0.1:0\ntls_hello_timeout = 1s\n"
		 "[route a]\nlisten = 127.0.0.1:%d 127.0.0.1:%d\nsni = a.example.com\n"
		 "backend = 127.0.0.1:%d\n"
		 "[route echo]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
		 pd, po, a.port, pd, echo.addr.text);
	const char *args[] = { "-c", h_conf_write("fwd.conf", text), NULL };
	H_CHECK(h_proxy_start(&p, h_binary(1), args, err, sizeof err) == 0, "proxy: %s", err);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "stats address");
	h_addr_parse("127.0.0.1:0", &dflt);
	only = dflt;
	((struct sockaddr_in *)&dflt.ss)->sin_port = htons((uint16_t)pd);
	((struct sockaddr_in *)&only.ss)->sin_port = htons((uint16_t)po);

	h_gen(7, 0, junk, sizeof junk);
	junk[0] = 'G'; /* not a TLS record */
	echo_check(&dflt, junk, sizeof junk);
	/* a TLS hello for a name no route has: to the default, untouched */
	size_t n = tls_make_hello("nobody.example.com", "h2", 0, h, sizeof h);
	echo_check(&dflt, h, n);

	/* silent: the proxy closes it after tls_hello_timeout (1 s, every route
	 * of the address), nothing forwarded; not our own receive timeout */
	int fd = connect_from(&dflt, NULL);
	int64_t t0 = h_now_ms();
	char c;
	h_set_timeouts(fd, 5000);
	ssize_t got = recv(fd, &c, 1, 0);
	int why = errno;
	int64_t took = h_now_ms() - t0;
	H_CHECK(got == 0 || (got < 0 && why == ECONNRESET), "a silent client: recv %zd (%s) "
		"after %lld ms, expected the proxy's FIN or RST", got, got < 0 ? strerror(why) : "a byte",
		(long long)took);
	H_CHECK(took >= 900 && took <= 2500, "a silent client closed after %lld ms, expected "
		"tls_hello_timeout (1 s)", (long long)took);
	close(fd);
	/* TLS-shaped garbage: a handshake record header, then random bytes */
	h_gen(9, 0, junk, sizeof junk);
	memcpy(junk, "\x16\x03\x01", 3);
	junk[3] = (uint8_t)((sizeof junk - 5) >> 8), junk[4] = (uint8_t)(sizeof junk - 5);
	junk[5] = 0x77; /* no ClientHello */
	closed_unanswered(&dflt, junk, sizeof junk, "16 KiB of garbage behind a TLS record header");
	/* a trailing dot is no host name (RFC 6066): a malformed hello */
	n = tls_make_hello("a.example.com.", NULL, 0, h, sizeof h);
	closed_unanswered(&dflt, h, n, "a hello for 'a.example.com.'");
	n = tls_make_hello("nobody.example.com", NULL, 0, h, sizeof h);
	echo_check(&dflt, h, n); /* and the next client is served */
	/* no default on this address: a name nobody has is closed */
	n = tls_make_hello("nobody.example.com", NULL, 0, h, sizeof h);
	H_CHECK(route_of(&only, h, n, 0) == 0, "no route, no default: a byte came back");
	H_CHECK(route_of(&only, (const uint8_t *)"PING\r\n", 6, 0) == 0, "plain TCP, no default");
	n = tls_make_hello("a.example.com", NULL, 0, h, sizeof h);
	H_CHECK(route_of(&only, h, n, 0) == 'a', "the named route on the second address");
	h_sleep_ms(200);
	H_CHECK(h_metric(&stats, "splicer_tls_hello_timeouts_total") == 1, "hello timeouts: %lld",
		h_metric(&stats, "splicer_tls_hello_timeouts_total"));
	H_CHECK(h_metric(&stats, "splicer_tls_no_route_total") == 2, "no route: %lld",
		h_metric(&stats, "splicer_tls_no_route_total"));
	H_CHECK(h_metric(&stats, "splicer_tls_hello_errors_total") == 2, "malformed hellos: %lld",
		h_metric(&stats, "splicer_tls_hello_errors_total"));
	h_proxy_down(&p);
	h_tag_stop(&a);
	h_server_stop(&echo);
}

/* ---- 64 MiB of real TLS through an sni route ---------------------------- */

struct tls_srv {
	int lfd, port;
	SSL_CTX *ctx;
	pthread_t thr;
	uint64_t len;
	unsigned char got[32];
	int ok;
};

static void *tls_srv_main(void *arg)
{
	struct tls_srv *t = arg;
	int fd = accept(t->lfd, NULL, NULL);
	SSL *ssl = SSL_new(t->ctx);
	struct h_sha sha;
	static unsigned char buf[65536];
	uint64_t left = t->len;

	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1)
		goto out;
	h_sha_init(&sha);
	while (left) {
		int n = SSL_read(ssl, buf, (int)(left < sizeof buf ? left : sizeof buf));
		if (n <= 0)
			goto out;
		h_sha_update(&sha, buf, (size_t)n);
		left -= (uint64_t)n;
	}
	h_sha_final(&sha, t->got);
	t->ok = SSL_write(ssl, t->got, 32) == 32;
	SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	close(fd);
	return NULL;
}

/* A self-signed certificate for the test server, made here. */
static SSL_CTX *server_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *x = X509_new();

	H_CHECK(ctx && key && x, "OpenSSL server objects");
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"a.example.com", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	H_CHECK(X509_sign(x, key, EVP_sha256()) > 0, "sign");
	H_CHECK(SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_use_PrivateKey(ctx, key) == 1, "cert");
	X509_free(x);
	EVP_PKEY_free(key);
	return ctx;
}

Test(integ, sni_route_carries_64mib_of_tls_end_to_end, .init = h_init, .fini = h_fini,
     .timeout = 120)
{
	struct tls_srv srv = { .len = 64 * H_MIB };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sin;
	struct h_tag_server d;
	struct h_proxy p;
	struct h_addr pa;
	char text[1024], err[256];
	int lport = h_free_port();

	srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(bind(srv.lfd, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(srv.lfd, 4) == 0 &&
			getsockname(srv.lfd, (struct sockaddr *)&sin, &sl) == 0, "tls server socket");
	srv.port = ntohs(sin.sin_port);
	srv.ctx = server_ctx();
	H_CHECK(pthread_create(&srv.thr, NULL, tls_srv_main, &srv) == 0, "tls server thread");
	h_tag_start(&d, 'd', 0, 0);
	snprintf(text, sizeof text,
		 "[route a]\nlisten = 127.0.0.1:%d\nsni = a.example.com\nbackend = 127.0.0.1:%d\n"
		 "[route other]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n",
		 lport, srv.port, lport, d.port);
	const char *args[] = { "-c", h_conf_write("tls64.conf", text), "--engine", "splice", NULL };
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);
	h_addr_parse("127.0.0.1:0", &pa);
	((struct sockaddr_in *)&pa.ss)->sin_port = htons((uint16_t)lport);

	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(cctx);
	int fd = connect_from(&pa, NULL);
	struct h_sha sha;
	unsigned char want[32], back[32];
	static unsigned char buf[65536];

	h_set_timeouts(fd, 20000);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "a.example.com");
	H_CHECK(SSL_connect(ssl) == 1, "TLS handshake through the proxy failed");
	h_sha_init(&sha);
	for (uint64_t off = 0; off < srv.len; off += sizeof buf) {
		h_gen(64, off, buf, sizeof buf);
		h_sha_update(&sha, buf, sizeof buf);
		H_CHECK(SSL_write(ssl, buf, sizeof buf) == (int)sizeof buf, "SSL_write at %llu",
			(unsigned long long)off);
	}
	h_sha_final(&sha, want);
	H_CHECK(SSL_read(ssl, back, 32) == 32, "no digest back from the TLS server");
	H_CHECK(!memcmp(back, want, 32), "the server's digest of 64 MiB differs");
	SSL_free(ssl);
	SSL_CTX_free(cctx);
	close(fd);
	pthread_join(srv.thr, NULL);
	H_CHECK(srv.ok, "server side failed");
	SSL_CTX_free(srv.ctx);
	close(srv.lfd);
	h_proxy_down(&p);
	h_tag_stop(&d);
}

/* ---- real TLS tools on both ends ----------------------------------------- */

#define OPENSSL "/usr/bin/openssl"
#define CURL    "/usr/bin/curl"
#define PYTHON  "/usr/bin/python3"

/* An `openssl s_server -www` backend (it answers GET with a page that
 * shows its own command line, port included) with a certificate of its
 * own, CN = its name; started and stopped by PID. */
struct tls_backend {
	char name[64], crt[300], key[300], log[300];
	int port;
	pid_t pid;
};

/* Runs bin to completion; returns its stdout and stderr, in that order,
 * as one string (malloc'd), after checking that it exited 0. */
static char *tool_run(const char *bin, const char *const *args, const char *what)
{
	char *out = NULL, *err = NULL, *all = NULL;
	int st = h_run_capture(bin, args, 20000, &out, &err);

	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: wait status %d\n%s%s",
		what, st, out ? out : "", err ? err : "");
	H_CHECK(asprintf(&all, "%s%s", out ? out : "", err ? err : "") > 0, "out of memory");
	free(out);
	free(err);
	return all;
}

static void tls_backend_start(struct tls_backend *b, const char *name, const char *alpn)
{
	char subj[80], accept[32];
	const char *dir = h_tmpdir();

	snprintf(b->name, sizeof b->name, "%s", name);
	snprintf(b->crt, sizeof b->crt, "%s/%s.crt", dir, name);
	snprintf(b->key, sizeof b->key, "%s/%s.key", dir, name);
	snprintf(b->log, sizeof b->log, "%s/%s.s_server.log", dir, name);
	snprintf(subj, sizeof subj, "/CN=%s", name);
	const char *gen[] = { "req", "-x509", "-newkey", "ec", "-pkeyopt",
			      "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", b->key, "-out",
			      b->crt, "-subj", subj, "-days", "1", NULL };
	free(tool_run(OPENSSL, gen, "openssl req (a test certificate)"));

	b->port = h_free_port();
	snprintf(accept, sizeof accept, "127.0.0.1:%d", b->port);
	char *argv[] = { OPENSSL, "s_server", "-accept", accept, "-cert", b->crt, "-key", b->key,
			 "-www", alpn ? "-alpn" : NULL, (char *)alpn, NULL };
	int logfd = open(b->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pid_t parent = getpid();

	H_CHECK(logfd >= 0 && nullfd >= 0, "%s: %s", b->log, strerror(errno));
	b->pid = fork();
	if (b->pid == 0)
		h_child_exec(parent, nullfd, logfd, logfd, OPENSSL, argv);
	close(logfd);
	close(nullfd);
	H_CHECK(b->pid > 0, "fork: %s", strerror(errno));
	for (int64_t deadline = h_now_ms() + 10000; !h_port_listening(b->port);) {
		H_CHECK(waitpid(b->pid, NULL, WNOHANG) == 0, "s_server %s exited (log %s)", name,
			b->log);
		H_CHECK(h_now_ms() < deadline, "s_server %s not listening on %s after 10 s (log %s)",
			name, accept, b->log);
		h_sleep_ms(10);
	}
}

static void tls_backend_stop(struct tls_backend *b)
{
	int64_t deadline = h_now_ms() + 3000;

	if (b->pid <= 0)
		return;
	kill(b->pid, SIGTERM);
	while (waitpid(b->pid, NULL, WNOHANG) == 0) {
		if (h_now_ms() > deadline) {
			kill(b->pid, SIGKILL);
			waitpid(b->pid, NULL, 0);
			break;
		}
		h_sleep_ms(5);
	}
	b->pid = 0;
}

/* What a page of backend b contains: its own command line. */
static int page_of(const char *out, const struct tls_backend *b)
{
	char accept[48];

	snprintf(accept, sizeof accept, "s_server -accept 127.0.0.1:%d ", b->port);
	return strstr(out, "HTTP/1.0 200 ok") || strstr(out, "<HTML>") ? strstr(out, accept) != NULL
								       : 0;
}

/* A Python ssl client: verifies the server against one backend's
 * certificate (hostname not checked), sends GET, prints
 * "CN=<subject> ALPN=<protocol> <status line>". */
static const char py_client[] =
	"import socket, ssl, sys\n"
	"port, name, alpn, ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]\n"
	"ctx = ssl.create_default_context(cafile=ca)\n"
	"ctx.check_hostname = False\n"
	"if alpn:\n"
	"    ctx.set_alpn_protocols(alpn.split(','))\n"
	"with socket.create_connection(('127.0.0.1', port), timeout=10) as raw:\n"
	"    with ctx.wrap_socket(raw, server_hostname=name) as s:\n"
	"        cn = dict(x[0] for x in s.getpeercert()['subject'])['commonName']\n"
	"        s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
	"        head = b''\n"
	"        while b'\\r\\n' not in head:\n"
	"            more = s.recv(256)\n"
	"            if not more:\n"
	"                break\n"
	"            head += more\n"
	"        print('CN=%s ALPN=%s %s' % (cn, s.selected_alpn_protocol(),\n"
	"                                    head.split(b'\\r\\n')[0].decode()))\n";

/* openssl s_client, curl --resolve and Python's ssl module through the
 * proxy to openssl s_server backends, one per route, each with its own
 * certificate: the certificate that answers says which route took the
 * client, and the negotiated ALPN that the bytes went through untouched. */
Test(integ, sni_real_tls_clients_reach_the_right_s_server, .init = h_init, .fini = h_fini,
     .timeout = 120)
{
	struct tls_backend be[3] = { 0 }; /* routes a, b, other */
	struct h_proxy p;
	char text[1024], err[256], port[16], target[160], resolve[160], url[160], want[160];
	int lport = h_free_port();

	if (access(OPENSSL, X_OK) || access(CURL, X_OK) || access(PYTHON, X_OK))
		cr_skip_test(OPENSSL ", " CURL " or " PYTHON " missing (Debian: openssl, curl, python3)");
	tls_backend_start(&be[0], "a.example.com", NULL);
	tls_backend_start(&be[1], "b.example.com", "h2");
	tls_backend_start(&be[2], "d.example.com", NULL);
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\n"
		 "[route a]\nlisten = 127.0.0.1:%d\nsni = a.example.com *.a.example.com\n"
		 "backend = 127.0.0.1:%d\n"
		 "[route b]\nlisten = 127.0.0.1:%d\nsni = b.example.com\nalpn = h2\n"
		 "backend = 127.0.0.1:%d\n"
		 "[route other]\nlisten = 127.0.0.1:%d\nbackend = 127.0.0.1:%d\n",
		 lport, be[0].port, lport, be[1].port, lport, be[2].port);
	const char *args[] = { "-c", h_conf_write("real.conf", text), NULL };
	H_CHECK(h_proxy_start(&p, h_binary(1), args, err, sizeof err) == 0, "proxy: %s", err);
	snprintf(port, sizeof port, "%d", lport);
	snprintf(target, sizeof target, "127.0.0.1:%d", lport);

	static const struct {
		const char *sni, *alpn;
		int route;
		const char *alpn_says;
	} cases[] = {
		{ "a.example.com", NULL, 0, "No ALPN negotiated" },
		{ "x.y.a.example.com", NULL, 0, "No ALPN negotiated" }, /* the wildcard */
		{ "A.Example.COM", NULL, 0, "No ALPN negotiated" },     /* any case */
		{ "b.example.com", "h2", 1, "ALPN protocol: h2" },
		{ "b.example.com", "http/1.1", 2, "No ALPN negotiated" }, /* alpn not met */
		{ "c.example.com", "h2", 2, "No ALPN negotiated" },      /* no route for it */
		{ NULL, "h2", 2, "No ALPN negotiated" },                 /* no SNI */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *sc[12] = { "s_client", "-connect", target }, **a = sc + 3;
		if (cases[i].sni)
			*a++ = "-servername", *a++ = cases[i].sni;
		else
			*a++ = "-noservername";
		if (cases[i].alpn)
			*a++ = "-alpn", *a++ = cases[i].alpn;
		char *out = tool_run(OPENSSL, sc, "openssl s_client");
		snprintf(want, sizeof want, "subject=CN = %s", be[cases[i].route].name);
		H_CHECK(strstr(out, want) && strstr(out, cases[i].alpn_says),
			"s_client -servername %s -alpn %s: expected \"%s\" and \"%s\" in\n%s",
			cases[i].sni ? cases[i].sni : "(none)", cases[i].alpn ? cases[i].alpn : "(none)",
			want, cases[i].alpn_says, out);
		free(out);
	}

	static const struct {
		const char *host, *http;
		int route;
	} gets[] = {
		{ "a.example.com", NULL, 0 },
		{ "www.a.example.com", NULL, 0 },
		{ "b.example.com", "--http1.1", 2 }, /* ALPN http/1.1 only: not route b */
		{ "c.example.com", NULL, 2 },
	};
	for (size_t i = 0; i < sizeof gets / sizeof gets[0]; i++) {
		snprintf(resolve, sizeof resolve, "%s:%d:127.0.0.1", gets[i].host, lport);
		snprintf(url, sizeof url, "https://%s:%d/", gets[i].host, lport);
		const char *cu[] = { "-sS", "-k", "-v", "--max-time", "10", "--resolve", resolve, url,
				     gets[i].http, NULL };
		char *out = tool_run(CURL, cu, "curl");
		snprintf(want, sizeof want, "subject: CN=%s", be[gets[i].route].name);
		H_CHECK(page_of(out, &be[gets[i].route]) && strstr(out, want),
			"curl %s: expected the page of s_server %s (port %d) and \"%s\" in\n%s", url,
			be[gets[i].route].name, be[gets[i].route].port, want, out);
		free(out);
	}

	static const struct {
		const char *sni, *alpn;
		int route;
		const char *says;
	} pys[] = {
		{ "b.example.com", "h2,http/1.1", 1, "CN=b.example.com ALPN=h2 HTTP/1.0 200 ok" },
		{ "Www.A.example.com", "", 0, "CN=a.example.com ALPN=None HTTP/1.0 200 ok" },
	};
	for (size_t i = 0; i < sizeof pys / sizeof pys[0]; i++) {
		const char *py[] = { "-c", py_client, port, pys[i].sni, pys[i].alpn,
				     be[pys[i].route].crt, NULL };
		char *out = tool_run(PYTHON, py, "python3 ssl client");
		H_CHECK(strstr(out, pys[i].says), "python ssl, server_hostname %s: expected \"%s\", "
			"got\n%s", pys[i].sni, pys[i].says, out);
		free(out);
	}
	h_proxy_down(&p);
	for (int i = 0; i < 3; i++)
		tls_backend_stop(&be[i]);
}

/* `check` on shared listeners: what cannot work is an error at its line,
 * what the precedence rule decides is a note, and bad names, protocols and
 * ranges are errors of the key's line. want "": check prints nothing. */
static void check_says(const char *name, const char *text, int want_status, const char *want)
{
	const char *path = h_conf_write(name, text);
	const char *args[] = { "check", "-c", path, NULL };
	char *out = NULL, *err = NULL;
	int st = h_run_capture(h_binary(0), args, 5000, &out, &err);

	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == want_status,
		"%s: check exit %d, expected %d; stderr: %s", name, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		want_status, err ? err : "");
	if (!*want) /* nothing to say */
		H_CHECK(err && !*err, "%s: check said\n%s\nexpected nothing", name, err ? err : "");
	else
		H_CHECK(err && strstr(err, want), "%s: check said\n%s\nexpected it to contain\n%s",
			name, err ? err : "(nothing)", want);
	free(out);
	free(err);
}

Test(integ, sni_check_reports_conflicts_and_precedence, .init = h_init, .fini = h_fini, .timeout = 60)
{
	check_says("two-defaults.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nbackend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nbackend = 127.0.0.1:2\n", 1,
		   ":5: listen 127.0.0.1:9443: routes 'a' (line 2) and 'b' share this address and neither "
		   "has sni");
	check_says("same-name.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nbackend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = X.example.com\nbackend = 127.0.0.1:2\n", 1,
		   ":7: listen 127.0.0.1:9443: server name 'x.example.com' is given twice (route a and "
		   "route b): route a comes first in the file and has no alpn, so it takes every "
		   "client for the name and route b none");
	/* alpn lists compare as sets, in file order (the first route met wins) */
	check_says("alpn-after-open.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nbackend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nalpn = h2\n"
		   "backend = 127.0.0.1:2\n", 1,
		   ":8: listen 127.0.0.1:9443: server name 'x.example.com' is given twice (route a and "
		   "route b): route a comes first in the file and has no alpn");
	check_says("alpn-subset.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nalpn = h2 http/1.1\n"
		   "backend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nalpn = h2\n"
		   "backend = 127.0.0.1:2\n", 1,
		   ":9: listen 127.0.0.1:9443: route b never gets a client for server name "
		   "'x.example.com': every protocol of its alpn (h2) is also in the alpn of route a, "
		   "which comes first in the file");
	check_says("alpn-shared.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = *.example.com\nalpn = h2\n"
		   "backend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = *.Example.com\nalpn = h2,http/1.1\n"
		   "backend = 127.0.0.1:2\n", 0,
		   ":9: note: listen 127.0.0.1:9443: server name '*.example.com' is in route a and "
		   "route b, whose alpn lists share h2: a client offering it goes to route a, the "
		   "first in the file");
	check_says("alpn-apart.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nalpn = h2\n"
		   "backend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nalpn = H2\n"
		   "backend = 127.0.0.1:2\n"
		   "[route c]\nlisten = 127.0.0.1:9443\nsni = x.example.com\nbackend = 127.0.0.1:3\n",
		   0, "");
	check_says("alpn-no-sni.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nalpn = h2\nbackend = 127.0.0.1:1\n", 1,
		   ":3: alpn needs sni in the same route: route 'a' has no sni");
	check_says("alpn-exact-under-wildcard.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = *.example.com\nbackend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = api.example.com\nalpn = h2\n"
		   "backend = 127.0.0.1:2\n"
		   "[route c]\nlisten = 127.0.0.1:9443\nbackend = 127.0.0.1:3\n", 0,
		   ":7: note: listen 127.0.0.1:9443: server name 'api.example.com' (route b) is also "
		   "matched by '*.example.com' (route a): the exact name wins; a client for it that "
		   "meets no alpn of route b goes to the listener's default route, not to route a");
	/* the ClientHello's limits are the listener's */
	static const char limits[] =
		"[route a]\nlisten = 127.0.0.1:9443\nsni = a.example.com\ntls_hello_timeout = 1s\n"
		"backend = 127.0.0.1:1\n"
		"[route b]\nlisten = 127.0.0.1:9443\nsni = b.example.com\nbackend = 127.0.0.1:2\n"
		"[route c]\nlisten = 127.0.0.1:9443\ntls_hello_max = 32k\nbackend = 127.0.0.1:3\n";
	check_says("hello-timeout.conf", limits, 0,
		   ":7: note: listen 127.0.0.1:9443: its routes set different tls_hello_timeout (a 1s, "
		   "b 5s, c 5s): the ClientHello is read before a route is chosen, so the largest, 5s, "
		   "applies to every client of this address");
	check_says("hello-max.conf", limits, 0,
		   ":11: note: listen 127.0.0.1:9443: its routes set different tls_hello_max (a 16k, "
		   "b 16k, c 32k): the ClientHello is read before a route is chosen, so the largest, "
		   "32k, applies to every client of this address");
	check_says("overlap.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = *.example.com\nbackend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nsni = api.example.com\nbackend = 127.0.0.1:2\n", 0,
		   ":7: note: listen 127.0.0.1:9443: server name 'api.example.com' (route b) is also "
		   "matched by '*.example.com' (route a): the exact name wins");
	check_says("bad-name.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = a..example.com\nbackend = 127.0.0.1:1\n", 1,
		   ":3: sni 'a..example.com' is not a host name");
	check_says("bad-wildcard.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = a.*.com\nbackend = 127.0.0.1:1\n", 1,
		   ":3: sni 'a.*.com': '*' may only stand as the first label, as in *.example.com");
	check_says("bad-cidr.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nallow = 10.0.0.0/33\nbackend = 127.0.0.1:1\n", 1,
		   ":3: allow: '10.0.0.0/33': bad prefix length 33 for IPv4");
	check_says("host-bits.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\ndeny = 10.1.2.3/8\nbackend = 127.0.0.1:1\n", 0,
		   ":3: note: deny: '10.1.2.3/8' has host bits set: it means 10.0.0.0/8");
	check_says("deny-covers-allow.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nallow = 10.1.0.0/16 ::ffff:10.2.0.0/112\n"
		   "deny = 10.0.0.0/8\nbackend = 127.0.0.1:1\n", 0,
		   ":4: note: deny covers every range of allow (line 3), and deny wins: route 'a' lets "
		   "no client in");
	check_says("deny-part-of-allow.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nallow = 10.1.0.0/16 2001:db8::/32\n"
		   "deny = 10.0.0.0/8\nbackend = 127.0.0.1:1\n", 0, "");
	check_says("proxy-mix.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nsni = a.example.com\naccept_proxy = yes\n"
		   "backend = 127.0.0.1:1\n"
		   "[route b]\nlisten = 127.0.0.1:9443\nbackend = 127.0.0.1:2\n", 1,
		   "route 'b' has accept_proxy off but route 'a'");
	check_says("maxconn.conf",
		   "[route a]\nlisten = 127.0.0.1:9443\nbackend = 127.0.0.1:1 maxconn=0\n", 1,
		   ":3: backend 127.0.0.1:1: invalid maxconn '0'");
}
