/* SPDX-License-Identifier: MIT */
/* bench_table: see bench_table.h. */
#include "bench_table.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct btrow {
	char cell[BT_MAXCOL][BT_CELL];
	char note[200];               /* a note row: this instead of cells */
};

struct btable {
	char title[200];
	int ncols, nrows, cap;
	char group[BT_MAXCOL][32], head[BT_MAXCOL][32];
	struct btrow *rows;
};

struct btable *btable_new(const char *title)
{
	struct btable *t = calloc(1, sizeof(*t));

	if (t)
		snprintf(t->title, sizeof(t->title), "%s", title);
	return t;
}

int btable_col(struct btable *t, const char *group, const char *head)
{
	if (!t || t->ncols == BT_MAXCOL)
		return -1;
	snprintf(t->group[t->ncols], sizeof(t->group[0]), "%s", group ? group : "");
	snprintf(t->head[t->ncols], sizeof(t->head[0]), "%s", head);
	return t->ncols++;
}

int btable_row(struct btable *t)
{
	if (!t)
		return -1;
	if (t->nrows == t->cap) {
		int cap = t->cap ? 2 * t->cap : 16;
		struct btrow *r = realloc(t->rows, (size_t)cap * sizeof(*r));
		if (!r)
			return -1;
		t->rows = r;
		t->cap = cap;
	}
	memset(&t->rows[t->nrows], 0, sizeof(t->rows[0]));
	return t->nrows++;
}

void btable_note_row(struct btable *t, const char *fmt, ...)
{
	int r = btable_row(t);
	va_list ap;

	if (r < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(t->rows[r].note, sizeof(t->rows[r].note), fmt, ap);
	va_end(ap);
}

void btable_set(struct btable *t, int row, int col, const char *fmt, ...)
{
	va_list ap;

	if (!t || row < 0 || row >= t->nrows || col < 0 || col >= t->ncols)
		return;
	va_start(ap, fmt);
	vsnprintf(t->rows[row].cell[col], BT_CELL, fmt, ap);
	va_end(ap);
}

void btable_set_range(struct btable *t, int row, int col, const char *fmt, double med, double lo,
		      double hi, int nrep)
{
	char a[16], b[16], c[16];

	if (isnan(med))
		return;
	snprintf(a, sizeof(a), fmt, med);
	snprintf(b, sizeof(b), fmt, lo);
	snprintf(c, sizeof(c), fmt, hi);
	if (nrep > 1)
		btable_set(t, row, col, "%s [%s-%s]", a, b, c);
	else
		btable_set(t, row, col, "%s", a);
}

static const char *shown(const char *cell)
{
	return cell[0] ? cell : "-";
}

static void print_markdown(const struct btable *t, FILE *f)
{
	fprintf(f, "\n%s\n\n|", t->title);
	for (int c = 0; c < t->ncols; c++)
		fprintf(f, " %s%s%s |", t->group[c], t->group[c][0] ? ": " : "", t->head[c]);
	fprintf(f, "\n|");
	for (int c = 0; c < t->ncols; c++)
		fprintf(f, "%s|", c ? " ---: " : " --- ");
	fprintf(f, "\n");
	for (int r = 0; r < t->nrows; r++) {
		if (t->rows[r].note[0]) {
			fprintf(f, "| %s |", t->rows[r].note);
			for (int c = 1; c < t->ncols; c++)
				fprintf(f, " |");
			fprintf(f, "\n");
			continue;
		}
		fprintf(f, "|");
		for (int c = 0; c < t->ncols; c++)
			fprintf(f, " %s |", shown(t->rows[r].cell[c]));
		fprintf(f, "\n");
	}
}

/* The column after the run of columns from c that share c's group. */
static int group_end(const struct btable *t, int c)
{
	int e = c + 1;

	while (e < t->ncols && !strcmp(t->group[e], t->group[c]))
		e++;
	return e;
}

/* The printed width of columns c..e-1, with the two spaces between them. */
static int group_span(const int *w, int c, int e)
{
	int span = 0;

	for (int k = c; k < e; k++)
		span += w[k] + (k > c ? 2 : 0);
	return span;
}

/* Text: the first column left-aligned, the others right-aligned; each
 * group's name centred in a rule over its columns. */
static void print_text(const struct btable *t, FILE *f)
{
	int w[BT_MAXCOL];

	for (int c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->head[c]);
		for (int r = 0; r < t->nrows; r++) {
			int len = (int)strlen(shown(t->rows[r].cell[c]));
			if (!t->rows[r].note[0] && len > w[c])
				w[c] = len;
		}
	}
	/* a group wider than its columns widens its last one */
	for (int c = 0; c < t->ncols;) {
		int e = group_end(t, c), span = group_span(w, c, e);
		if (t->group[c][0] && (int)strlen(t->group[c]) + 2 > span)
			w[e - 1] += (int)strlen(t->group[c]) + 2 - span;
		c = e;
	}
	fprintf(f, "\n%s\n", t->title);
	for (int c = 0, any = 0; c < t->ncols;) {
		int e = group_end(t, c), span = group_span(w, c, e);
		if (!any) {
			int has = 0;
			for (int k = 0; k < t->ncols; k++)
				has |= t->group[k][0] != 0;
			if (!has)
				break;
			fprintf(f, " ");
			any = 1;
		}
		if (!t->group[c][0]) {
			fprintf(f, " %*s", span, "");
		} else {
			int len = (int)strlen(t->group[c]) + 2, left = (span - len) / 2;
			fprintf(f, " ");
			for (int k = 0; k < left; k++)
				fputc('-', f);
			fprintf(f, " %s ", t->group[c]);
			for (int k = 0; k < span - len - left; k++)
				fputc('-', f);
		}
		c = e;
		if (c == t->ncols)
			fprintf(f, "\n");
	}
	fprintf(f, " ");
	for (int c = 0; c < t->ncols; c++)
		fprintf(f, c ? "  %*s" : " %-*s", w[c], t->head[c]);
	fprintf(f, "\n");
	for (int r = 0; r < t->nrows; r++) {
		fprintf(f, " ");
		if (t->rows[r].note[0]) {
			fprintf(f, " %s\n", t->rows[r].note);
			continue;
		}
		for (int c = 0; c < t->ncols; c++)
			fprintf(f, c ? "  %*s" : " %-*s", w[c], shown(t->rows[r].cell[c]));
		fprintf(f, "\n");
	}
}

void btable_print(const struct btable *t, FILE *f, int markdown)
{
	if (!t)
		return;
	if (markdown)
		print_markdown(t, f);
	else
		print_text(t, f);
}

void btable_free(struct btable *t)
{
	if (t)
		free(t->rows);
	free(t);
}
