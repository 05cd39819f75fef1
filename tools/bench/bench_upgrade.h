/* SPDX-License-Identifier: MIT */
/* bench_upgrade: `splicer bench --upgrade`, what an upgrade that hands
 * established sessions to the new process costs against their count
 * (issue 25). For each count (100, 1,000 and 8,000 by default) and each
 * case (splicer with auto, copy, splice; and always `drain`, auto with
 * upgrade_sessions = drain, the reference without a hand-over), N sessions
 * are opened through splicer (bench/splicer-upgrade.conf: an admin socket
 * and a stats endpoint), each carrying 64 bytes each way, then
 * `splicer ctl -s ADMIN upgrade` runs. Measured: how long ctl took (the
 * SIGUSR2 to its answer), when the new process said ready (its log), how
 * long the old one took to notice, the hand-over time it reports, how long
 * it lived after its "serves now" (its exit, reaped at 1 ms polls), the
 * new process's RSS and CPU once it adopted them, and then one round trip
 * of every session, bytes checked: a session that fails is a bug, counted
 * and reported, and the exit status is 1. Rows are interleaved over the
 * repetitions; figures are medians, failures are summed.
 *
 *   splicer bench --upgrade [--sessions 100,1000,8000] [--cases auto,copy,splice]
 *                           [--reps N] [--json FILE] */
#ifndef SPLICER_BENCH_UPGRADE_H
#define SPLICER_BENCH_UPGRADE_H

/* argv as `splicer bench` got it. Returns the exit status (0; 1 when a row
 * failed or a session did not survive; 2 for bad options). */
int bench_upgrade_main(int argc, char **argv);

#endif
