/* SPDX-License-Identifier: MIT */
/* bench_idle: `splicer bench --idle`, the memory an idle session costs
 * (issue 27, item 4). For each count of sessions (1,000 and 8,000 by
 * default) and each case (splicer's engines, HAProxy, nginx, and direct:
 * the client and backend without a proxy), N connections are opened
 * through the proxy to a backend of the bench's own, each carries 64 bytes
 * each way (so it is established end to end and its buffers were used
 * once), and then idles. After a second, and against a sample taken before
 * the first one opened: the proxy processes' RSS, the kernel's slab (less
 * what direct's sockets took: what remains is the proxy's two sockets,
 * their files, its epoll items, pipes; an idle session's socket queues are
 * empty, so TCP's buffer pages are not counted), and the sockets and
 * pipes the proxy holds, each per session. Rows are interleaved over the
 * repetitions; figures are medians.
 *
 *   splicer bench --idle [--sessions 1000,8000] [--cases LIST] [--reps N]
 *                        [--json FILE] */
#ifndef SPLICER_BENCH_IDLE_H
#define SPLICER_BENCH_IDLE_H

/* argv as `splicer bench` got it. Returns the exit status (0; 1 when a
 * splicer row failed; 2 for bad options). */
int bench_idle_main(int argc, char **argv);

#endif
