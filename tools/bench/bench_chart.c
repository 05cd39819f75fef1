/* SPDX-License-Identifier: MIT */
/* bench_chart: the chart of `splicer bench --chart FILE`, drawn by gnuplot
 * from the medians, each bar with a whisker from the min to the max of the
 * repetitions. On loopback: bulk throughput and CPU per GB, request/response
 * rates and the machine's CPU per request, short connections per second and
 * the ping-pong p50; when veth links ran, one stream's throughput and CPU
 * per GB per link. splicer's cases (and direct) come first; a dashed line
 * sets the peers (HAProxy, nginx, socat) apart on the right. */
#define _GNU_SOURCE
#include "bench_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The loopback figures, in data-file column order (med, min, max each). */
static const int chart_figs[] = {
	F_B1_GBPS, F_B4_GBPS, F_B1_CPU, F_B4_CPU,
	F_RRV + 0 * RRV_NFIG + RRV_RATE, F_RRV + 1 * RRV_NFIG + RRV_RATE,
	F_RRV + 2 * RRV_NFIG + RRV_RATE, F_RRV + 3 * RRV_NFIG + RRV_RATE,
	F_RRV + 0 * RRV_NFIG + RRV_MCPU, F_RRV + 1 * RRV_NFIG + RRV_MCPU,
	F_RRV + 2 * RRV_NFIG + RRV_MCPU, F_RRV + 3 * RRV_NFIG + RRV_MCPU,
	F_CONN_RATE, F_RR_P50,
};
#define NCHART (int)(sizeof(chart_figs) / sizeof(chart_figs[0]))

/* The using-spec of chart figure k: "y:ylow:yhigh". */
static const char *cols(int k)
{
	static char buf[4][40];
	static int next;
	char *b = buf[next++ % 4];

	snprintf(b, sizeof(buf[0]), "%d:%d:%d", 2 + 3 * k, 3 + 3 * k, 4 + 3 * k);
	return b;
}

static void put(FILE *d, double v)
{
	if (isnan(v))
		fprintf(d, " ?");
	else
		fprintf(d, " %g", v);
}

/* Writes the loopback rows, splicer's first; returns the separator's x
 * (its row index), or -1 when there are no peers. */
static int write_rows(FILE *d, const struct case_run *runs, int n, int *nrows)
{
	int row = 0, sep = -1;

	for (int peers = 0; peers < 2; peers++) {
		int first = 1;
		for (int i = 0; i < n; i++) {
			const struct case_run *c = &runs[i];
			if (c->skip || c->link->mtu || (c->c->kind > PX_SPLICER) != peers)
				continue;
			if (peers && first && row) {
				fprintf(d, "\"\"");
				for (int k = 0; k < 3 * NCHART; k++)
					fprintf(d, " ?");
				fprintf(d, "\n");
				sep = row++;
			}
			first = 0;
			fprintf(d, "\"%s\"", c->label);
			for (int k = 0; k < NCHART; k++) {
				put(d, c->med[chart_figs[k]]);
				put(d, c->lo[chart_figs[k]]);
				put(d, c->hi[chart_figs[k]]);
			}
			fprintf(d, "\n");
			row++;
		}
	}
	*nrows = row;
	return sep;
}

/* Whether any case ran on link l (links are torn down before the chart). */
static int link_ran(const struct case_run *runs, int n, const struct bench_link *l)
{
	for (int i = 0; i < n; i++)
		if (runs[i].link == l && !runs[i].skip && !isnan(runs[i].med[F_B1_GBPS]))
			return 1;
	return 0;
}

/* veth table: a row per case that ran on a veth link, for each link one
 * stream's Gbit/s and CPU-s/GB (med, min, max each). */
static int write_veth(FILE *ld, const struct case_run *runs, int n, struct bench_link *links,
		      int nlinks)
{
	int veth = 0;

	for (int l = 0; l < nlinks; l++)
		veth += links[l].mtu && link_ran(runs, n, &links[l]);
	for (int i = 0; veth && i < n; i++) {
		const struct case_run *c = &runs[i];
		int first = 1;
		if (!c->link->mtu)
			continue;
		for (int k = 0; k < i; k++)
			first &= !(runs[k].link->mtu && runs[k].c == c->c && runs[k].workers == c->workers);
		if (!first)
			continue;
		fprintf(ld, "\"%s\"", c->label);
		for (int l = 0; l < nlinks; l++) {
			const struct case_run *x = NULL;
			if (!links[l].mtu || !link_ran(runs, n, &links[l]))
				continue;
			for (int k = 0; k < n && !x; k++)
				if (runs[k].link == &links[l] && !runs[k].skip && runs[k].c == c->c &&
				    runs[k].workers == c->workers)
					x = &runs[k];
			for (int f = 0; f < 2; f++) {
				int fig = f ? F_B1_CPU : F_B1_GBPS;
				put(ld, x ? x->med[fig] : NAN);
				put(ld, x ? x->lo[fig] : NAN);
				put(ld, x ? x->hi[fig] : NAN);
			}
		}
		fprintf(ld, "\n");
	}
	return veth;
}

static void panel(FILE *g, const char *title, const char *dat, const int *ks, const char *const *names,
		  int nk)
{
	fprintf(g, "set title '%s'\nplot ", title);
	for (int i = 0; i < nk; i++)
		fprintf(g, "%s'%s' using %s%s title '%s'", i ? ", " : "", dat, cols(ks[i]),
			i ? "" : ":xtic(1)", names[i]);
	fprintf(g, "\n");
}

int bench_chart(const char *path, const struct case_run *runs, int n, struct bench_link *links,
		int nlinks)
{
	char dat[] = "/tmp/splicer-chart-XXXXXX", ldat[] = "/tmp/splicer-chartl-XXXXXX";
	int fd = mkstemp(dat), lfd = mkstemp(ldat), svg, r = -1, veth, sep, nrows;
	FILE *d = fd >= 0 ? fdopen(fd, "w") : NULL, *ld = lfd >= 0 ? fdopen(lfd, "w") : NULL, *g;
	size_t plen = strlen(path);
	static const char *const streams[] = { "1 stream", "4 streams" };
	static const char *const rrn[] = { "64 B depth 1", "64 B depth 16", "1 KiB depth 1", "1 KiB depth 16" };

	svg = plen > 4 && !strcmp(path + plen - 4, ".svg");
	if (!d || !ld)
		goto out;
	sep = write_rows(d, runs, n, &nrows);
	veth = write_veth(ld, runs, n, links, nlinks);
	fclose(d);
	fclose(ld);
	d = ld = NULL;
	if (!(g = popen("gnuplot", "w")))
		goto out;
	fprintf(g, "set terminal %s size 1400,%d font ',10'\nset output '%s'\n",
		svg ? "svg" : "pngcairo", veth ? 1800 : 1400, path);
	fprintf(g, "set multiplot layout %d,2 title 'splicer bench: medians with min-max whiskers, "
		   "one run on this machine; splicer left, peers right of the dashed line'\n"
		   "set datafile missing '?'\nset style data histograms\n"
		   "set style histogram errorbars gap 1 lw 1\n"
		   "set style fill solid 0.7 border -1\nset boxwidth 0.9\nset grid ytics\n"
		   "set xtics rotate by -35 scale 0\nset key outside top center horizontal\nset yrange [0:*]\n",
		veth ? 4 : 3);
	if (sep >= 0)
		fprintf(g, "set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb 'gray40'\n"
			   "set label 1 'peers' at %d.2, graph 0.97 left textcolor rgb 'gray40'\n",
			sep, sep, sep);
	panel(g, "loopback: bulk throughput (Gbit/s, higher is better)", dat, (int[]){ 0, 1 }, streams, 2);
	panel(g, "loopback: proxy CPU seconds per GB (lower is better)", dat, (int[]){ 2, 3 }, streams, 2);
	panel(g, "loopback: request/response, requests/s (higher is better)", dat,
	      (int[]){ 4, 5, 6, 7 }, rrn, 4);
	panel(g, "loopback: request/response, machine CPU us per request (lower is better)", dat,
	      (int[]){ 8, 9, 10, 11 }, rrn, 4);
	panel(g, "loopback: short connections per second (higher is better)", dat, (int[]){ 12 },
	      (const char *const[]){ "conn/s" }, 1);
	panel(g, "loopback: one connection, 64 B ping-pong p50 (us, lower is better)", dat, (int[]){ 13 },
	      (const char *const[]){ "p50" }, 1);
	fprintf(g, "unset arrow 1\nunset label 1\n");
	for (int p = 0; veth && p < 2; p++) {
		int first = 1, k = p;
		fprintf(g, "set title 'one stream over links: %s'\nplot ",
			p ? "proxy CPU seconds per GB (lower is better)" : "Gbit/s (higher is better)");
		for (int l = 0; l < nlinks; l++) {
			if (!links[l].mtu || !link_ran(runs, n, &links[l]))
				continue;
			fprintf(g, "%s'%s' using %s%s title '%s'", first ? "" : ", ", ldat, cols(k),
				first ? ":xtic(1)" : "", links[l].name);
			first = 0;
			k += 2;
		}
		fprintf(g, "\n");
	}
	fprintf(g, "unset multiplot\n");
	r = pclose(g) == 0 ? 0 : -1;
	(void)nrows;
out:
	if (d)
		fclose(d);
	if (ld)
		fclose(ld);
	if (fd >= 0)
		unlink(dat);
	if (lfd >= 0)
		unlink(ldat);
	return r;
}
