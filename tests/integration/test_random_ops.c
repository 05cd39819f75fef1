/* SPDX-License-Identifier: MIT */
/* Integration case: random operations on many sessions at once (in the
 * spirit of Envoy's tcp_proxy random-operation tests).
 *
 * A deterministic generator, seeded from SPLICER_TEST_SEED or the clock (the
 * seed is printed at the start and in every failure, so a run replays),
 * drives 40 session slots through the proxy with 600 operations: client or
 * backend writes (1 B..256 KiB of h_gen content at the stream's offset),
 * shutdown(SHUT_WR) on either side, resets (SO_LINGER {1,0} + close) on either
 * side, a client close with unread data (an RST, by the kernel's rule),
 * pauses, reader stalls, reconnects, and bursts of 5-10 MiB toward a reader
 * that stalls then reads slowly (more than the proxy's socket buffers hold,
 * so bytes wait inside the proxy when a FIN or a reset comes), "write, wait
 * until acknowledged, reset" on either side, early answers (the backend
 * answers an upload it never reads, waits until its answer is acknowledged,
 * closes with the upload unread: its kernel sends an RST, issue 12 defect
 * 1) and urgent data (one byte sent with MSG_OOB amid a stream). A session
 * that ends leaves its slot to a new one. One single-threaded poll loop
 * plays both the clients and the backend (non-blocking sockets with small
 * fixed buffers), so the model sees every event in one order: an observation
 * is judged against the operations issued before it. The draw never depends
 * on timing (an operation on a session not yet paired waits for it), so a
 * seed replays the same operations.
 *
 * The model, per direction:
 *   - every byte received is checked at its offset (h_gen_check), and never
 *     more than the sender has written: received data is always a prefix;
 *   - in a session without any reset or unread close so far, EOF is legal only
 *     after the sender's shutdown(SHUT_WR), and then exactly everything it
 *     wrote came first; no error is legal at all. Half-close in one direction
 *     keeps the other one working: later writes the other way must still
 *     arrive in full before that direction's EOF;
 *   - after a reset (or unread close) by one side, TCP only promises a prefix
 *     (bytes in flight may be discarded); the other side must see its end,
 *     EOF or ECONNRESET on read and an error on write (probed with single
 *     bytes when it has nothing to send), within RO_END_MS: the proxy must
 *     propagate it, well before the idle timeout would;
 *   - with the per-direction session rules (RO_RULES_NEW: copy, splice, auto;
 *     src/core/session.c, above dir_kill), a reset by a side whose own bytes were
 *     all acknowledged (SIOCOUTQ 0 at the reset: every byte sits in the
 *     proxy's kernel) is stronger: the far side receives exactly everything
 *     that side wrote, then its end (EOF or ECONNRESET). The new operations
 *     always reset that way; plain resets get the stronger rule whenever
 *     their SIOCOUTQ happened to be 0. The far side's RO_END_MS then counts
 *     from the reset or its last byte received, whichever is later (bytes
 *     are delivered before the end). sockmap and uring keep the old model
 *     (the first error ends the session) and get the weaker rule;
 *   - urgent data (RO_RULES_NEW, TCP only): the sender's in-band stream is
 *     its h_gen stream, the urgent byte an extra byte outside it (its value
 *     is the complement of the in-band byte at its place, so it shows as a
 *     wrong byte if it ever arrives in-band). Every in-band byte arrives; a
 *     receiver never sits at the mark for RO_END_MS while bytes after it are
 *     written (the old proxy stalled there until the idle timeout); one recv()
 *     never crosses the mark (the kernel stops there when the byte came as
 *     urgent); at the mark with bytes queued after it, recv(MSG_OOB) returns
 *     the urgent byte, with SIOCATMARK true. An end sends its next urgent
 *     byte only after the far end read past the previous mark (a newer
 *     urgent pointer turns an unread urgent byte into in-band data);
 *   - every session ends, every backend connection is paired (by an 8-byte
 *     tag the client sends first), and at the end the proxy still serves an
 *     echo round trip on a second route, its socket descriptors return to the
 *     baseline, its pipes are all back in the pools and no session ended by
 *     the idle timeout (/metrics; quiet sessions get keepalive bytes). */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RO_SLOTS 40
#define RO_OPS 600
#define RO_MAX_SESS (RO_SLOTS + RO_OPS) /* each op replaces at most one session */
#define RO_CHUNK (64 * 1024)
#define RO_TAG_BASE 0x52414E444F500000ull /* "\0\0PODNAR": tag = base + session id */
#define RO_PAIR_MS 5000       /* connect + tag through the proxy */
#define RO_END_MS 3000        /* the far side sees a reset's end (promptness, < idle timeout) */
#define RO_UNREAD_MS 2000     /* bytes for an unread close reach the client */
#define RO_KEEPALIVE_MS 1000  /* a quiet active session gets a byte (idle timeout is 5 s) */
#define RO_PASSIVE_MS 200     /* the far end waits this long for an RST before probing */
#define RO_PROBE_MS 20
#define RO_SLOW_READ 8192 /* a reader after a burst's stall: slower than the proxy */
#define RO_SOCKBUF (64 * 1024) /* our ends' buffers: the proxy's fill up, not ours */
#define RO_ACK_MS 4000        /* an end's bytes are acknowledged before its planned reset */
#define RO_URG_WAIT_MS 5000   /* the previous urgent mark is passed before the next one */

enum { RO_C, RO_B }; /* the two ends of a session: client, backend */

enum ro_kind {
	CW, BW, CSHUT, BSHUT, CRST, BRST, CUNREAD, PAUSE, STALL, RECONN, CBURST, BBURST,
	CARST, BARST, EARLY, CURG, BURG, RO_NKINDS
};

/* Which session model the engine promises (see the header comment). */
enum ro_rules {
	RO_RULES_OLD, /* sockmap, uring: the first error ends the session; no urgent data */
	RO_RULES_NEW, /* copy, splice, auto: per-direction ends, acknowledged bytes kept, urgent */
};

/* An end's urgent byte (the sender's struct ro_end). */
enum { RO_URG_NONE, RO_URG_PENDING, RO_URG_SENT };

static const struct {
	const char *name;
	unsigned weight;
} ro_kinds[RO_NKINDS] = {
	[CW] = { "client-write", 22 },     [BW] = { "backend-write", 22 },
	[CSHUT] = { "client-shut", 6 },    [BSHUT] = { "backend-shut", 6 },
	[CRST] = { "client-reset", 4 },    [BRST] = { "backend-reset", 4 },
	[CUNREAD] = { "client-unread-close", 4 }, [PAUSE] = { "pause", 8 },
	[STALL] = { "stall", 8 },          [RECONN] = { "reconnect", 6 },
	[CBURST] = { "client-burst", 2 },  [BBURST] = { "backend-burst", 2 },
	[CARST] = { "client-write-acked-reset", 3 }, [BARST] = { "backend-write-acked-reset", 3 },
	[EARLY] = { "early-answer-reset", 4 },
	[CURG] = { "client-urgent", 4 },   [BURG] = { "backend-urgent", 4 },
};

struct ro_end {
	int fd;
	uint64_t planned; /* bytes the generator asked this end to send */
	uint64_t written; /* of those, accepted by the kernel */
	uint64_t rcvd;    /* bytes received, each one verified */
	int64_t noread_until, slow_until, next_probe;
	int rerr, werr;   /* errno of a failed recv / send */
	uint8_t shut_req, shut_done, eof, noread;
	/* as a sender: its urgent byte goes out when written reaches urg_off */
	uint64_t urg_off;
	uint8_t urg_state, urg_val;
	/* as a receiver: the sender's urgent byte was read with MSG_OOB */
	uint8_t urg_checked;
	int64_t urg_wait_since; /* sitting at the sender's mark with bytes after it written */
};

struct ro_sess {
	unsigned id;
	uint64_t seed[2]; /* stream sent by the client / by the backend */
	struct ro_end e[2];
	int64_t t_open, t_last_io, end_by, unread_by, t_abrupt;
	int abrupt_by;    /* -1, or the end that reset / closed with unread data */
	uint8_t acked;    /* that end's bytes were all acknowledged: all must arrive */
	int rst_pending;  /* -1, or the end that resets once its bytes are acknowledged */
	uint8_t rst_unread; /* ... by a close with unread data (else SO_LINGER 0) */
	int64_t rst_by;
	uint8_t tag_sent, connected, paired, done;
	uint8_t graceful; /* ending cleanly: each end shuts down at its EOF */
	uint8_t unread_pending;
	char hist[400];   /* what happened to the session, for failure messages */
};

struct ro_pend { /* an accepted backend connection before its whole tag */
	int fd;
	unsigned got;
	unsigned char tag[8];
};

struct ro_op {
	int slot, kind, side;
	uint64_t n, m;
};

static struct {
	uint64_t seed, rng;
	struct h_addr proxy;
	int lfd;
	int64_t hard_deadline, grace_ms;
	struct ro_sess sess[RO_MAX_SESS];
	unsigned nsess;
	int slot[RO_SLOTS]; /* session index, -1 once the final phase began */
	struct ro_pend pend[RO_MAX_SESS];
	unsigned npend;
	unsigned ops_done, kinds[RO_NKINDS];
	int have_op, final;
	int rules, urgent; /* enum ro_rules; urgent operations drawn (TCP, RO_RULES_NEW) */
	struct ro_op op;
	int64_t next_op, op_wait;
	unsigned char buf[RO_CHUNK];
	/* results */
	int failed;
	char why[1400];
	uint64_t verified[2]; /* bytes received and checked at the backend / client */
	unsigned accepted, clean_done, abrupt_done, keepalives, probes;
	unsigned far_eof, far_rst, far_passive; /* how far ends saw a reset's end */
	unsigned acked_resets;                  /* resets judged by the stronger rule */
	unsigned urg_sent, urg_seen, urg_unseen; /* urgent bytes; read with MSG_OOB at the mark */
	unsigned urg_reset; /* crossed in-band: the sender's reset took the urgent byte */
	int64_t max_end_ms, max_pair_ms;        /* slowest far end, slowest pairing */
} ro;

static const char *const ro_end_name[2] = { "client", "backend" };

/* ---- generator ------------------------------------------------------------ */

static uint64_t ro_next(void)
{
	uint64_t z = (ro.rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t ro_below(uint64_t n)
{
	return ro_next() % n;
}

/* Write sizes: a quarter uniform over 1 B..256 KiB, the rest spread evenly
 * over powers of two, so single bytes and odd small sizes are common too. */
static uint64_t ro_size(void)
{
	if (ro_below(4) == 0)
		return 1 + ro_below(256 * 1024);
	return 1 + ro_below(1ull << ro_below(19));
}

/* ---- failures and history -------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static void ro_hist(struct ro_sess *s, const char *fmt, ...)
{
	size_t l = strlen(s->hist);
	if (l + 4 >= sizeof s->hist)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s->hist + l, sizeof s->hist - l, fmt, ap);
	va_end(ap);
	if (n < 0 || l + (size_t)n + 2 >= sizeof s->hist) {
		strcpy(s->hist + sizeof s->hist - 5, "...");
		return;
	}
	strcat(s->hist, " ");
}

/* Keeps the first failure, with the session's state and history. */
__attribute__((format(printf, 2, 3))) static void ro_fail(const struct ro_sess *s,
							   const char *fmt, ...)
{
	if (ro.failed)
		return;
	ro.failed = 1;
	size_t l = 0;
	if (s)
		l = (size_t)snprintf(ro.why, sizeof ro.why, "session %u: ", s->id);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ro.why + l, sizeof ro.why - l, fmt, ap);
	va_end(ap);
	l = strlen(ro.why);
	if (s)
		snprintf(ro.why + l, sizeof ro.why - l,
			 " [client wrote %llu/%llu got %llu; backend wrote %llu/%llu got %llu; "
			 "history: %s]",
			 (unsigned long long)s->e[RO_C].written, (unsigned long long)s->e[RO_C].planned,
			 (unsigned long long)s->e[RO_C].rcvd, (unsigned long long)s->e[RO_B].written,
			 (unsigned long long)s->e[RO_B].planned, (unsigned long long)s->e[RO_B].rcvd,
			 s->hist);
}

/* ---- sessions ------------------------------------------------------------- */

/* Fixed, small buffers (no autotuning to MBs) on the clients and the
 * backend: a stalled reader then backs data up into the proxy, where FINs
 * must wait behind it and resets may catch it. Set before connect / listen,
 * so the window scale fits. */
static void ro_small_buffers(int fd)
{
	int v = RO_SOCKBUF;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

static int ro_open(int64_t now)
{
	if (ro.nsess >= RO_MAX_SESS) {
		ro_fail(NULL, "more than %d sessions (generator bug)", RO_MAX_SESS);
		return -1;
	}
	struct ro_sess *s = &ro.sess[ro.nsess];
	memset(s, 0, sizeof *s);
	s->id = ro.nsess++;
	s->seed[RO_C] = ro.seed * 0x100000001B3ull + 2 * s->id;
	s->seed[RO_B] = ro.seed * 0x100000001B3ull + 2 * s->id + 1;
	s->e[RO_C].fd = s->e[RO_B].fd = -1;
	s->abrupt_by = s->rst_pending = -1;
	s->t_open = s->t_last_io = now;
	int fd = socket(ro.proxy.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		ro_small_buffers(fd);
	if (fd < 0 || (connect(fd, (struct sockaddr *)&ro.proxy.ss, ro.proxy.len) < 0 &&
		       errno != EINPROGRESS)) {
		ro_fail(s, "socket/connect to the proxy: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		s->done = 1;
		return -1;
	}
	s->e[RO_C].fd = fd;
	return (int)s->id;
}

/* A session with both ends at EOF and shut down, or a reset one whose far
 * end has seen its end, is over: close what is left. */
static void ro_finish(struct ro_sess *s)
{
	for (int k = 0; k < 2; k++)
		if (s->e[k].fd >= 0) {
			close(s->e[k].fd);
			s->e[k].fd = -1;
		}
	s->done = 1;
	if (s->abrupt_by >= 0)
		ro.abrupt_done++;
	else
		ro.clean_done++;
}

/* From now on only prefixes are promised; the other end must see its end
 * within RO_END_MS. */
static void ro_abrupt(struct ro_sess *s, int k, int64_t now)
{
	s->abrupt_by = k;
	s->t_abrupt = now;
	s->end_by = now + RO_END_MS;
	s->e[k].fd = -1;
}

/* Resets end k: SO_LINGER {1,0}, or (unread) a plain close that leaves
 * received bytes unread, so the kernel sends the RST. Its SIOCOUTQ just
 * before decides the rule: 0 means every byte it wrote sits in the proxy's
 * kernel, and with RO_RULES_NEW all of them must reach the far end. */
static void ro_close_abrupt(struct ro_sess *s, int k, int unread, int64_t now)
{
	struct ro_end *e = &s->e[k];
	int q = -1;

	if (ioctl(e->fd, SIOCOUTQ, &q) < 0)
		q = -1;
	if (!unread) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(e->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	}
	close(e->fd);
	s->acked = ro.rules == RO_RULES_NEW && q == 0;
	ro.acked_resets += s->acked;
	ro_hist(s, "%c:%s@%llu(outq %d)", ro_end_name[k][0], unread ? "close-unread" : "rst",
		(unsigned long long)e->written, q);
	ro_abrupt(s, k, now);
}

static void ro_write_error(struct ro_sess *s, int k, int err)
{
	struct ro_end *e = &s->e[k];
	e->werr = err;
	ro_hist(s, "%c:send-%s@%llu", ro_end_name[k][0], strerrorname_np(err),
		(unsigned long long)e->written);
	if (s->abrupt_by < 0)
		ro_fail(s, "%s: send failed after %llu bytes: %s, though no side has reset or closed",
			ro_end_name[k], (unsigned long long)e->written, strerror(err));
	e->planned = e->written; /* the rest is never sent */
}

/* Sends what is planned (the client's tag first), then the shutdown once
 * everything before it is written. */
static void ro_send(struct ro_sess *s, int k, int64_t now)
{
	struct ro_end *e = &s->e[k];
	if (e->fd < 0 || e->werr || e->shut_done)
		return;
	if (k == RO_C && s->tag_sent < 8) {
		uint64_t tag = RO_TAG_BASE + s->id;
		ssize_t r = send(e->fd, (char *)&tag + s->tag_sent, 8u - s->tag_sent, MSG_NOSIGNAL);
		if (r > 0)
			s->tag_sent += (uint8_t)r;
		else if (r < 0 && errno != EAGAIN && errno != EINTR)
			ro_write_error(s, k, errno);
		if (s->tag_sent < 8)
			return;
	}
	for (int i = 0; i < 4 && e->written < e->planned; i++) {
		uint64_t end = e->planned;
		if (e->urg_state == RO_URG_PENDING) {
			if (e->written == e->urg_off) {
				/* an extra byte, outside the h_gen stream */
				ssize_t r = send(e->fd, &e->urg_val, 1, MSG_OOB | MSG_NOSIGNAL);
				if (r < 0) {
					if (errno != EAGAIN && errno != EINTR)
						ro_write_error(s, k, errno);
					return;
				}
				e->urg_state = RO_URG_SENT;
				ro.urg_sent++;
				ro_hist(s, "%c:urg@%llu", ro_end_name[k][0],
					(unsigned long long)e->written);
				continue;
			}
			end = e->urg_off; /* the bytes before the mark first */
		}
		size_t n = end - e->written < RO_CHUNK ? (size_t)(end - e->written) : RO_CHUNK;
		h_gen(s->seed[k], e->written, ro.buf, n);
		ssize_t r = send(e->fd, ro.buf, n, MSG_NOSIGNAL);
		if (r > 0) {
			e->written += (uint64_t)r;
			s->t_last_io = now;
		} else {
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				ro_write_error(s, k, errno);
			return;
		}
	}
	if (e->shut_req && e->written == e->planned) {
		if (shutdown(e->fd, SHUT_WR) < 0) {
			ro_write_error(s, k, errno);
			return;
		}
		e->shut_done = 1;
		ro_hist(s, "%c:fin@%llu", ro_end_name[k][0], (unsigned long long)e->written);
	}
}

/* The far end of a reset by a side whose bytes were all acknowledged sees
 * its end (how): everything that side wrote must have come first. */
static void ro_acked_end(struct ro_sess *s, int k, const char *how)
{
	const struct ro_end *e = &s->e[k], *p = &s->e[!k];

	if (s->acked && s->abrupt_by == !k && e->rcvd != p->written)
		ro_fail(s, "%s: %s after %llu bytes, but the %s wrote %llu, all acknowledged by "
			   "the proxy's kernel before its reset (outq 0): the proxy lost %llu bytes",
			ro_end_name[k], how, (unsigned long long)e->rcvd, ro_end_name[!k],
			(unsigned long long)p->written, (unsigned long long)(p->written - e->rcvd));
}

static void ro_eof(struct ro_sess *s, int k)
{
	struct ro_end *e = &s->e[k], *p = &s->e[!k];
	e->eof = 1;
	ro.far_eof += s->abrupt_by == !k;
	ro_hist(s, "%c:eof@%llu", ro_end_name[k][0], (unsigned long long)e->rcvd);
	ro_acked_end(s, k, "EOF");
	if (s->abrupt_by < 0) {
		if (!p->shut_done)
			ro_fail(s, "%s: EOF after %llu bytes, but the %s has not shut down and no side "
				   "has reset or closed: the proxy ended a live stream",
				ro_end_name[k], (unsigned long long)e->rcvd, ro_end_name[!k]);
		else if (e->rcvd != p->written)
			ro_fail(s, "%s: EOF after %llu bytes, but the %s wrote %llu before its clean "
				   "shutdown (no reset anywhere): bytes lost",
				ro_end_name[k], (unsigned long long)e->rcvd, ro_end_name[!k],
				(unsigned long long)p->written);
	}
}

/* Receiver k sits where the sender put its urgent byte (p->urg_off): if
 * bytes after it are queued, the byte came (TCP is in order, and the kernel
 * takes the urgent byte out as the segment arrives), so it must read with
 * MSG_OOB, at the mark. FIONREAD first: with an urgent byte pending it
 * counts only the bytes before the mark (0 here); without one, every
 * queued byte, so bytes there before the recv() and no urgent byte mean
 * none came. With nothing queued the byte may still be on its way (EINVAL,
 * or EAGAIN when only the pointer came); ro_recv then only peeks, as a
 * recv() at the mark would consume a byte that came meanwhile. */
static void ro_urg_at_mark(struct ro_sess *s, int k)
{
	struct ro_end *e = &s->e[k];
	const struct ro_end *p = &s->e[!k];
	int q = 0, at = 0;
	unsigned char b;

	if (ioctl(e->fd, FIONREAD, &q) < 0)
		q = 0;
	ssize_t r = recv(e->fd, &b, 1, MSG_OOB);
	if (r == 1) {
		e->urg_checked = 1;
		ro_hist(s, "%c:oob@%llu", ro_end_name[k][0], (unsigned long long)e->rcvd);
		if (ioctl(e->fd, SIOCATMARK, &at) < 0)
			at = -1;
		if (b != p->urg_val)
			ro_fail(s, "%s: the urgent byte read with MSG_OOB is %#x, the %s sent %#x",
				ro_end_name[k], b, ro_end_name[!k], p->urg_val);
		else if (at != 1)
			ro_fail(s, "%s: read the urgent byte with MSG_OOB after %llu in-band bytes, "
				   "where the %s sent it, but SIOCATMARK says %d: the mark moved",
				ro_end_name[k], (unsigned long long)e->rcvd, ro_end_name[!k], at);
	} else if (r < 0 && errno == EINVAL && q > 0 && s->abrupt_by != !k) {
		/* (after the sender's reset the bytes may come without it:
		 * ro_urg_passed) */
		ro_fail(s, "%s: after %llu in-band bytes, where the %s sent its urgent byte, %d "
			   "bytes are queued but no urgent byte came (recv MSG_OOB: EINVAL): the "
			   "proxy did not pass it on as urgent",
			ro_end_name[k], (unsigned long long)e->rcvd, ro_end_name[!k], q);
	}
}

/* r bytes received by k after `before`: the sender's urgent mark. */
static void ro_urg_passed(struct ro_sess *s, int k, uint64_t before, uint64_t r)
{
	struct ro_end *e = &s->e[k], *p = &s->e[!k];

	if (p->urg_state != RO_URG_SENT || before + r <= p->urg_off)
		return;
	if (before < p->urg_off && s->abrupt_by == !k) {
		/* The sender reset: its socket on the proxy is closed, and
		 * recv(MSG_OOB) there fails (ENOTCONN) while an ordinary recv()
		 * still reads the bytes on both sides of the mark. So the
		 * in-band bytes come on without the urgent byte, which is what
		 * HAProxy and nginx deliver every time (urgent.h). */
		ro.urg_reset++;
	} else if (before < p->urg_off) {
		ro_fail(s, "%s: one recv() returned in-band bytes %llu..%llu across the %s's urgent "
			   "mark at %llu (the kernel stops at a mark it knows): the proxy did not "
			   "pass the urgent byte on as urgent",
			ro_end_name[k], (unsigned long long)before,
			(unsigned long long)(before + r), ro_end_name[!k],
			(unsigned long long)p->urg_off);
		return;
	}
	/* past the mark: the sender may send its next urgent byte */
	p->urg_state = RO_URG_NONE;
	if (before < p->urg_off)
		; /* counted above: taken by a reset */
	else if (e->urg_checked)
		ro.urg_seen++;
	else
		ro.urg_unseen++; /* the byte and more came between our looks: fine */
	e->urg_checked = 0;
}

static void ro_recv(struct ro_sess *s, int k, int64_t now)
{
	struct ro_end *e = &s->e[k];
	const struct ro_end *p = &s->e[!k];
	int slow = now < e->slow_until;
	for (int i = 0; i < (slow ? 1 : 4); i++) {
		int peek = 0;
		if (p->urg_state == RO_URG_SENT && e->rcvd == p->urg_off && !e->urg_checked) {
			ro_urg_at_mark(s, k);
			if (ro.failed)
				return;
			/* The byte is not here yet: a recv() at the mark would
			 * step over it unseen if it came now (and return EAGAIN
			 * when nothing follows it), so only peek: EOF and errors
			 * show, and bytes that came meanwhile mean look again. */
			peek = !e->urg_checked;
		}
		ssize_t r = recv(e->fd, ro.buf, peek ? 1 : slow ? RO_SLOW_READ : RO_CHUNK,
				 peek ? MSG_PEEK : 0);
		if (r > 0 && peek)
			continue;
		if (r > 0) {
			uint64_t sent = p->written;
			if (e->rcvd + (uint64_t)r > sent) {
				ro_fail(s, "%s: received %llu bytes, but the %s has written only %llu%s",
					ro_end_name[k], (unsigned long long)(e->rcvd + (uint64_t)r),
					ro_end_name[!k], (unsigned long long)sent,
					p->urg_state == RO_URG_SENT
						? " in band (its urgent byte came in-band?)"
						: "");
				return;
			}
			size_t bad = h_gen_check(s->seed[!k], e->rcvd, ro.buf, (size_t)r);
			if (bad < (size_t)r) {
				int urg = p->urg_state == RO_URG_SENT && e->rcvd + bad == p->urg_off;
				ro_fail(s, "%s: byte %llu differs from what the %s sent (not a prefix)%s",
					ro_end_name[k], (unsigned long long)(e->rcvd + bad),
					ro_end_name[!k],
					urg ? ": the urgent byte came in-band" : "");
				return;
			}
			ro_urg_passed(s, k, e->rcvd, (uint64_t)r);
			if (ro.failed)
				return;
			e->rcvd += (uint64_t)r;
			ro.verified[k] += (uint64_t)r;
			s->t_last_io = now;
			/* bytes are delivered before the end: its time counts from the last */
			if (ro.rules == RO_RULES_NEW && s->abrupt_by == !k && s->end_by < now + RO_END_MS)
				s->end_by = now + RO_END_MS;
		} else if (r == 0) {
			ro_eof(s, k);
			return;
		} else {
			if (errno == EAGAIN || errno == EINTR)
				return;
			e->rerr = errno;
			ro.far_rst += s->abrupt_by == !k;
			ro_hist(s, "%c:recv-%s@%llu", ro_end_name[k][0], strerrorname_np(errno),
				(unsigned long long)e->rcvd);
			if (s->abrupt_by < 0 || e->rerr != ECONNRESET)
				ro_fail(s, "%s: recv after %llu bytes: %s%s", ro_end_name[k],
					(unsigned long long)e->rcvd, strerror(e->rerr),
					s->abrupt_by < 0 ? ", though no side has reset or closed" : "");
			else
				ro_acked_end(s, k, "ECONNRESET");
			return;
		}
	}
}

/* The far end of a reset session with nothing to read or send: polled for
 * POLLERR / POLLHUP only, which mean its connection is gone. */
static int ro_far_idle(const struct ro_sess *s, int k)
{
	const struct ro_end *e = &s->e[k];
	return s->abrupt_by == !k && (e->eof || e->rerr) && !e->werr && !e->shut_done;
}

static void ro_far_hup(struct ro_sess *s, int k)
{
	struct ro_end *e = &s->e[k];
	int err = 0;
	socklen_t sl = sizeof err;
	getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
	e->werr = err ? err : EPIPE; /* POLLHUP: both ways shut or closed */
	e->planned = e->written;
	ro.far_passive++;
	ro_hist(s, "%c:hup-%s", ro_end_name[k][0], err ? strerrorname_np(err) : "closed");
}

static int ro_reading(const struct ro_end *e, int64_t now)
{
	return !e->eof && !e->rerr && !e->noread && now >= e->noread_until;
}

static int ro_wants_write(const struct ro_sess *s, int k)
{
	const struct ro_end *e = &s->e[k];
	if (e->werr || e->shut_done)
		return 0;
	return (k == RO_C && s->tag_sent < 8) || e->written < e->planned || e->shut_req;
}

/* ---- the backend's accept and pairing -------------------------------------- */

static void ro_accept(void)
{
	for (;;) {
		int fd = accept4(ro.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		ro.accepted++;
		if (ro.npend >= RO_MAX_SESS) {
			ro_fail(NULL, "more backend connections waiting for a tag than sessions");
			close(fd);
			return;
		}
		ro.pend[ro.npend++] = (struct ro_pend){ .fd = fd };
	}
}

/* Reads the tag (and not a byte more) and hands the connection to its
 * session. Returns 1 when the entry is finished with (paired or failed). */
static int ro_pend_read(struct ro_pend *pd, int64_t now)
{
	ssize_t r = recv(pd->fd, pd->tag + pd->got, 8 - pd->got, 0);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0) {
		ro_fail(NULL, "a backend connection ended (%s) after %u of its 8 tag bytes",
			r == 0 ? "EOF" : strerror(errno), pd->got);
		close(pd->fd);
		return 1;
	}
	pd->got += (unsigned)r;
	if (pd->got < 8)
		return 0;
	uint64_t tag;
	memcpy(&tag, pd->tag, 8);
	uint64_t id = tag - RO_TAG_BASE;
	if (id >= ro.nsess || ro.sess[id].paired) {
		ro_fail(NULL, "a backend connection carries tag %#llx: %s", (unsigned long long)tag,
			id >= ro.nsess ? "no such session" : "its session is already paired");
		close(pd->fd);
		return 1;
	}
	struct ro_sess *s = &ro.sess[id];
	s->e[RO_B].fd = pd->fd;
	s->paired = 1;
	s->t_last_io = now;
	if (now - s->t_open > ro.max_pair_ms)
		ro.max_pair_ms = now - s->t_open;
	ro_hist(s, "paired+%lldms", (long long)(now - s->t_open));
	return 1;
}

/* ---- operations ---------------------------------------------------------- */

/* A slot's session leaves the generator (it is ending) and a new one takes
 * its place. */
static void ro_retire(int slot, int64_t now)
{
	ro.slot[slot] = ro_open(now);
}

static void ro_draw(void)
{
	struct ro_op *op = &ro.op;
	op->slot = (int)ro_below(RO_SLOTS);
	const struct ro_sess *s = &ro.sess[ro.slot[op->slot]];
	unsigned ok[RO_NKINDS], total = 0;
	for (int i = 0; i < RO_NKINDS; i++) {
		ok[i] = ro_kinds[i].weight;
		if (((i == CW || i == CSHUT || i == CBURST || i == CURG || i == EARLY) &&
		     s->e[RO_C].shut_req) ||
		    ((i == BW || i == BSHUT || i == BBURST || i == CUNREAD || i == BURG ||
		      i == EARLY) &&
		     s->e[RO_B].shut_req))
			ok[i] = 0; /* an unread close needs a backend that can still write,
				    * an early answer an upload and an answer */
		if ((i == CURG || i == BURG) && !ro.urgent)
			ok[i] = 0;
		total += ok[i];
	}
	unsigned x = (unsigned)ro_below(total);
	for (op->kind = 0; x >= ok[op->kind]; op->kind++)
		x -= ok[op->kind];
	op->side = (int)ro_below(2);
	switch (op->kind) {
	case CW:
	case BW:
		op->n = ro_size();
		break;
	case CUNREAD:
		op->n = 1 + ro_below(64 * 1024);
		break;
	case CARST:
	case BARST:
		op->n = ro_size(); /* not written if that end has shut down */
		break;
	case EARLY:
		/* an answer of a few bytes (a 413) or up to 1 MiB, to an upload
		 * of more than the buffers on its way hold */
		op->n = ro_below(2) ? 1 + ro_below(256) : 1 + ro_below(H_MIB);
		op->m = 256 * 1024 + ro_below(4 * H_MIB);
		break;
	case CURG:
	case BURG:
		op->n = ro_below(2) ? ro_below(64) : ro_size(); /* in-band bytes before it */
		op->m = ro_size();                              /* and after it */
		break;
	case PAUSE:
		op->n = 1 + ro_below(10);
		break;
	case STALL:
		op->n = 5 + ro_below(56);
		break;
	case CBURST:
	case BBURST:
		op->n = 5 * H_MIB + ro_below(5 * H_MIB);
		op->side = (int)ro_below(2); /* 1: shut down right after it */
		break;
	default:
		op->n = 0;
	}
}

static void ro_execute(struct ro_sess *s, int64_t now)
{
	const struct ro_op *op = &ro.op;
	struct ro_end *c = &s->e[RO_C], *b = &s->e[RO_B];
	int retire = 0;

	ro.kinds[op->kind]++;
	ro.next_op = now + (int64_t)ro_below(8);
	switch (op->kind) {
	case CW:
	case BW:
		s->e[op->kind == CW ? RO_C : RO_B].planned += op->n;
		ro_hist(s, "%s+%llu", op->kind == CW ? "cw" : "bw", (unsigned long long)op->n);
		break;
	case CSHUT:
	case BSHUT:
		s->e[op->kind == CSHUT ? RO_C : RO_B].shut_req = 1;
		ro_hist(s, "%s", op->kind == CSHUT ? "cshut" : "bshut");
		if (c->shut_req && b->shut_req) {
			s->graceful = 1; /* nothing more can be sent: it ends by itself */
			s->end_by = now + ro.grace_ms;
			retire = 1;
		}
		break;
	case CRST:
	case BRST:
		ro_hist(s, "%s", op->kind == CRST ? "crst" : "brst");
		ro_close_abrupt(s, op->kind == CRST ? RO_C : RO_B, 0, now);
		retire = 1;
		break;
	case CARST:
	case BARST: {
		/* write, wait until the proxy's kernel acknowledged every byte
		 * (SIOCOUTQ 0), reset: ro_tick */
		int k = op->kind == CARST ? RO_C : RO_B;
		if (!s->e[k].shut_req)
			s->e[k].planned += op->n;
		s->rst_pending = k;
		s->rst_unread = 0;
		s->rst_by = now + RO_ACK_MS;
		ro_hist(s, "%cw+%llu+ackrst", ro_end_name[k][0],
			s->e[k].shut_req ? 0ull : (unsigned long long)op->n);
		retire = 1;
		break;
	}
	case EARLY:
		/* The backend stops reading, the client uploads, the backend
		 * answers; once the answer is acknowledged it closes with the
		 * upload unread (an RST right behind its answer): ro_tick. */
		b->noread = 1;
		c->planned += op->m;
		b->planned += op->n;
		s->rst_pending = RO_B;
		s->rst_unread = 1;
		s->rst_by = now + RO_ACK_MS;
		ro_hist(s, "early(cw+%llu,bw+%llu)", (unsigned long long)op->m,
			(unsigned long long)op->n);
		retire = 1;
		break;
	case CURG:
	case BURG: {
		/* op->n in-band bytes, the urgent byte, op->m in-band bytes;
		 * the byte is the complement of the in-band byte at its place */
		struct ro_end *e = &s->e[op->kind == CURG ? RO_C : RO_B];
		unsigned char g;
		e->urg_off = e->planned + op->n;
		e->planned += op->n + op->m;
		h_gen(s->seed[op->kind == CURG ? RO_C : RO_B], e->urg_off, &g, 1);
		e->urg_val = (uint8_t)~g;
		e->urg_state = RO_URG_PENDING;
		ro_hist(s, "%s+%llu+urg+%llu", op->kind == CURG ? "cw" : "bw",
			(unsigned long long)op->n, (unsigned long long)op->m);
		break;
	}
	case CUNREAD:
		/* The client stops reading, the backend sends op->n bytes; the
		 * close happens once some are queued unread at the client. */
		c->noread = 1;
		b->planned += op->n;
		s->unread_pending = 1;
		s->unread_by = now + RO_UNREAD_MS;
		ro_hist(s, "cunread(bw+%llu)", (unsigned long long)op->n);
		retire = 1;
		break;
	case PAUSE:
		ro.next_op = now + (int64_t)op->n;
		break;
	case STALL:
		s->e[op->side].noread_until = now + (int64_t)op->n;
		ro_hist(s, "%cstall%llums", ro_end_name[op->side][0], (unsigned long long)op->n);
		break;
	case CBURST:
	case BBURST: {
		/* More than the proxy's socket buffers hold (about 4 MiB sent
		 * toward a peer that does not read, plus its receive side)
		 * while the receiver stalls, then reads slowly: bytes wait in
		 * the proxy's own buffer or pipe when the FIN comes in, and the
		 * FIN must queue behind them. */
		int k = op->kind == CBURST ? RO_C : RO_B;
		s->e[k].planned += op->n;
		s->e[!k].noread_until = now + 100 + (int64_t)ro_below(200);
		s->e[!k].slow_until = s->e[!k].noread_until + 300;
		if (op->side)
			s->e[k].shut_req = 1;
		ro_hist(s, "%cburst+%llu%s", ro_end_name[k][0], (unsigned long long)op->n,
			op->side ? "+shut" : "");
		if (c->shut_req && b->shut_req) {
			s->graceful = 1;
			s->end_by = now + ro.grace_ms;
			retire = 1;
		}
		break;
	}
	case RECONN:
		s->graceful = 1;
		c->shut_req = 1;
		s->end_by = now + ro.grace_ms;
		ro_hist(s, "reconnect");
		retire = 1;
		break;
	}
	if (retire)
		ro_retire(op->slot, now);
}

/* The next operation, once its session has reached the backend: the draw
 * does not depend on timing, so a seed replays the same sequence. */
static void ro_generate(int64_t now)
{
	if (ro.final || now < ro.next_op)
		return;
	if (ro.ops_done == RO_OPS) {
		ro.final = 1; /* every session in a slot ends cleanly */
		for (int i = 0; i < RO_SLOTS; i++) {
			struct ro_sess *s = &ro.sess[ro.slot[i]];
			s->graceful = 1;
			s->e[RO_C].shut_req = 1;
			s->end_by = now + ro.grace_ms;
			ro_hist(s, "final");
			ro.slot[i] = -1;
		}
		return;
	}
	if (!ro.have_op) {
		ro_draw();
		ro.have_op = 1;
	}
	struct ro_sess *s = &ro.sess[ro.slot[ro.op.slot]];
	if (!s->paired)
		return; /* RO_PAIR_MS bounds the wait */
	if ((ro.op.kind == CURG || ro.op.kind == BURG) &&
	    s->e[ro.op.kind == CURG ? RO_C : RO_B].urg_state != RO_URG_NONE) {
		/* a newer urgent pointer would turn the unread byte in-band */
		if (!ro.op_wait) {
			ro.op_wait = now;
		} else if (now - ro.op_wait > RO_URG_WAIT_MS) {
			const struct ro_end *e = &s->e[ro.op.kind == CURG ? RO_C : RO_B];
			ro_fail(s, "the %s's urgent byte at in-band offset %llu was not passed within "
				   "%d ms (the %s received %llu bytes)",
				ro.op.kind == CURG ? "client" : "backend",
				(unsigned long long)e->urg_off, RO_URG_WAIT_MS,
				ro.op.kind == CURG ? "backend" : "client",
				(unsigned long long)s->e[ro.op.kind == CURG ? RO_B : RO_C].rcvd);
		}
		return;
	}
	ro.op_wait = 0;
	ro.have_op = 0;
	ro.ops_done++;
	ro_execute(s, now);
}

/* ---- per-session timers and ends ----------------------------------------- */

static int ro_in_slot(const struct ro_sess *s)
{
	for (int i = 0; i < RO_SLOTS; i++)
		if (ro.slot[i] == (int)s->id)
			return 1;
	return 0;
}

/* A planned reset: once end k wrote everything (and its FIN, if asked)
 * and the proxy's kernel acknowledged all of it, and for an unread close
 * once bytes wait unread (so its kernel sends an RST, not a FIN). */
static void ro_tick_reset(struct ro_sess *s, int64_t now)
{
	int k = s->rst_pending;
	struct ro_end *e = &s->e[k];
	int q = -1, unread = 0;

	if (e->written == e->planned && (k == RO_B || s->tag_sent == 8) &&
	    (!e->shut_req || e->shut_done) && ioctl(e->fd, SIOCOUTQ, &q) == 0 && q == 0 &&
	    (!s->rst_unread || (ioctl(e->fd, FIONREAD, &unread) == 0 && unread > 0))) {
		s->rst_pending = -1;
		ro_close_abrupt(s, k, s->rst_unread, now);
	} else if (now > s->rst_by) {
		ro_fail(s, "%s: %d ms after its write-then-reset, still %s (wrote %llu/%llu, "
			   "SIOCOUTQ %d, %d bytes unread)",
			ro_end_name[k], RO_ACK_MS,
			q != 0 ? "not all acknowledged by the proxy's kernel" : "no unread bytes",
			(unsigned long long)e->written, (unsigned long long)e->planned, q, unread);
	}
}

/* Receiver k reads, sits where the sender's urgent byte went, and the
 * sender has written in-band bytes after it: they must come. */
static void ro_urg_stall(struct ro_sess *s, int k, int64_t now)
{
	struct ro_end *e = &s->e[k];
	const struct ro_end *p = &s->e[!k];

	if (e->fd < 0 || p->urg_state != RO_URG_SENT || e->rcvd != p->urg_off ||
	    p->written <= p->urg_off || !ro_reading(e, now)) {
		e->urg_wait_since = 0;
	} else if (!e->urg_wait_since) {
		e->urg_wait_since = now;
	} else if (now - e->urg_wait_since > RO_END_MS) {
		ro_fail(s, "%s: stalled at the %s's urgent mark: %llu in-band bytes received, %llu "
			   "more written after the urgent byte, none arrived for %d ms%s",
			ro_end_name[k], ro_end_name[!k], (unsigned long long)e->rcvd,
			(unsigned long long)(p->written - p->urg_off), RO_END_MS,
			e->urg_checked ? " (the urgent byte itself came)" : "");
	}
}

static void ro_tick(struct ro_sess *s, int64_t now)
{
	struct ro_end *c = &s->e[RO_C], *b = &s->e[RO_B];
	if (!s->paired && now - s->t_open > RO_PAIR_MS) {
		ro_fail(s, "did not reach the backend within %d ms (client %s, tag %u/8 sent)",
			RO_PAIR_MS, s->connected ? "connected" : "not connected", s->tag_sent);
		return;
	}
	if (s->unread_pending) {
		int q = 0;
		if (ioctl(c->fd, FIONREAD, &q) == 0 && q > 0) {
			s->unread_pending = 0;
			ro_close_abrupt(s, RO_C, 1, now); /* unread bytes: the kernel sends an RST */
		} else if (now > s->unread_by) {
			ro_fail(s, "none of the %llu bytes the backend sent reached the client within "
				   "%d ms",
				(unsigned long long)(b->planned - c->rcvd), RO_UNREAD_MS);
			return;
		}
	}
	if (s->rst_pending >= 0) {
		ro_tick_reset(s, now);
		if (ro.failed)
			return;
	}
	for (int k = 0; k < 2; k++) {
		if (s->graceful && s->e[k].eof)
			s->e[k].shut_req = 1; /* answer the peer's FIN with ours */
		if (s->e[k].fd >= 0 && s->e[k].shut_req && !s->e[k].shut_done &&
		    s->e[k].written == s->e[k].planned && (k == RO_B || s->tag_sent == 8))
			ro_send(s, k, now);
	}
	if (s->abrupt_by < 0 && ro.urgent)
		for (int k = 0; k < 2 && !ro.failed; k++)
			ro_urg_stall(s, k, now);
	if (ro.failed)
		return;
	if (s->abrupt_by < 0) {
		if (c->eof && b->eof && c->shut_done && b->shut_done) {
			ro_finish(s);
		} else if (s->graceful && now > s->end_by) {
			ro_fail(s, "a clean end (both sides shut down) did not complete within %lld ms",
				(long long)ro.grace_ms);
		} else if (!s->graceful && s->paired && !s->unread_pending &&
			   now - s->t_last_io > RO_KEEPALIVE_MS && ro_in_slot(s) &&
			   c->written == c->planned && b->written == b->planned) {
			/* keep the proxy's idle timeout away (no PRNG draw: replays stay equal) */
			s->e[c->shut_req ? RO_B : RO_C].planned += 1;
			s->t_last_io = now;
			ro.keepalives++;
		}
		return;
	}
	/* Reset or unread close by one end: the other one must see its end. */
	int y = !s->abrupt_by;
	struct ro_end *e = &s->e[y];
	if (e->fd < 0) { /* operations wait for the pairing, so this is a test bug */
		ro_fail(s, "reset before the backend end was paired");
		return;
	}
	int rd_end = e->eof || e->rerr, wr_end = e->shut_done || e->werr;
	if (rd_end && wr_end) {
		int64_t took = now - s->t_abrupt;
		ro.max_end_ms = took > ro.max_end_ms ? took : ro.max_end_ms;
		ro_finish(s);
	} else if (now > s->end_by) {
		ro_fail(s, "%s: %d ms after the %s's %s%s, it has not seen the end of the session "
			   "(read side %s, write side %s): the proxy did not propagate it",
			ro_end_name[y], RO_END_MS, ro_end_name[!y],
			ro.rules == RO_RULES_NEW ? " (or its last byte received)" : "",
			s->abrupt_by == RO_C && c->noread ? "close with unread data" : "reset",
			rd_end ? "ended" : "open", wr_end ? "ended" : "open");
	} else if (rd_end && e->written == e->planned && !e->shut_req) {
		/* Nothing left to read: an RST from the proxy shows as POLLERR
		 * (see ro_far_idle); after RO_PASSIVE_MS, probe with single
		 * bytes, which a closed socket answers with an RST (a proxy that
		 * closed with a FIN after its earlier one is otherwise silent). */
		if (!e->next_probe) {
			e->next_probe = now + RO_PASSIVE_MS;
		} else if (now >= e->next_probe) {
			e->planned += 1;
			e->next_probe = now + RO_PROBE_MS;
			ro.probes++;
		}
	}
}

/* ---- the loop ------------------------------------------------------------- */

enum { RO_P_LISTEN, RO_P_PEND, RO_P_END };

struct ro_pmap {
	int what;
	unsigned idx;
	int k;
};

static int ro_all_done(void)
{
	if (!ro.final || ro.npend)
		return 0;
	for (unsigned i = 0; i < ro.nsess; i++)
		if (!ro.sess[i].done)
			return 0;
	return 1;
}

static void ro_run(void)
{
	static struct pollfd pfd[1 + 3 * RO_MAX_SESS];
	static struct ro_pmap map[1 + 3 * RO_MAX_SESS];

	while (!ro.failed && !ro_all_done()) {
		int64_t now = h_now_ms();
		if (now > ro.hard_deadline) {
			unsigned open = 0;
			for (unsigned i = 0; i < ro.nsess; i++)
				open += !ro.sess[i].done;
			ro_fail(NULL, "deadline passed after %u of %d operations with %u sessions open",
				ro.ops_done, RO_OPS, open);
			break;
		}
		ro_generate(now);
		for (unsigned i = 0; i < ro.nsess && !ro.failed; i++)
			if (!ro.sess[i].done)
				ro_tick(&ro.sess[i], now);
		if (ro.failed)
			break;

		int n = 0;
		pfd[n] = (struct pollfd){ .fd = ro.lfd, .events = POLLIN };
		map[n++] = (struct ro_pmap){ RO_P_LISTEN, 0, 0 };
		for (unsigned j = 0; j < ro.npend; j++) {
			pfd[n] = (struct pollfd){ .fd = ro.pend[j].fd, .events = POLLIN };
			map[n++] = (struct ro_pmap){ RO_P_PEND, j, 0 };
		}
		for (unsigned i = 0; i < ro.nsess; i++) {
			struct ro_sess *s = &ro.sess[i];
			for (int k = 0; k < 2 && !s->done; k++) {
				short ev = 0;
				if (s->e[k].fd < 0)
					continue;
				if (k == RO_C && !s->connected)
					ev = POLLOUT;
				else
					/* POLLPRI: at a mark, an urgent byte alone is
					 * not POLLIN */
					ev = (short)((ro_reading(&s->e[k], now)
							      ? POLLIN | (ro.urgent ? POLLPRI : 0)
							      : 0) |
						     (ro_wants_write(s, k) ? POLLOUT : 0));
				if (!ev && !ro_far_idle(s, k))
					continue; /* nothing to do: no POLLHUP spinning */
				pfd[n] = (struct pollfd){ .fd = s->e[k].fd, .events = ev };
				map[n++] = (struct ro_pmap){ RO_P_END, i, k };
			}
		}
		int pr = poll(pfd, (nfds_t)n, 2);
		if (pr < 0 && errno != EINTR) {
			ro_fail(NULL, "poll: %s", strerror(errno));
			break;
		}
		now = h_now_ms();
		int pend_changed = 0;
		for (int x = 0; x < n && pr > 0 && !ro.failed; x++) {
			short re = pfd[x].revents;
			if (!re)
				continue;
			if (map[x].what == RO_P_LISTEN) {
				ro_accept();
			} else if (map[x].what == RO_P_PEND) {
				struct ro_pend *pd = &ro.pend[map[x].idx];
				if (ro_pend_read(pd, now)) {
					pd->fd = -1;
					pend_changed = 1;
				}
			} else {
				struct ro_sess *s = &ro.sess[map[x].idx];
				int k = map[x].k;
				if (s->e[k].fd != pfd[x].fd)
					continue;
				if (!(pfd[x].events & (POLLIN | POLLOUT))) {
					ro_far_hup(s, k);
					continue;
				}
				if (k == RO_C && !s->connected) {
					int err = 0;
					socklen_t sl = sizeof err;
					getsockopt(s->e[k].fd, SOL_SOCKET, SO_ERROR, &err, &sl);
					if (err)
						ro_fail(s, "connect to the proxy: %s", strerror(err));
					s->connected = 1;
					continue;
				}
				if ((re & (POLLIN | POLLPRI | POLLERR | POLLHUP)) &&
				    (pfd[x].events & POLLIN))
					ro_recv(s, k, now);
				if ((re & (POLLOUT | POLLERR | POLLHUP)) && (pfd[x].events & POLLOUT) &&
				    !ro.failed)
					ro_send(s, k, now);
			}
		}
		if (pend_changed) {
			unsigned w = 0;
			for (unsigned j = 0; j < ro.npend; j++)
				if (ro.pend[j].fd >= 0)
					ro.pend[w++] = ro.pend[j];
			ro.npend = w;
		}
	}
	/* on failure, whatever is still open goes; the proxy is checked after */
	for (unsigned i = 0; i < ro.nsess; i++)
		for (int k = 0; k < 2; k++)
			if (ro.sess[i].e[k].fd >= 0) {
				close(ro.sess[i].e[k].fd);
				ro.sess[i].e[k].fd = -1;
			}
	for (unsigned j = 0; j < ro.npend; j++)
		if (ro.pend[j].fd >= 0)
			close(ro.pend[j].fd);
	ro.npend = 0;
}

/* ---- the proxy's descriptors and metrics ------------------------------------ */

/* Descriptors of pid: all, and how many of them are pipes. -1 on error. */
static int ro_fds(pid_t pid, int *pipes)
{
	char dir[64], path[320], link[128];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	*pipes = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		ssize_t l = readlink(path, link, sizeof link - 1);
		if (l < 0)
			continue; /* closed meanwhile */
		link[l] = 0;
		n++;
		*pipes += !strncmp(link, "pipe:", 5);
	}
	closedir(d);
	return n;
}

/* GET /metrics; the body (static), or "" on failure. */
static const char *ro_metrics(const struct h_addr *a)
{
	static char resp[65536];

	h_metrics_get(a, resp, sizeof resp, 4000); /* the checks name what is missing */
	return resp;
}

static long ro_metric(const char *body, const char *name)
{
	char key[200];
	snprintf(key, sizeof key, "\n%s ", name);
	const char *p = strstr(body, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* ---- the case ------------------------------------------------------------- */

static uint64_t ro_pick_seed(void)
{
	const char *env = getenv("SPLICER_TEST_SEED");
	if (env && *env) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(env, &end, 0);
		H_CHECK(!errno && !*end, "SPLICER_TEST_SEED='%s' is not a number", env);
		return v;
	}
	uint64_t z = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)h_now_us() ^ (uint64_t)getpid() << 32;
	z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
	return (z ^ (z >> 29)) % 1000000000000ull; /* 12 digits: easy to copy */
}

#define RO_CHECK(cond, fmt, ...)                                                              \
	H_CHECK(cond, "random ops seed: %llu (replay with SPLICER_TEST_SEED=%llu): " fmt,       \
		(unsigned long long)ro.seed, (unsigned long long)ro.seed, ##__VA_ARGS__)

/* The n-th address of the ready line (one per route, in file order). */
static void ro_ready_addr(const struct h_proxy *p, int n, struct h_addr *out)
{
	const char *s = strstr(p->ready_line, "listening on ");
	char buf[160];
	if (s)
		s += strlen("listening on ");
	for (int i = 0; i < n && s; i++)
		if ((s = strchr(s, ',')))
			s += 2;
	RO_CHECK(s && sscanf(s, "%159[^, ]", buf) == 1 && h_addr_parse(buf, out) == 0,
		 "ready line '%s' has no address %d", p->ready_line, n);
}

static void ro_stats_addr(const struct h_proxy *p, struct h_addr *out)
{
	RO_CHECK(h_stats_addr(p, out) == 0, "no 'stats: listening on' line in %s", p->log);
}

static void case_random_ops(const char *bin, const char *engine, enum ro_rules rules)
{
	static struct h_proxy p;
	static struct h_server echo;
	struct h_addr echo_addr, stats_addr, baddr;

	memset(&ro, 0, sizeof ro);
	ro.lfd = -1;
	ro.rules = rules;
	ro.seed = ro.rng = ro_pick_seed();
	fprintf(stderr, "random ops seed: %llu (replay with SPLICER_TEST_SEED=%llu)\n",
		(unsigned long long)ro.seed, (unsigned long long)ro.seed);

	/* the backend's listener, served by the loop */
	ro.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	RO_CHECK(ro.lfd >= 0, "socket: %s", strerror(errno));
	ro_small_buffers(ro.lfd); /* accepted sockets inherit them */
	h_addr_parse("127.0.0.1:0", &baddr);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	RO_CHECK(bind(ro.lfd, (struct sockaddr *)&baddr.ss, baddr.len) == 0 &&
			 listen(ro.lfd, 1024) == 0 &&
			 getsockname(ro.lfd, (struct sockaddr *)&ss, &sl) == 0,
		 "backend listen: %s", strerror(errno));
	h_addr_from(&baddr, (struct sockaddr *)&ss, sl);
	int rc = h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL);
	RO_CHECK(rc == 0, "echo backend: %s", strerror(-rc));

	/* route rand to the loop's backend, route echo for the last round trip */
	char conf[1024], path[300], err[512];
	snprintf(conf, sizeof conf,
		 "[global]\nworkers = 2\nstats = 127.0.0.1:0\nverbose = 1\n\n"
		 "[route rand]\nlisten = 127.0.0.1:0\nbackend = %s\nengine = %s\n"
		 "idle_timeout = 5s\n\n"
		 "[route echo]\nlisten = 127.0.0.1:0\nbackend = %s\nengine = %s\n"
		 "idle_timeout = 5s\n",
		 baddr.text, engine, echo.addr.text, engine);
	snprintf(path, sizeof path, "%s/random-ops.conf", h_tmpdir());
	FILE *f = fopen(path, "we");
	RO_CHECK(f && fputs(conf, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
	const char *args[] = { "-c", path, NULL };
	RO_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "proxy -c %s: %s", path, err);
	ro_ready_addr(&p, 0, &ro.proxy);
	ro_ready_addr(&p, 1, &echo_addr);
	/* urgent data exists on TCP only (both of our ends are TCP) */
	ro.urgent = rules == RO_RULES_NEW && ro.proxy.ss.ss_family != AF_UNIX;
	ro_stats_addr(&p, &stats_addr);
	int base_pipes, base_fds = ro_fds(p.pid, &base_pipes);
	RO_CHECK(base_fds > 0, "cannot read /proc/%d/fd", (int)p.pid);

	int64_t t0 = h_now_ms();
	ro.grace_ms = H_T(10000);
	ro.hard_deadline = t0 + H_T(30000); /* about 300 MB move: generous on a busy host */
	for (int i = 0; i < RO_SLOTS; i++)
		ro.slot[i] = ro_open(t0);
	ro_run();
	int64_t took = h_now_ms() - t0;
	close(ro.lfd);
	ro.lfd = -1;

	RO_CHECK(h_proxy_alive(&p), "the proxy died during the random operations (%s)",
		 ro.failed ? ro.why : "no model failure before");
	RO_CHECK(!ro.failed, "engine %s, after %u of %d operations, %lld ms: %s", engine, ro.ops_done,
		 RO_OPS, (long long)took, ro.why);
	RO_CHECK(ro.accepted == ro.nsess, "the backend accepted %u connections for %u sessions",
		 ro.accepted, ro.nsess);

	char why[256];
	rc = h_echo_roundtrip(&echo_addr, 64 * 1024, ro.seed ^ 0xEC40, 5000, why, sizeof why);
	RO_CHECK(rc == 0, "a fresh echo round trip after the random operations failed: %s", why);

	/* every socket the sessions used is closed: only the pools' pipes stay */
	int fds = -1, pipes = 0;
	for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20)) {
		fds = ro_fds(p.pid, &pipes);
		if (fds - pipes == base_fds - base_pipes)
			break;
	}
	RO_CHECK(fds - pipes == base_fds - base_pipes,
		 "the proxy holds %d descriptors other than pipes 5 s after every session ended, "
		 "%d at the start (leak)",
		 fds - pipes, base_fds - base_pipes);
	const char *body = ro_metrics(&stats_addr);
	long in_use = ro_metric(body, "splicer_pipes{state=\"in_use\"}");
	long nfree = ro_metric(body, "splicer_pipes{state=\"free\"}");
	long active = ro_metric(body, "splicer_route_sessions_active{route=\"rand\"}");
	long total = ro_metric(body, "splicer_route_sessions_total{route=\"rand\"}");
	long idle = ro_metric(body, "splicer_idle_timeouts_total");
	long half = ro_metric(body, "splicer_half_close_timeouts_total");
	long resets = ro_metric(body, "splicer_resets_sent_total");
	RO_CHECK(in_use == 0 && active == 0 && total == (long)ro.nsess,
		 "/metrics after every session ended: pipes in use %ld, sessions active %ld, sessions "
		 "%ld (expected 0, 0 and %u)",
		 in_use, active, total, ro.nsess);
	/* keepalives keep live sessions busy: an idle or half-close timeout is
	 * a session the proxy failed to end when its ends did */
	RO_CHECK(idle == 0 && half == 0, "/metrics: %ld sessions ended by the idle timeout, %ld by "
		 "the half-close timeout (expected 0 and 0)", idle, half);
	RO_CHECK(nfree >= 0 && pipes - base_pipes == 2 * nfree,
		 "the proxy holds %d pipe descriptors (%d at the start), but its pools hold %ld free "
		 "pipes (2 descriptors each)",
		 pipes, base_pipes, nfree);
	char ops[400];
	size_t ol = 0;
	for (int i = 0; i < RO_NKINDS; i++)
		ol += (size_t)snprintf(ops + ol, sizeof ops - ol, "%s%s %u", i ? ", " : "",
				       ro_kinds[i].name, ro.kinds[i]);
	fprintf(stderr,
		"random ops seed %llu, engine %s (%s rules): %u ops (%s) on %u sessions (%u ended "
		"clean, %u by a reset or unread close, %u of those with every byte acknowledged "
		"and delivered); verified %llu bytes up, %llu down; %u urgent bytes (%u read with "
		"MSG_OOB at the mark, %u passed between looks, %u taken by the sender's reset); %u keepalives; far "
		"ends of resets saw %u EOF, %u ECONNRESET, %u POLLHUP, needed %u probes, within %lld ms at most; proxy sent %ld RSTs; pairing took %lld ms at "
		"most; %lld ms; proxy fds %d -> %d (pipes %d -> %d, %ld free in pools)\n",
		(unsigned long long)ro.seed, engine, rules == RO_RULES_NEW ? "new" : "old",
		ro.ops_done, ops, ro.nsess, ro.clean_done, ro.abrupt_done, ro.acked_resets,
		(unsigned long long)ro.verified[RO_B], (unsigned long long)ro.verified[RO_C],
		ro.urg_sent, ro.urg_seen, ro.urg_unseen, ro.urg_reset, ro.keepalives, ro.far_eof, ro.far_rst,
		ro.far_passive, ro.probes, (long long)ro.max_end_ms, resets, (long long)ro.max_pair_ms,
		(long long)took, base_fds, fds, base_pipes, pipes,
		nfree);
	h_server_stop(&echo);
	/* h_proxy_down's checks, with the seed in the messages */
	int st = h_proxy_stop(&p, h_slow > 1 ? 10000 : 5000);
	RO_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "the proxy did not exit with status 0 after SIGTERM (wait status %d); log %s", st,
		 p.log);
	const char *prob = h_proxy_log_problem(&p);
	RO_CHECK(!prob, "proxy log %s contains a sanitizer report (\"%s\")", p.log, prob);
}

Test(integ, random_ops_copy, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_random_ops(h_binary(0), "copy", RO_RULES_NEW);
}

Test(integ, random_ops_splice, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_random_ops(h_binary(0), "splice", RO_RULES_NEW);
}

Test(integ, random_ops_auto, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_random_ops(h_binary(0), "auto", RO_RULES_NEW);
}

Test(integ, random_ops_auto_asan, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_random_ops(h_binary(1), "auto", RO_RULES_NEW);
}

Test(integ, random_ops_uring, .init = h_init, .fini = h_fini, .timeout = 60)
{
	case_random_ops(h_binary(0), "uring", RO_RULES_OLD);
}

Test(integ, random_ops_uring_asan, .init = h_init, .fini = h_fini, .timeout = 120)
{
	case_random_ops(h_binary(1), "uring", RO_RULES_OLD);
}

/* The sockmap engine's hand-off (copy first, then the kernel) under the same
 * model: resets and half-closes at any point of it; a session whose FIN came
 * before the hand-off may stay off the sockmap (counted as a fallback). */
Test(integ, random_ops_sockmap, .init = h_init, .fini = h_fini, .timeout = 60)
{
	h_sockmap_require(2);
	case_random_ops(h_binary(0), "sockmap", RO_RULES_OLD);
}
