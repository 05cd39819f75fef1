/* SPDX-License-Identifier: MIT */
/* The documentation against the binary: the generated parts of
 * doc/configuration.md and doc/splicer.conf.5 are what `splicer
 * config-reference [--man]` prints (make doc writes them), the man pages
 * pass `mandoc -Tlint -Wwarning`, every long option --help names is in
 * splicer.8, every route key of the reference is in --help, and every
 * metric family (of a real scrape and of stats_http.c's source) is in
 * operations.md. The doc files are read from SPLICER_DOC_DIR, else doc/
 * under the working directory (make test runs from the tree's top). */
#define _GNU_SOURCE
#include "harness.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MANDOC "/usr/bin/mandoc"

static void doc_path(const char *name, char *buf, size_t len)
{
	const char *dir = getenv("SPLICER_DOC_DIR");

	snprintf(buf, len, "%s/%s", dir && *dir ? dir : "doc", name);
}

/* Runs bin with args; returns its stdout (malloc'd) after checking it exited 0. */
static char *run_ok(const char *bin, const char *const *args, char **err)
{
	char *out = NULL;
	int st = h_run_capture(bin, args, 10000, &out, err);

	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out,
		"%s %s: wait status %d; stderr: %s", bin, args[0], st, *err ? *err : "");
	return out;
}

static char *file_text(const char *path)
{
	char *err = NULL, *text;
	const char *args[] = { path, NULL };

	H_CHECK(access(path, R_OK) == 0, "%s: not readable (run the tests from the tree's top, or "
		"set SPLICER_DOC_DIR)", path);
	text = run_ok("/bin/cat", args, &err);
	free(err);
	return text;
}

static char *doc_text(const char *name)
{
	char path[512];

	doc_path(name, path, sizeof(path));
	return file_text(path);
}

/* The lines strictly between the BEGIN GENERATED and END GENERATED lines,
 * in place (text is cut). */
static const char *generated_region(char *text, const char *name)
{
	char *begin = strstr(text, "BEGIN GENERATED"), *end, *nl;

	H_CHECK(begin && (nl = strchr(begin, '\n')), "%s: no BEGIN GENERATED line", name);
	end = strstr(nl + 1, "END GENERATED");
	H_CHECK(end && !strstr(end + 1, "BEGIN GENERATED"), "%s: no END GENERATED line after "
		"BEGIN GENERATED, or a second region", name);
	while (end > nl + 1 && end[-1] != '\n')
		end--; /* to the start of the END line */
	*end = '\0';
	return nl + 1;
}

/* Fails with the first line that differs, and how to fix it. */
static void same_text(const char *doc, const char *bin_out, const char *name, const char *cmd)
{
	unsigned line = 1;
	const char *a = doc, *b = bin_out;

	while (*a && *a == *b) {
		line += *a == '\n';
		a++;
		b++;
	}
	if (!*a && !*b)
		return;
	while (a > doc && a[-1] != '\n') /* the whole line, on both sides */
		a--, b--;
	H_CHECK(0, "%s's generated part differs from `%s` at its line %u:\n  doc:    %.*s\n"
		"  binary: %.*s\nrun `make doc`", name, cmd, line, (int)strcspn(a, "\n"), a,
		(int)strcspn(b, "\n"), b);
}

static void generated_matches(const char *name, const char *const *args, const char *cmd)
{
	char *text = doc_text(name), *err = NULL;
	char *out = run_ok(h_binary(0), args, &err);

	same_text(generated_region(text, name), out, name, cmd);
	free(text);
	free(out);
	free(err);
}

Test(integ, docs_configuration_md_is_generated, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *args[] = { "config-reference", NULL };

	generated_matches("configuration.md", args, "splicer config-reference");
}

Test(integ, docs_conf5_options_are_generated, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *args[] = { "config-reference", "--man", NULL };

	generated_matches("splicer.conf.5", args, "splicer config-reference --man");
}

Test(integ, docs_config_reference_usage, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *args[] = { "config-reference", "--roff", NULL };
	char *out = NULL, *err = NULL;
	int st = h_run_capture(h_binary(0), args, 10000, &out, &err);

	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2 && err &&
		strstr(err, "usage: ") && strstr(err, "config-reference [--man]"),
		"config-reference --roff: wait status %d, stderr: %s", st, err ? err : "");
	free(out);
	free(err);
}

Test(integ, docs_man_pages_pass_mandoc_lint, .init = h_init, .fini = h_fini, .timeout = 30)
{
	static const char *const pages[] = { "splicer.8", "splicer.conf.5" };

	if (access(MANDOC, X_OK))
		cr_skip_test(MANDOC " is not installed (Debian package mandoc): man pages not linted");
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		char path[512], *out = NULL, *err = NULL;
		const char *args[] = { "-Tlint", "-Wwarning", path, NULL };
		int st;

		doc_path(pages[i], path, sizeof(path));
		st = h_run_capture(MANDOC, args, 10000, &out, &err);
		H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && !*out && err && !*err,
			"mandoc -Tlint -Wwarning %s: wait status %d\n%s%s", path, st, out ? out : "",
			err ? err : "");
		free(out);
		free(err);
	}
}

/* "--name" at p in help: the name's length, else 0. */
static size_t long_option(const char *help, const char *p)
{
	size_t n;

	if (p[0] != '-' || p[1] != '-' || !islower((unsigned char)p[2]) ||
	    (p > help && (isalnum((unsigned char)p[-1]) || p[-1] == '-')))
		return 0;
	for (n = 2; islower((unsigned char)p[n]) || isdigit((unsigned char)p[n]) || p[n] == '-'; n++)
		;
	return n;
}

/* Whether man (roff, "\-" read as "-") names the option opt ("--name",
 * len bytes) as a whole word. */
static int man_names(const char *man, const char *opt, size_t len)
{
	char *plain = malloc(strlen(man) + 1), *q = plain;
	int found = 0;

	H_CHECK(plain, "out of memory");
	for (const char *p = man; *p; p++) {
		if (p[0] == '\\' && p[1] == '-')
			p++;
		*q++ = *p;
	}
	*q = '\0';
	for (char *p = plain; (p = strstr(p, opt)) && !found; p++) {
		char after = p[len];
		found = !(isalnum((unsigned char)after) || after == '-') &&
			(p == plain || !(isalnum((unsigned char)p[-1]) || p[-1] == '-'));
	}
	free(plain);
	return found;
}

Test(integ, docs_every_help_option_is_in_splicer_8, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *args[] = { "--help", NULL };
	char *err = NULL, *help = run_ok(h_binary(0), args, &err);
	char *man = doc_text("splicer.8"), missing[2048] = "";
	size_t nmissing = 0, checked = 0;

	for (const char *p = help; *p; p++) {
		size_t len = long_option(help, p);
		char opt[64];
		if (!len || len >= sizeof(opt))
			continue;
		snprintf(opt, sizeof(opt), "%.*s", (int)len, p);
		checked++;
		if (!man_names(man, opt, len) && !strstr(missing, opt))
			nmissing += (size_t)snprintf(missing + nmissing, sizeof(missing) - nmissing, " %s",
						     opt);
		p += len - 1;
	}
	H_CHECK(checked >= 20, "only %zu long options found in --help:\n%s", checked, help);
	H_CHECK(!nmissing, "options in `splicer --help` missing from doc/splicer.8:%s", missing);
	free(help);
	free(man);
	free(err);
}

/* Every route key of the reference's table is in --help: a setting as its
 * long option (--tls-hello-timeout), a key of the file only as "KEY =" in
 * the --config entry (sni =, alpn =, ...). */
Test(integ, docs_every_route_key_is_in_help, .init = h_init, .fini = h_fini, .timeout = 30)
{
	const char *help_args[] = { "--help", NULL }, *ref_args[] = { "config-reference", NULL };
	char *err = NULL, *err2 = NULL, *help = run_ok(h_binary(0), help_args, &err);
	char *ref = run_ok(h_binary(0), ref_args, &err2), missing[2048] = "";
	size_t nmissing = 0, checked = 0;

	/* the rows of "Keys at a glance": | [`key`](#key) | route | ... */
	for (char *line = strtok(ref, "\n"); line; line = strtok(NULL, "\n")) {
		char key[64], opt[72], file_only[72];
		if (sscanf(line, "| [`%63[a-z0-9_]`](#", key) != 1 || !strstr(line, ") | route |"))
			continue;
		snprintf(file_only, sizeof(file_only), " %s = ", key);
		for (char *k = key; *k; k++)
			*k = *k == '_' ? '-' : *k;
		snprintf(opt, sizeof(opt), "--%s ", key);
		checked++;
		if (!strstr(help, opt) && !strstr(help, file_only))
			nmissing += (size_t)snprintf(missing + nmissing, sizeof(missing) - nmissing, " %s",
						     key);
	}
	H_CHECK(checked >= 20, "only %zu route keys found in `splicer config-reference`", checked);
	H_CHECK(!nmissing, "route keys missing from `splicer --help`:%s", missing);
	free(help);
	free(ref);
	free(err);
	free(err2);
}

/* Every C source and header says its licence in its first lines (SPDX), so
 * a file copied out of the tree still carries it; a new file without one
 * fails here. */
static int spdx_walk(const char *dir, char *missing, size_t cap, int *files)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int bad = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[600], head[400];
		size_t l = strlen(e->d_name);
		if (e->d_name[0] == '.' || !strcmp(e->d_name, "corpus") || !strcmp(e->d_name, "data"))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (e->d_type == DT_DIR) {
			bad += spdx_walk(path, missing, cap, files);
			continue;
		}
		if (l < 3 || (strcmp(e->d_name + l - 2, ".c") && strcmp(e->d_name + l - 2, ".h")))
			continue;
		FILE *f = fopen(path, "re");
		size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
		if (f)
			fclose(f);
		head[n] = '\0';
		(*files)++;
		if (!strstr(head, "SPDX-License-Identifier:")) {
			size_t m = strlen(missing);
			snprintf(missing + m, cap - m, " %s", path);
			bad++;
		}
	}
	closedir(d);
	return bad;
}

Test(integ, docs_every_source_has_an_spdx_line, .init = h_init, .fini = h_fini, .timeout = 30)
{
	static const char *const dirs[] = { "src", "tests", "tools", "fuzz", "bpf" };
	char missing[4096] = "";
	int bad = 0, files = 0;

	if (access("src/app/main.c", R_OK))
		cr_skip_test("not in the source tree");
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		bad += spdx_walk(dirs[i], missing, sizeof missing, &files);
	H_CHECK(files > 100, "only %d sources found", files);
	H_CHECK(!bad, "%d sources without an SPDX-License-Identifier line:%s", bad, missing);
}

/* Whether text names metric as a whole word (not a prefix of a longer name). */
static int names_metric(const char *text, const char *metric)
{
	size_t n = strlen(metric);

	for (const char *p = text; (p = strstr(p, metric)); p++) {
		char after = p[n];
		if (!(isalnum((unsigned char)after) || after == '_') &&
		    (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')))
			return 1;
	}
	return 0;
}

/* Adds name to the list (a NUL-separated run of names) unless it is there. */
static void add_name(char *list, size_t cap, size_t *len, const char *name, size_t n)
{
	for (const char *p = list; p < list + *len; p += strlen(p) + 1)
		if (strlen(p) == n && !strncmp(p, name, n))
			return;
	if (*len + n + 1 < cap) {
		memcpy(list + *len, name, n);
		list[*len + n] = '\0';
		*len += n + 1;
	}
}

/* The family names of stats_http.c: its "splicer_..." literals, and the
 * suffixes its family macros and backend_pair() prefix. Families that only
 * some configs show (the DNS ones) are found here. */
static int source_families(const char *src, char *list, size_t cap, size_t *len)
{
	static const struct {
		const char *call, *prefix;
	} macros[] = {
		{ "ROUTE_FAMILY(\"", "splicer_route_" },   { "BACKEND_FAMILY(\"", "splicer_backend_" },
		{ "WORKER_COUNTER(\"", "splicer_" },       { "backend_pair(&o, c, \"", "splicer_backend_" },
	};
	char name[128];
	int found = 0;

	for (const char *p = src; (p = strstr(p, "\"splicer_")); p++) {
		size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz0123456789_");
		if (p[1 + n] == '"' && p[n] != '_') { /* a whole name, not a prefix */
			add_name(list, cap, len, p + 1, n);
			found++;
		}
	}
	for (size_t m = 0; m < sizeof macros / sizeof macros[0]; m++)
		for (const char *p = src; (p = strstr(p, macros[m].call)); p++) {
			const char *s = p + strlen(macros[m].call);
			size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_");
			if (s[n] == '"' && n &&
			    snprintf(name, sizeof name, "%s%.*s", macros[m].prefix, (int)n, s) < (int)sizeof name) {
				add_name(list, cap, len, name, strlen(name));
				found++;
			}
		}
	return found;
}

/* Every metric family is in doc/operations.md's table: those of a real
 * scrape (a maglev route with health checks beside a round-robin one:
 * every family but the DNS ones), and those stats_http.c can write. */
Test(integ, docs_every_metric_family_is_in_operations_md, .init = h_init, .fini = h_fini, .timeout = 60)
{
	const char *bin = h_binary(0);
	static struct h_proxy p;
	static char body[512 * 1024], list[16384];
	char text[600], err[512], missing[4096] = "";
	struct h_addr stats;
	size_t len = 0, nmiss = 0;
	int scraped = 0, nsrc;

	if (access("src/ctl/stats/stats_http.c", R_OK))
		cr_skip_test("not in the source tree");
	snprintf(text, sizeof text, "[global]\nworkers = 2\nstats = 127.0.0.1:0\n"
		 "[route hashed]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:9 127.0.0.1:19\n"
		 "balance = maglev\ncheck = tcp\ncheck_interval = 100ms\n"
		 "[route plain]\nlisten = 127.0.0.1:0\nbackend = 127.0.0.1:9\n");
	const char *args[] = { "-c", h_conf_write("metrics.conf", text), NULL };
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "start: %s", err);
	H_CHECK(h_stats_addr(&p, &stats) == 0 && h_metrics_get(&stats, body, sizeof body, 3000) == 0,
		"no /metrics answer");
	for (const char *l = body; (l = strstr(l, "\n# TYPE ")); l++) {
		size_t n = strcspn(l + 8, " \n");
		add_name(list, sizeof list, &len, l + 8, n);
		scraped++;
	}
	h_proxy_down(&p);
	char *src = file_text("src/ctl/stats/stats_http.c");
	nsrc = source_families(src, list, sizeof list, &len);
	free(src);
	H_CHECK(scraped >= 40 && nsrc >= 30, "%d families scraped, %d names found in stats_http.c:\n%s",
		scraped, nsrc, body);
	char *doc = doc_text("operations.md");
	for (const char *m = list; m < list + len; m += strlen(m) + 1)
		if (!names_metric(doc, m))
			nmiss += (size_t)snprintf(missing + nmiss, sizeof missing - nmiss, " %s", m);
	free(doc);
	H_CHECK(!nmiss, "metric families missing from doc/operations.md:%s", missing);
}
