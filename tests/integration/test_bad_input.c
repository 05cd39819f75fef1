/* SPDX-License-Identifier: MIT */
/* Integration cases for bad input: each must get a clear error (what is
 * wrong and where) and disturb nothing else.
 *   - config files that are not text (binary junk, a NUL after a valid
 *     value), a 1 MB line, a section header without its ']': `splicer check
 *     -c` and `splicer -c` name the line and stop, the line numbers after a
 *     long line stay right;
 *   - a listen address in use (by a plain socket, by a second splicer, by a
 *     live Unix server; the stats address): one message with the address and
 *     the errno text, and no socket file left by the listeners bound before;
 *   - a Unix path one byte over sun_path on -l, -b and in a file, while one
 *     at the limit works;
 *   - a backend name that does not resolve (.invalid never does), at start
 *     and in a SIGHUP reload while sessions run;
 *   - the stats port fed binary junk, a 100 KB request line, NULs, a
 *     slowloris and 230 connections at once, while sessions are forwarded;
 *   - malformed and slow PROXY headers, each logged with its reason and the
 *     client's address, while other sessions are forwarded.
 * Already covered elsewhere and not repeated: the per-key config errors
 * (test_config_file.c), bad command-line options (test_cli.c), short bad
 * HTTP requests (test_ops.c), the close and count of bad PROXY headers
 * (test_proxy_protocol.c).
 *
 * Objects that helper threads or h_fini() may still touch after a failed
 * check are static, never on the stack. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy_proto.h"

/* ---- helpers --------------------------------------------------------------- */

/* Writes n bytes to a new file in the test's temp dir; returns its path. */
static const char *put_file(const char *name, const void *data, size_t n)
{
	static char path[4][300];
	static int next;
	char *p = path[next++ % 4];

	snprintf(p, sizeof path[0], "%s/%s", h_tmpdir(), name);
	FILE *f = fopen(p, "we");
	H_CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "cannot write %s", p);
	return p;
}

static const char *put_text(const char *name, const char *text)
{
	return put_file(name, text, strlen(text));
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int nlines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

struct run {
	int st;
	char *out, *err;
};

/* Runs the proxy binary to completion (5 s at most) and frees the last run. */
static struct run *run(const char *bin, const char *const *args)
{
	static struct run r;
	free(r.out);
	free(r.err);
	r.st = h_run_capture(bin, args, 5000, &r.out, &r.err);
	if (!r.out)
		r.out = strdup("");
	if (!r.err)
		r.err = strdup("");
	return &r;
}

/* Expects exit status `code` and exactly `want` on stderr, nothing on stdout. */
static void expect_exact(const struct run *r, int code, const char *want, const char *what)
{
	H_CHECK(r->st != -1, "%s: still running after 5 s (killed); stderr: %s", what, r->err);
	H_CHECK(WIFEXITED(r->st) && WEXITSTATUS(r->st) == code,
		"%s: expected exit status %d, got %s %d; stderr: %s", what, code,
		WIFEXITED(r->st) ? "status" : "signal",
		WIFEXITED(r->st) ? WEXITSTATUS(r->st) : WTERMSIG(r->st), r->err);
	H_CHECK(!strcmp(r->err, want), "%s: stderr is\n%s\nexpected exactly\n%s", what, r->err, want);
	H_CHECK(!r->out[0], "%s: printed on stdout: %s", what, r->out);
}

/* Expects exit status 1 and one log line on stderr whose message (after
 * "error: ") is exactly want. */
static void expect_log_error(const struct run *r, const char *want, const char *what)
{
	H_CHECK(r->st != -1, "%s: still running after 5 s (killed): it started anyway; stderr: %s",
		what, r->err);
	H_CHECK(WIFEXITED(r->st) && WEXITSTATUS(r->st) == 1,
		"%s: expected exit status 1, got %s %d; stderr: %s", what,
		WIFEXITED(r->st) ? "status" : "signal",
		WIFEXITED(r->st) ? WEXITSTATUS(r->st) : WTERMSIG(r->st), r->err);
	const char *m = strstr(r->err, " error: ");
	H_CHECK(nlines(r->err) == 1 && m, "%s: expected one error line, stderr has %d lines:\n%s",
		what, nlines(r->err), r->err);
	m += strlen(" error: ");
	H_CHECK(!strncmp(m, want, strlen(want)) && !strcmp(m + strlen(want), "\n"),
		"%s: the message is\n%s\nexpected\n%s", what, m, want);
}


/* A listening socket on 127.0.0.1 (another process, as the proxy sees it);
 * with reuseport it sets SO_REUSEPORT as a second splicer would. */
static int busy_port(int *fd, int reuseport)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;
	int one = 1;

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (reuseport)
		setsockopt(*fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	H_CHECK(*fd >= 0 && bind(*fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(*fd, 16) == 0 && getsockname(*fd, (struct sockaddr *)&sin, &len) == 0,
		"busy port: %s", strerror(errno));
	return ntohs(sin.sin_port);
}

/* An interactive session kept open through the bad input: a round trip on
 * it after each case shows the proxy kept forwarding. */
struct live {
	int fd;
	uint64_t seed, off;
};

static void live_open(struct live *l, const struct h_addr *a, const void *hdr, size_t hn,
		      uint64_t seed)
{
	l->fd = h_connect(a, 2000);
	H_CHECK(l->fd >= 0, "live session: connect to %s: %s", a->text, strerror(errno));
	h_set_nodelay(l->fd);
	H_CHECK(!hn || h_send_all(l->fd, hdr, hn, h_now_ms() + 2000) == 0, "live session: header");
	l->seed = seed;
	l->off = 0;
}

static void live_check(struct live *l, const char *after)
{
	char out[1000], back[1000];

	h_gen(l->seed, l->off, out, sizeof out);
	int rc = h_send_all(l->fd, out, sizeof out, h_now_ms() + 3000);
	if (!rc)
		rc = h_recv_exact(l->fd, back, sizeof back, h_now_ms() + 3000);
	H_CHECK(rc == 0 && !memcmp(out, back, sizeof out),
		"the live session stopped forwarding after %s: %s", after,
		rc == -ENODATA ? "EOF" : rc ? strerror(-rc) : "the echo differs");
	l->off += sizeof out;
}

/* A bulk echo stream, its reader paced so that it runs through the cases. */
struct bulk {
	int fd;
	uint64_t len;
	struct h_xfer tx, rx;
};

static void bulk_start(struct bulk *b, const struct h_addr *a, const void *hdr, size_t hn,
		       uint64_t seed, uint64_t len)
{
	int64_t deadline = h_now_ms() + H_T(40000);

	b->fd = h_connect(a, 2000);
	H_CHECK(b->fd >= 0, "bulk session: connect: %s", strerror(errno));
	H_CHECK(!hn || h_send_all(b->fd, hdr, hn, h_now_ms() + 2000) == 0, "bulk session: header");
	b->len = len;
	h_xfer_init(&b->tx, b->fd, seed, len, deadline);
	b->tx.shut_wr = 1;
	h_xfer_init(&b->rx, b->fd, seed, 0, deadline);
	b->rx.verify = 1;
	b->rx.pace_bytes = 64 * H_KIB; /* about 2 MB/s: a few seconds of stream */
	b->rx.pace_ms = 30;
	H_CHECK(h_xfer_start_send(&b->tx) == 0 && h_xfer_start_recv(&b->rx) == 0, "bulk threads");
}

static void bulk_finish(struct bulk *b, const char *what)
{
	H_CHECK(h_xfer_join(&b->tx, 5000) == 0 && h_xfer_join(&b->rx, 5000) == 0,
		"%s: the bulk session did not finish (sent %llu, received %llu of %llu)", what,
		(unsigned long long)atomic_load(&b->tx.progress),
		(unsigned long long)atomic_load(&b->rx.progress), (unsigned long long)b->len);
	h_check_stream(what, &b->tx, &b->rx, b->len);
	close(b->fd);
}

/* The text after "prefix" on the first log line that has it, up to the
 * line's end (static), or NULL. */
static const char *log_value(const struct h_proxy *p, const char *prefix)
{
	static char val[256];
	char line[1024];
	FILE *f = fopen(p->log, "re");
	const char *found = NULL;

	while (f && !found && fgets(line, sizeof line, f)) {
		char *s = strstr(line, prefix);
		if (!s)
			continue;
		snprintf(val, sizeof val, "%s", s + strlen(prefix));
		val[strcspn(val, " \n")] = '\0';
		found = val;
	}
	if (f)
		fclose(f);
	return found;
}

/* ---- config files that are not a config ---------------------------------- */

/* Where the first byte that makes a text line binary is: line and column
 * (1-based), as the reader counts them. */
static void first_binary(const unsigned char *b, size_t n, int *line, int *col, int *byte)
{
	*line = 1;
	*col = 0;
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\n') {
			(*line)++;
			*col = 0;
			continue;
		}
		(*col)++;
		if ((b[i] < 0x20 && b[i] != '\t' && b[i] != '\r') || b[i] == 0x7f) {
			*byte = b[i];
			return;
		}
	}
	*byte = -1;
}

/* The file must fail `check -c` (exit 1) and `-c` (exit 2, nothing bound:
 * its Unix listen path never appears) with exactly `want`, each line
 * prefixed by the file's path. */
static void config_rejected(const char *bin, const char *path, const char *want,
			    const char *sock, const char *what)
{
	char exp[2048];
	size_t n = 0;

	/* "PATH:" before each line of want */
	for (const char *w = want; *w && n < sizeof exp - 400;) {
		const char *e = strchr(w, '\n');
		size_t len = e ? (size_t)(e - w) + 1 : strlen(w);
		n += (size_t)snprintf(exp + n, sizeof exp - n, "%s:%.*s", path, (int)len, w);
		w += len;
	}
	const char *check[] = { "check", "-c", path, NULL };
	expect_exact(run(bin, check), 1, exp, what);
	const char *start[] = { "-c", path, NULL };
	char w2[200];
	snprintf(w2, sizeof w2, "%s (splicer -c)", what);
	expect_exact(run(bin, start), 2, exp, w2);
	H_CHECK(!exists(sock), "%s: %s exists after a failed start", what, sock);
}

Test(integ, bad_config_binary_nul_long_line_unterminated_section, .init = h_init,
     .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	char sock[200], head[300], exp[300];
	static unsigned char junk[3000];
	static char big[(1 << 20) + 400];

	snprintf(sock, sizeof sock, "%s/cfg.sock", h_tmpdir());
	snprintf(head, sizeof head, "[route web]\nlisten = unix:%s\nbackend = 127.0.0.1:9\n", sock);

	/* binary junk: reading stops at the first control byte, one message */
	h_gen(0xBAD0C0F, 0, junk, sizeof junk);
	int line, col, byte;
	first_binary(junk, sizeof junk, &line, &col, &byte);
	H_CHECK(byte >= 0, "the junk has no control byte");
	snprintf(exp, sizeof exp, "%d: byte 0x%02x at column %d: not a text file (binary data?); "
				  "reading stopped\n", line, byte, col);
	config_rejected(bin, put_file("junk.conf", junk, sizeof junk), exp, sock, "binary junk");

	/* junk after a valid route: the route must not be taken as the file */
	size_t hl = strlen(head);
	memcpy(big, head, hl);
	memcpy(big + hl, junk, sizeof junk);
	first_binary(junk, sizeof junk, &line, &col, &byte);
	snprintf(exp, sizeof exp, "%d: byte 0x%02x at column %d: not a text file (binary data?); "
				  "reading stopped\n", line + 3, byte, col);
	config_rejected(bin, put_file("route-then-junk.conf", big, hl + sizeof junk), exp, sock,
			"a valid route, then binary junk");

	/* a NUL right after a valid value: fgets would end the value there and
	 * load the file as if nothing followed */
	static const char nul[] = "[route web]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:9\0garbage\n";
	config_rejected(bin, put_file("nul.conf", nul, sizeof nul - 1),
			"3: byte 0x00 at column 22: not a text file (binary data?); reading stopped\n",
			sock, "a NUL after a value");

	/* a 1 MB line: one message for it, and the next line keeps its number */
	int n = snprintf(big, sizeof big, "%s# ", head);
	memset(big + n, 'x', 1 << 20);
	n += 1 << 20;
	n += snprintf(big + n, sizeof big - (size_t)n, "\nengine = fast\n");
	config_rejected(bin, put_file("long.conf", big, (size_t)n),
			"4: line longer than 198 characters (split a long backend or listen list over "
			"several 'backend =' lines)\n"
			"5: engine: invalid value 'fast' (expects auto|copy|splice|sockmap|uring)\n",
			sock, "a 1 MB line");

	/* a section header without ']': named, and not echoed by other errors */
	snprintf(big, sizeof big, "[route web\nlisten = unix:%s\nbackend = 127.0.0.1:9\n", sock);
	config_rejected(bin, put_text("unterminated.conf", big),
			"1: section header '[route web' has no closing ']'\n", sock,
			"an unterminated section header");
}

/* ---- a listen address in use ---------------------------------------------- */

Test(integ, bad_listen_address_in_use, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	static struct h_server srv, live_srv;
	static struct h_proxy first;
	char addr[64], want[300], sock[200], why[256];
	int hold;

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	snprintf(sock, sizeof sock, "%s/first.sock", h_tmpdir());

	/* a plain listening socket */
	snprintf(addr, sizeof addr, "127.0.0.1:%d", busy_port(&hold, 0));
	snprintf(want, sizeof want, "route default: listen %s: Address already in use (another "
				    "process listens there)", addr);
	{
		const char *args[] = { "-l", addr, "-b", srv.addr.text, NULL };
		expect_log_error(run(bin, args), want, "listen on a port another socket listens on");
	}
	/* the same after a Unix listener was bound: its file must go too */
	{
		char l1[220];
		snprintf(l1, sizeof l1, "unix:%s", sock);
		const char *args[] = { "-l", l1, "-l", addr, "-b", srv.addr.text, NULL };
		expect_log_error(run(bin, args), want, "-l unix:PATH -l BUSY");
		H_CHECK(!exists(sock), "a failed start left the socket file %s of the listener it "
				       "had bound before", sock);
	}
	/* the stats address */
	{
		char l1[220], w2[300];
		snprintf(l1, sizeof l1, "unix:%s", sock);
		snprintf(w2, sizeof w2, "stats: listen %s: Address already in use (another process "
					"listens there)", addr);
		const char *args[] = { "-l", l1, "-b", srv.addr.text, "--stats", addr, NULL };
		expect_log_error(run(bin, args), w2, "--stats on a busy port");
		H_CHECK(!exists(sock), "a failed start (stats) left the socket file %s", sock);
	}
	close(hold);

	/* a socket with SO_REUSEPORT, as a second splicer has: the kernel would
	 * let a new SO_REUSEPORT listener share the port and split its clients */
	snprintf(addr, sizeof addr, "127.0.0.1:%d", busy_port(&hold, 1));
	snprintf(want, sizeof want, "route default: listen %s: Address already in use (another "
				    "process listens there)", addr);
	{
		const char *args[] = { "-l", addr, "-b", srv.addr.text, NULL };
		expect_log_error(run(bin, args), want, "listen where a SO_REUSEPORT socket listens");
	}
	close(hold);

	/* a second splicer on the first one's address: refused; the first
	 * keeps every client */
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&first, bin, "auto", "127.0.0.1:0", backends, NULL);
	snprintf(want, sizeof want, "route default: listen %s: Address already in use (another "
				    "process listens there)", first.addr.text);
	{
		const char *args[] = { "-l", first.addr.text, "-b", "127.0.0.1:9", NULL };
		expect_log_error(run(bin, args), want, "a second splicer on the same address");
	}
	for (int i = 0; i < 20; i++)
		H_CHECK(h_echo_roundtrip(&first.addr, 100, 0xF00 + (uint64_t)i, 3000, why,
					 sizeof why) == 0,
			"the first splicer after the second was refused, session %d: %s", i, why);
	h_proxy_down(&first);

	/* a Unix path a live server listens on: refused, and its file kept */
	char where[220];
	snprintf(where, sizeof where, "unix:%s/live.sock", h_tmpdir());
	rc = h_server_start(&live_srv, where, 16, h_echo_conn, NULL);
	H_CHECK(rc == 0, "unix server: %s", strerror(-rc));
	snprintf(want, sizeof want, "route default: listen %s: Address already in use (another "
				    "process listens there)", where);
	{
		const char *args[] = { "-l", where, "-b", srv.addr.text, NULL };
		expect_log_error(run(bin, args), want, "listen on a live Unix socket");
	}
	H_CHECK(h_echo_roundtrip(&live_srv.addr, 100, 0xF50, 3000, why, sizeof why) == 0,
		"the Unix server whose path the proxy was refused stopped answering: %s", why);
	h_server_stop(&live_srv);
	h_server_stop(&srv);
}

/* Issue 12, defect 12 and item 17: the Unix path of a listen address is
 *   - held by a live server whose accept queue is full: the proxy probed it
 *     with a blocking connect() and hung there (at start, and in a reload)
 *     for as long as the queue stayed full; now it fails at once, naming it;
 *   - a regular file: the proxy said "another process listens there"; now
 *     it says the path is not a socket, and leaves the file alone. */
Test(integ, bad_unix_listen_path_full_backlog_or_regular_file, .init = h_init, .fini = h_fini,
     .timeout = 30)
{
	const char *bin = h_binary(0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char where[220], want[400];
	int lfd, queued[64], nq = 0;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s/full.sock", h_tmpdir());
	snprintf(where, sizeof where, "unix:%s", sun.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sun, sizeof sun) == 0 && listen(lfd, 1) == 0,
		"unix server %s: %s", sun.sun_path, strerror(errno));
	/* fill its accept queue: it never accepts */
	for (;;) {
		H_CHECK(nq < 64, "the accept queue of a backlog-1 Unix socket never filled");
		queued[nq] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		H_CHECK(queued[nq] >= 0, "socket: %s", strerror(errno));
		if (connect(queued[nq], (struct sockaddr *)&sun, sizeof sun) < 0) {
			H_CHECK(errno == EAGAIN, "filling the queue: %s", strerror(errno));
			close(queued[nq]);
			break;
		}
		nq++;
	}
	snprintf(want, sizeof want, "route default: listen %s: Address already in use (another "
				    "process listens there; its accept queue is full)", where);
	{
		const char *args[] = { "-l", where, "-b", "127.0.0.1:9", NULL };
		int64_t t0 = h_now_ms();
		const struct run *r = run(bin, args);
		int64_t took = h_now_ms() - t0;
		expect_log_error(r, want, "listen on a Unix path whose server's queue is full");
		H_CHECK(took < 2000, "the refusal took %lld ms: the probe waited on the full queue",
			(long long)took);
	}
	H_CHECK(exists(sun.sun_path), "the live server's socket file was removed");
	while (nq--)
		close(queued[nq]);
	close(lfd);

	/* a regular file at the path */
	char file[200];
	snprintf(file, sizeof file, "%s/not-a-socket", h_tmpdir());
	put_text("not-a-socket", "keep me\n");
	snprintf(where, sizeof where, "unix:%s", file);
	snprintf(want, sizeof want, "route default: listen %s: the path exists and is not a socket; "
				    "remove it or choose another path", where);
	{
		const char *args[] = { "-l", where, "-b", "127.0.0.1:9", NULL };
		expect_log_error(run(bin, args), want, "listen on a regular file's path");
	}
	struct stat st;
	H_CHECK(stat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 8,
		"the regular file %s was changed", file);
}

/* ---- Unix paths over sun_path --------------------------------------------- */

Test(integ, bad_unix_path_too_long, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	char fits[200], over[200], abstract[200], want[400], why[256];
	size_t dl = strlen(h_tmpdir());

	H_CHECK(dl < 90, "temp dir path too long for this test: %s", h_tmpdir());
	/* 107 bytes of path plus its NUL fill sun_path[108] exactly */
	snprintf(fits, sizeof fits, "unix:%s/%0*d", h_tmpdir(), (int)(107 - dl - 1), 0);
	snprintf(over, sizeof over, "unix:%s/%0*d", h_tmpdir(), (int)(108 - dl - 1), 0);
	memset(abstract, 'a', sizeof abstract);
	memcpy(abstract, "unix:@", 6);
	abstract[6 + 108] = '\0'; /* an abstract name may hold 107 bytes after its NUL */
	H_CHECK(strlen(fits) == 5 + 107 && strlen(over) == 5 + 108, "path lengths");

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *opts[] = { "-l", "-b" };
	const char *addrs[] = { over, abstract };
	for (int o = 0; o < 2; o++)
		for (int a = 0; a < 2; a++) {
			snprintf(want, sizeof want, "splicer: option '%s': address '%.40s...': Unix socket "
						    "path longer than 107 bytes\n", opts[o], addrs[a]);
			const char *args[] = { "-l", o ? "127.0.0.1:0" : addrs[a], "-b",
					       o ? addrs[a] : srv.addr.text, NULL };
			char what[64];
			snprintf(what, sizeof what, "%s with a %s path one byte over", opts[o],
				 a ? "abstract" : "file");
			expect_exact(run(bin, args), 2, want, what);
		}
	H_CHECK(!exists(over + 5), "a rejected path was created: %s", over + 5);

	/* in a file: FILE:LINE */
	char text[600];
	snprintf(text, sizeof text, "[route r]\nlisten = %s\nbackend = %s\n", over, srv.addr.text);
	const char *path = put_text("longpath.conf", text);
	/* once: the route it leaves without a listener is not named again */
	snprintf(want, sizeof want, "%s:2: listen: address '%.40s...': Unix socket path longer than "
				    "107 bytes\n", path, over);
	const char *check[] = { "check", "-c", path, NULL };
	expect_exact(run(bin, check), 1, want, "a file's listen path one byte over");

	/* the longest path that fits works, and is removed at exit */
	const char *backends[] = { srv.addr.text, NULL };
	h_proxy_up(&p, bin, "auto", fits, backends, NULL);
	H_CHECK(h_echo_roundtrip(&p.addr, 1000, 0x107, 3000, why, sizeof why) == 0,
		"through a 107-byte Unix path: %s", why);
	h_proxy_down(&p);
	H_CHECK(!exists(fits + 5), "the proxy left its socket file %s at exit", fits + 5);
	h_server_stop(&srv);
}

/* ---- a backend name that does not resolve --------------------------------- */

/* "X: cannot resolve 'nonexistent.invalid': " and then the resolver's
 * reason (its wording is glibc's) on one line; then exactly `then`. */
static void expect_unresolved(const struct run *r, int code, const char *prefix, const char *then,
			      const char *what)
{
	const char *nl = strchr(r->err, '\n');

	H_CHECK(r->st != -1 && WIFEXITED(r->st) && WEXITSTATUS(r->st) == code,
		"%s: expected exit status %d, got %d; stderr: %s", what, code, r->st, r->err);
	H_CHECK(!strncmp(r->err, prefix, strlen(prefix)) && nl &&
			nl > r->err + strlen(prefix) + 2 && !strcmp(nl + 1, then),
		"%s: stderr is\n%s\nexpected a line starting\n%s\nthen exactly\n%s", what, r->err,
		prefix, then);
	H_CHECK(!r->out[0], "%s: printed on stdout: %s", what, r->out);
}

Test(integ, bad_backend_name_does_not_resolve, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	static struct live live;
	static struct bulk bulk;
	char text[600], sock[200], want[600], why[256];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	{
		const char *args[] = { "-l", "127.0.0.1:0", "-b", "nonexistent.invalid:80", NULL };
		expect_unresolved(run(bin, args), 2,
				  "splicer: option '-b': address 'nonexistent.invalid:80': cannot "
				  "resolve 'nonexistent.invalid': ", "", "-b nonexistent.invalid:80");
	}
	{
		const char *args[] = { "-l", "nonexistent.invalid:8080", "-b", srv.addr.text, NULL };
		expect_unresolved(run(bin, args), 2,
				  "splicer: option '-l': address 'nonexistent.invalid:8080': cannot "
				  "resolve 'nonexistent.invalid': ", "", "-l nonexistent.invalid:8080");
	}
	/* in a file, with a Unix listener that must not be created */
	snprintf(sock, sizeof sock, "%s/dns.sock", h_tmpdir());
	snprintf(text, sizeof text, "[route r]\nlisten = unix:%s\nbackend = nonexistent.invalid:80\n",
		 sock);
	const char *bad = put_text("dns.conf", text);
	snprintf(want, sizeof want, "%s:3: backend 'nonexistent.invalid:80': address "
				    "'nonexistent.invalid:80': cannot resolve 'nonexistent.invalid': ", bad);
	/* once: the route left without a backend is not named again */
	const char *then = "";
	const char *check[] = { "check", "-c", bad, NULL };
	expect_unresolved(run(bin, check), 1, want, then, "check -c with an unresolvable backend");
	const char *start[] = { "-c", bad, NULL };
	expect_unresolved(run(bin, start), 2, want, then, "-c with an unresolvable backend");
	H_CHECK(!exists(sock), "a failed start left %s", sock);

	/* a reload to a backend that does not resolve: refused, sessions go on */
	char listen[64];
	snprintf(listen, sizeof listen, "127.0.0.1:%d", h_free_port());
	snprintf(text, sizeof text, "[route r]\nlisten = %s\nbackend = %s\n", listen, srv.addr.text);
	const char *good = put_text("reload.conf", text);
	const char *args[] = { "-c", good, NULL };
	char err[512];
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", good, err);
	live_open(&live, &p.addr, NULL, 0, 0xD25);
	bulk_start(&bulk, &p.addr, NULL, 0, 0xD26, 4 * H_MIB);
	live_check(&live, "start");
	snprintf(text, sizeof text, "[route r]\nlisten = %s\nbackend = nonexistent.invalid:80\n", listen);
	put_text("reload.conf", text);
	kill(p.pid, SIGHUP);
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20))
		if (h_log_lines(&p, "SIGHUP:", "is not valid", NULL))
			break;
	H_CHECK(h_log_lines(&p, "SIGHUP:", good, "is not valid", "keeping the running config", NULL) == 1,
		"no 'SIGHUP: ... is not valid ... keeping the running config' line in %s", p.log);
	snprintf(want, sizeof want, "%s:3: backend 'nonexistent.invalid:80': address "
				    "'nonexistent.invalid:80': cannot resolve 'nonexistent.invalid': ", good);
	H_CHECK(h_log_lines(&p, want, NULL) == 1, "the reload's log lacks the line '%s...'", want);
	live_check(&live, "a reload with an unresolvable backend");
	H_CHECK(h_echo_roundtrip(&p.addr, 1000, 0xD27, 3000, why, sizeof why) == 0,
		"a new session after the refused reload: %s", why);
	bulk_finish(&bulk, "bulk session across the refused reload");
	close(live.fd);
	h_proxy_down(&p);
	h_server_stop(&srv);
}

/* ---- the stats port -------------------------------------------------------- */

/* Sends req (n bytes) to the stats endpoint, reads until it closes (or
 * ms pass) and returns the answer (static); *took is how long it took. */
static const char *stats_ask(const struct h_addr *a, const void *req, size_t n, int ms,
			     int64_t *took)
{
	static char resp[8192];
	int64_t t0 = h_now_ms();
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "connect to the stats endpoint %s: %s", a->text, strerror(errno));
	/* the server may answer a 431 and close before all of it is sent */
	h_send_all(fd, req, n, t0 + 3000);
	h_recv_all(fd, resp, sizeof resp, t0 + ms);
	close(fd);
	if (took)
		*took = h_now_ms() - t0;
	return resp;
}

/* Reads one connection's whole answer before the deadline; returns whether
 * it starts with status. */
static int answered(int fd, const char *status, int64_t deadline, char *got, size_t gotlen)
{
	size_t n = 0;

	got[0] = '\0';
	while (n < gotlen - 1 && h_now_ms() < deadline) {
		ssize_t k = recv(fd, got + n, gotlen - 1 - n, 0);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
		got[n] = '\0';
		if (n >= strlen(status))
			break;
	}
	return !strncmp(got, status, strlen(status));
}

Test(integ, bad_stats_input_while_forwarding, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	static struct live live;
	static struct bulk bulk;
	static char junk[64 * 1024], longline[100 * 1024 + 64];
	static int crowd[230];
	struct h_addr stats;
	int64_t took;
	char got[64];

	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	/* copy: no pipes come and go, so the descriptor count is exact */
	const char *extra[] = { "--stats", "127.0.0.1:0", NULL };
	h_proxy_up(&p, bin, "copy", "127.0.0.1:0", backends, extra);
	const char *sa = log_value(&p, "stats: listening on ");
	H_CHECK(sa && h_addr_parse(sa, &stats) == 0, "no 'stats: listening on' line in %s", p.log);
	int fds_idle = h_fd_count(p.pid);
	live_open(&live, &p.addr, NULL, 0, 0x57A1);
	bulk_start(&bulk, &p.addr, NULL, 0, 0x57A2, 6 * H_MIB);
	live_check(&live, "start");

	/* 64 KiB of binary junk */
	h_gen(0x57A3, 0, junk, sizeof junk);
	const char *r = stats_ask(&stats, junk, sizeof junk, 3000, NULL);
	H_CHECK(!strncmp(r, "HTTP/1.1 400 Bad Request\r\n", 26), "64 KiB of binary junk: '%.60s'", r);
	live_check(&live, "binary junk to the stats port");

	/* a 100 KB request line */
	memset(longline, 'a', sizeof longline);
	memcpy(longline, "GET /", 5);
	memcpy(longline + sizeof longline - 15, " HTTP/1.1\r\n\r\n", 14);
	r = stats_ask(&stats, longline, sizeof longline - 1, 3000, NULL);
	H_CHECK(!strncmp(r, "HTTP/1.1 431 Request Header Fields Too Large\r\n", 46),
		"a 100 KB request line: '%.60s'", r);
	live_check(&live, "a 100 KB request line");

	/* NULs inside a request that is otherwise whole */
	static const char nul[] = "GET /met\0rics HTTP/1.1\r\nHost: x\0\r\n\r\n";
	r = stats_ask(&stats, nul, sizeof nul - 1, 3000, NULL);
	H_CHECK(!strncmp(r, "HTTP/1.1 400 ", 13), "a request with NULs: '%.60s'", r);
	live_check(&live, "a request with NULs");

	/* a slowloris: a header line every 100 ms, never the blank line; the
	 * trickle must not extend the 2 s request limit */
	int fd = h_connect(&stats, 2000);
	H_CHECK(fd >= 0, "slowloris connect: %s", strerror(errno));
	int64_t t0 = h_now_ms();
	int closed = 0;
	h_send_all(fd, "GET /metrics HTTP/1.1\r\n", 23, t0 + 1000);
	while (!closed && h_now_ms() < t0 + 8000) {
		h_set_timeouts(fd, 100);
		if (answered(fd, "HTTP/1.1 408 ", h_now_ms() + 100, got, sizeof got) || got[0])
			closed = 1;
		else if (send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0)
			closed = -1;
	}
	took = h_now_ms() - t0;
	close(fd);
	H_CHECK(closed == 1 && !strncmp(got, "HTTP/1.1 408 ", 13),
		"a slowloris (a header line each 100 ms) got '%s' after %lld ms, expected a 408 "
		"after the 2 s request limit", got, (long long)took);
	H_CHECK(took >= 1500 && took <= 6000, "the slowloris was answered after %lld ms; the request "
					      "limit is 2 s", (long long)took);
	live_check(&live, "a slowloris on the stats port");

	/* 230 connections at once, silent or with half a request: /health and
	 * /metrics still answer at once, and each of the crowd gets its 408 */
	for (unsigned i = 0; i < sizeof crowd / sizeof *crowd; i++) {
		crowd[i] = h_connect(&stats, 2000);
		H_CHECK(crowd[i] >= 0, "crowd connection %u: %s", i, strerror(errno));
		if (i % 8 == 0)
			h_send_all(crowd[i], "GET /metrics HTTP/1.1\r\nHost:", 28, h_now_ms() + 1000);
	}
	r = stats_ask(&stats, "GET /health HTTP/1.0\r\n\r\n", 24, 3000, &took);
	H_CHECK(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17) && strstr(r, "\r\n\r\nok\n") && took < 1000,
		"GET /health with 230 idle connections open answered '%.40s' after %lld ms "
		"(expected 200 ok at once)", r, (long long)took);
	r = stats_ask(&stats, "GET /metrics HTTP/1.1\r\n\r\n", 25, 3000, &took);
	H_CHECK(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17) && took < 1000,
		"GET /metrics with 230 idle connections open answered '%.40s' after %lld ms", r,
		(long long)took);
	live_check(&live, "230 connections to the stats port");
	int64_t end = h_now_ms() + 6000;
	for (unsigned i = 0; i < sizeof crowd / sizeof *crowd; i++) {
		h_set_timeouts(crowd[i], 200);
		int ok = answered(crowd[i], "HTTP/1.1 408 ", end, got, sizeof got);
		H_CHECK(ok, "crowd connection %u got '%s' within 6 s, expected a 408", i, got);
		close(crowd[i]);
		crowd[i] = -1;
	}
	live_check(&live, "the crowd's 408s");
	bulk_finish(&bulk, "bulk session beside the stats port's bad clients");
	close(live.fd);

	/* every stats connection closed: the proxy holds what it held idle */
	int now = -1;
	for (end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(20))
		if ((now = h_fd_count(p.pid)) == fds_idle)
			break;
	H_CHECK(now == fds_idle, "the proxy holds %d descriptors after the sessions and stats "
				 "clients closed, %d before them", now, fds_idle);
	h_proxy_down(&p);
	h_server_stop(&srv);
}

/* ---- PROXY headers --------------------------------------------------------- */

/* The proxy's session id for the client whose local port is port, from its
 * -v close line with reason; waits for the line. Returns it (static) or "". */
static const char *session_of(const struct h_proxy *p, int port, const char *reason)
{
	static char id[32];
	char client[64], rs[64], line[1024];

	snprintf(client, sizeof client, " client=127.0.0.1:%d ", port);
	snprintf(rs, sizeof rs, " reason=%s\n", reason);
	id[0] = '\0';
	for (int64_t end = h_now_ms() + 3000; !id[0] && h_now_ms() < end; h_sleep_ms(10)) {
		FILE *f = fopen(p->log, "re");
		while (f && fgets(line, sizeof line, f)) {
			char *s = strstr(line, " session ");
			if (s && strstr(line, client) && strstr(line, rs) && strstr(line, ": close ")) {
				sscanf(s + 9, "%31[0-9a-f]", id);
				break;
			}
		}
		if (f)
			fclose(f);
	}
	return id;
}

struct bad_header {
	const char *bytes;
	size_t n;
	int fin;          /* shutdown(SHUT_WR) after the bytes */
	int trickle_ms;   /* send a byte each trickle_ms */
	const char *why, *reason;
};

#define V2SIG "\r\n\r\n\0\r\nQUIT\n"

static const struct bad_header bad_headers[] = {
	{ "PROXY TCP4 999.0.0.1 10.0.0.1 1 2\r\n", 35, 0, 0, "v1 header: bad IPv4 address",
	  "bad-proxy-header" },
	{ "PROXY TCP4 1.2.3.4 5.6.7.8 99999 2\r\n", 36, 0, 0, "v1 header: bad port",
	  "bad-proxy-header" },
	{ "PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", 33, 0, 0,
	  "v1 header: fields must be separated by single spaces", "bad-proxy-header" },
	{ "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", 32, 0, 0,
	  "v1 header: protocol is not TCP4, TCP6 or UNKNOWN", "bad-proxy-header" },
	{ V2SIG "\x11\x11\x00\x0c" "abcdefghijkl", 28, 0, 0, "v2 header: version is not 2",
	  "bad-proxy-header" },
	{ V2SIG "\x2f\x11\x00\x0c" "abcdefghijkl", 28, 0, 0,
	  "v2 header: command is neither LOCAL nor PROXY", "bad-proxy-header" },
	{ V2SIG "\x21\x11\x07\xf1", 16, 0, 0, "v2 header longer than 2048 bytes", "bad-proxy-header" },
	{ V2SIG "\x21\x12\x00\x0c" "abcdefghijkl", 28, 0, 0, "v2 header: transport is not STREAM",
	  "bad-proxy-header" },
	{ "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11, 0, 0,
	  "no PROXY header (wrong signature)", "bad-proxy-header" },
	{ "PROXY TCP4 1.2.3.4", 18, 1, 0, "connection closed inside the header",
	  "proxy-header-truncated" },
	{ "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n", 38, 0, 100,
	  "no complete header within proxy_timeout", "proxy-header-timeout" },
};

/* Sends one bad header and expects the proxy to close that client within
 * limit_ms; returns the client's port. */
static int send_bad_header(const struct h_addr *a, const struct bad_header *b, int limit_ms)
{
	struct sockaddr_in me;
	socklen_t len = sizeof me;
	int fd = h_connect(a, 2000), rc = 1;

	H_CHECK(fd >= 0 && getsockname(fd, (struct sockaddr *)&me, &len) == 0, "connect: %s",
		strerror(errno));
	int64_t t0 = h_now_ms();
	if (b->trickle_ms) {
		/* a byte at a time, until the proxy closes us or the header is sent */
		for (size_t i = 0; i < b->n && rc == 1; i++) {
			if (send(fd, b->bytes + i, 1, MSG_NOSIGNAL) != 1)
				rc = -errno;
			else if ((rc = h_expect_eof(fd, h_now_ms() + b->trickle_ms)) == -ETIMEDOUT)
				rc = 1;
		}
	} else {
		h_send_all(fd, b->bytes, b->n, t0 + 2000);
	}
	if (b->fin)
		shutdown(fd, SHUT_WR);
	if (rc == 1)
		rc = h_expect_eof(fd, t0 + limit_ms);
	close(fd);
	H_CHECK(rc == 0 || rc == -ECONNRESET || rc == -EPIPE,
		"'%s' case: the client was not closed within %d ms (%s)", b->why, limit_ms,
		rc == -EPROTO ? "data came back" : strerror(-rc));
	return ntohs(me.sin_port);
}

Test(integ, bad_proxy_headers_named_while_forwarding, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_server srv;
	static struct h_proxy p;
	static struct live live;
	static struct bulk bulk;
	uint8_t hdr[PROXY_HDR_MAX], slow[PROXY_HDR_MAX + 100], back[100];
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(1111) },
			   dst = { .sin_family = AF_INET, .sin_port = htons(443) };

	inet_pton(AF_INET, "203.0.113.7", &src.sin_addr);
	inet_pton(AF_INET, "198.51.100.1", &dst.sin_addr);
	int rc = h_server_start(&srv, "127.0.0.1:0", 128, h_echo_conn, NULL);
	H_CHECK(rc == 0, "echo backend: %s", strerror(-rc));
	const char *backends[] = { srv.addr.text, NULL };
	const char *extra[] = { "--accept-proxy", "yes", "--proxy-timeout", "1s", "-v", NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	size_t n1 = proxy_build(1, (struct sockaddr *)&src, sizeof src, (struct sockaddr *)&dst,
				sizeof dst, hdr);
	live_open(&live, &p.addr, hdr, n1, 0x9901);
	size_t n2 = proxy_build(2, (struct sockaddr *)&src, sizeof src, (struct sockaddr *)&dst,
				sizeof dst, hdr);
	bulk_start(&bulk, &p.addr, hdr, n2, 0x9902, 6 * H_MIB);
	live_check(&live, "start");

	unsigned nbad = sizeof bad_headers / sizeof *bad_headers;
	for (unsigned i = 0; i < nbad; i++) {
		const struct bad_header *b = &bad_headers[i];
		int64_t t0 = h_now_ms();
		int port = send_bad_header(&p.addr, b, b->trickle_ms ? 3000 : 2000);
		int64_t took = h_now_ms() - t0;
		if (b->trickle_ms)
			H_CHECK(took >= 800 && took <= 2500, "a header trickled a byte per %d ms was "
							   "closed after %lld ms; proxy_timeout is 1 s",
				b->trickle_ms, (long long)took);
		const char *id = session_of(&p, port, b->reason);
		H_CHECK(id[0], "'%s' case: no close line with client=127.0.0.1:%d and reason=%s in %s",
			b->why, port, b->reason, p.log);
		char want[256];
		snprintf(want, sizeof want, "session %s: PROXY header from client: %s\n", id, b->why);
		H_CHECK(h_log_lines(&p, want, NULL) == 1, "no log line '%.*s' for client 127.0.0.1:%d",
			(int)strlen(want) - 1, want, port);
		live_check(&live, b->why);
	}

	/* slow but within proxy_timeout: a header in three pieces, then data */
	size_t n = proxy_build(1, (struct sockaddr *)&src, sizeof src, (struct sockaddr *)&dst,
			       sizeof dst, slow);
	h_gen(0x9903, 0, slow + n, 100);
	int fd = h_connect(&p.addr, 2000);
	H_CHECK(fd >= 0, "connect: %s", strerror(errno));
	for (size_t off = 0; off < n; off += n / 3 + 1) {
		size_t k = n - off < n / 3 + 1 ? n - off : n / 3 + 1;
		H_CHECK(h_send_all(fd, slow + off, k, h_now_ms() + 1000) == 0, "slow header: send");
		h_sleep_ms(150);
	}
	H_CHECK(h_send_all(fd, slow + n, 100, h_now_ms() + 1000) == 0 &&
			h_recv_exact(fd, back, 100, h_now_ms() + 3000) == 0 &&
			!memcmp(back, slow + n, 100),
		"a header sent in three pieces over 450 ms (proxy_timeout 1 s) was not served");
	close(fd);

	live_check(&live, "every bad header");
	bulk_finish(&bulk, "bulk session beside the bad PROXY headers");
	close(live.fd);
	h_proxy_down(&p);
	char totals[64];
	snprintf(totals, sizeof totals, "bad proxy headers %u\n", nbad);
	H_CHECK(h_log_lines(&p, totals, NULL) == 1, "the totals line does not count %u bad headers",
		nbad);
	h_server_stop(&srv);
}
