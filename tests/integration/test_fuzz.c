/* SPDX-License-Identifier: MIT */
/* Short fuzz runs in the default suite: every libFuzzer harness of `make
 * fuzz` (fuzz/fuzz_*.c, clang -fsanitize=fuzzer,address,undefined) runs for
 * SPLICER_FUZZ_SECONDS (20 by default) on a copy of its seed corpus, all at
 * once so the suite pays 20 s, not 20 s each. A finding (crash, sanitizer report,
 * a failed property check, a timeout or out-of-memory) fails the test and
 * leaves the reproducer in the kept temp dir; the test also fails if a
 * harness executed nothing. Longer runs: `make fuzz FUZZ_SECONDS=N`. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *const fuzzers[] = { "proxy_proto", "addr", "config", "http_req", "tls_hello" };
#define NFUZZ (sizeof(fuzzers) / sizeof(fuzzers[0]))

/* Copies every file of src into dst (libFuzzer adds to its corpus dir, and
 * the repository's seeds must stay as committed). */
static int copy_dir(const char *src, const char *dst)
{
	DIR *d = opendir(src);
	if (!d || mkdir(dst, 0755))
		return -1;
	static char buf[1 << 16];
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char a[1024], b[1024];
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
		int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		for (ssize_t n; in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0;)
			if (write(out, buf, (size_t)n) != n)
				break;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
	}
	closedir(d);
	return 0;
}

/* libFuzzer's final "stat::number_of_executed_units: N", or -1. */
static long long executed(const char *log)
{
	FILE *f = fopen(log, "re");
	long long n = -1;
	for (char l[512]; f && fgets(l, sizeof l, f);)
		if (!strncmp(l, "stat::number_of_executed_units:", 31))
			n = atoll(l + 31);
	if (f)
		fclose(f);
	return n;
}

Test(integ, fuzz_each_harness_briefly, .init = h_init, .fini = h_fini, .timeout = 180)
{
	const char *dir = getenv("SPLICER_FUZZ_DIR");
	const char *corpus = getenv("SPLICER_FUZZ_CORPUS");
	const char *secs = getenv("SPLICER_FUZZ_SECONDS");

	H_CHECK(dir && corpus, "SPLICER_FUZZ_DIR and SPLICER_FUZZ_CORPUS are not set: run `make test`, "
			       "which builds the harnesses with clang");
	if (!secs)
		secs = "20";
	pid_t pid[NFUZZ];
	char log[NFUZZ][400];
	for (size_t i = 0; i < NFUZZ; i++) {
		char bin[400], seeds[400], work[400], tmo[32], art[400];
		snprintf(bin, sizeof bin, "%s/fuzz_%s", dir, fuzzers[i]);
		snprintf(seeds, sizeof seeds, "%s/%s", corpus, fuzzers[i]);
		snprintf(work, sizeof work, "%s/corpus-%s", h_tmpdir(), fuzzers[i]);
		snprintf(log[i], sizeof log[i], "%s/fuzz-%s.log", h_tmpdir(), fuzzers[i]);
		snprintf(tmo, sizeof tmo, "-max_total_time=%s", secs);
		snprintf(art, sizeof art, "-artifact_prefix=%s/crash-%s-", h_tmpdir(), fuzzers[i]);
		H_CHECK(access(bin, X_OK) == 0, "fuzz harness %s is missing (make test builds it)", bin);
		H_CHECK(copy_dir(seeds, work) == 0, "cannot copy the seed corpus %s", seeds);
		pid[i] = fork();
		H_CHECK(pid[i] >= 0, "fork: %s", strerror(errno));
		if (pid[i] == 0) {
			int fd = open(log[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
			dup2(fd, 1);
			dup2(fd, 2);
			execl(bin, bin, tmo, "-timeout=10", "-rss_limit_mb=2048", "-close_fd_mask=2",
			      "-print_final_stats=1", art, work, (char *)NULL);
			_exit(127);
		}
	}
	int failed = 0;
	for (size_t i = 0; i < NFUZZ; i++) {
		int st = 0;
		/* Bounded by the test's timeout; libFuzzer stops itself at max_total_time. */
		waitpid(pid[i], &st, 0);
		long long n = executed(log[i]);
		fprintf(stderr, "[fuzz] %-12s %s s: %lld executions, exit %d\n", fuzzers[i], secs, n,
			WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n <= 0) {
			h_print_tail(log[i], 40);
			failed++;
		}
	}
	H_CHECK(failed == 0, "%d fuzz harness(es) found a problem or ran nothing (logs and reproducers "
			     "in %s)", failed, h_tmpdir());
	/* h_fini removes plain files only; the grown corpora are directories. */
	char rm[600];
	snprintf(rm, sizeof rm, "rm -rf %s/corpus-*", h_tmpdir());
	H_CHECK(system(rm) == 0, "%s failed", rm);
}
