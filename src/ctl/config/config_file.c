/* SPDX-License-Identifier: MIT */
/* config_file: reads the INI config with libinih into struct config.
 *
 *   [global]
 *   workers = 2
 *   [route web]
 *   listen = :8080 [::]:8080
 *   backend = 10.0.0.1:80 weight=3 10.0.0.2:80
 *   balance = leastconn
 *
 * libinih does not tell its handler the line number, and skips sections
 * that hold no key; so the reader below counts lines and opens sections
 * itself, and the handler only sees keys. Every problem is printed as
 * FILE:LINE: message and reading goes on, so `splicer check` lists them all.
 *
 * Addresses are resolved as they are read: a name in listen or backend
 * stands for every address it resolves to then (a listener each; a backend
 * each, with the line's weight), and `*:port` for 0.0.0.0 and [::]. The file
 * is read at start, at every reload (SIGHUP) and by `check`: a name whose
 * addresses changed takes the new ones at the next reload, not before;
 * unless the backend line says resolve=DURATION: then the name is kept, and
 * the resolver thread (dns.c) gives its addresses and follows their changes.
 *
 * `include = PATTERN` reads other files where it stands (include() below),
 * each with a file_ctx of its own, so its problems name it and its lines;
 * what a file sets keeps its location (CONF_LOC: the file's index in the
 * config, and the line), so problems found later name the file too. Every
 * value has its ${VAR} and ${VAR:-default} expanded (config_env.h) before
 * it is read; `listen = systemd:NAME` is a socket systemd passed
 * (activation.h). */
#define _GNU_SOURCE
#include "activation.h"
#include "config.h"
#include "config_env.h"
#include "config_listen.h"
#include "config_sockopt.h"
#include "config_table.h"
#include "route_keys.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "units.h"

struct file_ctx {
	struct config *c;
	const char *path;
	FILE *f;
	unsigned line;           /* of the line inih is handling */
	unsigned file;           /* its index in c->incl; 0: the main file (CONF_LOC) */
	unsigned depth;          /* includes between the main file and this one */
	const struct file_ctx *parent; /* the file whose include reads this one */
	dev_t dev;               /* the file's identity, for include loops */
	ino_t ino;
	int errors;
	int binary;              /* a NUL or control byte was met: stop */
	enum { SEC_NONE, SEC_GLOBAL, SEC_ROUTE, SEC_BAD } sec;
	struct route *route;     /* SEC_ROUTE */
	unsigned key_line[SETTINGS_MAX]; /* per setting: where this section set it (duplicates) */
};

static void problem(struct file_ctx *x, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%u: ", x->path, x->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	x->errors++;
}

/* Where the line inih is handling is, as routes and settings keep it. */
static unsigned loc(const struct file_ctx *x)
{
	return CONF_LOC(x->file, x->line);
}

static int valid_route_name(const char *s)
{
	if (!*s || strlen(s) >= ROUTE_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-_.", *s))
			return 0;
	return 1;
}

/* A "[...]" line: opens the section (also when it will hold no key).
 * Returns -1 for a header without its ']', which it reports. */
static int open_section(struct file_ctx *x, const char *line)
{
	char text[256], *end, *name;

	snprintf(text, sizeof(text), "%s", line); /* inih parses the line after us */
	end = strchr(text, ']');
	memset(x->key_line, 0, sizeof(x->key_line));
	x->route = NULL;
	x->sec = SEC_BAD;
	if (!end) {
		text[strcspn(text, "\r\n")] = '\0';
		problem(x, "section header '%s' has no closing ']'", text);
		return -1;
	}
	*end = '\0';
	name = text + 1;
	while (isspace((unsigned char)*name))
		name++;
	for (char *e = name + strlen(name); e > name && isspace((unsigned char)e[-1]);)
		*--e = '\0';
	if (!strcmp(name, "global")) {
		x->sec = SEC_GLOBAL;
		return 0;
	}
	if (strncmp(name, "route", 5) || (name[5] && !isspace((unsigned char)name[5]))) {
		problem(x, "unknown section [%s] (expected [global] or [route NAME])", name);
		return 0;
	}
	name += 5;
	while (isspace((unsigned char)*name))
		name++;
	if (!valid_route_name(name)) {
		problem(x, "[route %s]: a route needs a name of letters, digits, '-', '_' or '.' "
			   "(at most %d)", name, ROUTE_NAME_MAX - 1);
		return 0;
	}
	for (unsigned i = 0; i < x->c->nroutes; i++)
		if (!strcmp(x->c->route[i]->name, name)) {
			char ref[300];
			problem(x, "duplicate route '%s' (first defined at %s)", name,
				config_line_ref(x->c, x->c->route[i]->line, ref, sizeof(ref)));
			return 0;
		}
	if (!(x->route = config_add_route(x->c, name, loc(x)))) {
		problem(x, "route '%s': at most %d routes are supported", name, MAX_ROUTES);
		return 0;
	}
	x->sec = SEC_ROUTE;
	return 0;
}

/* inih's line source: counts lines, opens sections, and turns a line too
 * long for inih's buffer into an error instead of two broken lines. It
 * reads byte by byte because fgets() cannot tell a NUL inside a line from
 * the line's end: one NUL would cut a value short in silence, and a long
 * line after it would split in two and shift every later line number. A
 * NUL or control byte means the file is not a text config at all: one
 * message, and reading stops rather than listing noise from every line. */
static char *reader(char *str, int num, void *stream)
{
	struct file_ctx *x = stream;
	size_t n = 0, len = 0, bad_at = 0;
	int ch, bad = -1;
	char *p;

	if (x->binary)
		return NULL;
	while ((ch = getc(x->f)) != EOF) {
		if (ch == '\n')
			break;
		len++;
		if (bad < 0 && ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)) {
			bad = ch;
			bad_at = len;
		}
		if (n < (size_t)num - 2)
			str[n++] = (char)ch;
	}
	if (ch == EOF && !len)
		return NULL;
	if (x->line == CONF_LOC_LINES) {
		problem(x, "more than %u lines: reading stopped", CONF_LOC_LINES);
		x->binary = 1;
		return NULL;
	}
	x->line++;
	if (bad >= 0) {
		problem(x, "byte 0x%02x at column %zu: not a text file (binary data?); reading stopped",
			bad, bad_at);
		x->binary = 1;
		return NULL;
	}
	str[n++] = '\n';
	str[n] = '\0';
	if (len > (size_t)num - 2) {
		problem(x, "line longer than %d characters (split a long backend or listen list "
			   "over several 'backend =' lines)", num - 2);
		str[0] = '\n';
		str[1] = '\0';
		return str;
	}
	/* A UTF-8 byte-order mark (editors on Windows write one) is not part
	 * of the first line: left in, it hid the first section header from
	 * open_section(), and every key of that section was "outside a section". */
	if (x->line == 1 && !memcmp(str, "\xef\xbb\xbf", 3))
		memmove(str, str + 3, strlen(str + 3) + 1);
	/* Indentation is layout, as in HAProxy's and nginx's files: an indented
	 * line is an ordinary line. inih would have read it as a continuation of
	 * the key above ("listen = :80" + "  backend = :81" made one listen value
	 * of three addresses, two of them bad), so it never sees the indent. A
	 * line meant as a continuation (an indented bare address) is named. */
	for (p = str; *p == ' ' || *p == '\t'; p++)
		;
	if (p != str) {
		memmove(str, p, strlen(p) + 1);
		if (*str && !strchr("\r\n;#[", *str) && !strchr(str, '=')) {
			str[strcspn(str, "\r\n")] = '\0';
			problem(x, "indented line '%s' is not 'key = value': continuation lines are "
				   "not supported (repeat the key, as in another 'backend =' line)", str);
			str[0] = '\n';
			str[1] = '\0';
			return str;
		}
	}
	for (p = str; isspace((unsigned char)*p); p++)
		;
	if (*p == '[' && open_section(x, p)) {
		str[0] = '\n'; /* reported: not inih's syntax error too */
		str[1] = '\0';
	}
	return str;
}

/* listen = systemd:NAME: the addresses of the sockets systemd passed
 * under that name (activation.h), each a listen address of the route. */
static void add_activated(struct file_ctx *x, struct route *r, const char *name)
{
	struct addr a[MAX_LISTENS];
	char why[768];
	int n;

	if (!*name || strlen(name) > 255 || strchr(name, ':')) {
		problem(x, "listen systemd:%s: expects systemd:NAME, NAME as the .socket unit's "
			   "FileDescriptorName= (at most 255 characters, no ':')", name);
		return;
	}
	if (r->nlisten >= MAX_LISTENS) {
		problem(x, "listen: at most %d addresses per route", MAX_LISTENS);
		return;
	}
	n = activation_lookup(name, a, MAX_LISTENS - r->nlisten, why, sizeof(why));
	if (n < 0) { /* `check` without sockets: said, and the route counts as listening */
		fprintf(stderr, "%s:%u: note: %s\n", x->path, x->line, why);
		return;
	}
	if (!n) {
		problem(x, "%s", why);
		return;
	}
	for (int i = 0; i < n; i++) {
		r->listen_line[r->nlisten] = loc(x);
		r->listen[r->nlisten++] = a[i];
	}
}

static void add_listens(struct file_ctx *x, struct route *r, char *val)
{
	char *save, *tok, why[384];

	r->given |= ROUTE_GAVE_LISTEN;
	for (tok = strtok_r(val, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
		if (r->nlisten >= MAX_LISTENS) {
			problem(x, "listen: at most %d addresses per route", MAX_LISTENS);
			return;
		}
		if (!strncmp(tok, "systemd:", 8)) {
			add_activated(x, r, tok + 8);
			continue;
		}
		if (route_add_addrs(r, 0, tok, loc(x), why, sizeof(why)) < 0)
			problem(x, "listen: %s", why);
	}
}

/* What a backend line's options may be, for the messages. */
#define BACKEND_OPTIONS "weight=N, maxconn=N, backup, source=ADDR|client, resolve=DURATION or srv[=yes|no]"

/* A backend option: "key=value", or the bare word srv or backup. */
static int backend_option(const char *tok)
{
	return strchr(tok, '=') || !strcmp(tok, "srv") || !strcmp(tok, "backup");
}

/* srv, srv=yes or srv=no: 1 or 0 into *on; -1 when it is not srv at all,
 * -2 for srv= with another value. */
static int srv_option(const char *tok, uint8_t *on)
{
	if (!strcmp(tok, "srv") || !strcmp(tok, "srv=yes"))
		*on = 1;
	else if (!strcmp(tok, "srv=no"))
		*on = 0;
	else
		return strncmp(tok, "srv=", 4) ? -1 : -2;
	return 0;
}

/* The options after one backend address: weight=N, maxconn=N, backup,
 * resolve=DURATION and srv[=yes|no] into d (resolve= also sets d->every_ms). Returns 0, or -1
 * after reporting the first bad one. */
static int backend_options(struct file_ctx *x, const char *addr, char **opt, unsigned nopt,
			   struct dns_name *d)
{
	const char *weighted = NULL;
	uint64_t v;

	for (unsigned i = 0; i < nopt; i++) {
		const char *t = opt[i];
		int srv = srv_option(t, &d->srv);
		if (srv == 0)
			continue;
		if (srv == -2) {
			problem(x, "backend %s: invalid srv '%s' (expects yes or no; the bare word srv "
				   "is yes)", addr, t + 4);
			return -1;
		}
		if (!strcmp(t, "backup")) {
			d->backup = 1;
		} else if (!strncmp(t, "weight=", 7)) {
			if (weighted) {
				problem(x, "backend %s: weight given twice ('%s', then '%s')", addr,
					weighted, t);
				return -1;
			}
			if (parse_uint(t + 7, &v) || v < 1 || v > MAX_WEIGHT) {
				problem(x, "backend %s: invalid weight '%s' (expects an integer 1..%d)",
					addr, t + 7, MAX_WEIGHT);
				return -1;
			}
			weighted = t;
			d->weight = (unsigned)v;
		} else if (!strncmp(t, "maxconn=", 8)) {
			if (parse_uint(t + 8, &v) || v < 1 || v > 10000000) {
				problem(x, "backend %s: invalid maxconn '%s' (expects an integer "
					   "1..10000000)", addr, t + 8);
				return -1;
			}
			d->maxconn = (unsigned)v;
		} else if (!strncmp(t, "source=", 7)) {
			char why[256];
			if (config_backend_source(t + 7, &d->source, &d->source_client, why,
						  sizeof(why))) {
				problem(x, "backend %s: %s", addr, why);
				return -1;
			}
		} else if (!strncmp(t, "resolve=", 8)) {
			/* at least a second: a lookup every few milliseconds is a
			 * typo for seconds, and a load on the DNS servers */
			if (parse_duration_ms(t + 8, &v) || v < 1000 || v > 24ULL * 3600 * 1000) {
				problem(x, "backend %s: invalid resolve '%s' (expects a duration "
					   "1s..24h, as resolve=30s)", addr, t + 8);
				return -1;
			}
			d->every_ms = v;
		} else {
			problem(x, "backend: unknown backend option '%s' (expects " BACKEND_OPTIONS ")", t);
			return -1;
		}
	}
	if (d->srv && !d->every_ms) {
		problem(x, "backend %s: srv needs resolve=DURATION (SRV names are looked up by "
			   "the resolver thread)", addr);
		return -1;
	}
	return 0;
}

/* A name with resolve=: kept as written for the resolver thread (dns.c),
 * which gives its addresses; checked here so the file's line says what is
 * wrong with it. */
static void add_dns_name(struct file_ctx *x, struct route *r, const char *tok, struct dns_name *d)
{
	char host[256], why[384];
	unsigned port;

	if (r->ndns >= MAX_DNS_NAMES) {
		problem(x, "backend %s: at most %d names with resolve= per route", tok, MAX_DNS_NAMES);
		return;
	}
	if (strlen(tok) >= sizeof(d->name)) {
		problem(x, "backend '%.40s...': name longer than %d characters", tok,
			(int)sizeof(d->name) - 1);
		return;
	}
	if (d->srv ? strchr(tok, ':') != NULL : !strncmp(tok, "unix:", 5)) {
		problem(x, d->srv ? "backend %s: an SRV name has no port (its records give the ports), "
				    "as in _http._tcp.example.com"
				  : "backend %s: resolve= is for host names, not Unix sockets", tok);
		return;
	}
	if (!d->srv && addr_split(tok, ADDR_CONNECT, host, sizeof(host), &port, why, sizeof(why))) {
		problem(x, "backend '%s': %s", tok, why);
		return;
	}
	if (!d->srv && (!host[0] || !strcmp(host, "*"))) {
		problem(x, "backend %s: resolve= needs a host name", tok);
		return;
	}
	snprintf(d->name, sizeof(d->name), "%s", tok);
	d->line = loc(x);
	r->dns[r->ndns++] = *d;
}

/* "ADDR [weight=N] [maxconn=N] [backup] [source=ADDR|client] [resolve=DURATION [srv[=yes|no]]] ADDR ...":
 * the options apply to the address before them, and to every address of a
 * name (each is a backend of its own). A name with resolve= is looked up
 * again and again (dns.c); any other is resolved now. */
static void add_backends(struct file_ctx *x, struct route *r, char *val)
{
	char *save, *tok[256], why[384];
	unsigned n = 0, i, j;

	r->given |= ROUTE_GAVE_BACKEND;
	for (char *t = strtok_r(val, " \t,", &save); t && n < 256; t = strtok_r(NULL, " \t,", &save))
		tok[n++] = t;
	for (i = 0; i < n; i = j) {
		struct dns_name d = { 0 };
		unsigned first = r->nbackend;
		for (j = i + 1; j < n && backend_option(tok[j]); j++)
			;
		if (backend_option(tok[i])) {
			if (!strncmp(tok[i], "weight=", 7) || !strncmp(tok[i], "maxconn=", 8))
				problem(x, "backend: '%s' follows no backend address", tok[i]);
			else
				problem(x, "backend: unknown backend option '%s' (expects "
					   BACKEND_OPTIONS ")", tok[i]);
			j = i + 1;
			continue;
		}
		if (backend_options(x, tok[i], tok + i + 1, j - i - 1, &d))
			continue;
		if (d.every_ms) {
			add_dns_name(x, r, tok[i], &d);
			continue;
		}
		if (r->nbackend >= MAX_BACKENDS) {
			problem(x, "backend: at most %d backends per route", MAX_BACKENDS);
			return;
		}
		if (route_add_addrs(r, 1, tok[i], loc(x), why, sizeof(why)) < 0) {
			problem(x, "backend '%s': %s", tok[i], why);
			continue;
		}
		for (unsigned b = first; b < r->nbackend; b++) {
			r->backend[b].weight = d.weight ? d.weight : 1;
			r->backend[b].maxconn = d.maxconn;
			r->backend[b].source = d.source;
			r->backend[b].source_client = d.source_client;
			r->backend[b].backup = d.backup;
		}
	}
}

/* inih strips "; comment" after a value; "# comment" is as common in
 * config files, so it goes too (a '#' after whitespace: no value here
 * contains one). Returns a malloc'd copy, trimmed. */
static char *strip_comment(const char *value)
{
	char *v = strdup(value), *p;

	if (!v)
		return NULL;
	for (p = v; *p; p++)
		if (*p == '#' && (p == v || isspace((unsigned char)p[-1]))) {
			*p = '\0';
			break;
		}
	for (p = v + strlen(v); p > v && isspace((unsigned char)p[-1]);)
		*--p = '\0';
	return v;
}

/* The keys a section takes, as a file spells them ('_'): a route's are
 * listen, backend and the route-scope settings; [global] takes every
 * setting (a route-scope one there is every route's default). */
static unsigned section_keys(int route, char names[][32], unsigned max)
{
	unsigned n = 0;

	if (route) {
		static const char *const lists[] = { "listen", "backend", "sni", "alpn", "allow", "deny" };
		for (unsigned i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
			snprintf(names[n++], 32, "%s", lists[i]);
	}
	for (unsigned k = 0; k < nsettings && n < max; k++) {
		if (route && settings[k].scope != SCOPE_ROUTE)
			continue;
		snprintf(names[n], 32, "%s", settings[k].name);
		for (char *c = names[n]; *c; c++)
			*c = *c == '-' ? '_' : *c;
		n++;
	}
	return n;
}

/* "unknown key 'idle_timout' in a route (did you mean 'idle_timeout'?);
 * expects listen, backend, ...": the likely typo, then every key the
 * section takes. A global setting in a route is said by the caller. */
static void unknown_key(struct file_ctx *x, const char *name)
{
	char names[SETTINGS_MAX + 8][32], list[2048], mean[64] = "";
	const char *ptr[SETTINGS_MAX + 9], *near; /* and "include" */
	unsigned n = section_keys(x->sec == SEC_ROUTE, names, SETTINGS_MAX + 8);
	size_t len = 0;

	for (unsigned i = 0; i < n; i++) {
		ptr[i] = names[i];
		len += (size_t)snprintf(list + len, len < sizeof(list) ? sizeof(list) - len : 0, "%s%s",
					i ? ", " : "", names[i]);
	}
	ptr[n] = "include"; /* a typo of it too (it is not a key of the section: not listed) */
	if ((near = name_nearest(name, ptr, n + 1)))
		snprintf(mean, sizeof(mean), " (did you mean '%s'?)", near);
	problem(x, "unknown key '%s' in %s%s; expects %s", name,
		x->sec == SEC_ROUTE ? "a route" : "[global]", mean, list);
}

static int handler_value(struct file_ctx *x, const char *name, const char *value);

static void include(struct file_ctx *x, const char *pattern);

/* A key's value: its comment stripped, then its ${VAR}s expanded
 * (config_env.h: after the strip, so a '#' in a variable's value stays). */
static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct file_ctx *x = user;
	char *v = strip_comment(value), *e, why[256];
	int r = 1;
	(void)section; /* the reader tracks sections, with their lines */

	if (!v || !(e = malloc(CONFIG_ENV_MAX))) {
		free(v);
		return 0;
	}
	if (config_env_expand(v, e, CONFIG_ENV_MAX, why, sizeof(why))) {
		problem(x, "%s: %s", name, why);
		/* said here: not again as "route has no listen address" */
		if (x->sec == SEC_ROUTE && !strcmp(name, "listen"))
			x->route->given |= ROUTE_GAVE_LISTEN;
		if (x->sec == SEC_ROUTE && !strcmp(name, "backend"))
			x->route->given |= ROUTE_GAVE_BACKEND;
	} else if (*v && !*e)
		problem(x, "'%s' has no value: '%s' expanded to nothing", name, v);
	else if (!strcmp(name, "include"))
		include(x, e);
	else
		r = handler_value(x, name, e);
	free(e);
	free(v);
	return r;
}

static int handler_value(struct file_ctx *x, const char *name, const char *value)
{
	const struct setting *s;
	char why[256], *val;
	unsigned k;

	if (x->sec == SEC_BAD)
		return 1; /* already reported at the section line */
	if (x->sec == SEC_NONE) {
		problem(x, "'%s' outside a section: put it under [global] or [route NAME]", name);
		return 1;
	}
	if (!*value) {
		problem(x, "'%s' has no value", name);
		return 1;
	}
	if (x->sec == SEC_ROUTE && route_text_key(name)) {
		char note[256] = "";
		if (route_text_set(x->route, name, value, loc(x), why, sizeof(why), note, sizeof(note)))
			problem(x, "%s", why);
		else if (note[0])
			fprintf(stderr, "%s:%u: note: %s\n", x->path, x->line, note);
		return 1;
	}
	if (!strcmp(name, "listen") || !strcmp(name, "backend")) {
		if (x->sec != SEC_ROUTE) {
			problem(x, "'%s' belongs in a [route NAME] section", name);
			return 1;
		}
		if (!(val = strdup(value)))
			return 0;
		if (name[0] == 'l')
			add_listens(x, x->route, val);
		else
			add_backends(x, x->route, val);
		free(val);
		return 1;
	}
	if (!(s = setting_find(name))) {
		unknown_key(x, name);
		return 1;
	}
	if (s->scope == SCOPE_GLOBAL && x->sec == SEC_ROUTE) {
		problem(x, "'%s' is a [global] setting; a route cannot set it", name);
		return 1;
	}
	k = (unsigned)(s - settings);
	if (x->key_line[k]) {
		problem(x, "duplicate key '%s' (first set at line %u)", name, x->key_line[k]);
		return 1;
	}
	x->key_line[k] = x->line;
	if (setting_parse(s, value, x->sec == SEC_ROUTE ? setting_field(x->c, &x->route->o, s)
						       : setting_field(x->c, &x->c->o, s),
			  why, sizeof(why))) {
		problem(x, "%s: %s", name, why);
		return 1;
	}
	if (x->sec == SEC_ROUTE) {
		x->route->set |= SETTING_BIT(k);
		x->route->key_line[k] = x->line;
	}
	else
		x->c->set_line[k] = loc(x);
	return 1;
}

/* Reads x->f (open, its identity in x) to its end; closes it. Returns the
 * problems, or -1 when reading stopped (not a text file). */
static int parse(struct file_ctx *x)
{
	int r = ini_parse_stream(reader, x, handler, x);

	fclose(x->f);
	x->f = NULL;
	if (r > 0) { /* inih's own error: the first line it could not parse */
		x->line = (unsigned)r;
		problem(x, "syntax error: expected '[section]', 'key = value' or a comment");
	} else if (r < 0) {
		fprintf(stderr, "%s: cannot read: out of memory\n", x->path);
		x->errors++;
	}
	return x->binary ? -1 : x->errors;
}

int config_read_includes = 1;

/* How deep includes nest: a main file, conf.d/ and a level below it is
 * what a deployment uses; deeper is a mistake, usually a loop that the
 * identity check missed (the same file by two mounts). */
#define INCLUDE_DEPTH 8

/* Records the directory an include pattern looks in (up to its first
 * component with a wildcard), into dir too: the sandbox lets a reload
 * read it. */
static void include_dir(struct config *c, const char *pattern, char *dir)
{
	char *wild;

	snprintf(dir, PATH_MAX, "%s", pattern);
	if ((wild = strpbrk(dir, "*?["))) {
		*wild = '\0';
		if (!(wild = strrchr(dir, '/')))
			snprintf(dir, PATH_MAX, ".");
		else
			*(wild == dir ? wild + 1 : wild) = '\0'; /* "/" stays */
	} else {
		char *d = dirname(dir); /* dir itself, or a static "." */
		memmove(dir, d, strlen(d) + 1);
	}
	for (unsigned i = 0; i < c->nincl_dir; i++)
		if (!strcmp(c->incl_dir[i], dir))
			return;
	size_t n = strlen(dir);

	if (c->nincl_dir < MAX_CONF_FILES && n < sizeof(c->incl_dir[0]))
		memcpy(c->incl_dir[c->nincl_dir++], dir, n + 1);
}

/* One file an include names: read as if its lines stood in a file of their
 * own (it opens its own sections; the includer's section goes on after
 * it). Problems are said at the include line x is on. */
static void include_file(struct file_ctx *x, const char *path)
{
	struct file_ctx in = { .c = x->c, .parent = x, .depth = x->depth + 1 };
	struct stat st;

	if (in.depth > INCLUDE_DEPTH) {
		problem(x, "include %s: includes nested more than %d deep", path, INCLUDE_DEPTH);
		return;
	}
	if (!(in.f = fopen(path, "re"))) {
		problem(x, "include %s: cannot open: %s", path, strerror(errno));
		return;
	}
	if (fstat(fileno(in.f), &st) || !S_ISREG(st.st_mode)) {
		problem(x, "include %s: %s", path, S_ISDIR(st.st_mode)
			? "is a directory (include DIR/*.conf reads the files in it)"
			: "not a regular file");
		fclose(in.f);
		return;
	}
	for (const struct file_ctx *p = x; p; p = p->parent)
		if (p->dev == st.st_dev && p->ino == st.st_ino) {
			problem(x, "include %s: include loop: it is %s, which is being read already",
				path, p->path);
			fclose(in.f);
			return;
		}
	if (x->c->nincl + 1 >= MAX_CONF_FILES || strlen(path) >= sizeof(x->c->incl[0])) {
		problem(x, "include %s: %s", path, strlen(path) >= sizeof(x->c->incl[0])
			? "path too long" : "too many included files (at most 63)");
		fclose(in.f);
		return;
	}
	in.file = ++x->c->nincl;
	snprintf(x->c->incl[in.file], sizeof(x->c->incl[0]), "%s", path);
	in.path = x->c->incl[in.file];
	in.dev = st.st_dev;
	in.ino = st.st_ino;
	if (parse(&in) < 0)
		in.errors++; /* said there: not text */
	x->errors += in.errors;
}

/* include = PATTERN, as nginx's include: a path, or a glob whose matches
 * are read in name order (byte order: the process runs in the C locale).
 * A relative pattern is relative to the including file's directory. A
 * pattern with a wildcard may match nothing (an empty conf.d/); a plain
 * path must exist. */
static void include(struct file_ctx *x, const char *pattern)
{
	char full[PATH_MAX], dir[PATH_MAX];
	struct stat st;
	glob_t g;
	int r;

	snprintf(dir, sizeof(dir), "%s", x->path);
	if (pattern[0] == '/' || !strchr(x->path, '/'))
		r = snprintf(full, sizeof(full), "%s", pattern);
	else
		r = snprintf(full, sizeof(full), "%s/%s", dirname(dir), pattern);
	if (r < 0 || (size_t)r >= sizeof(full)) {
		problem(x, "include %s: path too long", pattern);
		return;
	}
	include_dir(x->c, full, dir);
	if (!config_read_includes)
		return;
	if (!strpbrk(full, "*?[")) {
		include_file(x, full);
		return;
	}
	/* matching nothing is fine (an empty conf.d/), a directory that is
	 * not there is a typo */
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		problem(x, "include %s: %s: %s", full, dir, errno == ENOENT || !S_ISDIR(st.st_mode)
			? "no such directory" : strerror(errno));
		return;
	}
	r = glob(full, GLOB_ERR | GLOB_MARK, NULL, &g);
	if (r == GLOB_NOMATCH)
		return;
	if (r) {
		problem(x, "include %s: %s", full, r == GLOB_ABORTED
			? "cannot read a directory of it" : "out of memory");
		if (r != GLOB_NOSPACE)
			globfree(&g);
		return;
	}
	for (size_t i = 0; i < g.gl_pathc; i++)
		include_file(x, g.gl_pathv[i]);
	globfree(&g);
}

int config_load_file(struct config *c, const char *path)
{
	struct file_ctx x = { .c = c, .path = path };
	struct stat st;

	if (!(x.f = fopen(path, "re"))) {
		fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(x.f), &st) == 0 && S_ISDIR(st.st_mode)) {
		/* fopen() opens a directory; only reading it fails, as an empty file */
		fprintf(stderr, "%s: is a directory, not a config file\n", path);
		fclose(x.f);
		return -1;
	}
	x.dev = st.st_dev;
	x.ino = st.st_ino;
	return parse(&x);
}
