/* SPDX-License-Identifier: MIT */
/* bench_baseline: another build of splicer measured in the same run
 * (`splicer bench --baseline [NAME=]PATH`), so a table can say whether this
 * build is faster or slower than that one, within noise or not, when both
 * met the same machine at the same moments.
 *
 * A baseline adds a twin of each case it covers: the same engine and
 * options, run by the other binary, named CASE@NAME and run right after its
 * case in every repetition. The other binary may be older than this bench:
 * a twin is skipped, with the option named, when its --help lacks one of
 * the case's options. */
#ifndef SPLICER_BENCH_BASELINE_H
#define SPLICER_BENCH_BASELINE_H
#include <limits.h>
#include <stddef.h>

#include "bench_proxy.h"

#define MAX_BASELINES 3

struct bench_baseline {
	char name[32];          /* the columns' name ("x NAME") and the twins' suffix */
	char path[PATH_MAX];    /* as given */
	char exe[64];           /* /proc/PID/fd/N: the file as it was at start */
	char rev[160];          /* REVISION beside it (make perf-baseline), or "" */
	char *help;             /* its --help: the options it knows */
	int fd;
};

/* A twin case: storage for its names. */
struct bench_twin {
	struct bench_case c;
	char name[64];
	char what[PATH_MAX + 512];
};

/* Parses "[NAME=]PATH" (NAME: letters, digits, '.', '_', '-'; default
 * "baseline"), opens PATH and reads its --help. Returns 0, or -1 with a
 * sentence in err (not executable, not a splicer, a bad name). */
int bench_baseline_open(struct bench_baseline *b, const char *arg, char *err, size_t len);

/* Whether b's --help names word ("--sandbox", "sni") as a whole word. */
int bench_baseline_knows(const struct bench_baseline *b, const char *word);

/* Fills t as case c run by baseline b. Returns NULL, or why the twin
 * cannot run ("has no --sandbox option"), in why. */
const char *bench_baseline_twin(struct bench_twin *t, const struct bench_case *c,
				const struct bench_baseline *b, char *why, size_t len);

#endif
