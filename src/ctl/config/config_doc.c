/* SPDX-License-Identifier: MIT */
/* config_doc: see config_doc.h. One description per key (struct key_doc),
 * filled from the settings table or, for the keys the file reader handles
 * itself, from the limits in config.h; two renderers, markdown and roff. */
#define _GNU_SOURCE
#include "config_doc.h"
#include "config.h"
#include "config_table.h"
#include "engine.h"

#include <stdio.h>
#include <string.h>

#include "units.h"

struct key_doc {
	char key[48];             /* as a file spells it: '_' */
	const char *meta;         /* the value's placeholder: NAME, SIZE, ... */
	enum { K_GLOBAL, K_ROUTE, K_ROUTE_ONLY } scope; /* K_ROUTE: [global] too, for every route */
	const char *type;
	char accepts[512];
	const char *def;          /* NULL: none (the key is required or repeatable) */
	char cli[64];             /* "-e, --engine"; "" when none */
	char example[160];        /* a whole line: "engine = splice" */
	const char *help;
};

/* An example value per setting, checked against the setting's own parser
 * (a row added without one shows its default). */
static const struct {
	const char *name, *value;
} examples[] = {
	{ "engine", "splice" },          { "balance", "leastconn" },
	{ "workers", "4" },              { "buffer-size", "128k" },
	{ "pipe-size", "256k" },         { "lowat", "64k" },
	{ "busy-poll", "50" },           { "max-pipes", "20000" },
	{ "max-conns", "10000" },        { "connect-timeout", "3s" },
	{ "idle-timeout", "5m" },        { "half-close-timeout", "5m" },
	{ "log", "/var/log/splicer/access.log" },
	{ "log-interval", "1m" },        { "log-connect", "yes" },
	{ "proxy-protocol", "v2" },      { "accept-proxy", "yes" },
	{ "proxy-timeout", "5s" },       { "check", "http:GET /health 2xx" },
	{ "check-interval", "5s" },      { "check-timeout", "500ms" },
	{ "rise", "2" },                 { "fall", "3" },
	{ "stats", "127.0.0.1:9180" },   { "user", "splicer" },
	{ "verbose", "1" },              { "drain-timeout", "1m" },
	{ "source-max-conns", "100" },   { "source-conn-rate", "20" },
	{ "source-table-size", "200000" }, { "tls-hello-timeout", "3s" },
	{ "tls-hello-max", "32k" },      { "queue-timeout", "10s" },
	{ "max-session-time", "1h" },    { "max-session-jitter", "10%" },
	{ "drain-spread", "no" },        { "upgrade-sessions", "drain" },
	{ "client-keepalive", "60s,10s,5" },
	{ "backend-keepalive", "30s,5s,3" }, { "client-user-timeout", "30s" },
	{ "backend-user-timeout", "10s" }, { "source", "10.0.0.5 10.0.0.6" },
	{ "mptcp", "listen" },           { "fastopen", "listen" },
	{ "mark", "0x2a" },              { "tos", "0x10" },
	{ "defer-accept", "5s" },        { "interface", "vrf-blue" },
	{ "backlog", "16384" },          { "rate-limit-up", "100mbit" },
	{ "rate-limit-down", "20mbit/source" },
	{ "on-backend-down", "close" },  { "slowstart", "30s" },
};

static const char *example_of(const struct setting *s)
{
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++)
		if (!strcmp(examples[i].name, s->name))
			return examples[i].value;
	return s->def;
}

static void file_key(const char *name, char *buf, size_t len)
{
	size_t n = 0;

	for (; *name && n + 1 < len; name++)
		buf[n++] = *name == '-' ? '_' : *name;
	buf[n] = '\0';
}

/* "auto, copy, splice": the choices a user may write (test-* are for the suite). */
static void choices_text(const char *const *ch, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (; *ch && n < len; ch++)
		if (strncmp(*ch, "test-", 5))
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", *ch);
}

/* Fills d from s. Returns 0, or -1 (said on stderr) when the example does
 * not parse: a reference whose example the proxy refuses is worse than none. */
static int setting_doc(const struct setting *s, struct key_doc *d)
{
	char lo[32], hi[32], why[256], forms[256];
	union {
		uint64_t v;
		char text[SETTING_TEXT_MAX];
	} scratch;
	const char *ex = example_of(s);

	memset(d, 0, sizeof(*d));
	file_key(s->name, d->key, sizeof(d->key));
	d->scope = s->scope == SCOPE_ROUTE ? K_ROUTE : K_GLOBAL;
	d->def = s->def;
	d->help = s->help;
	switch (s->type) {
	case SET_ENUM:
		d->meta = "NAME";
		d->type = "choice";
		choices_text(s->choices, d->accepts, sizeof(d->accepts));
		break;
	case SET_SIZE:
		d->meta = "SIZE";
		d->type = "size";
		format_size(s->min, lo, sizeof(lo));
		format_size(s->max, hi, sizeof(hi));
		snprintf(d->accepts, sizeof(d->accepts),
			 "%s to %s%s; bytes, or with a suffix k, m or g (powers of 1024)", lo, hi,
			 s->flags & SET_ZERO_OK ? ", or 0" : "");
		break;
	case SET_DURATION:
		d->meta = "DURATION";
		d->type = "duration";
		format_duration_ms(s->min, lo, sizeof(lo));
		format_duration_ms(s->max, hi, sizeof(hi));
		snprintf(d->accepts, sizeof(d->accepts),
			 "%s to %s; always write the unit: ms, s, m or h (30s, 500ms)", lo, hi);
		break;
	case SET_UINT:
		d->meta = "N";
		d->type = "integer";
		snprintf(d->accepts, sizeof(d->accepts), "%llu to %llu%s", (unsigned long long)s->min,
			 (unsigned long long)s->max, s->flags & SET_AUTO_OK ? ", or auto" : "");
		break;
	case SET_TEXT:
		d->meta = "WHERE";
		d->type = "text";
		snprintf(forms, sizeof(forms), "%s", s->choices ? s->choices[0] : "text");
		for (char *p = forms; *p; p++)
			if (*p == '|')
				*p = ',';
		snprintf(d->accepts, sizeof(d->accepts), "one of: %s", forms);
		if (setting_kind(s)) {
			d->meta = setting_kind(s)->meta;
			d->type = setting_kind(s)->type;
			snprintf(d->accepts, sizeof(d->accepts), "%s", setting_kind(s)->accepts);
		}
		break;
	case SET_CUSTOM:
		d->meta = setting_kind(s)->meta;
		d->type = setting_kind(s)->type;
		snprintf(d->accepts, sizeof(d->accepts), "%s", setting_kind(s)->accepts);
		break;
	}
	if (s->short_opt)
		snprintf(d->cli, sizeof(d->cli), "-%c, --%s", s->short_opt, s->name);
	else
		snprintf(d->cli, sizeof(d->cli), "--%s", s->name);
	snprintf(d->example, sizeof(d->example), "%s = %s", d->key, ex);
	if (setting_parse(s, ex, &scratch, why, sizeof(why))) {
		fprintf(stderr, "config-reference: the example for '%s' does not parse: %s\n", s->name,
			why);
		return -1;
	}
	return 0;
}

/* The help's first letter capitalized: it starts a sentence here. */
static int cap(char c)
{
	return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

/* The keys config_file.c reads itself, only in a route. Their limits come
 * from config.h (accepts takes two of them). */
static const struct {
	const char *key, *meta, *accepts, *cli, *example, *help;
	int n1, n2;
	const char *type, *def; /* NULL: "addresses", required */
} route_only[] = {
	{ "listen", "ADDRESS ...",
	  "one or more addresses, separated by spaces or commas, or systemd:NAME (the sockets "
	  "systemd passed under that FileDescriptorName=: socket activation); the line may be "
	  "repeated; at most %d per route and %d in all routes",
	  "-l, --listen (one route only)", "listen = :8080 [::]:8080",
	  "where the route accepts clients; required (routes with sni may share one). An address "
	  "equal to a socket systemd passed takes that socket instead of binding", MAX_LISTENS,
	  MAX_LISTENERS, NULL, NULL },
	{ "backend", "ADDRESS [weight=N] [maxconn=N] [backup] [source=ADDR|client] [resolve=DURATION [srv]] ...",
	  "one or more addresses, separated by spaces or commas, each optionally followed by "
	  "weight=N (1 to %d, default 1), maxconn=N (1 to 10000000, default no limit), backup, "
	  "source=ADDR or source=client (this backend's connections come from that address, or "
	  "from the client's own: the route's `source` for one backend) and, for a "
	  "host name, resolve=DURATION (1s to 24h: looked up again at that interval) with srv "
	  "(the name is an SRV name, without a port); the line may be repeated; at most %d per "
	  "route",
	  "-b, --backend (one route only; weight 1)",
	  "backend = 10.0.0.1:80 weight=3 maxconn=200 10.0.0.2:80 10.0.0.9:80 backup",
	  "the route's backend pool; required. A weight is the backend's share of new sessions "
	  "under roundrobin, leastconn and maglev alike. maxconn caps the backend's sessions: when "
	  "every usable backend is at its cap, clients wait in the route's queue (queue_timeout). "
	  "A backup takes sessions only while no other backend (a primary) is usable (up, not "
	  "drained or disabled): the first usable backup in the file's order takes them all, the "
	  "next one only while it is down too. At least one backend of a route must be a primary. "
	  "A backend may not be its route's own listen address: its sessions would connect back to "
	  "the proxy", MAX_WEIGHT, MAX_BACKENDS, NULL, NULL },
	{ "sni", "NAME ...",
	  "host names or *.wildcards (one or more labels), case-insensitive, separated by spaces or "
	  "commas; the line may be repeated",
	  "none (config file only)", "sni = a.example.com *.a.example.com",
	  "TLS routing: this route takes the clients whose ClientHello names one of these (an "
	  "exact name before a wildcard, a longer wildcard before a shorter). Routes may then share "
	  "a listen address; the one without sni takes everyone else", 0, 0, "names",
	  "none (every client of its listeners)" },
	{ "alpn", "PROTOCOL ...",
	  "ALPN protocol names (1 to 255 bytes), separated by spaces or commas",
	  "none (config file only)", "alpn = h2",
	  "with sni (without it, an error): the client must also offer one of these protocols, or "
	  "the next route giving the name (file order) or else the listener's default takes it, "
	  "not a wildcard route that also matches the name", 0, 0, "protocols",
	  "none (any)" },
	{ "allow", "RANGE ...",
	  "address ranges (10.0.0.0/8, 2001:db8::/32, a single address), separated by spaces or "
	  "commas; the line may be repeated",
	  "none (config file only)", "allow = 10.0.0.0/8 2001:db8::/32",
	  "only clients in these ranges get in (others are reset at once and counted)", 0, 0,
	  "ranges", "none (every source)" },
	{ "deny", "RANGE ...",
	  "address ranges as for allow",
	  "none (config file only)", "deny = 10.9.0.0/16",
	  "clients in these ranges are reset at once and counted; deny wins over allow", 0, 0,
	  "ranges", "none" },
};
#define NROUTE_ONLY (sizeof(route_only) / sizeof(route_only[0]))

static void route_only_doc(unsigned i, struct key_doc *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->key, sizeof(d->key), "%s", route_only[i].key);
	d->meta = route_only[i].meta;
	d->scope = K_ROUTE_ONLY;
	d->type = route_only[i].type ? route_only[i].type : "addresses";
	d->def = route_only[i].def;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(d->accepts, sizeof(d->accepts), route_only[i].accepts, route_only[i].n1,
		 route_only[i].n2);
#pragma GCC diagnostic pop
	snprintf(d->cli, sizeof(d->cli), "%s", route_only[i].cli);
	snprintf(d->example, sizeof(d->example), "%s", route_only[i].example);
	d->help = route_only[i].help;
}

void config_doc_help_route_keys(FILE *f, int indent, int width)
{
	for (unsigned i = 0; i < NROUTE_ONLY; i++) {
		int col = fprintf(f, "%*s%s =", indent, "", route_only[i].key), wrap = col + 1;
		for (const char *w = route_only[i].meta; *w;) {
			/* a bracketed option stays whole: "[resolve=DURATION [srv]]" */
			int len = 0, depth = 0;
			while (w[len] && (w[len] != ' ' || depth)) {
				depth += (w[len] == '[') - (w[len] == ']');
				len++;
			}
			if (col + 1 + len > width)
				col = fprintf(f, "\n%*s", wrap, "") - 1;
			else
				col += fprintf(f, " ");
			col += fprintf(f, "%.*s", len, w);
			w += len + (w[len] == ' ');
		}
		fprintf(f, "\n");
	}
}

/* ---- markdown ----------------------------------------------------------- */

static void md_key(FILE *f, const struct key_doc *d, const struct setting *s)
{
	static const char *const scopes[] = {
		[K_GLOBAL] = "`[global]` only",
		[K_ROUTE] = "route (`[route NAME]`, or `[global]` for every route that does not set it)",
		[K_ROUTE_ONLY] = "`[route NAME]` only",
	};

	fprintf(f, "### `%s`\n\n", d->key);
	fprintf(f, "- Scope: %s\n", scopes[d->scope]);
	fprintf(f, "- Type: %s; %s\n", d->type, d->accepts);
	fprintf(f, "- Default: %s%s%s\n", d->def ? "`" : "", d->def ? d->def : "none", d->def ? "`" : "");
	fprintf(f, "- Command line: `%s`\n", d->cli);
	fprintf(f, "- Example: `%s`\n\n", d->example);
	fprintf(f, "%c%s.\n\n", cap(d->help[0]), d->help + 1);
	if (!s || s->choices != engine_names)
		return;
	for (const struct engine_choice_doc *ch = engine_docs; ch->name; ch++) {
		if (ch->hidden)
			continue;
		fprintf(f, "- `%s`: %s", ch->name, ch->help);
		if (ch->fallback)
			fprintf(f, "; falls back to `%s` where it cannot run", ch->fallback);
		fprintf(f, "\n");
	}
	fprintf(f, "\n");
}

static void md_row(FILE *f, const struct key_doc *d)
{
	fprintf(f, "| [`%s`](#%s) | %s | %s | %s%s%s |\n", d->key, d->key, d->scope == K_GLOBAL ? "global" : "route",
		d->type, d->def ? "`" : "", d->def ? d->def : "(required)", d->def ? "`" : "");
}

int config_doc_markdown(FILE *f)
{
	struct key_doc d;
	int bad = 0;

	fprintf(f, "## Sections\n\n"
		   "| section | holds |\n|---|---|\n"
		   "| `[global]` | the global keys, and route keys as defaults for every route |\n"
		   "| `[route NAME]` | one route: `listen`, `backend` and the route keys. NAME: letters, "
		   "digits, `-`, `_`, `.`; at most %d characters; at most %d routes |\n\n",
		ROUTE_NAME_MAX - 1, MAX_ROUTES);
	fprintf(f, "## Keys at a glance\n\n| key | scope | type | default |\n|---|---|---|---|\n");
	for (unsigned i = 0; i < NROUTE_ONLY; i++) {
		route_only_doc(i, &d);
		md_row(f, &d);
	}
	for (int pass = 1; pass >= 0; pass--)
		for (unsigned i = 0; i < nsettings; i++)
			if ((settings[i].scope == SCOPE_ROUTE) == pass) {
				bad |= setting_doc(&settings[i], &d);
				md_row(f, &d);
			}
	fprintf(f, "\n## Route keys\n\n");
	for (unsigned i = 0; i < NROUTE_ONLY; i++) {
		route_only_doc(i, &d);
		md_key(f, &d, NULL);
	}
	for (unsigned i = 0; i < nsettings; i++)
		if (settings[i].scope == SCOPE_ROUTE && !setting_doc(&settings[i], &d))
			md_key(f, &d, &settings[i]);
	fprintf(f, "## Global keys\n\n");
	for (unsigned i = 0; i < nsettings; i++)
		if (settings[i].scope == SCOPE_GLOBAL && !setting_doc(&settings[i], &d))
			md_key(f, &d, &settings[i]);
	return bad ? -1 : 0;
}

/* ---- roff --------------------------------------------------------------- */

/* Text for a roff line: '-' as \-, '\' as \e, and a leading '.' or '\''
 * (a request) made text. */
static void roff(FILE *f, const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", f);
	for (; *s; s++) {
		if (*s == '-')
			fputs("\\-", f);
		else if (*s == '\\')
			fputs("\\e", f);
		else
			fputc(*s, f);
	}
}

static void man_key(FILE *f, const struct key_doc *d, const struct setting *s)
{
	static const char *const scopes[] = {
		[K_GLOBAL] = "[global] only",
		[K_ROUTE] = "route, or [global] for every route",
		[K_ROUTE_ONLY] = "[route NAME] only",
	};

	fprintf(f, ".TP\n.BI \"");
	roff(f, d->key);
	fprintf(f, " = \" \"");
	roff(f, d->meta);
	fprintf(f, "\"\n%c", cap(d->help[0]));
	roff(f, d->help + 1);
	fprintf(f, ".\n.RS\n.PD 0\n.TP 10\nType:\n%s; ", d->type);
	roff(f, d->accepts);
	fprintf(f, ".\n.TP\nDefault:\n");
	roff(f, d->def ? d->def : "none");
	fprintf(f, "\n.TP\nScope:\n%s\n.TP\nOption:\n", scopes[d->scope]);
	roff(f, d->cli);
	fprintf(f, "\n.TP\nExample:\n");
	roff(f, d->example);
	fprintf(f, "\n.PD\n.RE\n");
	if (!s || s->choices != engine_names)
		return;
	fprintf(f, ".RS\n");
	for (const struct engine_choice_doc *ch = engine_docs; ch->name; ch++) {
		if (ch->hidden)
			continue;
		fprintf(f, ".TP 10\n.B ");
		roff(f, ch->name);
		fprintf(f, "\n");
		roff(f, ch->help);
		if (ch->fallback) {
			fprintf(f, ";\nfalls back to ");
			roff(f, ch->fallback);
			fprintf(f, " where it cannot run");
		}
		fprintf(f, "\n");
	}
	fprintf(f, ".RE\n");
}

int config_doc_man(FILE *f)
{
	struct key_doc d;
	int bad = 0;

	fprintf(f, ".SS Keys of a [route NAME] section\n"
		   "Route keys set in\n.B [global]\napply to every route that does not set them.\n"
		   "A route name is letters, digits, \\-, _ and ., at most %d characters;\n"
		   "at most %d routes.\n", ROUTE_NAME_MAX - 1, MAX_ROUTES);
	for (unsigned i = 0; i < NROUTE_ONLY; i++) {
		route_only_doc(i, &d);
		man_key(f, &d, NULL);
	}
	for (unsigned i = 0; i < nsettings; i++)
		if (settings[i].scope == SCOPE_ROUTE) {
			bad |= setting_doc(&settings[i], &d);
			man_key(f, &d, &settings[i]);
		}
	fprintf(f, ".SS Keys of the [global] section only\n");
	for (unsigned i = 0; i < nsettings; i++)
		if (settings[i].scope == SCOPE_GLOBAL) {
			bad |= setting_doc(&settings[i], &d);
			man_key(f, &d, &settings[i]);
		}
	return bad ? -1 : 0;
}

int cmd_config_reference(int argc, char **argv)
{
	int man = argc > 2 && !strcmp(argv[2], "--man");

	if (argc > 3 || (argc == 3 && !man)) {
		fprintf(stderr, "usage: %s config-reference [--man]\n", argv[0]);
		return 2;
	}
	if (man ? config_doc_man(stdout) : config_doc_markdown(stdout))
		return 1;
	return fflush(stdout) ? 1 : 0;
}
