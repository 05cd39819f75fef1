/* SPDX-License-Identifier: MIT */
/* config: the settings of a run and the one table that describes them. The
 * table (name, type, range, default, help, scope) drives command-line
 * parsing, the config file's keys and --help, so an option cannot exist in
 * one and be missing from another.
 *
 * A run has routes. Each route is listeners plus a backend pool, and carries
 * its own copy of the route-scope settings (engine, balance, timeouts, lowat):
 * a route section sets them for itself, [global] and the command line set
 * them for every route, and the command line wins over the file. */
#ifndef SPLICER_CONFIG_H
#define SPLICER_CONFIG_H
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "cidr.h"
#include "proxy_tlv.h"
#include "sockopt.h"

#define MAX_ROUTES    64
#define MAX_LISTENS   16  /* per route */
#define MAX_LISTENERS 64  /* all routes together */
/* A location in the config: 0 is the command line, else the line of a file,
 * which is the main one (index 0) or one it includes (struct config's incl);
 * every `line` of a route or setting holds one. config_where() writes it as
 * "FILE:LINE: ". Lines of a file stop at CONF_LOC_LINES. */
#define MAX_CONF_FILES  64
#define CONF_LOC_BITS   20
#define CONF_LOC_LINES  ((1u << CONF_LOC_BITS) - 1)
#define CONF_LOC(file, line) ((unsigned)(file) << CONF_LOC_BITS | (unsigned)(line))
#define CONF_LOC_FILE(loc)   ((unsigned)(loc) >> CONF_LOC_BITS)
#define CONF_LOC_LINE(loc)   ((unsigned)(loc) & CONF_LOC_LINES)
#define MAX_BACKENDS  64  /* per route */
#define MAX_WEIGHT    256
#define MAX_DNS_NAMES 16  /* per route: backend names with resolve= */
#define ROUTE_NAME_MAX 64

/* An "auto" setting before config_finalize() resolves it. */
#define SETTING_AUTO UINT64_MAX
#define SETTING_TEXT_MAX 256
/* The settings table's rows at most: bit masks of them are 64 bits. */
#define SETTINGS_MAX 128
/* One bit per setting (the settings table's index), for which were given. */
typedef unsigned __int128 settings_mask;
#define SETTING_BIT(k) ((settings_mask)1 << (k))

/* The engine choices' names (the engine registry), "auto" first: a route's
 * `engine` is an index into it. */
extern const char *const engine_names[];

enum balance_kind { BALANCE_ROUNDROBIN, BALANCE_LEASTCONN, BALANCE_MAGLEV };
extern const char *const balance_names[]; /* indexed by enum balance_kind */

struct engine;

/* The settings a route may set for itself. */
struct route_opts {
	uint64_t engine;             /* index into engine_names (0: auto) */
	uint64_t auto_uring_turns;   /* auto: request/response turns before a session moves to
					io_uring (session.c: turns_due); 0: never */
	uint64_t balance;            /* enum balance_kind */
	uint64_t lowat;              /* SO_RCVLOWAT on spliced sources; 0 = off */
	uint64_t connect_timeout_ms; /* per backend attempt */
	uint64_t idle_timeout_ms;    /* no byte either way for this long closes a session */
	uint64_t proxy_protocol;     /* 0 off, 1 v1, 2 v2: header sent to backends */
	uint64_t accept_proxy;       /* 1: clients must send a PROXY header first */
	uint64_t proxy_timeout_ms;   /* accept_proxy: the whole header within this */
	uint64_t pp_tlvs;            /* PP_SEND_* (proxy_tlv.h): the v2 TLVs sent to backends */
	char pp_pass_text[SETTING_TEXT_MAX]; /* proxy_protocol_pass as written: none, all or
						types (the set: struct route's pp_pass) */
	uint64_t check;              /* 0 none, else active health checks (check_spec.h): derived
					from check_text by config_finalize */
	uint64_t check_interval_ms;
	uint64_t check_timeout_ms;
	uint64_t rise;               /* good checks in a row that bring a backend up */
	uint64_t fall;               /* failed checks (or connects) in a row that take it down */
	uint64_t half_close_timeout_ms; /* idle limit once one direction has ended */
	/* admission (route_admit.c) and TLS routing (listeners with sni routes) */
	uint64_t source_max_conns;   /* concurrent sessions per source (IPv6: per /64); 0 = no limit */
	uint64_t source_conn_rate;   /* new sessions per second per source; 0 = no limit */
	uint64_t tls_hello_timeout_ms; /* the whole ClientHello within this */
	uint64_t tls_hello_max;      /* bytes of TLS records that may hold it */
	uint64_t queue_timeout_ms;   /* every backend at maxconn: how long a client may wait */
	/* a session's lifetime (session.c: the graceful close) */
	uint64_t max_session_time_ms; /* 0: none */
	uint64_t max_session_jitter; /* percent of it taken off at random, per session */
	/* socket options (sockopt.h; built into struct route's cli_so, srv_so, lso) */
	uint64_t client_keepalive, backend_keepalive; /* sockopt_ka_pack; 0: off */
	uint64_t client_user_timeout_ms, backend_user_timeout_ms; /* 0: the kernel's */
	uint64_t mptcp, fastopen;    /* SIDE_LISTEN | SIDE_BACKEND */
	uint64_t mark, tos;          /* both sides; mark 0: none */
	uint64_t defer_accept_ms, backlog; /* listeners */
	uint64_t rate_up, rate_down; /* sockopt_parse_rate: bytes/s (| SOCKOPT_RATE_PER_SOURCE) */
	char iface[SETTING_TEXT_MAX];  /* both sides, "off": none */
	char source[SETTING_TEXT_MAX]; /* "client", addresses, or "off" */
	uint64_t on_backend_down;    /* BACKEND_DOWN_KEEP or _CLOSE: a backend's running sessions
					when it is marked down or removed (backend.h) */
	uint64_t slowstart_ms;       /* a backend coming up takes a share rising over this
					long to its weight's; 0: at once */
	char check_text[SETTING_TEXT_MAX]; /* `check` as written: none, tcp, a preset or
					      send:/expect: (check_spec.h) */
};
/* route_opts mptcp and fastopen: which sockets of the route */
#define SIDE_LISTEN  1
#define SIDE_BACKEND 2
enum { BACKEND_DOWN_KEEP, BACKEND_DOWN_CLOSE };

/* A backend's run-time state: health, traffic and its leastconn count.
 * Shared by the checker thread and the workers, and by every config
 * generation that has this backend (same route name, same configured
 * address): it lives in backend.c's registry, so a reload keeps it. */
#define BACKEND_EVENTS 8 /* up/down changes a backend remembers (the status page) */
struct backend_health {
	uint8_t down;                /* atomic: sessions skip it */
	uint32_t good, bad;          /* checker: results in a row */
	uint32_t fails;              /* atomic: connect failures in a row (passive) */
	uint8_t passive_down;        /* atomic: marked down by sessions since the last check */
	uint64_t checks_ok, checks_failed; /* atomic totals */
	/* traffic through this backend, atomic; bytes as struct route_stats's */
	uint64_t sessions, bytes_up, bytes_down, connect_errors;
	int64_t active;              /* atomic: sessions on (or connecting to) it, for leastconn */
	/* connect errors not yet in the log (backend.c: a line per backend per
	 * BACKEND_ERR_REPORT_MS with their count), atomic */
	uint64_t err_pending;        /* since the last line */
	uint64_t err_since_ms;       /* the first of them (monotonic ms) */
	uint64_t err_report_ms;      /* the last line; 0: none yet */
	int err_last;                /* errno of the latest */
	/* the admin socket's overrides (admin.h), atomic; like the rest they
	 * belong to the backend, not to a generation, so a reload keeps them */
	uint8_t admin;               /* BACKEND_READY, _DRAIN or _DISABLED */
	uint32_t weight;             /* 0: the file's; else the weight sessions follow */
	/* slowstart: when it last came up (monotonic ms; 0: up since the
	 * start, at full weight), atomic */
	uint64_t up_since_ms;
	/* on_backend_down = close: raised to have its running sessions closed;
	 * a session remembers the value it found when it took its slot
	 * (backend.h: backend_cut), atomic */
	uint32_t cut_seq;
	uint8_t cut_why;             /* BACKEND_CUT_DOWN or _REMOVED: the latest cut's cause */
	/* health history for the status page (backend.h: backend_history),
	 * atomic: the last 64 check results, newest in bit 0 (1: passed), and
	 * how many there were (at most 64; the checker alone writes both);
	 * the last BACKEND_EVENTS changes up or down, each Unix ms << 1 | down,
	 * the newest at events[(event_seq - 1) % BACKEND_EVENTS] */
	uint64_t check_bits;
	uint32_t check_n;
	uint64_t events[BACKEND_EVENTS];
	uint32_t event_seq;
};
/* struct backend_health's admin: drain and disabled both take no new
 * session; disabling may also end the running ones (admin.c). */
enum { BACKEND_READY, BACKEND_DRAIN, BACKEND_DISABLED };

/* A route's traffic, atomic, never per byte: bytes of live sessions every
 * 250 ms (session_flush_bytes), the rest once per session.
 * One per route name, shared across reloads like struct backend_health. */
struct route_stats {
	uint64_t sessions, active, bytes_up, bytes_down;
	uint64_t connect_errors, retries, no_backend, all_down;
	/* admission: clients closed at once, by reason */
	uint64_t denied, source_conns_rejected, source_rate_rejected, source_table_full;
	/* maxconn: clients waiting now, served after waiting, timed out */
	uint64_t queued, dequeued, queue_timeouts, queue_wait_ms;
	uint64_t refuse_logged_ms, refused_unlogged; /* refusals' log line (session.c) */
	/* on_backend_down = close: sessions closed because their backend was
	 * marked down, or removed (reload, DNS, ctl backend del) */
	uint64_t cut_down, cut_removed;
};
#define STAT_ADD(field, n) __atomic_add_fetch(&(field), (uint64_t)(n), __ATOMIC_RELAXED)
#define STAT_GET(field)    __atomic_load_n(&(field), __ATOMIC_RELAXED)

struct backend_conf {
	struct addr addr;
	char spec[ADDR_TEXT_MAX];    /* as configured ("db.local:5432"); "" = addr.text */
	unsigned weight;             /* 1..MAX_WEIGHT: share of new sessions */
	unsigned line;               /* where it was given (file line, 0: command line) */
	uint8_t this_host;           /* the address is on this host: connections to it are
					watched for loops (loop_guard.h) */
	unsigned maxconn;            /* sessions at most (0: no limit); more wait in the queue */
	uint8_t dns;                 /* 1 + the index in route->dns of the resolve= name that gave
					it (dns.c); 0: an address of the file, resolved once */
	struct sock_ip source;       /* source=ADDR of the backend line (family 0: the route's) */
	uint8_t source_client;       /* source=client of the backend line: transparent */
	uint8_t backup;              /* used only while no primary backend is usable, in order */
	uint8_t runtime;             /* added by `ctl backend ROUTE add`: in memory only, the
					next reload keeps what the file says */
};

/* A backend name given with resolve=: looked up again every every_ms by
 * the resolver thread (dns.c); each address a backend with the line's
 * options. A change builds a new config generation from the running one. */
struct dns_name {
	char name[ADDR_TEXT_MAX];    /* as written: "app.internal:8080"; srv: "_app._tcp.internal" */
	uint64_t every_ms;
	unsigned line;
	unsigned weight;             /* 0: not given (1, or with srv the record's weight) */
	unsigned maxconn;
	uint8_t srv;                 /* name is an SRV name: targets and ports from its records */
	struct sock_ip source;       /* source= of the line, as struct backend_conf's */
	uint8_t source_client;
	uint8_t backup;              /* its backends are backups */
};

struct balance_table; /* backend.c */
struct route_hist;

struct route {
	char name[ROUTE_NAME_MAX];
	unsigned line;                     /* its [route NAME] line; 0 from the command line */
	struct addr listen[MAX_LISTENS];
	unsigned listen_line[MAX_LISTENS]; /* where each was given (file line, 0: command line) */
	unsigned nlisten;
	struct backend_conf backend[MAX_BACKENDS];
	unsigned nbackend;
	struct dns_name dns[MAX_DNS_NAMES]; /* resolve= names; their backends have dns set */
	unsigned ndns;
	uint8_t given;                     /* ROUTE_GAVE_*: keys present, even if every
					      address on them was refused (reported once) */
	struct route_opts o;
	settings_mask set;                 /* route_opts given in the route's own section (bit per
					    * settings[] index; SETTINGS_MAX) */
	unsigned key_line[SETTINGS_MAX];   /* where the section set each (0: not there) */
	struct pp_types pp_pass;           /* proxy_protocol_pass: TLV types passed on */
	/* Run time, shared by the workers: the balancing tables (backend.c),
	 * immutable once published; a weight change publishes new ones */
	struct balance_table *tab;         /* atomic pointer */
	uint64_t rr;                       /* cursor into the schedule (atomic) */
	struct route *built_next;          /* backend.c: every route with tables */
	/* Run-time state that outlives this config: per backend, and the
	 * route's counters; shared with the other generations (backend.c). */
	struct backend_health **health;
	struct route_stats *st;
	struct route_hist *hist;           /* latency and size histograms, by route name like st
					      (route_hist.h) */
	uint64_t live;                     /* atomic: sessions of this generation's route */
	/* TLS routing: names from the ClientHello's SNI ('*.' = one or more
	 * labels) and ALPN protocols of which one must be offered; "" = any */
	char sni[SETTING_TEXT_MAX * 4];
	unsigned sni_line;
	char alpn[SETTING_TEXT_MAX];
	unsigned alpn_line;
	/* source ACLs ("CIDR CIDR ..."; parsed into acl by config_finalize) */
	char allow[SETTING_TEXT_MAX * 4], deny[SETTING_TEXT_MAX * 4];
	unsigned allow_line, deny_line;
	struct acl acl;                    /* empty: every source */
	struct source_table *sources;      /* source_max_conns / source_conn_rate; shared across
					    * reloads like st (route_admit.c) */
	uint8_t has_queue;                 /* a backend has maxconn */
	/* socket options built from o (config_finalize: sockopt_conf.c) */
	struct sock_opts cli_so;           /* set on each client connection (what its listener
					      did not give it already: cli_inherited) */
	uint8_t cli_inherited;             /* the listener carries cli_so (every route of it agrees) */
	struct sock_opts srv_so;           /* on each backend connection */
	struct sock_source src;            /* where backend connections come from */
	uint8_t fastopen_backend;          /* the first client bytes ride in the SYN (MSG_FASTOPEN) */
	uint8_t has_backup;                /* a backend is a backup, beside a primary (backend.c) */
	/* where its sessions move once they behave as request/response
	   (engine_routes_check: auto's io_uring where it runs and
	   auto_uring_turns is not 0); NULL: they stay */
	const struct engine *turns;
};

struct sni_table;

/* One listening address and the routes that share it: a route with sni
 * gets the clients whose ClientHello names it, the route without sni (at
 * most one: dflt) everyone else. Built by config_finalize from the routes'
 * listen lists; the listening sockets are per group, not per route. */
struct listen_group {
	struct addr *addr;                 /* the first route's entry */
	unsigned line;
	struct route *dflt;                /* NULL: clients nobody's sni takes are closed */
	struct route *route[MAX_ROUTES];   /* every route on it, file order */
	unsigned nroute;
	uint8_t hello;                     /* a route has sni: read the ClientHello first */
	uint64_t hello_timeout_ms, hello_max; /* the largest of its routes' */
	struct listen_opts lso;            /* its sockets' options (its routes agree: sockopt_conf.c) */
	/* hello: the distinct server names of its routes (sni_match.h), and
	 * for each name the routes (bits by index in route[]) that give it */
	struct sni_table *sni;
	uint64_t *name_routes;
};

#define ROUTE_GAVE_LISTEN  1
#define ROUTE_GAVE_BACKEND 2

struct config {
	struct route *route[MAX_ROUTES];
	unsigned nroutes;
	struct listen_group lst[MAX_LISTENERS]; /* the sockets: config_finalize */
	unsigned nlst;
	char file[256];              /* -c FILE, "" when routes come from -l/-b */
	/* The files `include =` read (config_file.c), by index: a location
	 * (CONF_LOC) names one. incl[0] is unused: index 0 is `file`. */
	char incl[MAX_CONF_FILES][256];
	unsigned nincl;              /* incl[1..nincl] used */
	/* The directories the include patterns look in (their part before a
	 * wildcard): a reload reads them again, the sandbox lets it */
	char incl_dir[MAX_CONF_FILES][256];
	unsigned nincl_dir;
	struct route_opts o;         /* [global] and command-line values for every route */
	settings_mask cli_set;       /* route_opts given on the command line: they win */
	uint64_t workers;            /* worker threads; SETTING_AUTO = one per CPU */
	uint64_t buffer_size;        /* copy engine buffer per direction */
	uint64_t pipe_size;          /* splice engine pipe size; 0 = kernel default */
	uint64_t busy_poll_us;       /* poll without sleeping this long after an event; 0 = off */
	uint64_t max_pipes;          /* pipes per process; SETTING_AUTO = from the fd limit */
	uint64_t max_conns;          /* concurrent sessions; SETTING_AUTO = from the fd limit */
	uint64_t drain_timeout_ms;   /* SIGTERM: how long running sessions may finish */
	uint64_t lameduck_ms;        /* SIGTERM: /health 503 this long before listeners close */
	uint64_t drain_spread;       /* 1: the drain closes sessions gracefully, spread over it */
	uint64_t upgrade_sessions;   /* 0: handover (session_handoff.h), 1: drain */
	uint64_t verbose;            /* -v count */
	char access_log[SETTING_TEXT_MAX]; /* FILE, "-", "syslog", "syslog:..." or "off" */
	uint64_t log_format;               /* enum access_log_format: kv, json */
	uint64_t log_facility;             /* index of syslog_facility_names (syslog_out.h) */
	uint64_t log_interval_ms;          /* an interim access-log line per open session this
					      often; 0 = off */
	uint64_t log_connect;              /* 1: an access-log line when the backend is up */
	char stats[SETTING_TEXT_MAX];      /* ADDRESS of the metrics endpoint, or "off" */
	struct addr stats_addr;            /* stats, parsed by config_finalize() */
	char user[SETTING_TEXT_MAX];       /* drop root to this user after binding, or "off" */
	uint64_t sandbox;                  /* 1: no_new_privs, seccomp, Landlock after start-up */
	char admin[SETTING_TEXT_MAX];      /* PATH of the admin socket (admin.h), or "off" */
	char resolvers[SETTING_TEXT_MAX];  /* DNS servers for resolve= names ("IP[:PORT] ..."),
					    * or "system" (/etc/resolv.conf) */
	uint64_t source_table_size;        /* sources tracked per route for the source limits */
	unsigned set_line[SETTINGS_MAX];             /* [global] settings by table index: the file line
					    * that set it; 0: default or command line */
	uint8_t file_problems;             /* -c FILE was read, with problems (reported) */
};

/* 0: config_finalize() leaves the host alone (no user lookup, no log file
 * opened); the fuzzers set it, as they set addr_resolve_names. */
extern int config_host_checks;

/* 0: `include =` lines are taken as written and nothing is read (the
 * fuzzers: their inputs must not walk this host's files). */
extern int config_read_includes;

/* Fills *c with every default and no route. */
void config_defaults(struct config *c);

/* Frees the routes (and their run-time tables). */
void config_free(struct config *c);

/* Parses argv[first..argc) into *c. `-c FILE` loads the file first, so the
 * other options override it wherever they stand. Returns 0 to run, 1 when
 * --help or --version was printed (exit 0), -1 after printing the error:
 * a one-line error naming the option and the value (exit 2), or every
 * problem of the file as FILE:LINE: message. */
int config_parse_args(struct config *c, int argc, char **argv, int first);

/* Loads an INI file into *c: [global] keys are the long option names (with
 * '-' or '_'), [route NAME] sections take listen, backend and the route-scope
 * settings. Prints every problem as "FILE:LINE: message" to stderr and
 * returns how many there were (0: loaded), or -1 when the file cannot be
 * opened or is not text (a NUL or control byte: reading stopped there). */
int config_load_file(struct config *c, const char *path);

/* Resolves the derived values (workers, max_conns, max_pipes, each route's
 * settings and balancing tables) against the CPU count and RLIMIT_NOFILE,
 * and checks what the options cannot check one by one (a route without
 * listener or backend, a listen address used twice, the stats address) and
 * what start would trip on: `user` exists and can be become, the log file
 * can be opened for append as that user. Start, reload and `check` all come
 * here, so they refuse the same things. Returns 0 or -1 after printing
 * every problem (FILE:LINE: for what the file set). */
int config_finalize(struct config *c);


/* Adds a route named `name` (from the file at `line`, or 0). Returns it, or
 * NULL when MAX_ROUTES are taken. */
struct route *config_add_route(struct config *c, const char *name, unsigned line);

void config_print_help(const char *prog);

#endif
