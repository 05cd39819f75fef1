/* SPDX-License-Identifier: MIT */
/* status_page: see status_page.h. */
#include "status_page.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "metrics_index.h"
#include "status_chart.h"
#include "status_rates.h"

/* The families the page lays out in its own places; every other one is
 * listed under "more counters" (by route) or under the process. To give a
 * new family a place of its own, name it here and draw it below. */
static const char *const laid_out[] = {
	"splicer_build_info", "splicer_start_time_seconds", "splicer_last_reload_success",
	"splicer_last_reload_time_seconds",
	"splicer_route_sessions_total", "splicer_route_sessions_active", "splicer_route_bytes_total",
	"splicer_route_connect_errors_total", "splicer_route_retries_total",
	"splicer_route_no_backend_total", "splicer_route_all_backends_down_total",
	"splicer_route_refused_total", "splicer_route_queue_length", "splicer_route_queue_served_total",
	"splicer_route_queue_wait_seconds_total", "splicer_route_queue_timeouts_total",
	"splicer_backend_up", "splicer_backend_sessions_total", "splicer_backend_sessions_active",
	"splicer_backend_bytes_total", "splicer_backend_connect_errors_total",
	"splicer_backend_checks_total", "splicer_backend_backup", "splicer_backend_slowstart_ratio",
	"splicer_route_backend_gone_closed_total",
};

/* admission's refusals (splicer_route_refused_total's reasons) */
static const char *const refusals[][2] = {
	{ "denied", "denied (allow/deny)" },
	{ "source_max_conns", "over source_max_conns" },
	{ "source_conn_rate", "over source_conn_rate" },
	{ "source_table_full", "source table full" },
};

struct page {
	const struct status_input *in;
	struct html_buf *b;
	struct mindex x;
	unsigned rows;      /* backend rows drawn so far */
	unsigned more;      /* "more counters" rows drawn so far, all routes together */
};

static int is_laid_out(const struct mfamily *f)
{
	if (!strcmp(f->type, "histogram"))
		return 1; /* drawn as charts wherever they have a route */
	for (size_t i = 0; i < sizeof(laid_out) / sizeof(laid_out[0]); i++)
		if (!strcmp(f->name, laid_out[i]))
			return 1;
	return 0;
}

static double val(const struct page *p, const char *name, const char *route, const char *backend,
		  const char *rest)
{
	return metrics_index_value(&p->x, name, route, backend, rest, NAN);
}

/* A number, or a dash when /metrics did not have it. */
static void num(struct page *p, double v)
{
	if (isnan(v))
		html_put(p->b, "\xe2\x80\x93");
	else
		html_count(p->b, v);
}

static void bytes(struct page *p, double v)
{
	if (isnan(v))
		html_put(p->b, "\xe2\x80\x93");
	else
		html_bytes(p->b, v);
}

/* "12:03:04 UTC" (the page shows UTC: the sandbox reads no zone file) */
static void clock_utc(struct html_buf *b, uint64_t ms, int date)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char s[40];

	gmtime_r(&t, &tm);
	strftime(s, sizeof(s), date ? "%Y-%m-%d %H:%M:%S UTC" : "%H:%M:%S UTC", &tm);
	html_put(b, "%s", s);
}

/* ---- style and script ------------------------------------------------------- */

static const char style[] =
	":root{--bg:#f4f5f7;--card:#fff;--ink:#18202c;--mute:#667085;--line:#e3e6eb;--soft:#f0f2f5;"
	"--up:#14a44d;--down:#dc3126;--drain:#d98a00;--off:#8a94a6;--acc:#2f6fdb}"
	"*{box-sizing:border-box}"
	"body{margin:0;background:var(--bg);color:var(--ink);"
	"font:13px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Noto Sans','DejaVu Sans',sans-serif}"
	".top{display:flex;flex-wrap:wrap;align-items:baseline;gap:6px 18px;padding:11px 22px;"
	"background:#141a24;color:#e8ebf0}"
	".brand{font-weight:700;font-size:18px;letter-spacing:.2px}"
	".brand small{font-weight:400;color:#9aa3b2;font-size:12px;margin-left:6px}"
	".meta{color:#c4cad4}.meta b{color:#fff;font-weight:600}"
	".live{margin-left:auto;font-size:12px;color:#9aa3b2}"
	".live.ok::before{content:'';display:inline-block;width:8px;height:8px;border-radius:50%;"
	"background:var(--up);margin-right:6px}"
	".live.bad{color:#ffb4a9}"
	".pill{display:inline-block;padding:0 8px;border-radius:9px;font-size:12px;font-weight:600}"
	".pill.serving{background:#14a44d33;color:#7ee2a0}.pill.lameduck,.pill.draining{background:#d98a0040;"
	"color:#ffd27a}.pill.bad{background:#dc312640;color:#ffb4a9}"
	"main{padding:14px 22px 28px;max-width:1560px;margin:0 auto}"
	"h2{font-size:12px;text-transform:uppercase;letter-spacing:.7px;color:var(--mute);margin:22px 0 8px}"
	".cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(158px,1fr));gap:10px}"
	".card,.route,.box{background:var(--card);border:1px solid var(--line);border-radius:8px}"
	".card{padding:9px 12px 6px}"
	".card .k{color:var(--mute);font-size:12px}"
	".card .v{font-size:22px;font-weight:650;font-variant-numeric:tabular-nums;white-space:nowrap}"
	".card .v small{font-size:13px;font-weight:500;color:var(--mute)}"
	".card .s{color:var(--mute);font-size:12px}.card.warn .v{color:var(--down)}"
	".box{padding:4px 6px}"
	"table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}"
	"th{font-weight:600;color:var(--mute);font-size:11.5px;text-align:left;padding:6px 8px;"
	"border-bottom:1px solid var(--line);white-space:nowrap}"
	"td{padding:5px 8px;border-bottom:1px solid var(--soft);vertical-align:middle}"
	"tr:last-child td{border-bottom:0}"
	".n{text-align:right;white-space:nowrap}.m{color:var(--mute)}.z{color:#b4bac4}"
	".route{margin:0 0 14px;padding:0 0 6px}"
	".route>header{display:flex;flex-wrap:wrap;align-items:center;gap:6px;padding:10px 14px 8px;"
	"border-bottom:1px solid var(--line)}"
	".route h3{margin:0 8px 0 0;font-size:16px}"
	".chip{display:inline-block;background:var(--soft);border-radius:5px;padding:1px 7px;"
	"font-size:12px;color:#344054}"
	".figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(205px,1fr));gap:4px 24px;"
	"padding:10px 14px 0}"
	".fh{display:flex;justify-content:space-between;align-items:baseline;min-height:19px;font-size:10.5px;"
	"text-transform:uppercase;letter-spacing:.5px;color:var(--mute);font-weight:650}"
	".fh .v{font-size:13px;text-transform:none;letter-spacing:0;color:var(--ink);"
	"font-variant-numeric:tabular-nums}"
	".fig .spark,.nospark{display:block;width:100%;height:28px;margin:1px 0 2px}"
	".kv td{padding:1.5px 0;border:0}.kv td.n{font-weight:600}.kv .bad{color:var(--down)}"
	".hists{display:flex;flex-wrap:wrap;gap:8px 14px;padding:10px 14px 2px;"
	"border-top:1px solid var(--soft);margin-top:8px}"
	"figure{margin:0;width:224px}figcaption{font-size:11.5px;color:var(--mute);line-height:1.35}"
	"figcaption .q{font-size:10.5px;white-space:nowrap}"
	"figcaption b{color:var(--ink);font-weight:600;margin-right:2px}"
	".bar{fill:var(--acc)}.bar0{fill:#dde2ea}.axis{stroke:#cdd2da;stroke-width:1}"
	".ax{font-size:9.5px;fill:var(--mute);text-anchor:middle}.ax.s{text-anchor:start}.ax.e{text-anchor:end}"
	".spark .line{fill:none;stroke:var(--acc);stroke-width:1.5}.spark .area{fill:#2f6fdb22}"
	".spark.red .line{stroke:var(--down)}.spark.red .area{fill:#dc312622}"
	".spark.green .line{stroke:var(--up)}.spark.green .area{fill:#14a44d22}"
	".strip .pass{fill:var(--up)}.strip .fail{fill:var(--down)}.strip .none{fill:#e3e6eb}"
	".bt{margin:4px 8px 0;width:calc(100% - 16px)}"
	".st{display:inline-block;min-width:64px;text-align:center;padding:1px 8px;border-radius:10px;"
	"font-size:11.5px;font-weight:650;color:#fff;text-transform:uppercase;letter-spacing:.3px}"
	".st.up{background:var(--up)}.st.down{background:var(--down)}.st.drain{background:var(--drain)}"
	".st.disabled{background:var(--off)}"
	"tr.be[data-state=down] td:first-child{box-shadow:inset 3px 0 var(--down)}"
	"tr.be[data-state=down]{background:#dc312609}"
	".addr{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}"
	".full{color:var(--drain);font-weight:650}"
	".hc{display:flex;flex-direction:column;gap:1px;white-space:nowrap;font-size:11.5px}"
	"details{margin:6px 14px 4px}summary{cursor:pointer;color:var(--mute);font-size:12px}"
	"details table{margin-top:4px}"
	".note{color:var(--mute);font-size:12px;margin:6px 14px}"
	".proc{columns:3 300px;column-gap:30px;padding:10px 14px}"
	".pf{break-inside:avoid;padding:2px 0 5px}.pn{color:var(--mute);font-size:12px}"
	".pl{display:flex;justify-content:space-between;gap:10px;padding:1px 0 1px 12px}"
	".pf.one .pl{padding-left:0}.pl b{font-weight:600;font-variant-numeric:tabular-nums}"
	"footer{margin-top:18px;color:var(--mute);font-size:12px}a{color:var(--acc)}"
	"@media (max-width:900px){.bt .hide{display:none}}";

/* Fetches the page again every data-refresh seconds (while the tab is
 * seen), swaps its <main> in, keeps open <details> open, and says in
 * #live when that last worked. Only textContent and parsed nodes: no
 * string becomes markup here. */
static const char script[] =
	"(function(){"
	"var b=document.body,s=+b.getAttribute('data-refresh')||5,live=document.getElementById('live'),"
	"n=0,busy=0;"
	"function hms(){return new Date().toTimeString().slice(0,8)}"
	"function say(ok,t){live.className='live '+(ok?'ok':'bad');live.textContent=t}"
	"say(1,'live \\u00b7 every '+s+' s');"
	"function tick(){"
	"if(busy||document.hidden)return;busy=1;"
	"fetch(location.pathname+location.search,{cache:'no-store'}).then(function(r){"
	"if(!r.ok)throw new Error('HTTP '+r.status);return r.text()}).then(function(t){"
	/* only <main>: the new page's own <style> (another nonce) is never parsed */
	"var i=t.indexOf('<main'),j=t.lastIndexOf('</main>');"
	"if(i<0||j<i)throw new Error('not a status page');"
	"var m=new DOMParser().parseFromString(t.slice(i,j+7),'text/html').getElementById('main'),"
	"o=document.getElementById('main');if(!m||!o)throw new Error('not a status page');"
	"var open={};o.querySelectorAll('details[open]').forEach(function(e){open[e.id]=1});"
	"m.querySelectorAll('details').forEach(function(e){if(open[e.id])e.open=true});"
	"o.replaceWith(document.importNode(m,true));"
	"b.setAttribute('data-refreshes',++n);"
	"say(1,'live \\u00b7 updated '+hms()+' \\u00b7 every '+s+' s')"
	"}).catch(function(e){say(0,'not updated at '+hms()+': '+e.message)})"
	".then(function(){busy=0})}"
	"setInterval(tick,s*1000);"
	"document.addEventListener('visibilitychange',function(){if(!document.hidden)tick()})"
	"})();";

/* ---- the top and the totals ------------------------------------------------- */

static void top(struct page *p)
{
	const struct status_input *in = p->in;
	struct html_buf *b = p->b;
	double ok = val(p, "splicer_last_reload_success", NULL, NULL, NULL);
	double at = val(p, "splicer_last_reload_time_seconds", NULL, NULL, NULL);

	html_put(b, "<header class=\"top\"><div class=\"brand\">splicer<small>%s</small></div>"
		    "<div class=\"meta\"><b>", SPLICER_VERSION);
	html_text(b, in->host);
	html_put(b, "</b> \xc2\xb7 up ");
	html_age(b, in->now_ms > in->start_ms ? in->now_ms - in->start_ms : 0);
	html_put(b, " \xc2\xb7 %u worker%s \xc2\xb7 <span class=\"pill ", in->workers,
		 in->workers == 1 ? "" : "s");
	html_text(b, in->state);
	html_put(b, "\" id=\"state\">");
	html_text(b, in->state);
	html_put(b, "</span>");
	if (!isnan(ok) && !isnan(at) && at * 1000 > (double)in->start_ms + 500) {
		html_put(b, " \xc2\xb7 last reload <span class=\"pill %s\">%s</span> ", ok ? "serving" : "bad",
			 ok ? "ok" : "failed");
		clock_utc(b, (uint64_t)(at * 1000), 0);
	}
	html_put(b, "</div><div id=\"live\" class=\"live\">JavaScript off: reload the page to "
		    "refresh</div></header>");
}

static void card(struct html_buf *b, const char *key, int warn)
{
	html_put(b, "<div class=\"card%s\"><div class=\"k\">%s</div><div class=\"v\">", warn ? " warn" : "",
		 key);
}

/* A card of a total, its rate now and its last minute (red: these are
 * clients or connects that failed). */
static void count_card(struct html_buf *b, const char *key, double total, const struct rate_view *rv,
		       int rates, enum rate_kind k)
{
	card(b, key, 0);
	html_count(b, total);
	html_put(b, "</div><div class=\"s\">");
	if (rates)
		html_rate(b, rv->now[k]);
	html_put(b, "%s</div>", rates ? " /s now" : "");
	chart_spark(b, rv->per_s[k], rv->n, RATE_POINTS, "red");
	html_put(b, "</div>");
}

/* The whole process: sums of the routes, with the last minute drawn. */
static void totals(struct page *p)
{
	const struct config *c = p->in->cfg;
	struct html_buf *b = p->b;
	double active = 0, sessions = 0, refused = 0, errors = 0, queued = 0, qto = 0;
	unsigned n = 0, up = 0, down = 0, held = 0;
	struct rate_view rv;
	int rates = !status_rates_route(NULL, &rv);

	for (unsigned i = 0; i < c->nroutes; i++) {
		const char *r = c->route[i]->name;
		double v;
		active += isnan(v = val(p, "splicer_route_sessions_active", r, NULL, NULL)) ? 0 : v;
		sessions += isnan(v = val(p, "splicer_route_sessions_total", r, NULL, NULL)) ? 0 : v;
		errors += isnan(v = val(p, "splicer_route_connect_errors_total", r, NULL, NULL)) ? 0 : v;
		queued += isnan(v = val(p, "splicer_route_queue_length", r, NULL, NULL)) ? 0 : v;
		qto += isnan(v = val(p, "splicer_route_queue_timeouts_total", r, NULL, NULL)) ? 0 : v;
		for (size_t k = 0; k < sizeof(refusals) / sizeof(refusals[0]); k++) {
			char rest[64];
			snprintf(rest, sizeof(rest), "reason=%s", refusals[k][0]);
			refused += isnan(v = val(p, "splicer_route_refused_total", r, NULL, rest)) ? 0 : v;
		}
		for (unsigned k = 0; k < c->route[i]->nbackend; k++) {
			n++;
			if (backend_admin(c->route[i], k))
				held++;
			else if (backend_is_up(c->route[i], k))
				up++;
			else
				down++;
		}
	}
	html_put(b, "<section class=\"cards\" id=\"totals\">");
	card(b, "Sessions now", 0);
	html_count(b, active);
	html_put(b, "</div><div class=\"s\">");
	html_count(b, sessions);
	html_put(b, " since the start</div></div>");

	card(b, "New sessions", 0);
	if (rates)
		html_rate(b, rv.now[RATE_SESSIONS]);
	else
		html_put(b, "\xe2\x80\x93");
	html_put(b, "<small> /s</small></div>");
	chart_spark(b, rv.per_s[RATE_SESSIONS], rv.n, RATE_POINTS, "");
	html_put(b, "</div>");

	card(b, "Traffic", 0);
	if (rates) {
		html_bytes(b, rv.now[RATE_BYTES_UP] + rv.now[RATE_BYTES_DOWN]);
		html_put(b, "<small>/s</small></div><div class=\"s\">\xe2\x86\x91 ");
		html_bytes(b, rv.now[RATE_BYTES_UP]);
		html_put(b, "/s \xc2\xb7 \xe2\x86\x93 ");
		html_bytes(b, rv.now[RATE_BYTES_DOWN]);
		html_put(b, "/s</div>");
	} else {
		html_put(b, "\xe2\x80\x93</div>");
	}
	{
		float sum[RATE_POINTS];
		for (unsigned i = 0; i < rv.n; i++)
			sum[i] = rv.per_s[RATE_BYTES_UP][i] + rv.per_s[RATE_BYTES_DOWN][i];
		chart_spark(b, sum, rv.n, RATE_POINTS, "green");
	}
	html_put(b, "</div>");

	card(b, "Backends up", down > 0);
	html_put(b, "%u<small> / %u</small></div><div class=\"s\">%u down \xc2\xb7 %u drained or "
		    "disabled</div></div>", up, n, down, held);

	count_card(b, "Refused by admission", refused, &rv, rates, RATE_REFUSED);
	count_card(b, "Connect errors", errors, &rv, rates, RATE_ERRORS);

	card(b, "Waiting for a slot", 0);
	html_count(b, queued);
	html_put(b, "</div><div class=\"s\">");
	html_count(b, qto);
	html_put(b, " timed out in the queue</div></div>");
	html_put(b, "</section>");
}

/* ---- listeners -------------------------------------------------------------- */

static void listeners(struct page *p)
{
	const struct config *c = p->in->cfg;
	struct html_buf *b = p->b;

	html_put(b, "<h2>Listeners</h2><div class=\"box\"><table id=\"listeners\"><tr><th>Address</th>"
		    "<th>Routes</th><th>Routing</th></tr>");
	for (unsigned k = 0; k < c->nlst; k++) {
		const struct listen_group *g = &c->lst[k];
		html_put(b, "<tr><td class=\"addr\">");
		html_text(b, g->addr->text);
		html_put(b, "</td><td>");
		for (unsigned j = 0; j < g->nroute; j++) {
			const struct route *r = g->route[j];
			html_put(b, "%s<a href=\"#route-", j ? ", " : "");
			html_text(b, r->name);
			html_put(b, "\">");
			html_text(b, r->name);
			html_put(b, "</a>");
			if (r->sni[0]) {
				html_put(b, " <span class=\"m\">(sni ");
				html_text(b, r->sni);
				html_put(b, ")</span>");
			} else if (g->hello) {
				html_put(b, " <span class=\"m\">(default)</span>");
			}
		}
		html_put(b, "</td><td class=\"m\">");
		if (g->hello)
			html_put(b, "by the ClientHello's server name%s", g->dflt ? "" : "; no default route");
		else
			html_put(b, "every client");
		html_put(b, "</td></tr>");
	}
	html_put(b, "</table></div>");
}

/* ---- a route ------------------------------------------------------------------ */

static void chip(struct html_buf *b, const char *fmt, const char *text)
{
	html_put(b, "<span class=\"chip\">%s", fmt);
	if (text)
		html_text(b, text);
	html_put(b, "</span>");
}

static void route_head(struct page *p, const struct route *r)
{
	struct html_buf *b = p->b;
	char t[96];

	html_put(b, "<header><h3>");
	html_text(b, r->name);
	html_put(b, "</h3>");
	for (unsigned i = 0; i < r->nlisten; i++)
		chip(b, "listen ", r->listen[i].text);
	chip(b, "", balance_names[r->o.balance]);
	chip(b, "engine ", engine_names[r->o.engine]);
	if (r->o.check) {
		snprintf(t, sizeof(t), "every %llu ms, rise %llu, fall %llu",
			 (unsigned long long)r->o.check_interval_ms, (unsigned long long)r->o.rise,
			 (unsigned long long)r->o.fall);
		chip(b, "checks ", t);
	} else {
		chip(b, "no health checks", NULL);
	}
	if (r->sni[0])
		chip(b, "sni ", r->sni);
	if (r->allow[0] || r->deny[0])
		chip(b, "source allow/deny", NULL);
	if (r->o.source_max_conns) {
		snprintf(t, sizeof(t), "%llu", (unsigned long long)r->o.source_max_conns);
		chip(b, "source_max_conns ", t);
	}
	if (r->o.source_conn_rate) {
		snprintf(t, sizeof(t), "%llu/s", (unsigned long long)r->o.source_conn_rate);
		chip(b, "source_conn_rate ", t);
	}
	if (r->has_queue) {
		snprintf(t, sizeof(t), "%llu ms", (unsigned long long)r->o.queue_timeout_ms);
		chip(b, "queue_timeout ", t);
	}
	html_put(b, "</header>");
}

/* One line of a route's figures: a label, a number (or bytes), and a
 * data-k naming what it is (tests and scripts read it). */
static void kv(struct page *p, const char *label, const char *key, double v, int as_bytes, int bad)
{
	html_put(p->b, "<tr><td>%s</td><td class=\"n%s\" data-k=\"%s\">", label,
		 bad && v > 0 ? " bad" : "", key);
	if (as_bytes)
		bytes(p, v);
	else
		num(p, v);
	html_put(p->b, "</td></tr>");
}

/* A column of a route's figures: its heading, its rate now and a minute
 * of it drawn (kind < 0: none), then kv() lines, closed by fig_end(). */
static void fig(struct page *p, const char *title, const struct rate_view *rv, int ok, int kind,
		int as_bytes, const char *cls)
{
	struct html_buf *b = p->b;

	html_put(b, "<div class=\"fig\"><div class=\"fh\">%s", title);
	if (kind >= 0) {
		html_put(b, "<span class=\"v\">");
		if (!ok)
			html_put(b, "\xe2\x80\x93");
		else if (as_bytes)
			html_bytes(b, rv->now[kind]);
		else
			html_rate(b, rv->now[kind]);
		html_put(b, "/s</span></div>");
		chart_spark(b, rv->per_s[kind], rv->n, RATE_POINTS, cls);
	} else {
		html_put(b, "</div><div class=\"nospark\"></div>"); /* the columns' lines level */
	}
	html_put(b, "<table class=\"kv\">");
}

static void fig_end(struct page *p)
{
	html_put(p->b, "</table></div>");
}

static void route_figures(struct page *p, const struct route *r)
{
	const char *n = r->name;
	double served = val(p, "splicer_route_queue_served_total", n, NULL, NULL);
	double wait = val(p, "splicer_route_queue_wait_seconds_total", n, NULL, NULL);
	struct rate_view rv;
	int ok = !status_rates_route(n, &rv);
	float sum[RATE_POINTS];

	/* the traffic's line: both directions */
	for (unsigned i = 0; i < rv.n; i++)
		sum[i] = rv.per_s[RATE_BYTES_UP][i] + rv.per_s[RATE_BYTES_DOWN][i];
	memcpy(rv.per_s[RATE_BYTES_UP], sum, sizeof(sum));
	rv.now[RATE_BYTES_UP] += rv.now[RATE_BYTES_DOWN];

	html_put(p->b, "<div class=\"figs\">");
	fig(p, "Sessions", &rv, ok, RATE_SESSIONS, 0, "");
	kv(p, "open now", "sessions_active", val(p, "splicer_route_sessions_active", n, NULL, NULL), 0, 0);
	kv(p, "since the start", "sessions_total", val(p, "splicer_route_sessions_total", n, NULL, NULL), 0, 0);
	fig_end(p);
	fig(p, "Traffic", &rv, ok, RATE_BYTES_UP, 1, "green");
	kv(p, "up (client to backend)", "bytes_up",
	   val(p, "splicer_route_bytes_total", n, NULL, "direction=up"), 1, 0);
	kv(p, "down", "bytes_down", val(p, "splicer_route_bytes_total", n, NULL, "direction=down"), 1, 0);
	fig_end(p);
	fig(p, "Backend errors", &rv, ok, RATE_ERRORS, 0, "red");
	kv(p, "failed connects", "connect_errors", val(p, "splicer_route_connect_errors_total", n, NULL, NULL), 0, 1);
	kv(p, "retries on another backend", "retries", val(p, "splicer_route_retries_total", n, NULL, NULL), 0, 0);
	kv(p, "closed: every backend failed", "no_backend", val(p, "splicer_route_no_backend_total", n, NULL, NULL), 0, 1);
	kv(p, "closed: every backend down", "all_backends_down",
	   val(p, "splicer_route_all_backends_down_total", n, NULL, NULL), 0, 1);
	if (r->o.on_backend_down == BACKEND_DOWN_CLOSE) {
		kv(p, "closed: their backend went down", "gone_down",
		   val(p, "splicer_route_backend_gone_closed_total", n, NULL, "cause=down"), 0, 1);
		kv(p, "closed: their backend was removed", "gone_removed",
		   val(p, "splicer_route_backend_gone_closed_total", n, NULL, "cause=removed"), 0, 1);
	}
	fig_end(p);
	fig(p, "Refused by admission", &rv, ok, RATE_REFUSED, 0, "red");
	for (size_t k = 0; k < sizeof(refusals) / sizeof(refusals[0]); k++) {
		char rest[64], key[64];
		snprintf(rest, sizeof(rest), "reason=%s", refusals[k][0]);
		snprintf(key, sizeof(key), "refused_%s", refusals[k][0]);
		kv(p, refusals[k][1], key, val(p, "splicer_route_refused_total", n, NULL, rest), 0, 1);
	}
	fig_end(p);
	fig(p, "Queue (maxconn)", &rv, ok, -1, 0, "");
	kv(p, "waiting now", "queue_length", val(p, "splicer_route_queue_length", n, NULL, NULL), 0, 0);
	kv(p, "served after waiting", "queue_served", served, 0, 0);
	kv(p, "timed out waiting", "queue_timeouts", val(p, "splicer_route_queue_timeouts_total", n, NULL, NULL), 0, 1);
	html_put(p->b, "<tr><td>mean wait</td><td class=\"n\" data-k=\"queue_wait_mean\">");
	if (served > 0 && !isnan(wait))
		html_seconds(p->b, wait / served);
	else
		html_put(p->b, "\xe2\x80\x93");
	html_put(p->b, "</td></tr>");
	fig_end(p);
	html_put(p->b, "</div>");
}

static enum chart_unit unit_of(const char *family)
{
	size_t n = strlen(family);

	if (n > 8 && !strcmp(family + n - 8, "_seconds"))
		return UNIT_SECONDS;
	if (strstr(family, "_bytes"))
		return UNIT_BYTES;
	return UNIT_COUNT;
}

/* "splicer_route_first_byte_seconds" + "direction=up" -> "first byte up" */
static void hist_title(char *out, size_t len, const char *family, const char *labels)
{
	const char *s = family;
	size_t n, k = 0;

	if (!strncmp(s, "splicer_route_", 14))
		s += 14;
	else if (!strncmp(s, "splicer_", 8))
		s += 8;
	n = strlen(s);
	if (n > 8 && !strcmp(s + n - 8, "_seconds"))
		n -= 8;
	for (size_t i = 0; i < n && k + 1 < len; i++)
		out[k++] = s[i] == '_' ? ' ' : s[i];
	/* the labels' values: "direction=up,x=y" -> " up y" */
	for (const char *l = labels; *l && k + 2 < len;) {
		const char *eq = strchr(l, '='), *end;
		if (!eq)
			break;
		end = strchr(eq, ',');
		if (!end)
			end = eq + strlen(eq);
		out[k++] = ' ';
		for (const char *v = eq + 1; v < end && k + 1 < len; v++)
			out[k++] = *v;
		l = *end ? end + 1 : end;
	}
	out[k] = '\0';
}

/* Every histogram family with samples of route r: one chart per label set
 * (the labels besides route and le), in /metrics's order. */
static void route_histograms(struct page *p, const struct route *r)
{
	html_put(p->b, "<div class=\"hists\">");
	for (unsigned fi = 0; fi < p->x.nf; fi++) {
		const struct mfamily *f = &p->x.f[fi];
		size_t fl = strlen(f->name);
		if (strcmp(f->type, "histogram") || !f->has_route)
			continue;
		struct chart_hist h = { 0 };
		char base[256] = "", title[160], sname[160];
		for (unsigned si = f->first; si <= f->first + f->n; si++) {
			const struct msample *s = si < f->first + f->n ? &p->x.s[si] : NULL;
			char sb[256];
			const char *le = NULL;
			if (s) {
				if (!s->route || strcmp(s->route, r->name) || strcmp(s->name + fl, "_bucket"))
					continue;
				/* the set's labels without le (stats_http.c writes le last) */
				const char *at = !strncmp(s->rest, "le=", 3) ? s->rest : strstr(s->rest, ",le=");
				if (!at)
					continue;
				le = at + (*at == ',' ? 4 : 3);
				snprintf(sb, sizeof(sb), "%.*s", (int)(at - s->rest), s->rest);
			}
			/* a new set (or the end): draw the one gathered */
			if (h.n && (!s || strcmp(sb, base))) {
				snprintf(sname, sizeof(sname), "%s_sum", f->name);
				h.sum = metrics_index_value(&p->x, sname, r->name, NULL, base, 0);
				snprintf(sname, sizeof(sname), "%s_count", f->name);
				h.count = metrics_index_value(&p->x, sname, r->name, NULL, base, h.cum[h.n - 1]);
				hist_title(title, sizeof(title), f->name, base);
				chart_histogram(p->b, &h, unit_of(f->name), title, f->name, base);
				h.n = 0;
			}
			if (!s)
				break;
			if (!h.n)
				snprintf(base, sizeof(base), "%s", sb);
			if (h.n < CHART_BUCKETS_MAX) {
				h.le[h.n] = !strcmp(le, "+Inf") ? INFINITY : strtod(le, NULL);
				h.cum[h.n++] = s->v;
			}
		}
	}
	html_put(p->b, "</div>");
}

static const char *state_of(const struct route *r, unsigned i, double up)
{
	switch (backend_admin(r, i)) {
	case BACKEND_DRAIN:
		return "drain";
	case BACKEND_DISABLED:
		return "disabled";
	}
	if (!isnan(up))
		return up > 0 ? "up" : "down";
	return backend_is_up(r, i) ? "up" : "down";
}

/* The health column: the last checks as a strip, and the last change. */
static void health_cell(struct page *p, const struct route *r, unsigned i)
{
	struct html_buf *b = p->b;
	struct backend_history h;

	backend_history(r, i, &h);
	html_put(b, "<td><div class=\"hc\"");
	if (h.nevents) {
		html_put(b, " title=\"");
		for (unsigned k = 0; k < h.nevents; k++) {
			html_put(b, "%s%s at ", k ? "&#10;" : "", h.event_down[k] ? "down" : "up");
			clock_utc(b, h.event_ms[k], 1);
		}
		html_put(b, "\"");
	}
	html_put(b, ">");
	if (r->o.check)
		chart_strip(b, h.checks, h.nchecks, 48);
	html_put(b, "<span class=\"m\" data-k=\"last_change\">");
	if (h.nevents) {
		html_put(b, "%s ", h.event_down[0] ? "down" : "up");
		html_age(b, p->in->now_ms > h.event_ms[0] ? p->in->now_ms - h.event_ms[0] : 0);
		html_put(b, " ago");
	} else {
		html_put(b, r->o.check ? "no change since the start" : "checks off");
	}
	html_put(b, "</span></div></td>");
}

static void backend_row(struct page *p, const struct route *r, unsigned i)
{
	struct html_buf *b = p->b;
	const struct backend_conf *bc = &r->backend[i];
	const char *rn = r->name, *a = bc->addr.text;
	double up = val(p, "splicer_backend_up", rn, a, NULL);
	double act = val(p, "splicer_backend_sessions_active", rn, a, NULL);
	double ok = val(p, "splicer_backend_checks_total", rn, a, "result=ok");
	double bad = val(p, "splicer_backend_checks_total", rn, a, "result=failed");
	double backup = val(p, "splicer_backend_backup", rn, a, NULL);
	double ramp = val(p, "splicer_backend_slowstart_ratio", rn, a, NULL);
	const char *state = state_of(r, i, up);
	unsigned w = backend_weight(r, i);
	double rate[RATE_BACKEND_KINDS];
	int rates = !status_rates_backend(rn, i, a, rate);

	html_put(b, "<tr class=\"be\" data-backend=\"");
	html_text(b, a);
	html_put(b, "\" data-state=\"%s\"><td><span class=\"addr\">", state);
	html_text(b, a);
	html_put(b, "</span>");
	if (backup > 0)
		html_put(b, " <span class=\"chip\" data-k=\"backup\">backup</span>");
	if (bc->spec[0] && strcmp(bc->spec, a)) {
		html_put(b, "<br><span class=\"m\">");
		html_text(b, bc->spec);
		html_put(b, "</span>");
	}
	html_put(b, "</td><td><span class=\"st %s\" data-k=\"state\">%s</span>", state, state);
	if (backend_admin(r, i) && !backend_is_up(r, i))
		html_put(b, " <span class=\"m\">(down)</span>");
	html_put(b, "</td><td class=\"n\" data-k=\"weight\">%u", w);
	if (w != bc->weight)
		html_put(b, " <span class=\"m\">(file %u)</span>", bc->weight);
	if (!isnan(ramp) && ramp < 1)
		html_put(b, "<br><span class=\"m\" data-k=\"slowstart\">slowstart %.0f%%</span>",
			 ramp * 100);
	html_put(b, "</td><td class=\"n%s\" data-k=\"sessions_active\">",
		 bc->maxconn && act >= bc->maxconn ? " full" : "");
	num(p, act);
	if (bc->maxconn)
		html_put(b, "<span class=\"m\"> / %u</span>", bc->maxconn);
	html_put(b, "</td><td class=\"n\" data-k=\"sessions_total\">");
	num(p, val(p, "splicer_backend_sessions_total", rn, a, NULL));
	html_put(b, "</td><td class=\"n\" data-k=\"session_rate\">");
	if (rates)
		html_rate(b, rate[RATE_SESSIONS]);
	else
		html_put(b, "\xe2\x80\x93");
	html_put(b, "</td><td class=\"n\" data-k=\"bytes_up\">");
	bytes(p, val(p, "splicer_backend_bytes_total", rn, a, "direction=up"));
	html_put(b, "</td><td class=\"n\" data-k=\"bytes_down\">");
	bytes(p, val(p, "splicer_backend_bytes_total", rn, a, "direction=down"));
	html_put(b, "</td><td class=\"n\" data-k=\"connect_errors\">");
	num(p, val(p, "splicer_backend_connect_errors_total", rn, a, NULL));
	html_put(b, "</td><td class=\"n\" data-k=\"checks\">");
	if (r->o.check) {
		num(p, ok);
		html_put(b, "<span class=\"m\"> / </span><span%s>", bad > 0 ? " class=\"full\"" : "");
		num(p, bad);
		html_put(b, "</span>");
	} else {
		html_put(b, "<span class=\"z\">\xe2\x80\x93</span>");
	}
	html_put(b, "</td>");
	health_cell(p, r, i);
	html_put(b, "</tr>");
}

static void route_backends(struct page *p, const struct route *r)
{
	struct html_buf *b = p->b;
	unsigned shown = 0;

	html_put(b, "<table class=\"bt\"><tr><th>Backend</th><th>State</th><th class=\"n\">Weight</th>"
		    "<th class=\"n\">Open / maxconn</th><th class=\"n\">Sessions</th>"
		    "<th class=\"n\">Per second</th><th class=\"n\">Bytes up</th><th class=\"n\">Bytes down</th>"
		    "<th class=\"n\">Connect errors</th><th class=\"n\">Checks ok / failed</th>"
		    "<th>Health: the last checks, newest right</th></tr>");
	for (unsigned i = 0; i < r->nbackend && !b->full; i++) {
		if (p->rows >= STATUS_BACKEND_ROWS)
			break;
		p->rows++;
		shown++;
		backend_row(p, r, i);
	}
	if (!r->nbackend)
		html_put(b, "<tr><td colspan=\"11\" class=\"m\">no backend (a resolve= name without an "
			    "address yet)</td></tr>");
	html_put(b, "</table>");
	if (shown < r->nbackend)
		html_put(b, "<p class=\"note\">%u more backends of this route are not shown (the page "
			    "shows %u at most): see /metrics or <code>splicer ctl show backends</code>.</p>",
			 r->nbackend - shown, STATUS_BACKEND_ROWS);
}

/* A sample's labels for people: backend first, then the rest (k=v, ...). */
static void labels_cell(struct html_buf *b, const struct msample *s)
{
	html_put(b, "<td class=\"m\">");
	if (s->backend) {
		html_put(b, "backend=");
		html_text(b, s->backend);
		if (s->rest[0])
			html_put(b, ", ");
	}
	html_text(b, s->rest);
	html_put(b, "</td>");
}

/* The families of route r the page has no place for, as they come. */
static void route_more(struct page *p, const struct route *r, unsigned idx)
{
	struct html_buf *b = p->b;
	unsigned rows = 0, left = 0;

	for (unsigned fi = 0; fi < p->x.nf; fi++) {
		const struct mfamily *f = &p->x.f[fi];
		if (!f->has_route || is_laid_out(f))
			continue;
		for (unsigned si = f->first; si < f->first + f->n; si++) {
			const struct msample *s = &p->x.s[si];
			if (!s->route || strcmp(s->route, r->name))
				continue;
			if (rows >= STATUS_MORE_ROWS || p->more >= STATUS_MORE_PAGE_ROWS) {
				left++;
				continue;
			}
			p->more++;
			if (!rows++)
				html_put(b, "<details id=\"more-%u\"><summary>More counters of this route"
					    "</summary><table>", idx);
			html_put(b, "<tr title=\"");
			html_text(b, f->help);
			html_put(b, "\"><td>");
			html_text(b, f->name);
			html_put(b, "</td>");
			labels_cell(b, s);
			html_put(b, "<td class=\"n\">");
			html_count(b, s->v);
			html_put(b, "</td></tr>");
		}
	}
	if (rows)
		html_put(b, "</table>%s</details>", left ? "<p class=\"note\">(more: see /metrics)</p>" : "");
}

static void route_card(struct page *p, const struct route *r, unsigned idx)
{
	struct html_buf *b = p->b;

	html_put(b, "<article class=\"route\" id=\"route-");
	html_text(b, r->name);
	html_put(b, "\" data-route=\"");
	html_text(b, r->name);
	html_put(b, "\">");
	route_head(p, r);
	route_figures(p, r);
	route_histograms(p, r);
	route_backends(p, r);
	route_more(p, r, idx);
	html_put(b, "</article>");
}

/* ---- the process ------------------------------------------------------------- */

/* The name people read: without the common prefix. */
static const char *short_name(const char *family)
{
	return strncmp(family, "splicer_", 8) ? family : family + 8;
}

/* Every family without a route label that the page has no place for, as
 * it comes: one line for a lone sample, else its name and a line per
 * label set; its help as its title. */
static void process(struct page *p)
{
	struct html_buf *b = p->b;
	unsigned rows = 0;

	html_put(b, "<h2>Process</h2><div class=\"box proc\" id=\"process\">");
	for (unsigned fi = 0; fi < p->x.nf && rows < STATUS_MORE_ROWS; fi++) {
		const struct mfamily *f = &p->x.f[fi];
		const struct msample *s0 = &p->x.s[f->first];
		if (f->has_route || is_laid_out(f) || !f->n)
			continue;
		int one = f->n == 1 && !s0->backend && !s0->rest[0];
		html_put(b, "<div class=\"pf%s\" title=\"", one ? " one" : "");
		html_text(b, f->name);
		html_put(b, " (%s): ", f->type);
		html_text(b, f->help);
		html_put(b, "\" data-family=\"");
		html_text(b, f->name);
		html_put(b, "\">");
		if (!one) {
			html_put(b, "<div class=\"pn\">");
			html_text(b, short_name(f->name));
			html_put(b, "</div>");
		}
		for (unsigned si = f->first; si < f->first + f->n && rows < STATUS_MORE_ROWS; si++, rows++) {
			const struct msample *s = &p->x.s[si];
			html_put(b, "<div class=\"pl\"><span>");
			if (one) {
				html_text(b, short_name(f->name));
			} else {
				if (s->backend) {
					html_put(b, "backend=");
					html_text(b, s->backend);
					html_put(b, s->rest[0] ? ", " : "");
				}
				html_text(b, s->rest[0] || s->backend ? s->rest : "(no labels)");
			}
			html_put(b, "</span><b>");
			html_count(b, s->v);
			html_put(b, "</b></div>");
		}
		html_put(b, "</div>");
	}
	html_put(b, "</div>");
}

int status_page_render(const struct status_input *in, struct html_buf *out)
{
	struct page p = { .in = in, .b = out };
	const struct config *c = in->cfg;

	if (metrics_index_parse(in->metrics, in->metrics_len, &p.x))
		return -ENOMEM;
	html_put(out, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
		      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
		      "<link rel=\"icon\" href=\"data:,\"><title>splicer \xc2\xb7 ");
	html_text(out, in->host);
	html_put(out, "</title><style nonce=\"");
	html_text(out, in->nonce);
	html_put(out, "\">%s</style></head><body data-refresh=\"%u\" data-refreshes=\"0\">", style,
		 in->refresh_s);
	top(&p);
	html_put(out, "<main id=\"main\" data-seq=\"%llu\" data-generated=\"%llu\">",
		 (unsigned long long)in->seq, (unsigned long long)in->now_ms);
	totals(&p);
	listeners(&p);
	html_put(out, "<h2>Routes</h2>");
	for (unsigned i = 0; i < c->nroutes && !out->full; i++)
		route_card(&p, c->route[i], i);
	process(&p);
	html_put(out, "<footer>Page %llu, drawn at ", (unsigned long long)in->seq);
	clock_utc(out, in->now_ms, 1);
	html_put(out, " \xc2\xb7 the same numbers as <a href=\"/metrics\">/metrics</a> \xc2\xb7 "
		      "<a href=\"/health\">/health</a></footer></main><script nonce=\"");
	html_text(out, in->nonce);
	html_put(out, "\">%s</script></body></html>\n", script);
	metrics_index_free(&p.x);
	return out->full == HTML_NOMEM ? -ENOMEM : out->full ? -EFBIG : 0;
}
