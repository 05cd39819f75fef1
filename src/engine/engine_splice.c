/* SPDX-License-Identifier: MIT */
/* engine_splice: socket -> pipe -> socket with splice(2), so payload pages
 * move by reference and never cross into user space.
 *
 * What the netdev threads taught (../shared/seeds) and this file honours:
 * - Flags are SPLICE_F_NONBLOCK | SPLICE_F_MOVE. Never SPLICE_F_MORE: it
 *   corks the output and delays the last chunk (~200 ms on loopback).
 * - splice() returns what is queued (it never waits for more). SO_RCVLOWAT
 *   (--lowat) makes readiness wait for a batch instead.
 * - EAGAIN from socket->pipe is ambiguous: the socket may be empty, or the
 *   pipe may be out of slots (a 64 KiB pipe has 16, each holding one skb
 *   fragment: ~23 KiB of 1448-byte segments). With bytes in the pipe we
 *   cannot tell, so the source stays marked readable (pipe_full) and is
 *   retried once the pipe has drained; only EAGAIN on an *empty* pipe proves
 *   the socket empty. Hence no readiness edge is ever lost.
 * - A pipe holding bytes belongs to its session until written out; it goes
 *   back to the worker's pool only when empty (and is closed at session end
 *   otherwise), so an idle session holds no pipe. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "pipe_pool.h"

extern struct engine engine_copy, engine_splice;

/* A direction's pipe and what it holds. */
struct splice_dir {
	struct pipe_pair pipe; /* rd/wr, -1 when none is held */
	uint32_t in_pipe;      /* bytes in the pipe, not yet sent */
	uint8_t pipe_full;     /* splice-in said EAGAIN with bytes in the pipe */
};
ENGINE_STATE_FITS(struct splice_dir, struct dir);

static struct splice_dir *state(const struct dir *d)
{
	return ENGINE_STATE(struct splice_dir, (struct dir *)d);
}

static void splice_attach(struct dir *d)
{
	state(d)->pipe.rd = state(d)->pipe.wr = -1;
}
#include "log.h"
#include "urgent.h"

#define SPLICE_FLAGS (SPLICE_F_NONBLOCK | SPLICE_F_MOVE)

/* Splices one byte from a socketpair through a pipe: fails on kernels or
 * sandboxes (seccomp) that refuse splice. */
static int splice_probe(char *err, unsigned errlen)
{
	int sv[2] = { -1, -1 }, p[2] = { -1, -1 }, r = 0;
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) || pipe2(p, O_CLOEXEC)) {
		r = -errno;
		snprintf(err, errlen, "cannot create a socketpair or pipe: %s", strerror(errno));
		goto out;
	}
	if (write(sv[0], "x", 1) != 1 || (n = splice(sv[1], NULL, p[1], NULL, 1, SPLICE_FLAGS)) != 1) {
		r = -(errno ? errno : EIO);
		snprintf(err, errlen, "splice() from a socket failed: %s", strerror(-r));
	}
out:
	for (int i = 0; i < 2; i++) {
		if (sv[i] >= 0)
			close(sv[i]);
		if (p[i] >= 0)
			close(p[i]);
	}
	return r;
}

static void set_lowat(struct worker *w, struct dir *d)
{
	int v = (int)d->src->s->route->o.lowat;

	d->lowat_set = 1;
	if (setsockopt(d->src->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)))
		log_debug("SO_RCVLOWAT %d: %s", v, strerror(errno));
}

/* At an urgent mark whose byte has been passed on (urgent.h): splice()
 * cannot step over the mark, a recv() can. The bytes it reads behind the
 * mark go into the (empty) pipe, so they leave in order. Returns 1 when
 * bytes moved or the source state changed, 0 when the socket was empty,
 * or -errno. */
static int step_over_mark(struct dir *d)
{
	struct splice_dir *p = state(d);
	char buf[4096]; /* a pipe holds at least a page: never a short write */
	ssize_t n = recv(d->src->fd, buf, sizeof(buf), MSG_DONTWAIT);
	int r = 1;

	urgent_passed(d);
	if (n > 0) {
		if (write(p->pipe.wr, buf, (size_t)n) != n)
			return dir_fail(d, errno ? errno : EIO, 0);
		p->in_pipe += (uint32_t)n;
	} else if (n == 0) {
		d->eof = 1;
	} else if (errno == EAGAIN) {
		d->src->can_read = 0;
		r = 0;
	} else if (errno != EINTR) {
		return dir_fail(d, errno, 0);
	}
	return r;
}

/* No pipe to be had, or splice refused for this socket: the direction
 * goes on with the fallback (copy). Nothing is in a pipe yet that could be
 * reordered: pipes are taken empty and given back when empty. */
static int give_up(struct worker *w, struct dir *d)
{
	struct splice_dir *p = state(d);

	if (p->in_pipe)
		die("splice: falling back with %u bytes in a pipe", p->in_pipe);
	pipe_pool_put(&w->pipes, &p->pipe, 0);
	engine_count(w, &engine_splice, 1, 1);
	return PUMP_FALLBACK;
}

static int splice_pump(struct worker *w, struct dir *d, unsigned *budget)
{
	struct splice_dir *p = state(d);
	int ret = 0, r;
	ssize_t n;

	if (d->src->s->route->o.lowat && !d->lowat_set)
		set_lowat(w, d);
	for (;;) {
		int did = 0;

		if (p->in_pipe && d->dst->can_write) {
			n = splice(p->pipe.rd, NULL, d->dst->fd, NULL, p->in_pipe, SPLICE_FLAGS);
			if (n > 0) {
				p->in_pipe -= (uint32_t)n;
				d->bytes += (uint64_t)n;
				engine_count(w, &engine_splice, ENGINE_CTR_BYTES, (uint64_t)n);
				p->pipe_full = 0;
				did = 1;
			} else if (n < 0 && errno == EAGAIN) {
				d->dst->can_write = 0;
			} else if (n < 0 && errno != EINTR) {
				ret = dir_fail(d, errno, 1);
				break;
			}
		}
		if (!d->eof && d->src->can_read && !p->pipe_full && *budget) {
			int urg = d->src->urg ? urgent_step(d, p->in_pipe) : URG_READ;

			if (urg < 0) {
				ret = urg;
				break;
			}
			if (urg == URG_WAIT)
				goto read_done;
			if (p->pipe.rd < 0 && pipe_pool_get(&w->pipes, &p->pipe) < 0) {
				ret = give_up(w, d); /* pool bound or fd limit */
				break;
			}
			if (urg == URG_SKIP) {
				r = step_over_mark(d);
				if (r < 0) {
					ret = r;
					break;
				}
				did = r;
				continue;
			}
			n = splice(d->src->fd, NULL, p->pipe.wr, NULL, INT_MAX & ~4095, SPLICE_FLAGS);
			if (n > 0) {
				p->in_pipe += (uint32_t)n;
				dir_used(d, &engine_splice);
				(*budget)--;
				did = 1;
			} else if (n <= 0 && (n == 0 || errno == EAGAIN) && d->src->urg &&
				   urgent_at_mark(d)) {
				/* splice() stops at the urgent mark (EAGAIN, or 0 once
				 * a FIN is queued): the next turn steps over it. */
				did = 1;
			} else if (n == 0) {
				d->eof = 1;
			} else if (errno == EAGAIN) {
				if (p->in_pipe)
					p->pipe_full = 1; /* or empty socket: retried after a drain */
				else
					d->src->can_read = 0;
			} else if ((errno == EINVAL || errno == ENOSYS) && !(d->used & (1u << engine_splice.id))) {
				ret = give_up(w, d); /* this socket type cannot splice */
				break;
			} else if (errno != EINTR) {
				ret = dir_fail(d, errno, 0);
				break;
			}
		}
read_done:
		if (!did)
			break;
	}
	if (!p->in_pipe && p->pipe.rd >= 0 && (d->eof || !d->src->can_read))
		pipe_pool_put(&w->pipes, &p->pipe, 0);
	return ret;
}

static void splice_release(struct worker *w, struct dir *d)
{
	struct splice_dir *p = state(d);

	pipe_pool_put(&w->pipes, &p->pipe, p->in_pipe);
	p->in_pipe = 0;
}

static uint64_t splice_pending(const struct dir *d)
{
	return state(d)->in_pipe;
}

/* A pipe with bytes in it goes with the session as it is (its pages are
 * never copied); release() then closes this process's ends, as for any
 * pipe that holds bytes. An empty one stays here, in the pool. */
static int splice_hand_out(const struct dir *d, struct dir_handoff *h)
{
	const struct splice_dir *p = state(d);

	if (p->in_pipe && p->pipe.rd >= 0) {
		h->fds[0] = p->pipe.rd;
		h->fds[1] = p->pipe.wr;
		h->nfds = 2;
		h->in_pipe = p->in_pipe;
	}
	h->aux = p->pipe_full;
	return 0;
}

static int splice_hand_in(struct worker *w, struct dir *d, const struct dir_handoff *h)
{
	struct splice_dir *p = state(d);

	p->pipe.rd = p->pipe.wr = -1;
	if (h->nfds == 2) {
		p->pipe.rd = h->fds[0];
		p->pipe.wr = h->fds[1];
		p->in_pipe = h->in_pipe;
		pipe_pool_adopt(&w->pipes); /* counted as this pool's from now on */
	}
	p->pipe_full = (uint8_t)h->aux;
	return 0;
}

static const struct engine_counter splice_counters[] = {
	{ "splice_fallbacks_total", "Directions that wanted a pipe and copied instead." },
};

struct engine engine_splice = {
	.name = "splice",
	.hands_over = 1,
	.hand_out = splice_hand_out,
	.hand_in = splice_hand_in,
	.fallback = &engine_copy,
	.uses_pipes = 1,
	.probe = splice_probe,
	.attach = splice_attach,
	.pump = splice_pump,
	.release = splice_release,
	.pending = splice_pending,
	.counters = splice_counters,
	.ncounters = 1,
};
