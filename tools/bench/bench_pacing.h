/* SPDX-License-Identifier: MIT */
/* bench_pacing: `splicer bench --pacing`, the rate limits measured (issue
 * 24). One stream from the built-in sender through each proxy to a reader,
 * on loopback, for each rate: splicer with rate_limit_down (the kernel
 * paces its sends, SO_MAX_PACING_RATE; the splice engine moves the bytes),
 * nginx with proxy_download_rate (a user-space limiter) when installed, and
 * both unlimited. Per row: the rate achieved in the steady state (after the
 * first second: TCP's initial window leaves unpaced), its error against
 * the limit, and the proxy's CPU seconds per GB moved.
 *
 *   splicer bench --pacing [--rates 10mbit,100mbit,1gbit] [--seconds S]
 *                          [--peers nginx|none] [--json FILE] */
#ifndef SPLICER_BENCH_PACING_H
#define SPLICER_BENCH_PACING_H

/* The --pacing run: argv as `splicer bench` got it. Returns the exit
 * status (0, 1 when a row failed, 2 for bad options). */
int bench_pacing_main(int argc, char **argv);

#endif
