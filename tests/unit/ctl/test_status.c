/* SPDX-License-Identifier: MIT */
/* Unit tests for the status page (src/ctl/stats/): the /metrics text read
 * back (metrics_index), the HTML buffer's escaping and numbers (html_buf),
 * the charts' quantiles (status_chart), the rates sampler (status_rates),
 * the backends' health history (src/core/backend.c) and the page itself
 * (status_page): hostile names escaped, every family shown, bounded in
 * size and time with the most routes and backends a config may have. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "html_buf.h"
#include "metrics_index.h"
#include "status_chart.h"
#include "status_page.h"
#include "status_rates.h"

/* ---- metrics_index ------------------------------------------------------------ */

Test(unit_status, metrics_index_reads_labels_escapes_and_histograms)
{
	char text[] =
		"# HELP splicer_route_sessions_total Sessions accepted.\n"
		"# TYPE splicer_route_sessions_total counter\n"
		"splicer_route_sessions_total{route=\"web\"} 12\n"
		"splicer_route_sessions_total{route=\"db\"} 3\n"
		"# HELP splicer_backend_checks_total Checks.\n"
		"# TYPE splicer_backend_checks_total counter\n"
		"splicer_backend_checks_total{route=\"web\",backend=\"10.0.0.1:80\",result=\"ok\"} 7\n"
		"splicer_backend_checks_total{result=\"failed\",backend=\"10.0.0.1:80\",route=\"web\"} 2\n"
		"# HELP splicer_odd Odd labels.\n"
		"# TYPE splicer_odd gauge\n"
		"splicer_odd{route=\"a\\\"b\\\\c\\nd\",name=\"x,y=z\"} 1.5\n"
		"# HELP splicer_h A histogram.\n"
		"# TYPE splicer_h histogram\n"
		"splicer_h_bucket{route=\"web\",le=\"0.001\"} 1\n"
		"splicer_h_bucket{route=\"web\",le=\"+Inf\"} 4\n"
		"splicer_h_sum{route=\"web\"} 0.5\n"
		"splicer_h_count{route=\"web\"} 4\n"
		"splicer_pipes{state=\"free\"} 9\n"
		"garbage{route=\"x\" 1\n"
		"splicer_plain 42\n";
	struct mindex x;

	cr_assert_eq(metrics_index_parse(text, strlen(text), &x), 0);
	cr_assert_eq(metrics_index_value(&x, "splicer_route_sessions_total", "web", NULL, NULL, -1), 12);
	cr_assert_eq(metrics_index_value(&x, "splicer_route_sessions_total", "db", NULL, "", -1), 3);
	cr_assert_eq(metrics_index_value(&x, "splicer_route_sessions_total", "nope", NULL, NULL, -1), -1);
	cr_assert_eq(metrics_index_value(&x, "splicer_backend_checks_total", "web", "10.0.0.1:80",
					 "result=ok", -1), 7);
	/* the labels' order does not matter for route and backend */
	cr_assert_eq(metrics_index_value(&x, "splicer_backend_checks_total", "web", "10.0.0.1:80",
					 "result=failed", -1), 2);
	/* no backend label is not an empty one */
	cr_assert_eq(metrics_index_value(&x, "splicer_backend_checks_total", "web", NULL, "result=ok", -1), -1);
	cr_assert_eq(metrics_index_value(&x, "splicer_odd", "a\"b\\c\nd", NULL, "name=x,y=z", -1), 1.5);
	cr_assert_eq(metrics_index_value(&x, "splicer_h_bucket", "web", NULL, "le=+Inf", -1), 4);
	cr_assert_eq(metrics_index_value(&x, "splicer_h_count", "web", NULL, NULL, -1), 4);
	cr_assert_eq(metrics_index_value(&x, "splicer_pipes", NULL, NULL, "state=free", -1), 9);
	cr_assert_eq(metrics_index_value(&x, "splicer_plain", NULL, NULL, NULL, -1), 42);
	cr_assert_eq(x.skipped, 1, "the unterminated label set is skipped, not misread");

	/* families: histogram samples in theirs; untyped ones named by their sample */
	const char *names[] = { "splicer_route_sessions_total", "splicer_backend_checks_total",
				"splicer_odd", "splicer_h", "splicer_pipes", "splicer_plain" };
	unsigned counts[] = { 2, 2, 1, 4, 1, 1 };
	cr_assert_eq(x.nf, 6);
	for (unsigned i = 0; i < 6; i++) {
		cr_assert_str_eq(x.f[i].name, names[i]);
		cr_assert_eq(x.f[i].n, counts[i], "%s: %u samples", names[i], x.f[i].n);
	}
	cr_assert_str_eq(x.f[3].type, "histogram");
	cr_assert_str_eq(x.f[4].type, "untyped");
	cr_assert(x.f[0].has_route && !x.f[4].has_route);
	cr_assert_str_eq(x.f[1].help, "Checks.");
	metrics_index_free(&x);
}

Test(unit_status, metrics_index_of_nothing)
{
	char text[] = "";
	struct mindex x;

	cr_assert_eq(metrics_index_parse(text, 0, &x), 0);
	cr_assert_eq(x.ns, 0);
	cr_assert_null(metrics_index_find(&x, "a", NULL, NULL, NULL));
	metrics_index_free(&x);
}

/* ---- html_buf ------------------------------------------------------------------ */

Test(unit_status, html_text_escapes_markup_quotes_and_controls)
{
	struct html_buf b;

	html_init(&b, 1 << 20);
	html_text(&b, "<script>alert('x')</script> & \"q\"\x01\x7f ok");
	cr_assert_str_eq(b.p, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
			      "&#xfffd;&#xfffd; ok");
	html_free(&b);
}

Test(unit_status, html_numbers_for_people)
{
	struct html_buf b;
	static const struct {
		int kind;
		double v;
		const char *want;
	} cases[] = {
		{ 0, 0, "0" }, { 0, 999, "999" }, { 0, 1234567, "1,234,567" }, { 0, -1000, "-1,000" },
		{ 0, 0.25, "0.25" }, { 1, 512, "512\xc2\xa0" "B" }, { 1, 1536, "1.50\xc2\xa0KiB" },
		{ 1, 10 << 20, "10\xc2\xa0MiB" }, { 2, 0.00025, "250\xc2\xa0\xc2\xb5s" },
		{ 2, 0.0123, "12.3\xc2\xa0ms" }, { 2, 2.5, "2.50\xc2\xa0s" }, { 2, 125, "2m\xc2\xa0" "5s" },
		{ 3, 0.5, "0.50" }, { 3, 12345.6, "12,346" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		html_init(&b, 4096);
		if (cases[i].kind == 0)
			html_count(&b, cases[i].v);
		else if (cases[i].kind == 1)
			html_bytes(&b, cases[i].v);
		else if (cases[i].kind == 2)
			html_seconds(&b, cases[i].v);
		else
			html_rate(&b, cases[i].v);
		cr_assert_str_eq(b.p, cases[i].want, "case %zu: %g gave '%s'", i, cases[i].v, b.p);
		html_free(&b);
	}
}

Test(unit_status, html_buf_stops_at_its_ceiling)
{
	struct html_buf b;

	html_init(&b, 100);
	for (int i = 0; i < 50; i++)
		html_put(&b, "0123456789");
	cr_assert_eq(b.full, HTML_CEILING);
	cr_assert(b.n < 100 && strlen(b.p) == b.n);
	html_free(&b);
}

/* ---- charts ---------------------------------------------------------------------- */

Test(unit_status, quantiles_as_prometheus_estimates_them)
{
	/* 10 observations: 4 <= 1, 4 in (1, 2], 2 in (2, 4] */
	struct chart_hist h = { .n = 4, .le = { 1, 2, 4, INFINITY }, .cum = { 4, 8, 10, 10 },
				.sum = 20, .count = 10 };

	cr_assert_float_eq(chart_quantile(&h, 0.2), 0.5, 1e-9);  /* rank 2 of 4 in [0, 1] */
	cr_assert_float_eq(chart_quantile(&h, 0.5), 1.25, 1e-9); /* rank 1 of 4 in (1, 2] */
	cr_assert_float_eq(chart_quantile(&h, 0.9), 3, 1e-9);    /* rank 1 of 2 in (2, 4] */
	h.cum[3] = 20;                                            /* 10 more past the last bound */
	cr_assert_float_eq(chart_quantile(&h, 0.99), 4, 1e-9, "+Inf gives the last finite bound");
	h.cum[0] = h.cum[1] = h.cum[2] = h.cum[3] = 0;
	cr_assert(isnan(chart_quantile(&h, 0.5)));
}

Test(unit_status, strip_draws_the_checks_newest_right)
{
	struct html_buf b;

	html_init(&b, 1 << 16);
	/* 3 checks: oldest passed, then failed, newest passed (bit 0) */
	chart_strip(&b, 0x5, 3, 4);
	cr_assert(strstr(b.p, "<path class=\"none\" d=\"M0 0h3v14h-3z\"/>"), "%s", b.p);
	cr_assert(strstr(b.p, "<path class=\"fail\" d=\"M8 0h3v14h-3z\"/>"), "%s", b.p);
	cr_assert(strstr(b.p, "<path class=\"pass\" d=\"M4 0h3v14h-3zM12 0h3v14h-3z\"/>"), "%s", b.p);
	html_free(&b);
}

/* ---- configs for the page and the rates ----------------------------------------- */

/* A finalized config of nroutes routes r0.. with nb backends each
 * (10.R.B.1:80, checks on), from an INI text. */
static struct config *make_config(unsigned nroutes, unsigned nb)
{
	size_t cap = 64 + nroutes * (96 + nb * 40);
	char *ini = malloc(cap), path[] = "/tmp/splicer-unit-status.XXXXXX";
	struct config *c = calloc(1, sizeof(*c));
	size_t n = 0;
	int fd;

	cr_assert(ini && c);
	n += (size_t)snprintf(ini + n, cap - n, "[global]\nworkers = 1\n");
	for (unsigned r = 0; r < nroutes; r++) {
		n += (size_t)snprintf(ini + n, cap - n, "[route r%u]\nlisten = 127.0.0.1:%u\ncheck = tcp\n",
				      r, 20000 + r);
		for (unsigned b = 0; b < nb; b++)
			n += (size_t)snprintf(ini + n, cap - n, "backend = 10.%u.%u.1:80\n", r, b);
	}
	cr_assert((fd = mkstemp(path)) >= 0);
	cr_assert_eq(write(fd, ini, n), (ssize_t)n);
	close(fd);
	config_host_checks = 0;
	config_defaults(c);
	cr_assert_eq(config_load_file(c, path), 0);
	cr_assert_eq(config_finalize(c), 0);
	unlink(path);
	free(ini);
	return c;
}

static void free_config(struct config *c)
{
	config_free(c);
	free(c);
}

/* ---- the rates ------------------------------------------------------------------------ */

Test(unit_status, rates_follow_the_counters_per_second)
{
	struct config *c = make_config(2, 2);
	struct route *r = c->route[0];
	struct rate_view v;
	double b[RATE_BACKEND_KINDS];

	cr_assert_eq(status_rates_route("r0", &v), -1, "no sample yet");
	status_rates_sample(c, 10000);
	cr_assert_eq(status_rates_route("r0", &v), -1, "one sample is no interval");
	for (unsigned s = 1; s <= 4; s++) {
		STAT_ADD(r->st->sessions, 10);
		STAT_ADD(r->st->bytes_down, 5000);
		STAT_ADD(r->st->denied, 1);
		STAT_ADD(r->health[1]->sessions, 4);
		status_rates_sample(c, 10000 + s * 1000);
	}
	cr_assert_eq(status_rates_route("r0", &v), 0);
	cr_assert_eq(v.n, 4);
	cr_assert_float_eq(v.per_s[RATE_SESSIONS][3], 10, 1e-6);
	cr_assert_float_eq(v.now[RATE_SESSIONS], 10, 1e-6);
	cr_assert_float_eq(v.now[RATE_BYTES_DOWN], 5000, 1e-6);
	cr_assert_float_eq(v.now[RATE_REFUSED], 1, 1e-6);
	cr_assert_eq(status_rates_backend("r0", 1, r->backend[1].addr.text, b), 0);
	cr_assert_float_eq(b[RATE_SESSIONS], 4, 1e-6);
	cr_assert_eq(status_rates_backend("r0", 1, "10.9.9.9:80", b), -1, "another address: not known");
	cr_assert_eq(status_rates_route(NULL, &v), 0);
	cr_assert_float_eq(v.now[RATE_SESSIONS], 10, 1e-6, "the total: r1 had none");
	/* a counter that went back (the route came again) counts from 0, not negative */
	__atomic_store_n(&r->st->sessions, 3, __ATOMIC_RELAXED);
	status_rates_sample(c, 15000);
	cr_assert_eq(status_rates_route("r0", &v), 0);
	cr_assert_float_eq(v.per_s[RATE_SESSIONS][v.n - 1], 3, 1e-6);
	/* a route gone from the config is forgotten */
	struct config *one = make_config(1, 1);
	status_rates_sample(one, 16000);
	cr_assert_eq(status_rates_route("r1", &v), -1);
	free_config(one);
	free_config(c);
}

/* ---- health history (backend.c) ------------------------------------------------------ */

Test(unit_status, backend_history_keeps_checks_and_changes)
{
	struct config *c = make_config(1, 1);
	struct route *r = c->route[0];
	struct backend_history h;

	backend_history(r, 0, &h);
	cr_assert_eq(h.nchecks, 0);
	cr_assert_eq(h.nevents, 0);
	for (int i = 0; i < 70; i++)
		backend_check_seen(r, 0, i % 3 != 0); /* ..., 67 and 68 passed, the newest (69) failed */
	backend_set_down(r, 0, 1, "test");
	backend_set_down(r, 0, 1, "test: no change, no event");
	backend_set_down(r, 0, 0, "test");
	backend_history(r, 0, &h);
	cr_assert_eq(h.nchecks, 64, "at most 64 checks");
	cr_assert_eq(h.checks & 7, 0x6, "the newest in bit 0: %llx", (unsigned long long)h.checks);
	cr_assert_eq(h.nevents, 2);
	cr_assert_eq(h.event_down[0], 0, "newest first: up");
	cr_assert_eq(h.event_down[1], 1);
	cr_assert(h.event_ms[0] >= h.event_ms[1] && h.event_ms[1] > 1600000000000ull);
	for (int i = 0; i < 20; i++)
		backend_set_down(r, 0, i % 2 == 0, "flap");
	backend_history(r, 0, &h);
	cr_assert_eq(h.nevents, BACKEND_EVENTS, "at most BACKEND_EVENTS changes");
	cr_assert_eq(h.event_down[0], 0, "the last flap marked it up");
	free_config(c);
}

/* ---- the page ------------------------------------------------------------------------ */

/* Appends the Prometheus text stats_http.c would write for c's routes and
 * backends (the families the page lays out, one histogram, and extra
 * families the page does not know), label values escaped the same way. */
static void put(char **buf, size_t *n, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	int k;

	for (;;) {
		va_start(ap, fmt);
		k = vsnprintf(*buf + *n, *cap - *n, fmt, ap);
		va_end(ap);
		if (*n + (size_t)k < *cap)
			break;
		*cap = *cap * 2 + (size_t)k;
		cr_assert((*buf = realloc(*buf, *cap)));
	}
	*n += (size_t)k;
}

static const char *esc(const char *s, char *out)
{
	size_t k = 0;

	for (; *s; s++) {
		if (*s == '"' || *s == '\\' || *s == '\n')
			out[k++] = '\\';
		out[k++] = *s == '\n' ? 'n' : *s;
	}
	out[k] = '\0';
	return out;
}

static char *metrics_for(const struct config *c, const char *extra, size_t *len)
{
	size_t n = 0, cap = 1 << 16;
	char *m = malloc(cap), rn[256], bn[512];

	cr_assert(m);
	m[0] = '\0';
	put(&m, &n, &cap, "# HELP splicer_route_sessions_total x\n# TYPE splicer_route_sessions_total counter\n");
	for (unsigned i = 0; i < c->nroutes; i++)
		put(&m, &n, &cap, "splicer_route_sessions_total{route=\"%s\"} %u\n",
		    esc(c->route[i]->name, rn), 100 + i);
	put(&m, &n, &cap, "# HELP splicer_route_connect_seconds x\n# TYPE splicer_route_connect_seconds histogram\n");
	for (unsigned i = 0; i < c->nroutes; i++) {
		static const char *const le[] = { "0.001", "0.01", "0.1", "1", "+Inf" };
		for (unsigned k = 0; k < 5; k++)
			put(&m, &n, &cap, "splicer_route_connect_seconds_bucket{route=\"%s\",le=\"%s\"} %u\n",
			    esc(c->route[i]->name, rn), le[k], 2 * k + 1);
		put(&m, &n, &cap, "splicer_route_connect_seconds_sum{route=\"%s\"} 0.5\n"
				  "splicer_route_connect_seconds_count{route=\"%s\"} 9\n", rn, rn);
	}
	static const char *const bfam[] = { "up", "sessions_total", "sessions_active",
					    "connect_errors_total" };
	for (unsigned f = 0; f < 4; f++) {
		put(&m, &n, &cap, "# HELP splicer_backend_%s x\n# TYPE splicer_backend_%s gauge\n", bfam[f],
		    bfam[f]);
		for (unsigned i = 0; i < c->nroutes; i++)
			for (unsigned b = 0; b < c->route[i]->nbackend; b++)
				put(&m, &n, &cap, "splicer_backend_%s{route=\"%s\",backend=\"%s\"} %u\n", bfam[f],
				    esc(c->route[i]->name, rn), esc(c->route[i]->backend[b].addr.text, bn),
				    f == 0 ? b % 2 == 0 : 1000 * f + b);
	}
	put(&m, &n, &cap, "%s", extra);
	*len = n;
	return m;
}

static int render(const struct config *c, char *metrics, size_t mlen, size_t max, struct html_buf *out)
{
	struct status_input in = {
		.cfg = c, .metrics = metrics, .metrics_len = mlen, .now_ms = 1700000000000ull,
		.start_ms = 1699999000000ull, .state = "serving", .host = "h<o>st", .workers = 2,
		.seq = 7, .nonce = "Tm9uY2Vub25jZW5vbmNl", .refresh_s = 5,
	};

	html_init(out, max);
	return status_page_render(&in, out);
}

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

Test(unit_status, page_escapes_every_name_and_value_from_outside)
{
	struct config *c = make_config(1, 2);
	struct route *r = c->route[0];
	struct html_buf out;
	size_t mlen;

	/* a backend name as DNS could give it, and label values as any
	 * family could carry them (an SNI name, a PROXY-header address) */
	snprintf(r->backend[0].addr.text, sizeof(r->backend[0].addr.text), "<img src=x onerror=alert(1)>");
	snprintf(r->backend[1].spec, sizeof(r->backend[1].spec), "\"><script>alert(2)</script>");
	char *m = metrics_for(c,
			      "# HELP splicer_route_sni_seen_total <b>help</b>\n"
			      "# TYPE splicer_route_sni_seen_total counter\n"
			      "splicer_route_sni_seen_total{route=\"r0\",name=\"</td><script>alert(3)</script>\"} 1\n"
			      "# HELP splicer_client_seen x\n# TYPE splicer_client_seen gauge\n"
			      "splicer_client_seen{addr=\"<svg onload=alert(4)>\"} 2\n"
			      "# HELP splicer_<i>bad x\n",
			      &mlen);
	cr_assert_eq(render(c, m, mlen, STATUS_PAGE_MAX, &out), 0);
	cr_assert_eq(count(out.p, "<script"), 1, "only the page's own script:\n%s", out.p);
	cr_assert_null(strstr(out.p, "<img"));
	cr_assert_null(strstr(out.p, "<svg onload"));
	cr_assert_null(strstr(out.p, "<i>"));
	cr_assert_null(strstr(out.p, "<b>help"));
	cr_assert_null(strstr(out.p, "h<o>st"));
	cr_assert(strstr(out.p, "&lt;img src=x onerror=alert(1)&gt;"));
	cr_assert(strstr(out.p, "&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"));
	cr_assert(strstr(out.p, "name=&lt;/td&gt;&lt;script&gt;alert(3)&lt;/script&gt;"),
		  "an unknown route family is listed under the route, escaped");
	cr_assert(strstr(out.p, "addr=&lt;svg onload=alert(4)&gt;"),
		  "an unknown process family is listed, escaped");
	/* the nonce on the page's own style and script */
	cr_assert_eq(count(out.p, "nonce=\"Tm9uY2Vub25jZW5vbmNl\""), 2);
	html_free(&out);
	free(m);
	free_config(c);
}

Test(unit_status, page_shows_states_numbers_and_histograms)
{
	struct config *c = make_config(2, 3);
	struct html_buf out;
	size_t mlen;
	char *m = metrics_for(c, "", &mlen);

	backend_set_admin(c->route[1], 2, BACKEND_DRAIN);
	cr_assert_eq(render(c, m, mlen, STATUS_PAGE_MAX, &out), 0);
	/* backends: up from the metrics, down (1 is 0 there), drain from the admin state */
	cr_assert(strstr(out.p, "data-backend=\"10.0.0.1:80\" data-state=\"up\""), "%s", out.p);
	cr_assert(strstr(out.p, "data-backend=\"10.0.1.1:80\" data-state=\"down\""));
	cr_assert(strstr(out.p, "data-backend=\"10.1.2.1:80\" data-state=\"drain\""));
	/* the numbers of the metrics text: backend 1 of r1 has 1001 sessions, r1 101 */
	const char *row = strstr(out.p, "data-backend=\"10.1.1.1:80\"");
	cr_assert(row && strstr(row, "data-k=\"sessions_total\">1,001<"));
	const char *card = strstr(out.p, "data-route=\"r1\"");
	cr_assert(card && strstr(card, "data-k=\"sessions_total\">101<"));
	/* a histogram per route, with its count and quantiles */
	cr_assert_eq(count(out.p, "data-family=\"splicer_route_connect_seconds\""), 2);
	cr_assert(strstr(out.p, "data-count=\"9\""));
	cr_assert(strstr(out.p, "p50 "));
	html_free(&out);
	free(m);
	free_config(c);
}

Test(unit_status, page_is_bounded_with_the_most_routes_and_backends, .timeout = 60)
{
	struct config *c = make_config(MAX_ROUTES, MAX_BACKENDS);
	struct html_buf out;
	struct timespec t0, t1;
	size_t mlen, xn = 0, xcap = 1 << 16;
	char *extra = malloc(xcap), bn[512];

	/* a family per backend the page has no place for: its samples are
	 * listed under each route, a bounded number in all */
	cr_assert(extra);
	extra[0] = '\0';
	put(&extra, &xn, &xcap, "# HELP splicer_backend_unknown x\n# TYPE splicer_backend_unknown gauge\n");
	for (unsigned i = 0; i < c->nroutes; i++)
		for (unsigned k = 0; k < c->route[i]->nbackend; k++)
			put(&extra, &xn, &xcap, "splicer_backend_unknown{route=\"%s\",backend=\"%s\"} 1\n",
			    c->route[i]->name, esc(c->route[i]->backend[k].addr.text, bn));
	char *m = metrics_for(c, extra, &mlen);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(render(c, m, mlen, STATUS_PAGE_MAX, &out), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_log_info("%u routes x %u backends: %zu bytes in %.3f s", MAX_ROUTES, MAX_BACKENDS, out.n, s);
	cr_assert(out.n <= STATUS_PAGE_MAX);
	cr_assert_eq(count(out.p, "<tr class=\"be\""), STATUS_BACKEND_ROWS);
	cr_assert(strstr(out.p, "more backends of this route are not shown"));
	cr_assert_eq(count(out.p, "<article class=\"route\""), MAX_ROUTES, "every route has its card");
	cr_assert_eq(count(out.p, "<tr title=\"x\"><td>splicer_backend_unknown</td>"), STATUS_MORE_PAGE_ROWS,
		     "the other samples listed are bounded, all routes together");
	/* a promptness bound with a wide margin (a loaded 2-CPU machine): the
	 * stats thread answers /health between two pages */
	cr_assert(s < 2.0, "rendering took %.3f s", s);
	html_free(&out);

	/* a ceiling the page cannot fit under: refused whole */
	free(m);
	m = metrics_for(c, "", &mlen);
	cr_assert_eq(render(c, m, mlen, 64 << 10, &out), -EFBIG);
	html_free(&out);
	free(m);
	free(extra);
	free_config(c);
}
