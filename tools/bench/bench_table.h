/* SPDX-License-Identifier: MIT */
/* bench_table: the tables of `splicer bench`, built cell by cell and
 * printed either aligned for a terminal or as markdown for --doc, so the
 * two never disagree.
 *
 *   struct btable *t = btable_new("Bulk");
 *   btable_col(t, "1 stream", "Gbit/s");   // columns under a group name
 *   int r = btable_row(t);
 *   btable_set(t, r, 0, "%.2f", gbps);
 *   btable_print(t, stdout, 0);
 *   btable_free(t);
 *
 * In text, a group's name is written once above its columns, ruled across
 * them; in markdown it prefixes each of its column headers. */
#ifndef SPLICER_BENCH_TABLE_H
#define SPLICER_BENCH_TABLE_H
#include <stdio.h>

#define BT_MAXCOL 32
#define BT_CELL   48

struct btable;

struct btable *btable_new(const char *title);
/* Appends a column; group NULL or "" for none. Returns its index. */
int btable_col(struct btable *t, const char *group, const char *head);
/* Appends a row of empty cells ("-" when printed); returns its index, or -1
 * when out of memory. */
int btable_row(struct btable *t);
/* A full-width line in place of a row ("skipped: ..."). */
void btable_note_row(struct btable *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void btable_set(struct btable *t, int row, int col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A median with its [min-max] when there were several repetitions
 * (nrep > 1), each in fmt; left "-" when med is NAN. */
void btable_set_range(struct btable *t, int row, int col, const char *fmt, double med, double lo,
		      double hi, int nrep);
void btable_print(const struct btable *t, FILE *f, int markdown);
void btable_free(struct btable *t);

#endif
