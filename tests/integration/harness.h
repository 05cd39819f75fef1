/* SPDX-License-Identifier: MIT */
/* Integration-test harness for splicer: runs the proxy binary as a child
 * process, provides helper backends as threads of the test process, bounded
 * socket I/O, a position-addressable PRNG byte stream, SHA-256 and an RSS
 * reader.
 *
 * Rules the helpers follow:
 *   - every socket call is bounded (SO_RCVTIMEO/SO_SNDTIMEO of at most 1 s,
 *     looped against an absolute deadline), so a broken proxy fails a test
 *     instead of hanging it;
 *   - helper threads never call Criterion assertions (only the test's main
 *     thread does); they record results that the main thread checks;
 *   - every proxy started is registered and killed in h_fini() even when an
 *     assertion aborted the test, and the child also dies with the test
 *     process (PR_SET_PDEATHSIG).
 * All exported names start with h_ / H_ so they cannot clash with unit tests. */
#ifndef SPLICER_IT_HARNESS_H
#define SPLICER_IT_HARNESS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define H_KIB 1024ull
#define H_MIB (1024ull * 1024ull)

/* ---- time ---------------------------------------------------------------- */

int64_t h_now_ms(void); /* CLOCK_MONOTONIC */
int64_t h_now_us(void);
void h_sleep_ms(int ms);

/* 1 for the plain proxy, 3 when the current case runs the ASan proxy:
 * throughput deadlines are multiplied by it (never promptness limits). */
extern int h_slow;
#define H_T(ms) ((int64_t)(ms) * h_slow)

/* ---- failure reporting --------------------------------------------------- */

/* Prints, for every proxy of this test, its log path and the log's tail, and
 * marks the test as failed so h_fini() keeps the temp dir for inspection. */
void h_fail_note(const char *file, int line);

/* The assertion every integration test uses instead of cr_assert. */
#define H_CHECK(cond, ...)                                                     \
	do {                                                                   \
		if (!(cond)) {                                                 \
			h_fail_note(__FILE__, __LINE__);                       \
			cr_assert_fail(__VA_ARGS__);                           \
		}                                                              \
	} while (0)

/* Criterion .init / .fini for every integration test. */
void h_init(void);
void h_fini(void);

/* A per-test temp dir (created on first use) under /tmp. */
const char *h_tmpdir(void);

/* ---- binaries and engines ------------------------------------------------ */

/* Resolves the proxy binary for a case: SPLICER_BIN (fails the test if unset
 * or not executable) or, when asan != 0, SPLICER_ASAN_BIN (skips the test if
 * unset or not executable). Sets h_slow. */
const char *h_binary(int asan);

typedef void (*h_case_fn)(const char *bin, const char *engine);

/* The uring engine's pair of a case (plain and ASan+UBSan proxy). */
#define H_URING_CASES(name, tmo)                                               \
	Test(integ, name##_uring, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(0), "uring"); }                                 \
	Test(integ, name##_uring_asan, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(1), "uring"); }

/* Six Criterion tests per case: engines copy, splice, auto and uring with
 * the plain proxy, and auto and uring with the ASan+UBSan proxy. auto runs
 * the copy engine, then the splice engine on the same session, so its ASan
 * run covers both; separate ASan runs of copy and splice cost the suite
 * about 90 s for no path of their own. */
#define H_ENGINE_CASES(name, tmo)                                              \
	Test(integ, name##_copy, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(0), "copy"); }                                  \
	Test(integ, name##_splice, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(0), "splice"); }                                \
	Test(integ, name##_auto, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(0), "auto"); }                                  \
	Test(integ, name##_auto_asan, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(1), "auto"); }                                  \
	H_URING_CASES(name, tmo)

/* A case on the test-only engine (src/engine/engine_tiny.c: copies through a
 * 7-byte buffer): an engine added by one file and one registry row runs
 * the core's cases; every read is short, so the core's paths run at every
 * step. Only cases whose streams are small enough for 7-byte steps (a 32
 * MiB stream takes minutes): reset, retry, all down, PROXY header,
 * half_close_timeout. */
#define H_TINY_CASE(name, tmo)                                                 \
	Test(integ, name##_test_tiny, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ case_##name(h_binary(0), "test-tiny"); }

/* The sockmap engine's variants of a case (plain and ASan proxy). Skipped,
 * with the reason, when BPF is not permitted: this process lacks CAP_BPF (or
 * CAP_SYS_ADMIN) or CAP_NET_ADMIN, or the proxy logs that the kernel refused
 * the program. Otherwise h_proxy_up() checks the program was loaded and
 * h_proxy_down() that bytes really moved in the kernel. */
#define H_SOCKMAP_CASES(name, tmo)                                             \
	Test(integ, name##_sockmap, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ h_sockmap_require(1); case_##name(h_binary(0), "sockmap"); }         \
	Test(integ, name##_sockmap_asan, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ h_sockmap_require(1); case_##name(h_binary(1), "sockmap"); }

/* The same for a case whose session may legitimately stay off the sockmap:
 * the kernel inserts only ESTABLISHED sockets, so a peer whose FIN arrives
 * before the hand-off (a client's request + shutdown before the backend is
 * connected, a backend's greeting + shutdown right after accept) keeps the
 * session on copy/splice. Then the proxy must have counted the
 * fallback instead. */
#define H_SOCKMAP_CASES_MAY_FALL_BACK(name, tmo)                               \
	Test(integ, name##_sockmap, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ h_sockmap_require(2); case_##name(h_binary(0), "sockmap"); }         \
	Test(integ, name##_sockmap_asan, .init = h_init, .fini = h_fini, .timeout = tmo) \
	{ h_sockmap_require(2); case_##name(h_binary(1), "sockmap"); }

/* Skips the test unless this process could load BPF (see above); marks the
 * test as a sockmap one for h_proxy_up/h_proxy_down (mode 1: bytes must
 * move through the sockmap; 2: or a fallback be counted). */
void h_sockmap_require(int mode);
/* 1 if the effective capabilities allow loading a sockmap program. */
int h_bpf_capable(void);

/* ---- addresses ----------------------------------------------------------- */

struct h_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char text[160]; /* "127.0.0.1:80", "[::1]:80", "unix:/path" */
};

/* Parses the proxy's address forms (numeric hosts, "[v6]:port", "unix:/p",
 * "unix:@abstract"). Returns 0 or -1. */
int h_addr_parse(const char *s, struct h_addr *a);
/* Fills a from a socket address, with the same text form. */
void h_addr_from(struct h_addr *a, const struct sockaddr *sa, socklen_t len);
int h_addr_port(const struct h_addr *a);

/* Writes text to a new file `name` in h_tmpdir() (asserts success) and
 * returns its path; the last 8 paths stay valid. */
const char *h_conf_write(const char *name, const char *text);

/* ---- the proxy process --------------------------------------------------- */

struct h_proxy {
	pid_t pid;          /* 0 once reaped */
	int status;         /* wait status once reaped */
	char log[256];      /* stderr of the proxy */
	struct h_addr addr; /* first address of the ready line */
	char ready_line[512];
};

/* Starts `bin args...` (args NULL-terminated, without argv[0]) with stderr to
 * a log file in h_tmpdir() and stdout to /dev/null, and waits (bounded) for
 * the "ready: listening on ADDR" line. Returns 0, or -1 with a reason in err
 * (the proxy is then already killed and reaped). A proxy run whose arguments
 * (or config file) do not name `lameduck` gets --lameduck 0: only the lame
 * duck's own tests wait for it at SIGTERM. */
int h_proxy_start(struct h_proxy *p, const char *bin, const char *const *args, char *err,
		  size_t errlen);

/* SIGTERM, then waits up to timeout_ms; SIGKILL after that. Returns the wait
 * status, or -1 if the proxy had to be killed (or was not running). */
int h_proxy_stop(struct h_proxy *p, int timeout_ms);

/* Waits up to timeout_ms for the proxy to exit on its own (after a signal the
 * test sent). Returns the wait status or -1 on timeout (still running). */
int h_proxy_wait(struct h_proxy *p, int timeout_ms);

/* 1 if the proxy is still running (not exited). */
int h_proxy_alive(struct h_proxy *p);

/* Checks the proxy log for sanitizer reports; returns a pointer to a static
 * description of the first one found, or NULL. */
const char *h_proxy_log_problem(const struct h_proxy *p);

/* Convenience for the cases: starts the proxy listening on `listen`, with
 * --engine engine --workers 2, the backends (NULL-terminated) and extra
 * options (NULL-terminated, may be NULL). Asserts success. */
void h_proxy_up(struct h_proxy *p, const char *bin, const char *engine, const char *listen,
		const char *const *backends, const char *const *extra);

/* In a forked child: dies with its parent (PDEATHSIG), takes in/out/err as
 * 0-2, closes every other descriptor, resets signal dispositions and the
 * mask, and execs bin. Only async-signal-safe calls; never returns. */
void h_child_exec(pid_t parent, int in_fd, int out_fd, int err_fd, const char *bin,
		  char *const *argv) __attribute__((noreturn));

/* systemd's socket activation for the children started next (h_proxy_start,
 * h_run_capture, h_child_exec) until h_activate_clear: fds[0..n) become
 * their descriptors 3.., with LISTEN_FDS=n, LISTEN_PID=the child's pid and,
 * when names is not NULL, LISTEN_FDNAMES=names ("a:b"). The caller keeps
 * its own copies of fds (as systemd does). */
void h_activate(const int *fds, unsigned n, const char *names);
void h_activate_clear(void);
/* Stops the proxy and asserts that it exited with status 0 and that its log
 * holds no sanitizer report. */
void h_proxy_down(struct h_proxy *p);

/* How many lines of the proxy's log contain every needle (a NULL-terminated
 * list of strings). */
int h_log_lines(const struct h_proxy *p, ...);

/* The same, once at least one such line is there: read again every 20 ms
 * for up to wait_ms. For a line the proxy logs through its writer thread
 * (log.c), which an answer it sent (ctl's) can overtake. */
int h_log_lines_wait(const struct h_proxy *p, int wait_ms, ...);

/* The first line of the file at path holding every needle (a NULL-
 * terminated list), read again every 20 ms for up to wait_ms (0: once),
 * copied into out without its newline. Returns 1, or 0 with out empty. */
int h_file_line(const char *path, int wait_ms, char *out, size_t len, ...);

/* The value of key in a key=value line (an access log's): the text after
 * " key=" up to the next space; empty when the key is not there. */
void h_kv_value(const char *line, const char *key, char *out, size_t len);

/* Prints the last `lines` lines of a file to stderr. */
void h_print_tail(const char *path, int lines);

/* VmRSS of a process in KiB, or -1. */
long h_rss_kib(pid_t pid);

/* The value of a line of /proc/PID/status ("Uid:", "CapEff:", "Seccomp:"),
 * up to its end of line, into out; "" when the process or the line is
 * not there. */
void h_proc_status(pid_t pid, const char *key, char *out, size_t len);

/* Open descriptors of a process (entries of /proc/PID/fd), or -1. */
int h_fd_count(pid_t pid);

/* User + system CPU seconds a process has used so far, or -1. */
double h_cpu_seconds(pid_t pid);

/* The proxy's stats endpoint, from its "stats: listening on ADDR" log line
 * (the proxy runs with --stats ADDR). Returns 0 or -1. */
int h_stats_addr(const struct h_proxy *p, struct h_addr *out);

/* GET /metrics: the whole answer (status line, headers, body) into buf,
 * NUL-terminated, within timeout_ms. Returns 0 for a 200 answer, else -1
 * (buf then holds whatever came, possibly nothing). */
int h_metrics_get(const struct h_addr *stats, char *buf, size_t len, int timeout_ms);

/* One value from GET /metrics: the first line that is `name` followed by a
 * space (name includes any labels, e.g. splicer_pipes{state="free"}).
 * Returns -1 when absent or when the endpoint does not answer within 2 s. */
long long h_metric(const struct h_addr *stats, const char *name);

/* A file's whole content (malloc'd, NUL-terminated; "" when it cannot be
 * read; NULL without memory), its length into *lenp when not NULL. */
char *h_read_file(const char *path, size_t *lenp);

/* The path of an executable `name` found in PATH (a static buffer, valid
 * until the next call), or NULL. */
const char *h_which(const char *name);

/* Runs a command to completion (bounded by timeout_ms, SIGKILL after that),
 * capturing stdout and stderr (malloc'd, NUL-terminated; caller frees).
 * Returns the wait status or -1 on timeout / spawn failure. */
int h_run_capture(const char *bin, const char *const *args, int timeout_ms, char **out,
		  char **errout);

/* ---- sockets ------------------------------------------------------------- */

/* Sets SO_RCVTIMEO and SO_SNDTIMEO. */
void h_set_timeouts(int fd, int ms);
void h_set_nodelay(int fd);

/* Connects (bounded by timeout_ms) and returns a blocking fd with 1 s
 * socket timeouts, or -1 with errno set (ECONNREFUSED, ETIMEDOUT, ...). */
int h_connect(const struct h_addr *a, int timeout_ms);

/* A TCP connection to 127.0.0.1:port from the local address src (one of
 * 127.0.0.0/8, as a client of its own; asserts), with timeout_ms socket
 * timeouts. */
int h_connect_from(int port, const char *src, int timeout_ms);

/* Sends all n bytes before the deadline; returns 0 or -errno. */
int h_send_all(int fd, const void *buf, size_t n, int64_t deadline_ms);
/* Receives exactly n bytes before the deadline; returns 0, -errno, or
 * -ENODATA on EOF before n bytes. */
int h_recv_exact(int fd, void *buf, size_t n, int64_t deadline_ms);
/* Reads until EOF, an error or the deadline, at most cap - 1 bytes, and
 * NUL-terminates; returns the bytes read. For answers that end with a close
 * (the stats endpoint). */
size_t h_recv_all(int fd, char *buf, size_t cap, int64_t deadline_ms);
/* Waits for EOF; returns 0 on EOF, -EPROTO if data arrived, -errno on error
 * (e.g. -ECONNRESET) or -ETIMEDOUT. */
int h_expect_eof(int fd, int64_t deadline_ms);

/* A TCP port on 127.0.0.1 that refuses connections: a socket bound to it that
 * never listens holds the port so nothing else takes it meanwhile. */
struct h_refused {
	int fd;
	int port;
	char text[64]; /* "127.0.0.1:PORT" */
};
int h_refused_open(struct h_refused *r);
void h_refused_close(struct h_refused *r);

/* For level-triggered epoll loops: re-arms fd (registered with data.u32 =
 * id) for `want` events only when that differs from *cur, so a socket at EOF
 * or with nothing to send is never armed for what it cannot do. */
void h_epoll_arm(int ep, int fd, uint32_t id, uint32_t *cur, uint32_t want);

/* A TCP port that nobody uses right now, outside the ephemeral range
 * (asserts). */
int h_free_port(void);

/* Whether a socket listens on 127.0.0.1:port. /proc/net/tcp, not a
 * connect: a server started by a test logs no half-made connection. */
int h_port_listening(int port);

/* 1 if an AF_INET6 socket can bind ::1. */
int h_ipv6_available(void);

/* ---- data ---------------------------------------------------------------- */

/* Byte `off` of stream `seed` is a pure function of (seed, off), so any
 * slice can be produced or checked anywhere, in any chunking. */
void h_gen(uint64_t seed, uint64_t off, void *buf, size_t n);
/* Returns the index of the first byte of buf that differs from the stream at
 * off, or n if all match. */
size_t h_gen_check(uint64_t seed, uint64_t off, const void *buf, size_t n);

struct h_sha {
	void *ctx; /* EVP_MD_CTX */
};
void h_sha_init(struct h_sha *s);
void h_sha_update(struct h_sha *s, const void *buf, size_t n);
void h_sha_final(struct h_sha *s, unsigned char out[32]);
/* Hex of a digest into a 65-byte buffer. */
const char *h_hex32(const unsigned char d[32], char out[65]);

/* ---- stream transfers ---------------------------------------------------- */

/* One direction of a transfer on fd, run inline or as a thread. */
struct h_xfer {
	/* inputs */
	int fd;
	uint64_t seed;       /* stream content (sender) / expected content (receiver, if verify) */
	uint64_t len;        /* sender: bytes to send; receiver: limit (0: until EOF) */
	int shut_wr;         /* sender: shutdown(SHUT_WR) when done */
	int verify;          /* receiver: compare against h_gen(seed) */
	int64_t deadline_ms; /* absolute, h_now_ms() clock */
	size_t pace_bytes;   /* receiver: sleep pace_ms after each pace_bytes (0: no pacing) */
	int pace_ms;
	/* progress (readable from other threads) */
	_Atomic uint64_t progress;
	/* results */
	uint64_t bytes;         /* sent / received */
	unsigned char sha[32];  /* of the bytes sent / received */
	int err;                /* 0, or errno of the failing call (ETIMEDOUT past deadline) */
	int eof;                /* receiver: saw EOF */
	int64_t t_end_us;       /* when it ended (h_now_us) */
	int64_t mismatch_at;    /* receiver with verify: first bad offset, or -1 */
	unsigned char bad[32];  /* the bytes received from mismatch_at on (h_check_stream */
	unsigned nbad;          /* finds where in the sent stream they came from) */
	pthread_t thr;
	int started;
};

void h_xfer_init(struct h_xfer *x, int fd, uint64_t seed, uint64_t len, int64_t deadline_ms);
void h_xfer_send(struct h_xfer *x); /* inline */
void h_xfer_recv(struct h_xfer *x); /* inline */
int h_xfer_start_send(struct h_xfer *x);
int h_xfer_start_recv(struct h_xfer *x);
/* Joins the thread, waiting until its deadline plus grace_ms; returns 0 or
 * -1 if it did not finish (then the thread is left running). */
int h_xfer_join(struct h_xfer *x, int grace_ms);

/* Asserts (main thread only) that rx received exactly what tx sent: both
 * without error, rx saw EOF, exactly len bytes each, equal SHA-256, and, if
 * rx->verify, content equal to the generated stream. `what` names the
 * direction in messages ("client->backend"). */
void h_check_stream(const char *what, const struct h_xfer *tx, const struct h_xfer *rx,
		    uint64_t len);

/* ---- helper backends ----------------------------------------------------- */

#define H_SERVER_MAX_CONNS 64

struct h_server;
/* Handles one accepted connection in its own thread. The harness closes fd
 * when the handler returns (set SO_LINGER {1,0} first for a reset). */
typedef void (*h_conn_fn)(struct h_server *s, int fd, int index, void *arg);

struct h_server {
	int lfd;
	int stop_fd; /* eventfd */
	struct h_addr addr;
	char unix_path[108];
	h_conn_fn fn;
	void *arg;
	pthread_t acc;
	int running;
	pthread_mutex_t mu;
	pthread_t conn_thr[H_SERVER_MAX_CONNS];
	int conn_fd[H_SERVER_MAX_CONNS];
	int nconn;
	_Atomic int accepted;
	_Atomic int done;   /* handlers returned */
	_Atomic int dropped; /* connections over H_SERVER_MAX_CONNS (closed at once) */
};

/* Listens on `where` ("127.0.0.1:0", "127.0.0.1:PORT", "[::1]:0",
 * "unix:/path") and serves each connection with fn in a new thread.
 * Returns 0 or -errno. */
int h_server_start(struct h_server *s, const char *where, int backlog, h_conn_fn fn, void *arg);
/* Stops accepting, shuts down live connections, joins every thread. */
void h_server_stop(struct h_server *s);
/* Waits until `n` handlers have returned; returns 0 or -1 on timeout. */
int h_server_wait_done(struct h_server *s, int n, int timeout_ms);

/* A backend that says who it is: accepts in a thread, writes its one-byte
 * tag to each connection and closes it; with hold, keeps each open until
 * the client closes. port 0: any free one (t->port says which). */
struct h_tag_server {
	int lfd;
	char tag;
	int hold;
	int port;
	_Atomic int stop;
	_Atomic int accepted;
	pthread_t thr;
	int held[64];
	int nheld;
};
void h_tag_start(struct h_tag_server *t, char tag, int hold, int port);
void h_tag_stop(struct h_tag_server *t);
/* Connects to a and reads the backend's tag; returns it, or 0. With keep,
 * the descriptor (-1 when the connect failed) goes to *keep, open. */
char h_tag_of(const struct h_addr *a, int *keep);

/* Ready-made handler: echoes everything until EOF, then shuts down its write
 * side. arg unused. */
void h_echo_conn(struct h_server *s, int fd, int index, void *arg);

/* n echo round trips of 64 bytes on fd (rounds from .. from + n - 1 of seed's
 * bytes, h_gen), each checked and within timeout_ms; the test fails at the
 * first that is not. */
void h_echo_rounds(int fd, uint64_t seed, int from, int n, int timeout_ms);

/* One echo round trip of n random bytes (n <= 64 KiB) through addr; returns
 * 0 or a negative errno-style code and a reason in why. */
int h_echo_roundtrip(const struct h_addr *addr, size_t n, uint64_t seed, int timeout_ms,
		     char *why, size_t whylen);

/* ---- the admin socket, spoken directly ------------------------------------ */

/* Connects to the admin socket at path (asserts); 1 s socket timeouts. */
int h_admin_connect(const char *path);
/* Sends one command line on fd and reads its whole answer (up to the empty
 * line that ends it) into ans, NUL-terminated, within 5 s; asserts that it
 * came and is not an error ("error: ..."). Returns ans. */
const char *h_admin_cmd(int fd, const char *line, char *ans, size_t cap);
/* The same, error answers included (they start with "error: "). */
const char *h_admin_try(int fd, const char *line, char *ans, size_t cap);

#endif
