/* SPDX-License-Identifier: MIT */
/* Integration cases for the admin socket and `splicer ctl` (issue 16, item
 * 2), each against real sessions through the proxy:
 *   - show routes | backends | sessions, as text and as JSON (parsed here);
 *   - drain: a held session keeps working, new ones go to the other backend;
 *     enable brings it back; drain, disable and disable --kill print how long
 *     they took to act ("admin timing": < 1 s asserted);
 *   - disable keeps running sessions, disable --kill ends them (and only
 *     them);
 *   - weight: 3 against 1 gives exactly 300:100 of 400 connections with
 *     roundrobin, moves leastconn's choice and maglev's table;
 *   - session kill ends that session and no other;
 *   - reload through ctl; drain and weight survive it, and show backends
 *     says where they differ from the file;
 *   - the socket is mode 0600 and the run-as user's; another user cannot
 *     connect (and could, were it 0666: the check can fail);
 *   - bad commands get specific errors; the line protocol's terminator;
 *   - lameduck: /health 503 with the listener still serving, then SIGTERM
 *     drains at once. */
#define _GNU_SOURCE
#include "harness.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a backend that says who it is, then echoes ------------------------- */

#define TE_MAX 256

struct tag_echo {
	int lfd, port;
	char tag;
	_Atomic int stop;
	_Atomic int accepted;
	pthread_t thr;
	char text[32];
};

static void *te_loop(void *arg)
{
	struct tag_echo *e = arg;
	struct pollfd pfd[TE_MAX + 1];
	int n = 0;
	char buf[16384];

	pfd[0] = (struct pollfd){ .fd = e->lfd, .events = POLLIN };
	while (!atomic_load(&e->stop)) {
		if (poll(pfd, (nfds_t)n + 1, 50) <= 0)
			continue;
		for (int i = n; i >= 1; i--) {
			if (!pfd[i].revents)
				continue;
			ssize_t r = read(pfd[i].fd, buf, sizeof buf);
			if (r <= 0 || h_send_all(pfd[i].fd, buf, (size_t)r, h_now_ms() + 2000)) {
				close(pfd[i].fd);
				pfd[i] = pfd[n--];
			}
		}
		if (pfd[0].revents) {
			int fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			atomic_fetch_add(&e->accepted, 1);
			h_set_timeouts(fd, 1000);
			if (n == TE_MAX || send(fd, &e->tag, 1, MSG_NOSIGNAL) != 1) {
				close(fd);
				continue;
			}
			pfd[++n] = (struct pollfd){ .fd = fd, .events = POLLIN };
		}
	}
	for (int i = 1; i <= n; i++)
		close(pfd[i].fd);
	return NULL;
}

static void te_start(struct tag_echo *e, char tag)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;

	memset(e, 0, sizeof *e);
	e->tag = tag;
	e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	H_CHECK(e->lfd >= 0 && bind(e->lfd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
			listen(e->lfd, 1024) == 0 && getsockname(e->lfd, (struct sockaddr *)&sin, &len) == 0,
		"tag-echo server: %s", strerror(errno));
	e->port = ntohs(sin.sin_port);
	snprintf(e->text, sizeof e->text, "127.0.0.1:%d", e->port);
	H_CHECK(pthread_create(&e->thr, NULL, te_loop, e) == 0, "tag-echo thread");
}

static void te_stop(struct tag_echo *e)
{
	atomic_store(&e->stop, 1);
	pthread_join(e->thr, NULL);
	close(e->lfd);
}

/* Connects through the proxy (from src, when given: maglev hashes the
 * client's address) and reads the backend's tag. With keep, the session
 * stays open in *keep. Returns the tag, or 0. */
static char tag_via(const struct h_addr *proxy, const char *src, int *keep)
{
	int fd;
	char c = 0;

	if (!src)
		return h_tag_of(proxy, keep);
	struct sockaddr_in sin = { .sin_family = AF_INET };
	inet_pton(AF_INET, src, &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	h_set_timeouts(fd, 1000);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) ||
	    connect(fd, (const struct sockaddr *)&proxy->ss, proxy->len) ||
	    h_recv_exact(fd, &c, 1, h_now_ms() + 2000))
		c = 0;
	if (fd >= 0)
		close(fd);
	return c;
}

/* n bytes through a held session and back. */
static int echo_ok(int fd, uint64_t seed, size_t n)
{
	static char out[8192], in[8192];

	h_gen(seed, 0, out, n);
	if (h_send_all(fd, out, n, h_now_ms() + 3000) || h_recv_exact(fd, in, n, h_now_ms() + 3000))
		return 0;
	return h_gen_check(seed, 0, in, n) == n;
}

/* A session to backend `want`: connects until one lands there (at most 16
 * tries; the others are closed). Returns the held fd. */
static int session_to(const struct h_addr *proxy, char want)
{
	for (int i = 0; i < 16; i++) {
		int fd = -1;
		char t = h_tag_of(proxy, &fd);
		if (t == want)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	H_CHECK(0, "no session reached backend %c in 16 connections", want);
	return -1;
}

static int local_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;

	H_CHECK(getsockname(fd, (struct sockaddr *)&sin, &len) == 0, "getsockname");
	return ntohs(sin.sin_port);
}

/* ---- ctl ---------------------------------------------------------------- */

/* The directory of the socket: the temp dir, unless a case made another
 * (user = nobody: the socket is made as nobody, in its own directory). */
static char sock_dir[300];

static const char *sock_path(void)
{
	static char path[340];
	snprintf(path, sizeof path, "%s/admin.sock", sock_dir[0] ? sock_dir : h_tmpdir());
	return path;
}

/* `bin ctl -s SOCK words...`, optionally as another user (setpriv); the
 * exit code (-1: did not end), stdout in *out and stderr in *err (freed
 * by the caller). */
static int ctl_as(const char *bin, int uid, char **out, char **err, const char *const *words)
{
	const char *args[40];
	char ru[32], rg[32];
	int n = 0, st;

	if (uid >= 0) {
		snprintf(ru, sizeof ru, "--reuid=%d", uid);
		snprintf(rg, sizeof rg, "--regid=%d", uid);
		args[n++] = ru;
		args[n++] = rg;
		args[n++] = "--clear-groups";
		args[n++] = bin;
	}
	args[n++] = "ctl";
	args[n++] = "-s";
	args[n++] = sock_path();
	for (int i = 0; words[i] && n < 38; i++)
		args[n++] = words[i];
	args[n] = NULL;
	st = h_run_capture(uid >= 0 ? "/usr/bin/setpriv" : bin, args, 20000, out, err);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define CTL(bin, out, ...) ctl_ok(bin, out, (const char *const[]){ __VA_ARGS__, NULL })

/* Runs ctl, asserts exit 0; the answer (caller frees). */
static char *ctl_ok(const char *bin, char **out, const char *const *words)
{
	char *err = NULL;
	int rc = ctl_as(bin, -1, out, &err, words);

	H_CHECK(rc == 0 && *out, "splicer ctl %s %s %s: exit %d; stderr: %s", words[0],
		words[1] ? words[1] : "", words[1] && words[2] ? words[2] : "", rc, err ? err : "");
	free(err);
	return *out;
}

/* Runs ctl, asserts exit 1 with an "error: " line holding `want`. */
static void ctl_fails(const char *bin, const char *want, const char *const *words)
{
	char *out = NULL, *err = NULL;
	int rc = ctl_as(bin, -1, &out, &err, words);

	H_CHECK(rc == 1 && err && !strncmp(err, "error: ", 7) && strstr(err, want),
		"splicer ctl %s %s...: exit %d, stderr '%s', stdout '%s'; expected an error with '%s'",
		words[0], words[1] ? words[1] : "", rc, err ? err : "", out ? out : "", want);
	free(out);
	free(err);
}
#define CTL_FAILS(bin, want, ...) ctl_fails(bin, want, (const char *const[]){ __VA_ARGS__, NULL })

/* The line of a text table whose cells include every needle. */
static int table_has(const char *text, const char *a, const char *b, const char *c)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[1024];
		snprintf(line, sizeof line, "%.*s", (int)len, l);
		if (strstr(line, a) && (!b || strstr(line, b)) && (!c || strstr(line, c)))
			return 1;
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* ---- a small JSON validator (RFC 8259 grammar) --------------------------- */

static const char *js_ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *js_string(const char *p)
{
	if (*p != '"')
		return NULL;
	for (p++; *p && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p != '\\')
			continue;
		p++;
		if (*p == 'u') {
			for (int i = 1; i <= 4; i++)
				if (!isxdigit((unsigned char)p[i]))
					return NULL;
			p += 4;
		} else if (!*p || !strchr("\"\\/bfnrt", *p)) {
			return NULL;
		}
	}
	return *p == '"' ? p + 1 : NULL;
}

static const char *js_number(const char *p)
{
	const char *s = p;

	if (*p == '-')
		p++;
	if (!isdigit((unsigned char)*p))
		return NULL;
	if (*p == '0')
		p++;
	else
		while (isdigit((unsigned char)*p))
			p++;
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return p > s ? p : NULL;
}

static const char *js_value(const char *p, int depth)
{
	p = js_ws(p);
	if (depth > 32)
		return NULL;
	if (*p == '{' || *p == '[') {
		int obj = *p == '{';
		char close = obj ? '}' : ']';
		p = js_ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				if (!(p = js_string(p)))
					return NULL;
				p = js_ws(p);
				if (*p++ != ':')
					return NULL;
			}
			if (!(p = js_value(p, depth + 1)))
				return NULL;
			p = js_ws(p);
			if (*p == ',') {
				p = js_ws(p + 1);
				continue;
			}
			return *p == close ? p + 1 : NULL;
		}
	}
	if (*p == '"')
		return js_string(p);
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	return js_number(p);
}

static int json_valid(const char *s)
{
	const char *e = js_value(s, 0);
	return e && !*js_ws(e);
}

static int count_of(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The JSON object (no nested braces: the rows of show) that holds needle,
 * copied into buf. */
static int json_row(const char *json, const char *needle, char *buf, size_t len)
{
	const char *at = strstr(json, needle), *open, *close;

	if (!at)
		return 0;
	for (open = at; open > json && *open != '{'; open--)
		;
	close = strchr(at, '}');
	if (*open != '{' || !close)
		return 0;
	snprintf(buf, len, "%.*s", (int)(close - open + 1), open);
	return 1;
}

/* ---- the proxy ------------------------------------------------------------ */

static void proxy_up(struct h_proxy *p, const char *bin, struct tag_echo *a, struct tag_echo *b,
		     const char *balance)
{
	const char *backends[] = { a->text, b->text, NULL };
	const char *extra[] = { "--admin", sock_path(), "--balance", balance, NULL };

	h_proxy_up(p, bin, "auto", "127.0.0.1:0", backends, extra);
}

/* ---- cases ------------------------------------------------------------- */

static void case_show(const char *bin)
{
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL, row[1024], want[64];
	int fa, fb;

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "roundrobin");
	fa = session_to(&p.addr, 'A');
	fb = session_to(&p.addr, 'B');
	H_CHECK(echo_ok(fa, 1, 1000) && echo_ok(fb, 2, 300), "echo through the held sessions");

	CTL(bin, &out, "show", "routes");
	H_CHECK(table_has(out, "ROUTE", "LISTEN", "BALANCE") &&
			table_has(out, "default", p.addr.text, "roundrobin") &&
			table_has(out, "default", "auto", NULL),
		"show routes:\n%s", out);
	free(out);
	CTL(bin, &out, "show", "routes", "--json");
	H_CHECK(json_valid(out) && count_of(out, "\"name\":\"default\"") == 1 &&
			strstr(out, "\"sessions_active\":2"), "show routes --json:\n%s", out);
	free(out);

	CTL(bin, &out, "show", "backends");
	H_CHECK(table_has(out, "BACKEND", "STATE", "WEIGHT") && table_has(out, a.text, " up ", NULL) &&
			table_has(out, b.text, " up ", NULL), "show backends:\n%s", out);
	free(out);
	CTL(bin, &out, "show", "backends", "--json");
	H_CHECK(json_valid(out) && count_of(out, "\"route\":\"default\"") == 2, "show backends --json:\n%s",
		out);
	snprintf(want, sizeof want, "\"backend\":\"%s\"", a.text);
	H_CHECK(json_row(out, want, row, sizeof row) && strstr(row, "\"sessions_active\":1") &&
			strstr(row, "\"weight\":1") && strstr(row, "\"state\":\"up\""),
		"backend A's row: %s", out);
	free(out);

	CTL(bin, &out, "show", "sessions");
	snprintf(want, sizeof want, "127.0.0.1:%d", local_port(fa));
	H_CHECK(table_has(out, "ID", "ENGINE", "WHY") && table_has(out, want, a.text, " open ") &&
			table_has(out, want, " not-a-stream/not-a-stream", NULL) &&
			count_of(out, "\n") == 3, "show sessions (2 and a header):\n%s", out);
	free(out);
	CTL(bin, &out, "show", "sessions", "--json");
	H_CHECK(json_valid(out) && count_of(out, "\"id\":") == 2, "show sessions --json:\n%s", out);
	snprintf(want, sizeof want, "\"client\":\"127.0.0.1:%d\"", local_port(fa));
	/* exactly what went through: 1000 up, the tag and 1000 down */
	H_CHECK(json_row(out, want, row, sizeof row) && strstr(row, "\"bytes_up\":1000,") &&
			strstr(row, "\"bytes_down\":1001,") && strstr(row, "\"state\":\"open\"") &&
			strstr(row, "\"engine_reason_up\":\"not-a-stream\""),
		"session A's row in: %s", out);
	free(out);
	close(fa);
	close(fb);
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_show, .init = h_init, .fini = h_fini, .timeout = 60) { case_show(h_binary(0)); }
Test(integ, admin_show_asan, .init = h_init, .fini = h_fini, .timeout = 90) { case_show(h_binary(1)); }

/* When (h_now_us) a new session has its tag from backend want (-1: none
 * of 16 did). */
static int64_t us_session_on(const struct h_addr *proxy, char want)
{
	for (int i = 0; i < 16; i++)
		if (tag_via(proxy, NULL, NULL) == want)
			return h_now_us();
	return -1;
}

/* The timings the closing note quotes: from the ctl command (the ctl
 * process started) and from its answer (it exited) to what it caused. */
static void timing_note(const char *bin, const char *what, int64_t t_cmd, int64_t t_ans,
			int64_t t_effect)
{
	fprintf(stderr, "admin timing (%s): %s: ctl %.2f ms; %.2f ms after the answer (%.2f ms "
		"after the command)\n", strcmp(bin, h_binary(1)) ? "plain" : "asan", what,
		(double)(t_ans - t_cmd) / 1000, (double)(t_effect - t_ans) / 1000,
		(double)(t_effect - t_cmd) / 1000);
	H_CHECK(t_effect >= t_ans && t_effect - t_cmd < 1000000, "%s: %.2f ms from the ctl command "
		"(bound: 1 s)", what, (double)(t_effect - t_cmd) / 1000);
}

/* drain: the held session on A goes on; new ones all go to B; enable. */
static void case_drain(const char *bin)
{
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL;
	int fa, n_a = 0;

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "roundrobin");
	fa = session_to(&p.addr, 'A');
	int64_t t_cmd = h_now_us();
	CTL(bin, &out, "backend", "default", a.text, "drain");
	int64_t t_ans = h_now_us(), t_b = us_session_on(&p.addr, 'B');
	H_CHECK(t_b >= 0, "no new session reached B after the drain of A");
	timing_note(bin, "drain A: the first new session on B", t_cmd, t_ans, t_b);
	H_CHECK(strstr(out, "ok: ") && strstr(out, "drains") && strstr(out, "1 running finish"),
		"drain's answer: %s", out);
	free(out);
	CTL(bin, &out, "show", "backends");
	H_CHECK(table_has(out, a.text, " drain ", NULL), "show backends after drain:\n%s", out);
	free(out);
	for (int i = 0; i < 20; i++)
		n_a += tag_via(&p.addr, NULL, NULL) == 'A';
	H_CHECK(n_a == 0, "%d of 20 new sessions went to the draining backend", n_a);
	H_CHECK(echo_ok(fa, 3, 4000), "the held session on the draining backend stopped working");
	CTL(bin, &out, "backend", "default", a.text, "enable");
	free(out);
	for (int i = 0; i < 4; i++)
		n_a += tag_via(&p.addr, NULL, NULL) == 'A';
	H_CHECK(n_a == 2, "after enable, %d of 4 sessions went to A (roundrobin: 2)", n_a);
	close(fa);
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_drain, .init = h_init, .fini = h_fini, .timeout = 60) { case_drain(h_binary(0)); }

/* disable keeps what runs; --kill ends the sessions on it, not the others. */
static void case_disable(const char *bin)
{
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL;
	int fa, fa2, fb, n_a = 0, r;

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "roundrobin");
	fa = session_to(&p.addr, 'A');
	fa2 = session_to(&p.addr, 'A');
	fb = session_to(&p.addr, 'B');
	int64_t t_cmd = h_now_us();
	CTL(bin, &out, "backend", "default", a.text, "disable");
	int64_t t_ans = h_now_us(), t_b = us_session_on(&p.addr, 'B');
	H_CHECK(t_b >= 0, "no new session reached B after A was disabled");
	timing_note(bin, "disable A: the first new session on B", t_cmd, t_ans, t_b);
	H_CHECK(strstr(out, "disabled") && strstr(out, "2 running go on"), "disable: %s", out);
	free(out);
	H_CHECK(echo_ok(fa, 4, 500), "disable without --kill ended a running session");
	for (int i = 0; i < 10; i++)
		n_a += tag_via(&p.addr, NULL, NULL) == 'A';
	H_CHECK(n_a == 0, "%d of 10 new sessions went to the disabled backend", n_a);
	t_cmd = h_now_us();
	CTL(bin, &out, "backend", "default", a.text, "disable", "--kill");
	t_ans = h_now_us();
	H_CHECK(strstr(out, "2 running ended"), "disable --kill: %s", out);
	free(out);
	r = h_expect_eof(fa, h_now_ms() + 3000);
	H_CHECK(r == 0 || r == -ECONNRESET, "the killed session on A: %d (%s)", r, strerror(-r));
	r = h_expect_eof(fa2, h_now_ms() + 3000);
	H_CHECK(r == 0 || r == -ECONNRESET, "the second session on A: %d", r);
	timing_note(bin, "disable --kill A: EOF of both sessions on A", t_cmd, t_ans, h_now_us());
	H_CHECK(echo_ok(fb, 5, 500), "disable --kill of A ended B's session");
	CTL(bin, &out, "show", "backends");
	H_CHECK(table_has(out, a.text, " disabled ", NULL), "show backends:\n%s", out);
	free(out);
	CTL(bin, &out, "backend", "default", a.text, "enable");
	free(out);
	close(session_to(&p.addr, 'A')); /* enabled: sessions reach it again */
	close(fa);
	close(fa2);
	close(fb);
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_disable_kill, .init = h_init, .fini = h_fini, .timeout = 60) { case_disable(h_binary(0)); }
Test(integ, admin_disable_kill_asan, .init = h_init, .fini = h_fini, .timeout = 90) { case_disable(h_binary(1)); }

/* weight 3 against 1: roundrobin counted exactly, leastconn's choice. */
static void case_weight(const char *bin, const char *balance)
{
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL;
	int n_a = 0, n_b = 0, held[8];

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, balance);
	CTL(bin, &out, "backend", "default", a.text, "weight", "3");
	H_CHECK(strstr(out, "weight 3 (file: 1)"), "weight's answer: %s", out);
	free(out);
	CTL(bin, &out, "show", "backends");
	H_CHECK(table_has(out, a.text, "3 (file: 1)", NULL) && table_has(out, b.text, " 1 ", NULL),
		"show backends marks the weight that differs from the file:\n%s", out);
	free(out);
	if (!strcmp(balance, "roundrobin")) {
		for (int i = 0; i < 400; i++) {
			char t = tag_via(&p.addr, NULL, NULL);
			n_a += t == 'A';
			n_b += t == 'B';
		}
		H_CHECK(n_a == 300 && n_b == 100, "weight 3:1 gave A %d, B %d of 400 (want 300:100)",
			n_a, n_b);
	} else {
		/* leastconn with held sessions: sessions per unit of weight */
		for (int i = 0; i < 8; i++) {
			char t = tag_via(&p.addr, NULL, &held[i]);
			n_a += t == 'A';
			n_b += t == 'B';
		}
		H_CHECK(n_a + n_b == 8 && n_a >= 5, "leastconn with weight 3:1 held A %d, B %d of 8 "
			"(equal weights hold 4:4)", n_a, n_b);
		for (int i = 0; i < 8; i++)
			close(held[i]);
	}
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_weight_roundrobin, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_weight(h_binary(0), "roundrobin");
}
Test(integ, admin_weight_leastconn, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_weight(h_binary(0), "leastconn");
}

/* maglev: 200 client addresses; weight 9 against 1 moves the table. */
Test(integ, admin_weight_maglev, .init = h_init, .fini = h_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL, src[32];
	int before = 0, after = 0;

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "maglev");
	for (int i = 1; i <= 200; i++) {
		snprintf(src, sizeof src, "127.0.%d.%d", 1 + i / 250, i % 250 + 1);
		before += tag_via(&p.addr, src, NULL) == 'A';
	}
	CTL(bin, &out, "backend", "default", a.text, "weight", "9");
	free(out);
	for (int i = 1; i <= 200; i++) {
		snprintf(src, sizeof src, "127.0.%d.%d", 1 + i / 250, i % 250 + 1);
		after += tag_via(&p.addr, src, NULL) == 'A';
	}
	H_CHECK(before >= 60 && before <= 140 && after >= 160,
		"maglev: A had %d of 200 clients at 1:1 and %d at 9:1 (want about 100, then about 180)",
		before, after);
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

/* session kill: that session ends, the other goes on. */
static void case_kill(const char *bin)
{
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL, want[64], row[1024], id[32];
	int f1, f2, r;

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "roundrobin");
	f1 = session_to(&p.addr, 'A');
	f2 = session_to(&p.addr, 'A');
	CTL(bin, &out, "show", "sessions", "--json");
	snprintf(want, sizeof want, "\"client\":\"127.0.0.1:%d\"", local_port(f1));
	H_CHECK(json_row(out, want, row, sizeof row) && sscanf(strstr(row, "\"id\":\""), "\"id\":\"%31[0-9a-f]\"", id) == 1,
		"session of port %d in: %s", local_port(f1), out);
	free(out);
	CTL(bin, &out, "session", "kill", id);
	H_CHECK(strstr(out, "ended"), "session kill: %s", out);
	free(out);
	r = h_expect_eof(f1, h_now_ms() + 3000);
	H_CHECK(r == 0 || r == -ECONNRESET, "the killed session: %d", r);
	H_CHECK(echo_ok(f2, 6, 2000), "the other session on the same backend ended too");
	CTL_FAILS(bin, "no session", "session", "kill", id);
	CTL(bin, &out, "show", "sessions");
	H_CHECK(count_of(out, "\n") == 2, "one session left:\n%s", out);
	free(out);
	close(f2);
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_session_kill, .init = h_init, .fini = h_fini, .timeout = 60) { case_kill(h_binary(0)); }
Test(integ, admin_session_kill_asan, .init = h_init, .fini = h_fini, .timeout = 90) { case_kill(h_binary(1)); }

/* ---- reload ---------------------------------------------------------------- */

static const char *conf_write(int port, const struct tag_echo *a, const struct tag_echo *b,
			      int wb, const char *admin)
{
	static char path[300];
	snprintf(path, sizeof path, "%s/admin.conf", h_tmpdir());
	FILE *f = fopen(path, "we");
	H_CHECK(f, "cannot write %s", path);
	fprintf(f, "[global]\nadmin = %s\nworkers = 2\n\n[route web]\nlisten = 127.0.0.1:%d\n"
		"backend = %s\nbackend = %s weight=%d\n", admin, port, a->text, b->text, wb);
	H_CHECK(fclose(f) == 0, "write %s", path);
	return path;
}

static void case_reload(const char *bin)
{
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL, other[300];
	int port = h_free_port(), n_a = 0, held;
	const char *conf;

	te_start(&a, 'A');
	te_start(&b, 'B');
	conf = conf_write(port, &a, &b, 1, sock_path());
	const char *args[] = { "-c", conf, NULL };
	char err[512];
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", conf, err);
	held = session_to(&p.addr, 'A');

	CTL(bin, &out, "backend", "web", a.text, "drain");
	free(out);
	CTL(bin, &out, "backend", "web", b.text, "weight", "4");
	free(out);
	CTL(bin, &out, "reload");
	H_CHECK(strstr(out, "ok: reloaded"), "reload: %s", out);
	free(out);
	H_CHECK(h_log_lines_wait(&p, 2000, "SIGHUP: reloaded", NULL) == 1,
		"the proxy logged no reload, or more than one");
	CTL(bin, &out, "show", "backends");
	H_CHECK(table_has(out, a.text, " drain ", NULL) && table_has(out, b.text, "4 (file: 1)", NULL),
		"after a reload, show backends:\n%s", out);
	free(out);
	/* the file's weight changes: the run-time one stays, the mark follows */
	conf_write(port, &a, &b, 2, sock_path());
	CTL(bin, &out, "reload");
	free(out);
	CTL(bin, &out, "show", "backends");
	H_CHECK(table_has(out, b.text, "4 (file: 2)", NULL), "after a second reload:\n%s", out);
	free(out);
	for (int i = 0; i < 10; i++)
		n_a += tag_via(&p.addr, NULL, NULL) == 'A';
	H_CHECK(n_a == 0, "%d of 10 sessions went to A, drained before two reloads", n_a);
	H_CHECK(echo_ok(held, 7, 1000), "the session from before the reloads");
	/* the file's own weight clears the mark */
	CTL(bin, &out, "backend", "web", b.text, "weight", "2");
	free(out);
	CTL(bin, &out, "show", "backends", "--json");
	H_CHECK(json_valid(out) && strstr(out, "\"weight\":2,\"file_weight\":2"), "%s", out);
	free(out);
	/* a new admin path needs a restart: said, and the socket stays */
	snprintf(other, sizeof other, "%s/other.sock", h_tmpdir());
	conf_write(port, &a, &b, 2, other);
	CTL(bin, &out, "reload");
	free(out);
	H_CHECK(h_log_lines_wait(&p, 2000, "admin changed; it needs a restart", NULL) == 1 &&
			access(other, F_OK) != 0, "a changed admin path");
	/* an invalid file: the running config stays, ctl says so */
	FILE *f = fopen(conf, "we");
	H_CHECK(f && fputs("[route web]\nlisten = nowhere\n", f) >= 0 && fclose(f) == 0, "write");
	CTL_FAILS(bin, "reload: the running config stays", "reload");
	close(held);
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_reload_state, .init = h_init, .fini = h_fini, .timeout = 90) { case_reload(h_binary(0)); }

/* ---- permissions ----------------------------------------------------------- */

Test(integ, admin_permissions, .init = h_init, .fini = h_fini, .timeout = 90)
{
	const char *bin = h_binary(0);
	struct tag_echo a, b;
	struct h_proxy p;
	struct stat sb;
	char *out = NULL, *err = NULL;
	const char *show[] = { "show", "routes", NULL };
	int rc;

	if (geteuid() != 0)
		cr_skip_test("needs root: another user (nobody) must try the socket");
	/* the directory lets anyone through: only the socket's mode keeps out */
	H_CHECK(chmod(h_tmpdir(), 0711) == 0, "chmod %s", h_tmpdir());
	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "roundrobin");
	H_CHECK(stat(sock_path(), &sb) == 0 && S_ISSOCK(sb.st_mode) && (sb.st_mode & 0777) == 0600 &&
			sb.st_uid == 0, "the socket: mode %o, uid %d", sb.st_mode & 0777, (int)sb.st_uid);
	rc = ctl_as(bin, 65534, &out, &err, show);
	H_CHECK(rc == 1 && err && strstr(err, "Permission denied"),
		"nobody used root's admin socket: exit %d, stdout %s, stderr %s", rc, out, err);
	free(out);
	free(err);
	/* the control: the same call works once the mode lets it */
	H_CHECK(chmod(sock_path(), 0666) == 0, "chmod");
	rc = ctl_as(bin, 65534, &out, &err, show);
	H_CHECK(rc == 0 && strstr(out, "default"), "with mode 0666 nobody could not connect: %d %s", rc,
		err);
	free(out);
	free(err);
	h_proxy_down(&p);

	/* user = nobody: the socket is nobody's, still 0600, made by nobody
	 * in a directory of its own (root makes no file there, doc/security.md) */
	snprintf(sock_dir, sizeof sock_dir, "%s/run", h_tmpdir());
	H_CHECK(mkdir(sock_dir, 0755) == 0 && chown(sock_dir, 65534, 65534) == 0, "mkdir %s", sock_dir);
	const char *backends[] = { a.text, b.text, NULL };
	const char *extra[] = { "--admin", sock_path(), "--user", "nobody", NULL };
	h_proxy_up(&p, bin, "auto", "127.0.0.1:0", backends, extra);
	H_CHECK(stat(sock_path(), &sb) == 0 && (sb.st_mode & 0777) == 0600 && sb.st_uid == 65534,
		"user = nobody: mode %o, uid %d", sb.st_mode & 0777, (int)sb.st_uid);
	rc = ctl_as(bin, 65534, &out, &err, show);
	H_CHECK(rc == 0 && strstr(out, "default"), "the run-as user cannot use its socket: %d %s", rc,
		err);
	free(out);
	free(err);
	h_proxy_down(&p);
	H_CHECK(access(sock_path(), F_OK) != 0, "the socket file is left behind at stop");
	sock_dir[0] = '\0';
	te_stop(&a);
	te_stop(&b);
}

/* ---- bad input ---------------------------------------------------------------- */

/* One connection, raw lines: each answer ends with an empty line. */
static void raw_protocol(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char buf[16384], big[5000];
	size_t n;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	H_CHECK(strlen(sock_path()) < sizeof sun.sun_path, "socket path too long");
	memcpy(sun.sun_path, sock_path(), strlen(sock_path()) + 1);
	H_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0, "connect: %s",
		strerror(errno));
	h_set_timeouts(fd, 1000);
	const char two[] = "show routes\nfrobnicate\n";
	H_CHECK(h_send_all(fd, two, sizeof two - 1, h_now_ms() + 2000) == 0, "send");
	n = 0;
	while (count_of(buf, "\n\n") < 2 && n < sizeof buf - 1) {
		ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
		H_CHECK(k > 0, "answers cut short after %zu bytes", n);
		n += (size_t)k;
		buf[n] = '\0';
	}
	H_CHECK(!strncmp(buf, "ROUTE", 5) && strstr(buf, "\n\nerror: unknown command 'frobnicate'") &&
			n >= 2 && !strcmp(buf + n - 2, "\n\n"), "two answers on one connection:\n%s", buf);
	memset(big, 'x', sizeof big);
	H_CHECK(h_send_all(fd, big, sizeof big, h_now_ms() + 2000) == 0, "send");
	n = h_recv_all(fd, buf, sizeof buf, h_now_ms() + 3000);
	H_CHECK(strstr(buf, "error: a line longer than 4095 bytes\n\n"), "a long line: %s", buf);
	close(fd);
}

Test(integ, admin_bad_commands, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct tag_echo a, b;
	struct h_proxy p;
	char *out = NULL, *err = NULL;
	int st;

	te_start(&a, 'A');
	te_start(&b, 'B');
	proxy_up(&p, bin, &a, &b, "roundrobin");
	CTL_FAILS(bin, "unknown command 'frobnicate'", "frobnicate");
	CTL_FAILS(bin, "show what?", "show");
	CTL_FAILS(bin, "show: unknown 'things'", "show", "things");
	CTL_FAILS(bin, "usage: backend ROUTE ADDR", "backend", "default");
	CTL_FAILS(bin, "no route 'web' (routes: default)", "backend", "web", a.text, "drain");
	CTL_FAILS(bin, "route default has no backend '127.0.0.1:1'", "backend", "default", "127.0.0.1:1",
		  "drain");
	CTL_FAILS(bin, "weight: expects an integer 1..256, not '0'", "backend", "default", a.text,
		  "weight", "0");
	CTL_FAILS(bin, "not 'heavy'", "backend", "default", a.text, "weight", "heavy");
	CTL_FAILS(bin, "not '257'", "backend", "default", a.text, "weight", "257");
	CTL_FAILS(bin, "unknown action 'explode'", "backend", "default", a.text, "explode");
	CTL_FAILS(bin, "unexpected argument 'now'", "backend", "default", a.text, "drain", "now");
	CTL_FAILS(bin, "'zz' is not a session ID", "session", "kill", "zz");
	CTL_FAILS(bin, "no session 1 (it ended", "session", "kill", "1");
	CTL_FAILS(bin, "usage: session kill ID", "session", "list");
	CTL_FAILS(bin, "reload: unexpected argument 'now'", "reload", "now");
	/* routes from the command line: nothing to reload */
	CTL_FAILS(bin, "reload: the running config stays", "reload");
	/* the upgrade itself: test_upgrade.c (upgrade_ctl_answers_the_outcome) */
	CTL_FAILS(bin, "upgrade: unexpected argument 'now'", "upgrade", "now");
	H_CHECK(h_proxy_alive(&p), "the proxy died of a ctl upgrade");
	raw_protocol();
	/* ctl's own errors */
	st = h_run_capture(bin, (const char *const[]){ "ctl", "show", "routes", NULL }, 5000, &out, &err);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, "where is the admin socket"),
		"ctl without -s or -c: %s", err);
	free(out);
	free(err);
	st = h_run_capture(bin, (const char *const[]){ "ctl", "-s", "/nonexistent/admin.sock", "show",
						       "routes", NULL }, 5000, &out, &err);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(err, "No such file"), "ctl -s nowhere: %s",
		err);
	free(out);
	free(err);
	H_CHECK(h_proxy_alive(&p), "the proxy died of bad admin commands");
	h_proxy_down(&p);
	te_stop(&a);
	te_stop(&b);
}

/* GET /health: the status code (0: no answer), the body in body. */
static int health(const struct h_addr *stats, char *body, size_t len)
{
	const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char buf[4096];
	int code = 0, fd = h_connect(stats, 2000);

	body[0] = '\0';
	if (fd < 0)
		return 0;
	if (h_send_all(fd, req, sizeof req - 1, h_now_ms() + 2000) == 0) {
		size_t n = h_recv_all(fd, buf, sizeof buf - 1, h_now_ms() + 2000);
		buf[n] = '\0';
		const char *b = strstr(buf, "\r\n\r\n");
		if (sscanf(buf, "HTTP/1.1 %d", &code) != 1)
			code = 0;
		snprintf(body, len, "%s", b ? b + 4 : "");
	}
	close(fd);
	return code;
}

/* Backends a and b, the admin socket, stats on and lameduck: the proxy. */
static void stats_proxy_up(struct h_proxy *p, const char *bin, struct tag_echo *a,
			   struct tag_echo *b, const char *lameduck, struct h_addr *stats)
{
	const char *backends[3], *extra[] = { "--admin", sock_path(), "--stats", "127.0.0.1:0",
					      "--lameduck", lameduck, NULL };

	te_start(a, 'a');
	te_start(b, 'b');
	backends[0] = a->text, backends[1] = b->text, backends[2] = NULL;
	h_proxy_up(p, bin, "auto", "127.0.0.1:0", backends, extra);
	H_CHECK(h_stats_addr(p, stats) == 0, "stats address");
}

/* ctl lameduck (a Kubernetes preStop): /health turns 503 and show process
 * says lameduck, while the listener accepts and serves on with no SIGTERM
 * and no end; a second call changes nothing; an upgrade is refused
 * meanwhile. The SIGTERM that follows drains at once (not another
 * `lameduck` of 5 s): the port refuses, the held session finishes, exit 0. */
static void case_lameduck(const char *bin)
{
	struct tag_echo a, b;
	struct h_proxy p;
	struct h_addr stats;
	char *out = NULL, body[256];

	stats_proxy_up(&p, bin, &a, &b, "5s", &stats);
	H_CHECK(health(&stats, body, sizeof body) == 200, "/health before: %s", body);
	CTL(bin, &out, "show", "process");
	H_CHECK(table_has(out, "PID", "STATE", NULL) && table_has(out, " serving ", NULL, NULL),
		"show process before:\n%s", out);
	free(out);

	CTL(bin, &out, "lameduck");
	H_CHECK(strstr(out, "ok: lame duck: /health answers 503"), "ctl lameduck: %s", out);
	free(out);
	H_CHECK(health(&stats, body, sizeof body) == 503 && strstr(body, "draining"),
		"/health after ctl lameduck: %s", body);
	CTL(bin, &out, "lameduck");
	H_CHECK(strstr(out, "ok: lame duck already"), "a second ctl lameduck: %s", out);
	free(out);
	CTL(bin, &out, "show", "process", "--json");
	H_CHECK(json_valid(out) && strstr(out, "\"state\":\"lameduck\""), "show process: %s", out);
	free(out);
	CTL_FAILS(bin, "SIGUSR2 during the lame duck (ctl lameduck): ignored", "upgrade");
	/* no stop follows: still accepting and serving well after */
	h_sleep_ms(300);
	H_CHECK(h_proxy_alive(&p), "ctl lameduck stopped the proxy");
	int held = -1;
	char t = h_tag_of(&p.addr, &held);
	H_CHECK((t == 'a' || t == 'b') && echo_ok(held, 11, 2000),
		"a new connection during the lame duck: tag '%c'", t ? t : '-');
	H_CHECK(health(&stats, body, sizeof body) == 503, "/health later in the lame duck: %s", body);

	int64_t t0 = h_now_ms();
	H_CHECK(kill(p.pid, SIGTERM) == 0, "SIGTERM");
	int64_t t_refused = -1;
	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(10)) {
		int fd = h_connect(&p.addr, 200);
		if (fd < 0 && errno == ECONNREFUSED) {
			t_refused = h_now_ms() - t0;
			break;
		}
		if (fd >= 0)
			close(fd);
	}
	H_CHECK(t_refused >= 0 && t_refused < 1000, "after SIGTERM the port refused after %lld ms "
		"(a second lame duck of 5 s?)", (long long)t_refused);
	H_CHECK(h_proxy_alive(&p) && echo_ok(held, 12, 2000), "the held session while draining");
	close(held);
	int st = h_proxy_wait(&p, 10000);
	int64_t t_exit = h_now_ms() - t0;
	fprintf(stderr, "ctl lameduck, then SIGTERM: port refusing after %lld ms, exit after %lld ms\n",
		(long long)t_refused, (long long)t_exit);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "after SIGTERM: status %d", st);
	te_stop(&a);
	te_stop(&b);
}

Test(integ, admin_lameduck, .init = h_init, .fini = h_fini, .timeout = 60) { case_lameduck(h_binary(0)); }
Test(integ, admin_lameduck_asan, .init = h_init, .fini = h_fini, .timeout = 90) { case_lameduck(h_binary(1)); }

/* ctl drain: the lame duck, then the drain, as SIGTERM: /health answers 503
 * at once while the listener still accepts, and the proxy then exits 0. */
Test(integ, admin_drain_process, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct tag_echo a, b;
	struct h_proxy p;
	struct h_addr stats;
	char *out = NULL, body[256];

	stats_proxy_up(&p, bin, &a, &b, "1s", &stats);
	ctl_ok(bin, &out, (const char *const[]){ "drain", NULL });
	H_CHECK(strstr(out, "ok: draining"), "ctl drain said: %s", out);
	free(out);
	/* /health is 503 during the lame duck, and the listener still serves */
	H_CHECK(health(&stats, body, sizeof body) == 503, "/health during the lame duck: %s", body);
	H_CHECK(tag_via(&p.addr, NULL, NULL) != 0, "the listener refused during the lame duck");
	int st = h_proxy_wait(&p, 10000);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "after ctl drain: status %d", st);
	te_stop(&a);
	te_stop(&b);
}

/* `splicer ctl -c FILE`: the socket's path from the file's admin = PATH,
 * as an operator runs it against the service's own config; a file that
 * sets none, or does not parse, is a clear error before any connect. */
Test(integ, admin_ctl_finds_the_socket_from_the_config, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	struct tag_echo a;
	struct h_proxy p;
	char text[1024], err_buf[256], *out = NULL, *err = NULL;
	int port = h_free_port(), st;

	te_start(&a, 'A');
	snprintf(text, sizeof text, "[global]\nadmin = %s\n[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
		 sock_path(), port, a.text);
	const char *conf = h_conf_write("ctl.conf", text);
	const char *args[] = { "-c", conf, NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err_buf, sizeof err_buf) == 0, "proxy: %s", err_buf);

	const char *show[] = { "ctl", "-c", conf, "show", "routes", NULL };
	st = h_run_capture(bin, show, 20000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && table_has(out, "web", "127.0.0.1", NULL),
		"ctl -c %s show routes: status %d, stdout '%s', stderr '%s'", conf, st, out ? out : "",
		err ? err : "");
	free(out), free(err), out = err = NULL;

	const char *none = h_conf_write("noadmin.conf", "[route web]\nlisten = 127.0.0.1:1\nbackend = 127.0.0.1:2\n");
	const char *show_none[] = { "ctl", "-c", none, "show", "routes", NULL };
	st = h_run_capture(bin, show_none, 20000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0 && err && strstr(err, none) &&
			strstr(err, "admin"),
		"ctl -c on a config without admin: status %d, stderr '%s'", st, err ? err : "");
	free(out), free(err), out = err = NULL;

	const char *bad = h_conf_write("bad.conf", "[global]\nadmin = /x\nnope = 1\n");
	const char *show_bad[] = { "ctl", "-c", bad, "show", "routes", NULL };
	st = h_run_capture(bin, show_bad, 20000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0 && err && strstr(err, "nope"),
		"ctl -c on a config that does not parse: status %d, stderr '%s'", st, err ? err : "");
	free(out), free(err);
	h_proxy_down(&p);
	te_stop(&a);
}
