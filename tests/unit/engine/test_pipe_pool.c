/* SPDX-License-Identifier: MIT */
/* Unit tests for src/engine/pipe_pool.c: pipes are non-blocking and sized, the pool
 * is bounded, only empty pipes are recycled, and destroy closes what it holds. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pipe_pool.h"

/* Checks one end of a pool pipe: open, non-blocking, close-on-exec, and of
 * the given size (0: don't check the size). */
static void expect_pipe_end(int fd, int size)
{
	int fl, fdfl, sz;

	cr_assert(fd >= 0, "fd %d", fd);
	fdfl = fcntl(fd, F_GETFD);
	cr_assert(fdfl >= 0, "fd %d is not open: %s", fd, strerror(errno));
	cr_expect(fdfl & FD_CLOEXEC, "fd %d is not close-on-exec", fd);
	fl = fcntl(fd, F_GETFL);
	cr_assert(fl >= 0);
	/* assert, not expect: later reads and writes would block forever. */
	cr_assert(fl & O_NONBLOCK, "fd %d is blocking (flags %#x)", fd, fl);
	if (size) {
		sz = fcntl(fd, F_GETPIPE_SZ);
		cr_expect_eq(sz, size, "fd %d: pipe size %d, want %d", fd, sz, size);
	}
}

static void expect_pipe(const struct pipe_pair *pp, int size)
{
	cr_assert_neq(pp->rd, pp->wr);
	expect_pipe_end(pp->rd, size);
	expect_pipe_end(pp->wr, size);
	cr_expect_eq(fcntl(pp->rd, F_GETFL) & O_ACCMODE, O_RDONLY, "rd end is not the read end");
	cr_expect_eq(fcntl(pp->wr, F_GETFL) & O_ACCMODE, O_WRONLY, "wr end is not the write end");
}

/* Must be called right after the close: fd numbers get reused. */
static void expect_closed(int fd)
{
	errno = 0;
	cr_expect_eq(fcntl(fd, F_GETFD), -1, "fd %d is still open", fd);
	cr_expect_eq(errno, EBADF, "fcntl(%d): errno %d, want EBADF", fd, errno);
}

static void expect_empty_pipe(const struct pipe_pair *pp)
{
	char c;
	ssize_t n;
	int avail = -1;

	cr_assert_eq(ioctl(pp->rd, FIONREAD, &avail), 0);
	cr_expect_eq(avail, 0, "a pipe handed out by the pool holds %d byte(s)", avail);
	cr_assert(fcntl(pp->rd, F_GETFL) & O_NONBLOCK, "fd %d is blocking", pp->rd);
	errno = 0;
	n = read(pp->rd, &c, 1);
	cr_expect_eq(n, -1, "read %zd byte(s) from a pipe handed out by the pool", n);
	cr_expect_eq(errno, EAGAIN, "read: errno %d, want EAGAIN", errno);
}

/* The size the kernel gives a pipe nobody resized. */
static int default_pipe_size(void)
{
	int fds[2], sz;

	cr_assert_eq(pipe(fds), 0);
	sz = fcntl(fds[0], F_GETPIPE_SZ);
	close(fds[0]);
	close(fds[1]);
	cr_assert(sz > 0);
	return sz;
}

Test(unit_pipe_pool, init_is_empty)
{
	struct pipe_pool p;

	memset(&p, 0xa5, sizeof(p));
	cr_assert_eq(pipe_pool_init(&p, 8, 65536), 0);
	cr_expect_neq(p.free, NULL);
	cr_expect_eq(p.max, 8);
	cr_expect_eq(p.size, 65536);
	cr_expect_eq(p.nfree, 0);
	cr_expect_eq(p.total, 0);
	cr_expect_eq(p.actual_size, 0);
	cr_expect_eq(p.created, 0);
	cr_expect_eq(p.exhausted, 0);
	cr_expect_eq(p.resize_failed, 0);
	cr_expect_eq(pipe_pool_in_use(&p), 0);
	pipe_pool_destroy(&p);
	cr_expect_eq(p.free, NULL);
}

Test(unit_pipe_pool, get_creates_nonblocking_64k_pipe)
{
	struct pipe_pool p;
	struct pipe_pair pp = { -1, -1 };
	char buf[8];

	cr_assert_eq(pipe_pool_init(&p, 4, 64 << 10), 0);
	cr_assert_eq(pipe_pool_get(&p, &pp), 0);
	expect_pipe(&pp, 64 << 10);
	cr_expect_eq(p.actual_size, 64 << 10);
	cr_expect_eq(p.resize_failed, 0);
	cr_expect_eq(p.created, 1);
	cr_expect_eq(p.total, 1);
	cr_expect_eq(pipe_pool_in_use(&p), 1);

	/* It is a working pipe, wr -> rd. */
	cr_assert_eq(write(pp.wr, "abc", 3), 3);
	cr_assert_eq(read(pp.rd, buf, sizeof(buf)), 3);
	cr_expect(!memcmp(buf, "abc", 3));
	expect_empty_pipe(&pp);

	pipe_pool_put(&p, &pp, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, get_creates_nonblocking_256k_pipe)
{
	struct pipe_pool p;
	struct pipe_pair a = { -1, -1 }, b = { -1, -1 };

	cr_assert_eq(pipe_pool_init(&p, 4, 256 << 10), 0);
	cr_assert_eq(pipe_pool_get(&p, &a), 0);
	cr_assert_eq(pipe_pool_get(&p, &b), 0);
	expect_pipe(&a, 256 << 10);
	expect_pipe(&b, 256 << 10);
	cr_expect_neq(a.rd, b.rd);
	cr_expect_neq(a.wr, b.wr);
	cr_expect_eq(p.actual_size, 256 << 10);
	cr_expect_eq(p.resize_failed, 0);
	cr_expect_eq(p.created, 2);
	cr_expect_eq(p.total, 2);

	/* A 256k pipe takes more than the default 64k without blocking. */
	{
		static char chunk[200 << 10];
		memset(chunk, 'z', sizeof(chunk));
		cr_expect_eq(write(a.wr, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	}
	pipe_pool_put(&p, &a, 200 << 10);
	pipe_pool_put(&p, &b, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, size_zero_keeps_kernel_default)
{
	struct pipe_pool p;
	struct pipe_pair pp = { -1, -1 };
	int def = default_pipe_size();

	cr_assert_eq(pipe_pool_init(&p, 1, 0), 0);
	cr_assert_eq(pipe_pool_get(&p, &pp), 0);
	expect_pipe(&pp, def);
	cr_expect_eq(p.actual_size, (unsigned)def);
	cr_expect_eq(p.resize_failed, 0);
	pipe_pool_put(&p, &pp, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, resize_failure_still_returns_pipe)
{
	struct pipe_pool p;
	struct pipe_pair pp = { -1, -1 };
	int def = default_pipe_size();

	/* Over 2^31: the kernel refuses it even for root. */
	cr_assert_eq(pipe_pool_init(&p, 1, 0xffffffffu), 0);
	cr_assert_eq(pipe_pool_get(&p, &pp), 0);
	cr_expect_eq(p.resize_failed, 1);
	expect_pipe(&pp, def);
	cr_expect_eq(p.actual_size, (unsigned)def);
	cr_expect_eq(p.created, 1);
	cr_expect_eq(p.total, 1);
	pipe_pool_put(&p, &pp, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, bound_refuses_fourth_get)
{
	struct pipe_pool p;
	struct pipe_pair pp[3], extra = { -42, -43 };

	cr_assert_eq(pipe_pool_init(&p, 3, 64 << 10), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(pipe_pool_get(&p, &pp[i]), 0, "get #%d", i + 1);
		expect_pipe(&pp[i], 64 << 10);
	}
	cr_expect_neq(pp[0].rd, pp[1].rd);
	cr_expect_neq(pp[1].rd, pp[2].rd);
	cr_expect_neq(pp[0].rd, pp[2].rd);
	cr_expect_eq(p.exhausted, 0);

	cr_expect_eq(pipe_pool_get(&p, &extra), -ENOSPC);
	cr_expect_eq(p.exhausted, 1);
	cr_expect_eq(extra.rd, -42, "a refused get wrote *out");
	cr_expect_eq(extra.wr, -43);
	cr_expect_eq(pipe_pool_get(&p, &extra), -ENOSPC);
	cr_expect_eq(p.exhausted, 2);
	cr_expect_eq(p.created, 3);
	cr_expect_eq(p.total, 3);
	cr_expect_eq(pipe_pool_in_use(&p), 3);

	for (int i = 0; i < 3; i++)
		pipe_pool_put(&p, &pp[i], 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, max_zero_refuses_everything)
{
	struct pipe_pool p;
	struct pipe_pair pp = { -1, -1 };

	cr_assert_eq(pipe_pool_init(&p, 0, 0), 0);
	cr_expect_eq(pipe_pool_get(&p, &pp), -ENOSPC);
	cr_expect_eq(p.exhausted, 1);
	cr_expect_eq(p.created, 0);
	cr_expect_eq(p.total, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, put_empty_recycles)
{
	struct pipe_pool p;
	struct pipe_pair a = { -1, -1 }, b = { -1, -1 };
	int rd, wr;

	cr_assert_eq(pipe_pool_init(&p, 2, 64 << 10), 0);
	cr_assert_eq(pipe_pool_get(&p, &a), 0);
	rd = a.rd;
	wr = a.wr;
	cr_expect_eq(p.created, 1);

	pipe_pool_put(&p, &a, 0);
	cr_expect_eq(a.rd, -1, "put must clear the caller's pair");
	cr_expect_eq(a.wr, -1);
	cr_expect_eq(p.nfree, 1);
	cr_expect_eq(p.total, 1);
	cr_expect_eq(pipe_pool_in_use(&p), 0);
	expect_pipe_end(rd, 64 << 10); /* still open while on the free list */
	expect_pipe_end(wr, 64 << 10);

	cr_assert_eq(pipe_pool_get(&p, &b), 0);
	cr_expect_eq(b.rd, rd, "got rd %d, want recycled %d", b.rd, rd);
	cr_expect_eq(b.wr, wr, "got wr %d, want recycled %d", b.wr, wr);
	cr_expect_eq(p.created, 1, "a new pipe was created instead of reusing the free one");
	cr_expect_eq(p.nfree, 0);
	cr_expect_eq(p.total, 1);
	cr_expect_eq(pipe_pool_in_use(&p), 1);
	expect_pipe(&b, 64 << 10);
	expect_empty_pipe(&b);

	pipe_pool_put(&p, &b, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, put_with_bytes_left_closes)
{
	struct pipe_pool p;
	struct pipe_pair a = { -1, -1 }, b = { -1, -1 };
	int rd, wr;

	cr_assert_eq(pipe_pool_init(&p, 1, 64 << 10), 0);
	cr_assert_eq(pipe_pool_get(&p, &a), 0);
	cr_assert_eq(write(a.wr, "x", 1), 1);
	rd = a.rd;
	wr = a.wr;

	pipe_pool_put(&p, &a, 1);
	expect_closed(rd);
	expect_closed(wr);
	cr_expect_eq(a.rd, -1);
	cr_expect_eq(a.wr, -1);
	cr_expect_eq(p.total, 0);
	cr_expect_eq(p.nfree, 0);
	cr_expect_eq(pipe_pool_in_use(&p), 0);

	/* The bound (max 1) has room again: a new pipe is created. */
	cr_assert_eq(pipe_pool_get(&p, &b), 0);
	cr_expect_eq(p.created, 2);
	cr_expect_eq(p.total, 1);
	cr_expect_eq(p.exhausted, 0);
	expect_pipe(&b, 64 << 10);
	expect_empty_pipe(&b);

	pipe_pool_put(&p, &b, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, data_never_leaks_into_next_session)
{
	struct pipe_pool p;
	struct pipe_pair a = { -1, -1 }, b = { -1, -1 }, c = { -1, -1 }, d = { -1, -1 };
	int brd;

	cr_assert_eq(pipe_pool_init(&p, 2, 64 << 10), 0);
	cr_assert_eq(pipe_pool_get(&p, &a), 0);
	cr_assert_eq(pipe_pool_get(&p, &b), 0);
	brd = b.rd;
	cr_assert_eq(write(a.wr, "secret", 6), 6);

	pipe_pool_put(&p, &a, 6); /* still holds bytes: closed */
	pipe_pool_put(&p, &b, 0); /* empty: recycled */
	cr_expect_eq(p.total, 1);
	cr_expect_eq(p.nfree, 1);

	cr_assert_eq(pipe_pool_get(&p, &c), 0);
	cr_assert_eq(pipe_pool_get(&p, &d), 0);
	cr_expect_eq(c.rd, brd, "the empty pipe should be the one recycled");
	cr_expect_eq(p.created, 3);
	expect_empty_pipe(&c);
	expect_empty_pipe(&d);

	pipe_pool_put(&p, &c, 0);
	pipe_pool_put(&p, &d, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, exhausted_pool_reuses_after_put)
{
	struct pipe_pool p;
	struct pipe_pair a = { -1, -1 }, b = { -1, -1 };
	int rd;

	cr_assert_eq(pipe_pool_init(&p, 1, 64 << 10), 0);
	cr_assert_eq(pipe_pool_get(&p, &a), 0);
	rd = a.rd;
	cr_expect_eq(pipe_pool_get(&p, &b), -ENOSPC);
	cr_expect_eq(p.exhausted, 1);

	pipe_pool_put(&p, &a, 0);
	cr_assert_eq(pipe_pool_get(&p, &b), 0);
	cr_expect_eq(b.rd, rd);
	cr_expect_eq(p.created, 1);
	cr_expect_eq(p.exhausted, 1);
	pipe_pool_put(&p, &b, 0);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, in_use_counts)
{
	struct pipe_pool p;
	struct pipe_pair pp[4];

	cr_assert_eq(pipe_pool_init(&p, 4, 0), 0);
	cr_expect_eq(pipe_pool_in_use(&p), 0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(pipe_pool_get(&p, &pp[i]), 0);
		cr_expect_eq(pipe_pool_in_use(&p), (unsigned)i + 1);
	}
	pipe_pool_put(&p, &pp[0], 0);
	cr_expect_eq(pipe_pool_in_use(&p), 3);
	cr_expect_eq(p.total, 4);
	pipe_pool_put(&p, &pp[1], 100);
	cr_expect_eq(pipe_pool_in_use(&p), 2);
	cr_expect_eq(p.total, 3);
	pipe_pool_put(&p, &pp[2], 0);
	cr_expect_eq(pipe_pool_in_use(&p), 1);
	cr_expect_eq(p.nfree, 2);
	cr_assert_eq(pipe_pool_get(&p, &pp[0]), 0);
	cr_expect_eq(pipe_pool_in_use(&p), 2);
	pipe_pool_put(&p, &pp[0], 0);
	pipe_pool_put(&p, &pp[3], 0);
	cr_expect_eq(pipe_pool_in_use(&p), 0);
	cr_expect_eq(p.total, 3);
	cr_expect_eq(p.nfree, 3);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, second_put_of_same_pair_is_ignored)
{
	struct pipe_pool p;
	struct pipe_pair a = { -1, -1 };

	cr_assert_eq(pipe_pool_init(&p, 2, 0), 0);
	cr_assert_eq(pipe_pool_get(&p, &a), 0);
	pipe_pool_put(&p, &a, 0);
	pipe_pool_put(&p, &a, 0);
	cr_expect_eq(p.nfree, 1);
	cr_expect_eq(p.total, 1);
	pipe_pool_put(&p, &a, 5);
	cr_expect_eq(p.total, 1);
	pipe_pool_destroy(&p);
}

Test(unit_pipe_pool, destroy_closes_free_pipes)
{
	struct pipe_pool p;
	struct pipe_pair pp[3];
	int fds[4];

	cr_assert_eq(pipe_pool_init(&p, 3, 64 << 10), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pipe_pool_get(&p, &pp[i]), 0);
	fds[0] = pp[0].rd;
	fds[1] = pp[0].wr;
	fds[2] = pp[1].rd;
	fds[3] = pp[1].wr;
	pipe_pool_put(&p, &pp[0], 0);
	pipe_pool_put(&p, &pp[1], 0);
	cr_assert_eq(p.nfree, 2);

	pipe_pool_destroy(&p);
	for (int i = 0; i < 4; i++)
		expect_closed(fds[i]);
	cr_expect_eq(p.nfree, 0);
	cr_expect_eq(p.free, NULL);
	/* The pipe still in use is the caller's, not the pool's: left open. */
	cr_expect_eq(p.total, 1);
	expect_pipe_end(pp[2].rd, 64 << 10);
	close(pp[2].rd);
	close(pp[2].wr);
}

Test(unit_pipe_pool, pipe2_failure_returns_errno)
{
	struct pipe_pool p;
	struct pipe_pair pp = { -7, -8 };
	struct rlimit old, low;
	int lowest, r;

	cr_assert_eq(pipe_pool_init(&p, 4, 0), 0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	lowest = dup(0);
	cr_assert(lowest >= 0);
	close(lowest);

	/* No descriptor can be allocated until the limit is restored. */
	low = old;
	low.rlim_cur = (rlim_t)lowest;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	r = pipe_pool_get(&p, &pp);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);

	cr_expect_eq(r, -EMFILE, "get returned %d, want -EMFILE", r);
	cr_expect_eq(pp.rd, -7, "a failed get wrote *out");
	cr_expect_eq(p.total, 0);
	cr_expect_eq(p.created, 0);
	cr_expect_eq(p.exhausted, 0);

	/* And the pool works again once descriptors are available. */
	cr_assert_eq(pipe_pool_get(&p, &pp), 0);
	cr_expect_eq(p.total, 1);
	pipe_pool_put(&p, &pp, 0);
	pipe_pool_destroy(&p);
}

/* After a burst the pool shrinks back (to the headroom once nothing is in
 * use), never below what steady traffic uses, and in bounded steps. */
Test(unit_pipe_pool, trim_shrinks_after_a_burst_and_keeps_steady_use)
{
	enum { BURST = 300, STEADY = 20 };
	static struct pipe_pair pp[BURST];
	struct pipe_pool p;

	cr_assert_eq(pipe_pool_init(&p, 1000, 0), 0);
	for (int i = 0; i < BURST; i++)
		cr_assert_eq(pipe_pool_get(&p, &pp[i]), 0);
	cr_expect_eq(p.peak, BURST);
	/* The burst ends but for STEADY sessions that keep their pipes. */
	for (int i = STEADY; i < BURST; i++)
		pipe_pool_put(&p, &pp[i], 0);
	cr_expect_eq(p.total, BURST);
	unsigned closed = pipe_pool_trim(&p);
	cr_expect_leq(closed, PIPE_POOL_TRIM_BATCH, "one call closed %u pipes", closed);
	cr_expect_eq(closed, 0, "the first calm tick already closed %u pipes", closed);
	/* 60 s of ticks: down to steady use plus headroom, never below it. */
	for (int t = 0; t < 600; t++) {
		pipe_pool_trim(&p);
		cr_assert_geq(p.total, STEADY, "trimmed below the pipes in use");
	}
	cr_expect_eq(p.total, STEADY + PIPE_POOL_HEADROOM, "pool holds %u pipes after 60 s", p.total);
	cr_expect_eq(pipe_pool_in_use(&p), STEADY);
	/* Steady use again: gets are served from the headroom, no churn. */
	uint64_t created = p.created;
	for (int k = 0; k < 100; k++) {
		struct pipe_pair x;
		cr_assert_eq(pipe_pool_get(&p, &x), 0);
		pipe_pool_put(&p, &x, 0);
		pipe_pool_trim(&p);
	}
	cr_expect_eq(p.created, created, "steady traffic created %llu new pipes",
		     (unsigned long long)(p.created - created));
	/* Everything back: only the headroom stays. */
	for (int i = 0; i < STEADY; i++)
		pipe_pool_put(&p, &pp[i], 0);
	for (int t = 0; t < 600; t++)
		pipe_pool_trim(&p);
	cr_expect_eq(p.total, PIPE_POOL_HEADROOM, "idle pool holds %u pipes", p.total);
	pipe_pool_destroy(&p);
	cr_expect_eq(p.total, 0);
}
