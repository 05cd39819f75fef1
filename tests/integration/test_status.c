/* SPDX-License-Identifier: MIT */
/* Integration cases for what people and dashboards see of a running proxy
 * (src/ctl/stats/status_page.c, contrib/grafana-dashboard.json):
 *   - the status page in a real browser, Debian's chromium, headless, one
 *     render per case (integ/load_status_page_chromium_*, the heavy
 *     shard): a screenshot kept for a person to look at
 *     (build/status-page.png when run from the source tree); the DOM after
 *     the page's script ran and refreshed it, which must show the proxy's
 *     live numbers: a backend whose checks fail is down, a drained one
 *     drain, the sessions the test made, the client admission refused, the
 *     connect histogram's count; no Content-Security-Policy violation and
 *     no script error; and the same page with JavaScript off;
 *   - the page over plain HTTP: its head (type, a CSP nonce new for each
 *     answer and the same on the page's style and script), HEAD, methods;
 *   - the Grafana dashboard: every metric its expressions name is one the
 *     proxy exports (tests/tools/grafana_check.py on a real scrape with
 *     every family on), and a dashboard naming one that is not is caught.
 * Chromium runs as root with the flags a container needs (no sandbox, no
 * GPU, nothing fetched from outside), in its own process group, its own
 * HOME and profile under the test's temp dir, bounded in seconds and
 * stopped by its pid's group. Without chromium the browser case is a skip
 * with the reason. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- HTTP ------------------------------------------------------------------- */

/* The whole answer to a raw request (malloc'd, NUL-terminated). */
static char *st_http(const struct h_addr *stats, const char *req)
{
	size_t cap = 8 << 20;
	char *buf = malloc(cap);
	int fd = h_connect(stats, 2000);

	H_CHECK(buf && fd >= 0, "connect to the stats endpoint %s", stats->text);
	H_CHECK(h_send_all(fd, req, strlen(req), h_now_ms() + 2000) == 0, "send the request");
	size_t n = h_recv_all(fd, buf, cap - 1, h_now_ms() + 5000);
	buf[n] = '\0';
	close(fd);
	return buf;
}

/* A header's value (up to its CRLF) into out, or NULL. */
static const char *st_header(const char *resp, const char *name, char *out, size_t cap)
{
	const char *end = strstr(resp, "\r\n\r\n"), *h = resp;
	size_t n = strlen(name);

	while ((h = strstr(h, "\r\n")) && h < end) {
		h += 2;
		if (!strncasecmp(h, name, n) && h[n] == ':') {
			const char *v = h + n + 1 + (h[n + 1] == ' '), *e = strstr(v, "\r\n");
			snprintf(out, cap, "%.*s", (int)(e - v), v);
			return out;
		}
	}
	return NULL;
}

static long long st_metric(const struct h_addr *stats, const char *name)
{
	return h_metric(stats, name);
}

/* Waits up to ms for a metric to read want. */
static int st_metric_until(const struct h_addr *stats, const char *name, long long want, int ms)
{
	for (int64_t end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(50))
		if (st_metric(stats, name) == want)
			return 0;
	return -1;
}

/* ---- chromium --------------------------------------------------------------- */

/* Runs chromium headless on url with the extra flags, stdout into out_path
 * and stderr into err_path, in a process group of its own (its zygote and
 * renderers with it), for at most timeout_ms; then (or once it exited)
 * every process left in that group is killed. Returns the exit status, or
 * -1 when it had to be killed for its time. */
static int st_chromium_run(const char *bin, const char *const *extra, const char *url,
			   const char *out_path, const char *err_path, int timeout_ms)
{
	static char profile[300], home[300];
	const char *args[40];
	int n = 0;

	snprintf(home, sizeof home, "%s/chromium-home", h_tmpdir());
	snprintf(profile, sizeof profile, "--user-data-dir=%s/chromium-profile", h_tmpdir());
	mkdir(home, 0700);
	/* chromium writes under HOME (crash reports, caches) besides its profile */
	setenv("HOME", home, 1);
	setenv("XDG_CONFIG_HOME", home, 1);
	setenv("XDG_CACHE_HOME", home, 1);
	args[n++] = bin;
	static const char *const base[] = { "--headless", "--no-sandbox", "--disable-gpu",
					    "--disable-quic", "--no-first-run",
					    "--disable-background-networking",
					    "--disable-component-update", "--disable-sync",
					    "--enable-logging=stderr", "--v=0", NULL };
	for (int i = 0; base[i]; i++)
		args[n++] = base[i];
	args[n++] = profile;
	for (int i = 0; extra[i] && n < 36; i++)
		args[n++] = extra[i];
	args[n++] = url;
	args[n] = NULL;

	int ofd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	H_CHECK(ofd >= 0 && efd >= 0 && nfd >= 0, "open %s, %s", out_path, err_path);
	pid_t parent = getpid(), pid = fork();
	H_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		h_child_exec(parent, nfd, ofd, efd, bin, (char *const *)args);
	}
	setpgid(pid, pid); /* as the child does: whichever runs first */
	close(ofd);
	close(efd);
	close(nfd);
	int status = -1;
	int64_t deadline = h_now_ms() + timeout_ms;
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (h_now_ms() > deadline) {
			kill(-pid, SIGKILL);
			waitpid(pid, NULL, 0);
			status = -1;
			break;
		}
		h_sleep_ms(20);
	}
	kill(-pid, SIGKILL); /* what it left behind, if anything (ESRCH otherwise) */
	return status;
}

/* The <tr> of backend addr in a DOM (copied into out), or NULL. */
static const char *st_row(const char *dom, const char *addr, char *out, size_t cap)
{
	char key[200];
	const char *s, *start, *end;

	snprintf(key, sizeof key, "data-backend=\"%s\"", addr);
	if (!(s = strstr(dom, key)))
		return NULL;
	for (start = s; start > dom && strncmp(start, "<tr", 3); start--)
		;
	end = strstr(s, "</tr>");
	if (!end)
		return NULL;
	snprintf(out, cap, "%.*s", (int)(end - start), start);
	return out;
}

/* The text of the element with data-k="key" after `from`, or "". */
static const char *st_cell(const char *from, const char *key, char *out, size_t cap)
{
	char k[80];
	const char *s, *e;

	out[0] = '\0';
	snprintf(k, sizeof k, "data-k=\"%s\">", key);
	if (from && (s = strstr(from, k)) && (e = strchr(s + strlen(k), '<')))
		snprintf(out, cap, "%.*s", (int)(e - s - strlen(k)), s + strlen(k));
	return out;
}

/* A number attribute (name="N") in s, or -1. */
static long long st_attr(const char *s, const char *name)
{
	char k[80];
	const char *p;

	snprintf(k, sizeof k, "%s=\"", name);
	if (!s || !(p = strstr(s, k)))
		return -1;
	return strtoll(p + strlen(k), NULL, 10);
}

/* A PNG's width and height from its IHDR; 0 when it is not a PNG. */
static int st_png_size(const char *path, unsigned *w, unsigned *h, long *bytes)
{
	unsigned char b[24];
	FILE *f = fopen(path, "rb");
	struct stat sb;

	*w = *h = 0;
	*bytes = stat(path, &sb) ? -1 : (long)sb.st_size;
	if (!f)
		return -1;
	size_t n = fread(b, 1, sizeof b, f);
	fclose(f);
	if (n < 24 || memcmp(b, "\x89PNG\r\n\x1a\n", 8) || memcmp(b + 12, "IHDR", 4))
		return -1;
	*w = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19];
	*h = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23];
	return 0;
}

/* chromium's stderr must show no CSP violation and no script error. */
static void st_console_clean(const char *err_path, const char *what)
{
	char *err = h_read_file(err_path, NULL);
	const char *bad = strstr(err, "Content Security Policy");

	if (!bad)
		bad = strstr(err, "Uncaught");
	if (bad) {
		const char *line = bad;
		while (line > err && line[-1] != '\n')
			line--;
		H_CHECK(0, "%s: chromium's console: %.400s", what, line);
	}
	free(err);
}

/* ---- the page in chromium ------------------------------------------------------ */

struct st_proxy {
	struct h_server a, c;      /* echo backends: a takes the sessions, c is drained */
	struct h_refused b;        /* refuses: its checks fail, it is marked down */
	struct h_proxy p;
	struct h_addr stats;
	int port;
	char admin[300];
};

/* A proxy with one route over a (up), b (down: refused) and c (drained
 * through the admin socket), checks every 200 ms, and 127.0.0.2 denied. */
static void st_up(struct st_proxy *x, const char *bin)
{
	char conf[2048], ans[512], err[512];

	H_CHECK(h_server_start(&x->a, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0 &&
			h_server_start(&x->c, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backends");
	H_CHECK(h_refused_open(&x->b) == 0, "a refusing port");
	x->port = h_free_port();
	snprintf(x->admin, sizeof x->admin, "%s/admin.sock", h_tmpdir());
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nadmin = %s\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\nbackend = %s\nbackend = %s\n"
		 "check = tcp\ncheck_interval = 200ms\ncheck_timeout = 150ms\nrise = 1\nfall = 1\n"
		 "deny = 127.0.0.2/32\n",
		 x->admin, x->port, x->a.addr.text, x->b.text, x->c.addr.text);
	const char *args[] = { "-c", h_conf_write("status.conf", conf), NULL };
	H_CHECK(h_proxy_start(&x->p, bin, args, err, sizeof err) == 0, "proxy: %s", err);
	H_CHECK(h_stats_addr(&x->p, &x->stats) == 0, "no stats address in %s", x->p.log);
	int fd = h_admin_connect(x->admin);
	char cmd[200];
	snprintf(cmd, sizeof cmd, "backend web %s drain", x->c.addr.text);
	h_admin_cmd(fd, cmd, ans, sizeof ans);
	close(fd);
}

static void st_down(struct st_proxy *x)
{
	h_proxy_down(&x->p);
	h_server_stop(&x->a);
	h_server_stop(&x->c);
	h_refused_close(&x->b);
}

/* What the browser cases share: the proxy of st_up with its traffic made
 * (b marked down by its checks, 7 sessions on a, one client denied), the
 * figures /metrics gives for them, and the page's sequence number as the
 * test saw it before the browser came. */
struct st_live {
	struct st_proxy x;
	long long route_sessions;  /* splicer_route_sessions_total of route web */
	long long seq0;            /* data-seq of the page the test fetched */
	char url[200];
};

static const char *st_chromium_or_skip(void)
{
	const char *chromium = h_which("chromium");

	if (!chromium)
		cr_skip_test("chromium is not installed (Debian package chromium, which `make test` "
			     "installs through tools/deps.sh): the status page's browser tests are "
			     "skipped; integ/status_page_http_answers checks the page without a browser");
	return chromium;
}

static void st_live_up(struct st_live *l)
{
	struct st_proxy *x = &l->x;
	char name[300], why[256];

	st_up(x, h_binary(0));
	snprintf(name, sizeof name, "splicer_backend_up{route=\"web\",backend=\"%s\"}", x->b.text);
	H_CHECK(st_metric_until(&x->stats, name, 0, 5000) == 0, "backend %s not marked down", x->b.text);
	for (int i = 0; i < 7; i++)
		H_CHECK(h_echo_roundtrip(&x->p.addr, 1000 + 500 * i, (uint64_t)i, 3000, why, sizeof why) == 0,
			"echo %d: %s", i, why);
	int fd = h_connect_from(x->port, "127.0.0.2", 1000);
	char byte;
	H_CHECK(recv(fd, &byte, 1, 0) <= 0, "a denied client got a byte");
	close(fd);
	snprintf(name, sizeof name, "splicer_backend_sessions_total{route=\"web\",backend=\"%s\"}",
		 x->a.addr.text);
	H_CHECK(st_metric_until(&x->stats, name, 7, 3000) == 0, "7 sessions on %s expected", x->a.addr.text);
	H_CHECK(st_metric_until(&x->stats, "splicer_route_refused_total{route=\"web\",reason=\"denied\"}", 1,
				3000) == 0, "1 denied client expected");
	H_CHECK(st_metric_until(&x->stats, "splicer_route_connect_seconds_count{route=\"web\"}", 7, 3000) == 0,
		"7 connects in the histogram expected");
	l->route_sessions = st_metric(&x->stats, "splicer_route_sessions_total{route=\"web\"}");

	/* the page as the test sees it first: the browser's must be newer */
	char *resp = st_http(&x->stats, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	l->seq0 = st_attr(strstr(resp, "<main"), "data-seq");
	H_CHECK(!strncmp(resp, "HTTP/1.1 200 ", 13) && l->seq0 > 0, "GET /: %.300s", resp);
	free(resp);
	snprintf(l->url, sizeof l->url, "http://%s/", x->stats.text);
}

/* The backends' rows of a DOM: b down, c drained, a up with its 7 sessions. */
static void st_check_rows(const struct st_live *l, const char *dom, const char *where)
{
	char row[8192], cell[128];

	H_CHECK(st_row(dom, l->x.b.text, row, sizeof row) && strstr(row, "data-state=\"down\"") &&
			strstr(row, "class=\"st down\""),
		"backend %s is not shown down: %.600s; DOM in %s", l->x.b.text, row, where);
	H_CHECK(st_row(dom, l->x.c.addr.text, row, sizeof row) && strstr(row, "data-state=\"drain\""),
		"backend %s is not shown drained: %.600s; DOM in %s", l->x.c.addr.text, row, where);
	H_CHECK(st_row(dom, l->x.a.addr.text, row, sizeof row) && strstr(row, "data-state=\"up\""),
		"backend %s is not shown up: %.600s; DOM in %s", l->x.a.addr.text, row, where);
	H_CHECK(!strcmp(st_cell(row, "sessions_total", cell, sizeof cell), "7"),
		"backend %s: sessions '%s' shown, 7 made; DOM in %s", l->x.a.addr.text, cell, where);
}

/* One render each (a headless chromium takes seconds of both CPUs to
 * start): the heavy shard's load_ prefix. */

/* The screenshot, for a person to look at: build/status-page.png. */
Test(integ, load_status_page_chromium_screenshot, .init = h_init, .fini = h_fini, .timeout = 120)
{
	const char *chromium = st_chromium_or_skip();
	static struct st_live l;
	char shot[512], out[512], errp[512], shot_arg[600];
	unsigned w, h;
	long bytes;
	struct stat sb;

	st_live_up(&l);
	if (!stat("build", &sb) && S_ISDIR(sb.st_mode) && !access("build", W_OK)) {
		H_CHECK(getcwd(shot, sizeof shot - 32), "getcwd");
		strcat(shot, "/build/status-page.png");
	} else {
		snprintf(shot, sizeof shot, "%s/status-page.png", h_tmpdir());
	}
	unlink(shot);
	snprintf(shot_arg, sizeof shot_arg, "--screenshot=%s", shot);
	snprintf(out, sizeof out, "%s/chromium-shot.out", h_tmpdir());
	snprintf(errp, sizeof errp, "%s/chromium-shot.err", h_tmpdir());
	const char *shot_args[] = { shot_arg, "--window-size=1280,1600", "--hide-scrollbars", NULL };
	int64_t t0 = h_now_ms();
	int st = st_chromium_run(chromium, shot_args, l.url, out, errp, 60000);
	H_CHECK(st == 0 || (st > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0),
		"chromium --screenshot: status %d (-1: killed after 60 s); stderr in %s", st, errp);
	H_CHECK(st_png_size(shot, &w, &h, &bytes) == 0 && w == 1280 && h == 1600,
		"%s: a 1280x1600 PNG expected, got %ux%u (%ld bytes)", shot, w, h, bytes);
	/* a blank or error page compresses to a few kilobytes; the page's
	 * tables, text and charts do not */
	H_CHECK(bytes > 40000, "%s: only %ld bytes: a blank page?", shot, bytes);
	st_console_clean(errp, "the screenshot");
	fprintf(stderr, "status page screenshot: %s (%ux%u, %ld bytes, chromium %lld ms)\n", shot, w, h,
		bytes, (long long)(h_now_ms() - t0));
	st_down(&l.x);
}

/* The DOM after the page's script ran and refreshed it (virtual time: 12 s
 * of the page's timers pass without waiting for them): the live numbers. */
Test(integ, load_status_page_chromium_live_dom, .init = h_init, .fini = h_fini, .timeout = 120)
{
	const char *chromium = st_chromium_or_skip();
	static struct st_live l;
	char out[512], errp[512], cell[128], want[32];

	st_live_up(&l);
	snprintf(out, sizeof out, "%s/dom-js.html", h_tmpdir());
	snprintf(errp, sizeof errp, "%s/dom-js.err", h_tmpdir());
	const char *js_args[] = { "--virtual-time-budget=12000", "--dump-dom", NULL };
	int st = st_chromium_run(chromium, js_args, l.url, out, errp, 60000);
	H_CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "chromium --dump-dom: status %d", st);
	st_console_clean(errp, "the page with JavaScript");
	char *dom = h_read_file(out, NULL);
	const char *body = strstr(dom, "<body");
	H_CHECK(st_attr(body, "data-refreshes") >= 1,
		"the script did not refresh the page (data-refreshes %lld); DOM in %s",
		st_attr(body, "data-refreshes"), out);
	H_CHECK(strstr(dom, "id=\"live\" class=\"live ok\""), "the live line does not say ok; DOM in %s",
		out);
	H_CHECK(st_attr(strstr(dom, "<main"), "data-seq") >= l.seq0 + 2,
		"the DOM is not a page drawn after the browser's first (seq %lld, the test's %lld)",
		st_attr(strstr(dom, "<main"), "data-seq"), l.seq0);
	st_check_rows(&l, dom, out);
	const char *card = strstr(dom, "data-route=\"web\"");
	snprintf(want, sizeof want, "%lld", l.route_sessions);
	H_CHECK(!strcmp(st_cell(card, "sessions_total", cell, sizeof cell), want),
		"route web: sessions '%s' shown, /metrics says %s", cell, want);
	H_CHECK(!strcmp(st_cell(card, "refused_denied", cell, sizeof cell), "1"),
		"route web: denied '%s' shown, 1 made", cell);
	const char *hist = strstr(dom, "data-family=\"splicer_route_connect_seconds\"");
	H_CHECK(hist && st_attr(hist, "data-count") == 7, "the connect histogram's count is not 7");
	free(dom);
	st_down(&l.x);
}

/* JavaScript off: the page as served without its script (headless
 * chromium cannot dump or shoot a page with scripts disabled: it needs
 * them itself), from a file: the same numbers, drawn by the server. */
Test(integ, load_status_page_chromium_without_javascript, .init = h_init, .fini = h_fini,
     .timeout = 120)
{
	const char *chromium = st_chromium_or_skip();
	static struct st_live l;
	char out[512], errp[512], file_url[400];

	st_live_up(&l);
	char *resp = st_http(&l.x.stats, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	char *page = strstr(resp, "\r\n\r\n"), *s0, *s1;
	H_CHECK(page && (s0 = strstr(page, "<script")) && (s1 = strstr(s0, "</script>")), "no script in the page");
	memmove(s0, s1 + 9, strlen(s1 + 9) + 1);
	H_CHECK(!strstr(page, "<script"), "a second script in the page");
	h_conf_write("nojs.html", page + 4);
	free(resp);
	snprintf(file_url, sizeof file_url, "file://%s/nojs.html", h_tmpdir());
	snprintf(out, sizeof out, "%s/dom-nojs.html", h_tmpdir());
	snprintf(errp, sizeof errp, "%s/dom-nojs.err", h_tmpdir());
	const char *nojs_args[] = { "--dump-dom", NULL };
	int st = st_chromium_run(chromium, nojs_args, file_url, out, errp, 60000);
	H_CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "chromium --dump-dom: status %d", st);
	char *dom = h_read_file(out, NULL);
	H_CHECK(st_attr(strstr(dom, "<body"), "data-refreshes") == 0 &&
			strstr(dom, "JavaScript off: reload the page to refresh"),
		"without its script the page says so and is not refreshed; DOM in %s", out);
	st_check_rows(&l, dom, out);
	H_CHECK(strstr(dom, "<svg class=\"strip\"") && strstr(dom, "data-family=\"splicer_route_connect_seconds\""),
		"without its script: the check strips and the histograms drawn; DOM in %s", out);
	free(dom);
	st_down(&l.x);
}

/* ---- the page over HTTP ---------------------------------------------------------- */

/* The nonce of a CSP header's script-src. */
static const char *st_nonce(const char *csp, char *out, size_t cap)
{
	const char *s = strstr(csp, "script-src 'nonce-");

	out[0] = '\0';
	if (s)
		snprintf(out, cap, "%.*s", (int)strcspn(s + 18, "'"), s + 18);
	return out;
}

static void case_http_answers(const char *bin)
{
	static struct st_proxy x;
	char v[1024], nonce[64], nonce2[64], attr[128], len_get[32];

	st_up(&x, bin);
	char *r = st_http(&x.stats, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	H_CHECK(!strncmp(r, "HTTP/1.1 200 ", 13), "GET /: %.300s", r);
	H_CHECK(st_header(r, "Content-Type", v, sizeof v) && !strcmp(v, "text/html; charset=utf-8"),
		"Content-Type: %s", v);
	H_CHECK(st_header(r, "Content-Security-Policy", v, sizeof v) &&
			strstr(v, "default-src 'none'") && strstr(v, "connect-src 'self'") &&
			!strstr(v, "unsafe-inline") && st_nonce(v, nonce, sizeof nonce)[0],
		"Content-Security-Policy: %s", v);
	H_CHECK(st_header(r, "X-Content-Type-Options", v, sizeof v) && !strcmp(v, "nosniff"), "nosniff");
	H_CHECK(st_header(r, "Cache-Control", v, sizeof v) && !strcmp(v, "no-store"), "no-store");
	snprintf(attr, sizeof attr, "nonce=\"%s\"", nonce);
	const char *body = strstr(r, "\r\n\r\n") + 4;
	H_CHECK(strstr(body, "<style ") && strstr(strstr(body, "<style "), attr) &&
			strstr(strstr(body, "<script "), attr),
		"the page's style and script carry the header's nonce %s", nonce);
	H_CHECK(strstr(body, "</html>") && st_header(r, "Content-Length", len_get, sizeof len_get) &&
			(size_t)atol(len_get) == strlen(body),
		"Content-Length %s, body %zu bytes", len_get, strlen(body));
	/* an external reference would need the network or break the CSP */
	H_CHECK(!strstr(body, "src=\"http") && !strstr(body, "href=\"http") && !strstr(body, "@import"),
		"the page refers to something outside itself");
	free(r);
	r = st_http(&x.stats, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
	st_header(r, "Content-Security-Policy", v, sizeof v);
	H_CHECK(strcmp(st_nonce(v, nonce2, sizeof nonce2), nonce), "the nonce was the same twice: %s",
		nonce);
	free(r);
	/* HEAD: the same head, no body */
	r = st_http(&x.stats, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
	H_CHECK(!strncmp(r, "HTTP/1.1 200 ", 13) && st_header(r, "Content-Length", v, sizeof v) &&
			llabs(atoll(v) - atoll(len_get)) < 4096 && !strcmp(strstr(r, "\r\n\r\n"), "\r\n\r\n"),
		"HEAD /: %.300s", r);
	free(r);
	r = st_http(&x.stats, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
	H_CHECK(!strncmp(r, "HTTP/1.1 405 ", 13), "POST /: %.100s", r);
	free(r);
	r = st_http(&x.stats, "GET /index.html HTTP/1.1\r\n\r\n");
	H_CHECK(!strncmp(r, "HTTP/1.1 404 ", 13), "GET /index.html: %.100s", r);
	free(r);
	r = st_http(&x.stats, "GET /health HTTP/1.1\r\n\r\n");
	H_CHECK(!strncmp(r, "HTTP/1.1 200 ", 13) && strstr(r, "\r\n\r\nok\n"), "GET /health: %.100s", r);
	free(r);
	st_down(&x);
}

Test(integ, status_page_http_answers, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_http_answers(h_binary(0));
}

/* the page's parser and renderer under ASan and UBSan */
Test(integ, status_page_http_answers_asan, .init = h_init, .fini = h_fini, .timeout = 90)
{
	case_http_answers(h_binary(1));
}

/* ---- the Grafana dashboard --------------------------------------------------------- */

/* contrib/ and tests/tools/ of the source tree the test runs from. */
static const char *st_source(const char *rel, char *out, size_t cap)
{
	snprintf(out, cap, "%s", rel);
	if (access(out, R_OK)) {
		const char *bin = getenv("SPLICER_BIN"); /* build/splicer: the tree is its parent's */
		if (bin && strstr(bin, "build/"))
			snprintf(out, cap, "%.*s%s", (int)(strstr(bin, "build/") - bin), bin, rel);
	}
	return out;
}

Test(integ, grafana_dashboard_names_exported_metrics, .init = h_init, .fini = h_fini, .timeout = 90)
{
	static struct st_proxy x;
	static char resp[4 << 20];
	char dash[512], tool[512], scrape[512], bad[512], why[256];
	char *out = NULL, *err = NULL;

	st_source("contrib/grafana-dashboard.json", dash, sizeof dash);
	st_source("tests/tools/grafana_check.py", tool, sizeof tool);
	H_CHECK(!access(dash, R_OK) && !access(tool, R_OK), "%s or %s is missing", dash, tool);
	/* every family on: traffic, a down backend (errors, checks), a denied
	 * client, a queue (maxconn), and a resolve= name (dns_*; its lookups
	 * fail: the resolver is a port that refuses) */
	struct h_refused dns;
	char conf[2048], err_s[512];
	H_CHECK(h_server_start(&x.a, "127.0.0.1:0", 16, h_echo_conn, NULL) == 0, "echo backend");
	H_CHECK(h_refused_open(&x.b) == 0 && h_refused_open(&dns) == 0, "refusing ports");
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nresolvers = %s\n\n"
		 "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s maxconn=8\nbackend = %s\n"
		 "check = tcp\ncheck_interval = 200ms\nfall = 1\ndeny = 127.0.0.2/32\n\n"
		 "[route named]\nlisten = 127.0.0.1:%d\nbackend = app.invalid:80 resolve=1s\n",
		 dns.text, h_free_port(), x.a.addr.text, x.b.text, h_free_port());
	const char *args[] = { "-c", h_conf_write("grafana.conf", conf), NULL };
	H_CHECK(h_proxy_start(&x.p, h_binary(0), args, err_s, sizeof err_s) == 0, "proxy: %s", err_s);
	H_CHECK(h_stats_addr(&x.p, &x.stats) == 0, "no stats address in %s", x.p.log);
	for (int i = 0; i < 3; i++)
		h_echo_roundtrip(&x.p.addr, 100, (uint64_t)i, 2000, why, sizeof why);
	H_CHECK(h_metrics_get(&x.stats, resp, sizeof resp, 3000) == 0, "GET /metrics: %.200s", resp);
	H_CHECK(strstr(resp, "splicer_dns_resolutions_total{"), "no dns_* family in the scrape");
	snprintf(scrape, sizeof scrape, "%s/scrape.txt", h_tmpdir());
	h_conf_write("scrape.txt", strstr(resp, "\r\n\r\n") + 4);

	const char *run[] = { tool, dash, scrape, NULL };
	int st = h_run_capture("/usr/bin/python3", run, 60000, &out, &err);
	cr_log_info("grafana_check: %s", out ? out : "");
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"%s does not match what /metrics exports (status %d):\n%s\n%s", dash, st, out ? out : "",
		err ? err : "");
	H_CHECK(out && strstr(out, "expressions checked"), "no summary from the checker: %s", out);
	free(out);
	free(err);

	/* the checker itself: a dashboard naming a metric nobody exports fails */
	char *text = h_read_file(dash, NULL), *p = strstr(text, "splicer_route_sessions_total");
	H_CHECK(p, "the dashboard does not use splicer_route_sessions_total");
	memcpy(p, "splicer_route_sessions_tutal", 28);
	snprintf(bad, sizeof bad, "%s/bad-dashboard.json", h_tmpdir());
	h_conf_write("bad-dashboard.json", text);
	free(text);
	const char *run_bad[] = { tool, bad, scrape, NULL };
	st = h_run_capture("/usr/bin/python3", run_bad, 60000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && out &&
			strstr(out, "splicer_route_sessions_tutal"),
		"a dashboard with an unknown metric passed (status %d): %s %s", st, out ? out : "",
		err ? err : "");
	free(out);
	free(err);
	h_proxy_down(&x.p);
	h_server_stop(&x.a);
	h_refused_close(&x.b);
	h_refused_close(&dns);
}
