/* SPDX-License-Identifier: MIT */
/* The differential suite's machinery: one scenario (a backend behaviour and
 * a client behaviour) runs through several columns -- direct (client to
 * backend), HAProxy, nginx stream and splicer with each engine -- repeated,
 * and each rep yields a verdict: delivered or not, wrong bytes or not, and a
 * short label of how it went. The table of counts is printed to stderr and
 * every splicer column must deliver at least what the best peer delivers;
 * in SNI scenarios, every rep that direct delivers (all of them, where
 * direct has no meaning).
 *
 * HAProxy and nginx run as children of the test in its temp dir, with
 * generated configs on free ports, and are stopped by PID (nginx's master
 * and worker share a process group of their own, killed as a group only if
 * the master does not stop on SIGTERM). pr_fini() is the tests' .fini. */
#ifndef SPLICER_PEERS_H
#define SPLICER_PEERS_H

#include "harness.h"

#define PR_MAX_COLS 10
#define PR_MAX_REPS 20
#define PR_LABEL    16

enum pr_kind { PR_DIRECT, PR_HAPROXY, PR_NGINX, PR_SPLICER };

/* What one rep of one column produced. Filled by the client side and, for
 * sequential scenarios, by the backend handler of that rep (bk). */
struct pr_rep {
	int ran;
	int ok;       /* delivered, as the scenario defines it */
	int bad;      /* a byte differed from what was sent (never acceptable) */
	int stalled;  /* ended by its deadline */
	char how[PR_LABEL];
};

/* A backend handler's record of one connection. */
struct pr_side {
	int ran;
	uint64_t got;    /* bytes received */
	int end;         /* how reading ended: 0 EOF, errno, or -1 (not read to the end) */
	int bad;
	char how[PR_LABEL];
};

struct pr_scenario;
struct pr_col;

/* SNI scenarios (pr_scenario.sni): every column has one backend per route,
 * each writing its tag and then echoing every byte until EOF, so the first
 * byte a client reads says which route took it and the rest whether its
 * bytes arrived intact. The routes, the same in every proxy's config:
 *   'a'  a.example.com and *.a.example.com (one label or more)
 *   'b'  b.example.com, when the client offers ALPN h2
 *   'd'  the default: not TLS, no SNI, or no match
 * The ClientHello wait (splicer tls_hello_timeout, HAProxy inspect-delay,
 * nginx preread_timeout) is PR_HELLO_WAIT_S in each. */
#define PR_ROUTES       3
#define PR_HELLO_WAIT_S 2
extern const char pr_route_tags[PR_ROUTES];

struct pr_route {
	struct pr_col *c;
	char tag;
	struct h_server srv;
};

struct pr_col {
	char name[16];
	enum pr_kind kind;
	int half_close;       /* nginx: proxy_half_close on */
	const char *engine;   /* splicer */
	char na[200];         /* not available here, and why (the column is not run) */
	struct h_server srv;  /* this column's backend (not in SNI scenarios) */
	struct pr_route route[PR_ROUTES]; /* SNI scenarios: the routes' backends */
	struct h_addr front;  /* where its clients connect */
	struct h_proxy sp;    /* splicer */
	pid_t pid;            /* HAProxy, or nginx's master (leader of its group) */
	char log[256];        /* HAProxy's / nginx's stderr */
	const struct pr_scenario *sc;
	_Atomic int cur_rep;  /* the rep whose connection the backend serves next */
	_Atomic int started[PR_MAX_REPS], finished[PR_MAX_REPS];
	struct pr_side bk[PR_MAX_REPS];
	struct pr_rep rep[PR_MAX_REPS];
	int cut;              /* reps not run after consecutive stalls */
};

/* One scenario. backend() serves one connection (rep is -1 in parallel
 * scenarios, whose verdict the client sees alone); client() runs one rep,
 * and for sequential scenarios may wait for the backend's record with
 * pr_backend_wait(). */
struct pr_scenario {
	const char *name;
	const char *delivered; /* what "delivered" means, for the table's note */
	int reps;
	int parallel;          /* every rep of every column at once (long waits, stalls) */
	int deadline_ms;       /* per rep */
	int sni;               /* an SNI scenario: three routed backends (see above) */
	const char *direct_na; /* SNI: why `direct` has no meaning here (no proxy decides) */
	void (*backend)(struct pr_col *c, int fd, struct pr_side *out);
	void (*client)(struct pr_col *c, int rep, struct pr_rep *out);
	/* the same feature in each proxy's words (not SNI scenarios): lines of
	 * HAProxy's backend section, of nginx's server block, and splicer's
	 * options (NULL-terminated); NULL: none */
	const char *haproxy_backend;
	const char *nginx_server;
	const char *const *splicer_args;
};

/* Criterion .fini of the peer tests: stops the peers this test started,
 * then h_fini(). */
void pr_fini(void);

/* Runs the scenario through every column, prints the table row and checks:
 * direct delivers every rep (the scenario is sound), no splicer column
 * delivers a wrong byte, and every splicer column delivers at least as many
 * reps as the best of HAProxy and nginx; in an SNI scenario, every rep
 * direct delivered (every rep, when direct_na). */
void pr_run(const struct pr_scenario *sc);

/* For sequential scenarios: waits until this rep's backend connection (if
 * one came) has been served. Returns its record, or NULL if the backend saw
 * no connection within timeout_ms. */
const struct pr_side *pr_backend_wait(struct pr_col *c, int rep, int timeout_ms);

/* For scenarios that need a peer of their own config (health checks):
 * starts HAProxy with conf (written to NAME.conf in the temp dir, its log
 * into log) and waits for it to listen on 127.0.0.1:port. Returns its pid
 * (asserts); pr_pid_stop() stops it (SIGTERM, then its group SIGKILL). */
pid_t pr_haproxy_start(const char *name, const char *conf, int port, char *log, size_t loglen);
void pr_pid_stop(pid_t pid);
/* The same for nginx: stream is the body of its stream {} block (log
 * formats, servers); its error log goes to log. */
pid_t pr_nginx_start(const char *name, const char *stream, int port, char *log, size_t loglen);
/* With SPLICER_PEER_TABLE set (make test), appends a row (and, to an empty
 * file, the header) to the table printed after the run. */
void pr_table_append(const char *head, const char *row);

/* ---- I/O helpers --------------------------------------------------------- */

/* Sends and receives at once on fd (made non-blocking) until both sides are
 * done or the deadline passes. The sent bytes are stream send_seed; the
 * received bytes are checked against stream recv_seed, and anything past
 * recv_expect counts as wrong. */
struct pr_io {
	uint64_t send_len, send_seed;
	int shut_wr;            /* shutdown(SHUT_WR) after the last byte */
	int stop_on_recv_end;   /* stop sending once reading ended */
	int no_recv;            /* do not read at all */
	uint64_t recv_expect, recv_seed;
	/* results */
	uint64_t sent;
	int send_err;           /* 0 or errno */
	uint64_t got;
	int recv_end;           /* 0 EOF, errno (ETIMEDOUT: deadline), -1 not ended */
	int bad;
};
void pr_duplex(int fd, struct pr_io *io, int64_t deadline_ms);

/* Waits until every byte sent on fd was acknowledged by the peer's kernel
 * (SIOCOUTQ 0). Returns 0 or -1 at the deadline. */
int pr_wait_acked(int fd, int64_t deadline_ms);
/* SO_LINGER {1, 0}: the close that follows sends an RST. */
void pr_linger0(int fd);
/* Connects to the column's front; -1 on failure. */
int pr_connect(const struct pr_col *c);
/* SNI scenarios: the column's front, or for `direct` the backend of the
 * route the client expects (tag 'a', 'b' or 'd'); -1 on failure. */
int pr_connect_route(const struct pr_col *c, char tag);
/* Writes a rep's label (at most PR_LABEL - 1 characters). */
void pr_how(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "fin", "rst", "stall", "err-N" for a pr_io recv_end. */
const char *pr_end_label(int end);

#endif
