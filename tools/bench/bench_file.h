/* SPDX-License-Identifier: MIT */
/* bench_file: the seeds' socket -> file and file -> socket experiments
 * (threads 001 and 003) as rows of `splicer bench`, measured by running
 * `splicer recv` and `splicer send` themselves over loopback.
 *
 * recv rows: one method (splice, vmsplice, copy) into one target (/dev/null,
 * a file on tmpfs, a file on the disk's filesystem, i.e. its page cache),
 * fed by `send --method sendfile` from a tmpfs file; the figures are the
 * receiver's CPU seconds per GiB (user+sys from wait4) and MiB/s from the
 * sender's start to the receiver's exit. send rows: one method (sendfile,
 * splice, copy) from the tmpfs file into `recv --method splice` to
 * /dev/null; the figures are the sender's. Every run checks exit statuses
 * and the size of what landed; every target is removed after its run. */
#ifndef SPLICER_BENCH_FILE_H
#define SPLICER_BENCH_FILE_H
#include <stdint.h>

#include "json.h"

#define FILE_MAX_REPS 20

struct file_row {
	char name[40];        /* "recv-splice-tmpfs", "send-sendfile" */
	char what[120];       /* legend line */
	int send;             /* 1: a send row */
	const char *method;
	char target[300];     /* recv rows: where it writes */
	double mibs[FILE_MAX_REPS], cpu[FILE_MAX_REPS]; /* MiB/s, CPU-s/GiB */
	int nrep;
	double med_mibs, lo_mibs, hi_mibs, med_cpu, lo_cpu, hi_cpu;
	char fail[400];
};

struct file_bench {
	uint64_t bytes;       /* per run */
	int nrows;
	struct file_row row[16];
	char src[300];        /* the tmpfs source file */
	char skip[400];       /* why nothing ran, or "" */
};

/* Prepares the rows and the source file (bytes of a pseudo-random pattern on
 * /dev/shm). Returns 0, or -1 with fb->skip saying why. */
int bench_file_setup(struct file_bench *fb, uint64_t bytes);

/* One repetition of every row (rows interleaved across repetitions by the
 * caller's loop). Returns 0, or -1 if a row failed (its fail says why). */
int bench_file_rep(struct file_bench *fb, int rep);

/* Medians and [min-max]; prints the table; removes the source file. */
void bench_file_finish(struct file_bench *fb);
void bench_file_print(const struct file_bench *fb);
void bench_file_json(struct json *j, const struct file_bench *fb);

#endif
