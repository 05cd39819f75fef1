/* config: the settings table, the command-line parser and --help. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "units.h"

const char *const engine_names[] = { "auto", "copy", "splice", NULL };

enum set_type { SET_UINT, SET_SIZE, SET_DURATION, SET_ENUM };

struct setting {
	const char *name;            /* long option and (later) config key */
	char short_opt;              /* 0 when none */
	enum set_type type;
	uint64_t min, max;           /* accepted range (after units) */
	const char *def;             /* default, as the user would write it */
	int auto_ok;                 /* "auto" (stored as 0) is accepted */
	const char *const *choices;  /* SET_ENUM */
	size_t off;                  /* field in struct config */
	const char *help;
};

#define F(field) offsetof(struct config, field)
#define KiB 1024ULL
#define MiB (1024ULL * 1024)
#define DAY_MS (24ULL * 3600 * 1000)

static const struct setting settings[] = {
	{ "engine", 'e', SET_ENUM, 0, 0, "auto", 0, engine_names, F(engine),
	  "how bytes move: copy (recv/send), splice (socket->pipe->socket), auto (copy, then splice for streams)" },
	{ "workers", 'w', SET_UINT, 1, 256, "auto", 1, NULL, F(workers),
	  "worker threads, each with its own epoll loop and SO_REUSEPORT listener (auto: one per CPU)" },
	{ "buffer-size", 0, SET_SIZE, 1 * KiB, 64 * MiB, "64k", 0, NULL, F(buffer_size),
	  "copy engine buffer per direction" },
	{ "pipe-size", 0, SET_SIZE, 0, 64 * MiB, "512k", 0, NULL, F(pipe_size),
	  "splice engine pipe size (0: kernel default, 64k); see README, Performance" },
	{ "lowat", 0, SET_SIZE, 0, 64 * MiB, "0", 0, NULL, F(lowat),
	  "SO_RCVLOWAT on spliced sources so readiness waits for a batch (0: off; bulk routes only)" },
	{ "busy-poll", 0, SET_UINT, 0, 100000, "0", 0, NULL, F(busy_poll_us),
	  "microseconds a worker keeps polling without sleeping after its last event: lower latency, more CPU (0: off)" },
	{ "max-pipes", 0, SET_UINT, 0, 1000000, "auto", 1, NULL, F(max_pipes),
	  "pipes per process, shared out among workers (auto: a quarter of the fd limit)" },
	{ "max-conns", 0, SET_UINT, 1, 10000000, "auto", 1, NULL, F(max_conns),
	  "concurrent sessions; beyond it accepting pauses (auto: a quarter of the fd limit)" },
	{ "connect-timeout", 0, SET_DURATION, 1, DAY_MS, "5s", 0, NULL, F(connect_timeout_ms),
	  "backend connect attempt limit before trying the next backend" },
	{ "idle-timeout", 0, SET_DURATION, 1, 365 * DAY_MS, "10m", 0, NULL, F(idle_timeout_ms),
	  "close a session after this long without a byte either way" },
	{ "drain-timeout", 0, SET_DURATION, 0, DAY_MS, "30s", 0, NULL, F(drain_timeout_ms),
	  "on SIGTERM/SIGINT, how long running sessions may finish" },
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static uint64_t *field(struct config *c, const struct setting *s)
{
	return (uint64_t *)((char *)c + s->off);
}

static void range_text(const struct setting *s, char *buf, size_t len)
{
	char lo[32], hi[32];
	size_t n = 0;

	switch (s->type) {
	case SET_ENUM:
		for (const char *const *ch = s->choices; *ch; ch++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", *ch);
		return;
	case SET_SIZE:
		format_size(s->min, lo, sizeof(lo));
		format_size(s->max, hi, sizeof(hi));
		snprintf(buf, len, "a size %s..%s (suffix k, m, g)", lo, hi);
		return;
	case SET_DURATION:
		format_duration_ms(s->min, lo, sizeof(lo));
		format_duration_ms(s->max, hi, sizeof(hi));
		snprintf(buf, len, "a duration %s..%s (suffix ms, s, m, h)", lo, hi);
		return;
	case SET_UINT:
		snprintf(buf, len, "an integer %llu..%llu%s", (unsigned long long)s->min,
			 (unsigned long long)s->max, s->auto_ok ? " or auto" : "");
		return;
	}
}

/* Sets one setting from its text. Returns 0 or -1 after printing the error. */
static int setting_set(struct config *c, const struct setting *s, const char *opt, const char *val)
{
	uint64_t v = 0;
	int r = 0;
	char range[160];

	if (s->auto_ok && !strcmp(val, "auto")) {
		*field(c, s) = SETTING_AUTO;
		return 0;
	}
	switch (s->type) {
	case SET_ENUM:
		r = -EINVAL;
		for (unsigned i = 0; s->choices[i]; i++)
			if (!strcmp(val, s->choices[i])) {
				v = i;
				r = 0;
			}
		break;
	case SET_SIZE: r = parse_size(val, &v); break;
	case SET_DURATION: r = parse_duration_ms(val, &v); break;
	case SET_UINT: r = parse_uint(val, &v); break;
	}
	if (!r && s->type != SET_ENUM && (v < s->min || v > s->max))
		r = -ERANGE;
	if (r) {
		range_text(s, range, sizeof(range));
		fprintf(stderr, "splicer: option '%s': invalid value '%s' (expects %s)\n", opt, val, range);
		return -1;
	}
	*field(c, s) = v;
	return 0;
}

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	for (unsigned i = 0; i < NSETTINGS; i++)
		if (setting_set(c, &settings[i], settings[i].name, settings[i].def))
			abort(); /* a default that does not parse is a bug in the table */
}

static int add_addr(struct addr *arr, unsigned *n, unsigned max, const char *opt,
		    const char *val, enum addr_use use)
{
	char err[256];

	if (*n >= max) {
		fprintf(stderr, "splicer: option '%s': at most %u allowed\n", opt, max);
		return -1;
	}
	if (addr_parse(val, use, &arr[*n], err, sizeof(err))) {
		fprintf(stderr, "splicer: option '%s': %s\n", opt, err);
		return -1;
	}
	(*n)++;
	return 0;
}

int config_parse_args(struct config *c, int argc, char **argv, int first)
{
	for (int i = first; i < argc; i++) {
		const char *arg = argv[i], *val = NULL, *eq;
		char name[64];
		const struct setting *s = NULL;
		int is_listen = 0, is_backend = 0;

		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			config_print_help(argv[0]);
			return 1;
		}
		if (!strcmp(arg, "--version")) {
			printf("splicer %s\n", SPLICER_VERSION);
			return 1;
		}
		if (arg[0] == '-' && arg[1] == 'v' && strspn(arg + 1, "v") == strlen(arg + 1)) {
			c->verbose += strlen(arg + 1);
			continue;
		}
		if (!strcmp(arg, "--verbose")) {
			c->verbose++;
			continue;
		}
		if (arg[0] != '-' || !arg[1]) {
			fprintf(stderr, "splicer: unexpected argument '%s' (see --help)\n", arg);
			return -1;
		}
		if (arg[1] == '-') { /* --name or --name=value */
			eq = strchr(arg, '=');
			snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - arg - 2 : (long)strlen(arg) - 2), arg + 2);
			if (eq)
				val = eq + 1;
			is_listen = !strcmp(name, "listen");
			is_backend = !strcmp(name, "backend");
			for (unsigned k = 0; k < NSETTINGS && !is_listen && !is_backend; k++)
				if (!strcmp(name, settings[k].name))
					s = &settings[k];
		} else if (!arg[2]) { /* -x value */
			is_listen = arg[1] == 'l';
			is_backend = arg[1] == 'b';
			for (unsigned k = 0; k < NSETTINGS; k++)
				if (settings[k].short_opt && settings[k].short_opt == arg[1])
					s = &settings[k];
		}
		if (!s && !is_listen && !is_backend) {
			fprintf(stderr, "splicer: unknown option '%s' (see --help)\n", arg);
			return -1;
		}
		if (!val) {
			if (i + 1 >= argc) {
				fprintf(stderr, "splicer: option '%s' needs a value\n", arg);
				return -1;
			}
			val = argv[++i];
		}
		if (is_listen) {
			if (add_addr(c->listen, &c->nlisten, MAX_LISTENS, arg, val, ADDR_LISTEN))
				return -1;
		} else if (is_backend) {
			if (add_addr(c->backend, &c->nbackend, MAX_BACKENDS, arg, val, ADDR_CONNECT))
				return -1;
		} else if (setting_set(c, s, arg, val)) {
			return -1;
		}
	}
	return 0;
}

int config_finalize(struct config *c)
{
	struct rlimit rl;
	uint64_t budget;
	long cpus;

	if (!c->nlisten) {
		fprintf(stderr, "splicer: no listener: give -l ADDRESS (see --help)\n");
		return -1;
	}
	if (!c->nbackend) {
		fprintf(stderr, "splicer: no backend: give at least one -b ADDRESS (see --help)\n");
		return -1;
	}
	if (c->workers == SETTING_AUTO) {
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		c->workers = cpus > 0 ? (uint64_t)cpus : 1;
	}
	if (c->pipe_size && c->pipe_size < 4096) {
		fprintf(stderr, "splicer: option '--pipe-size': %llu is below one page (4096)\n",
			(unsigned long long)c->pipe_size);
		return -1;
	}
	/* Each session holds two sockets and, while bytes are in flight, up to
	 * two pipes of two descriptors each: split what the fd limit leaves
	 * (after a reserve for listeners, epoll and logs) between them. */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		rl.rlim_cur = 1 << 20;
	budget = rl.rlim_cur > 64 + 8 * c->workers ? rl.rlim_cur - 64 - 8 * c->workers : 0;
	if (c->max_conns == SETTING_AUTO)
		c->max_conns = budget / 4 ? budget / 4 : 1;
	if (c->max_pipes == SETTING_AUTO)
		c->max_pipes = budget > 2 * c->max_conns ? (budget - 2 * c->max_conns) / 2 : 0;
	if (2 * c->max_conns + 2 * c->max_pipes > budget)
		fprintf(stderr, "splicer: warning: --max-conns %llu and --max-pipes %llu need up to %llu "
			"descriptors but ulimit -n is %llu; raise the limit (ulimit -n, LimitNOFILE=) "
			"or lower them\n", (unsigned long long)c->max_conns,
			(unsigned long long)c->max_pipes,
			(unsigned long long)(2 * c->max_conns + 2 * c->max_pipes + 64),
			(unsigned long long)rl.rlim_cur);
	return 0;
}

void config_print_help(const char *prog)
{
	char range[160], optname[48];

	printf("splicer %s: a layer-4 TCP forwarding proxy with splice() engines\n\n"
	       "usage: %s -l LISTEN -b BACKEND [-b BACKEND ...] [options]\n"
	       "       %s bench [--quick] ...     measure the engines beside HAProxy, nginx, socat\n"
	       "       %s demo [--size SIZE] [--engines LIST]   a stream through each engine, checked\n\n"
	       "addresses: host:port, [v6addr]:port, :port (all addresses), unix:/path, unix:@abstract\n\n"
	       "  -l, --listen ADDRESS            accept clients here (repeatable; required)\n"
	       "  -b, --backend ADDRESS           forward to these, round-robin, trying the next on\n"
	       "                                  connect failure (repeatable; required)\n",
	       SPLICER_VERSION, prog, prog, prog);
	for (unsigned i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *meta = s->type == SET_ENUM ? "NAME" : s->type == SET_SIZE ? "SIZE"
				   : s->type == SET_DURATION ? "DURATION" : "N";
		if (s->short_opt)
			snprintf(optname, sizeof(optname), "-%c, --%s %s", s->short_opt, s->name, meta);
		else
			snprintf(optname, sizeof(optname), "    --%s %s", s->name, meta);
		range_text(s, range, sizeof(range));
		printf("  %-30s  %s\n  %-30s  [default %s; %s]\n", optname, s->help, "", s->def, range);
	}
	printf("  -v, --verbose                   log each session at close (-vv: debug)\n"
	       "  -h, --help                      this text\n"
	       "      --version                   print the version\n");
}
