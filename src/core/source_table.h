/* SPDX-License-Identifier: MIT */
/* source_table: per-source admission, for a route's source_max_conns
 * (concurrent sessions per source) and source_conn_rate (new sessions per
 * second per source).
 *
 * The source: an IPv4 address (/32), an IPv6 network (/64: one host gets a
 * whole /64, so counting per address would let it walk around the limit),
 * a v4-mapped IPv6 client as its IPv4 address (cidr.h, ip_from_sockaddr).
 * Other families (Unix sockets) are not counted: admit says OK and
 * release does nothing.
 *
 * The rate: a sliding window of one second, kept as two counters, the
 * sessions admitted in the current one-second period and in the one
 * before, like HAProxy's conn_rate(1s). At time t into the current period
 * the rate is  current + previous * (1000 - t) / 1000  and a session is
 * admitted while that is below max_rate. A client steady at the limit is
 * admitted evenly; a burst of max_rate is admitted at once, then nothing
 * until the window slides. Only admitted sessions count: a client refused
 * for its rate gets in again as soon as its admitted sessions age out.
 * `now` is milliseconds of a monotonic clock; a now that lags the table's
 * (another thread's older reading) counts as the period's start.
 *
 * Size and eviction: the table holds at most `size` sources (a setting;
 * source_table_resize changes it in place, as a reload does, keeping every
 * live entry and its counts). An entry stays after its last session ends
 * (it holds the rate); when a new source comes and the table is full, the
 * entry idle (no live session) the longest is evicted, forgetting its rate
 * history. An entry with a live session is never evicted: its count must be
 * there at release. When every entry has live sessions, admit returns
 * SOURCE_TABLE_FULL and does not admit: splicer cannot keep its limits for
 * that source, so it refuses it (HAProxy in the same place refuses to track
 * the client and lets it in unlimited; see its stick-table `size`). With
 * size >= the proxy's max_conns this cannot happen, since every live entry
 * holds at least one of the sessions; that is the default to choose.
 *
 * Threads: one table is shared by all workers (limits per source must hold
 * across workers), guarded by one mutex: admit and release are a hash
 * lookup and a few list links, once per session, and one lock keeps the
 * least-recently-used order and the size guarantee above exact (striped
 * locks would split both per stripe). tests/unit/core/test_source_table.c
 * prints what an admit+release pair costs, alone and contended.
 *
 * Lookup is O(1) on average: a chained hash with a per-table random seed
 * (chains are not predictable from outside without it), the idle entries on
 * a doubly-linked list in least-recently-used order, all in arrays sized at
 * creation (no allocation after source_table_new). */
#ifndef SPLICER_SOURCE_TABLE_H
#define SPLICER_SOURCE_TABLE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cidr.h"

enum source_verdict {
	SOURCE_OK,             /* admitted: call source_release() when the session ends */
	SOURCE_TOO_MANY_CONNS, /* max_conns sessions from this source are live */
	SOURCE_TOO_FAST,       /* max_rate sessions in the last second */
	SOURCE_TABLE_FULL,     /* every entry has live sessions: refused (see above) */
};

struct source_table;

#define SOURCE_TABLE_MAX (1u << 31)

struct source_table_stats {
	size_t size;        /* entries at most */
	size_t used;        /* entries in use */
	size_t live;        /* entries with live sessions */
	uint64_t conns;     /* live sessions counted, over all entries */
	uint64_t evicted;   /* idle entries evicted for a new source */
	uint64_t full;      /* admits refused with SOURCE_TABLE_FULL */
};

/* A table for `size` sources (1..SOURCE_TABLE_MAX). NULL when out of
 * memory or size is out of range. */
struct source_table *source_table_new(size_t size);

/* Makes t hold `size` sources from now on, with the sessions of every
 * source counted as before: each entry with live sessions stays (with its
 * rate history), and so do the most recently used idle ones while fewer
 * than size are kept; the rest are forgotten. A size below the entries
 * with live sessions keeps them all: new sources are refused
 * (SOURCE_TABLE_FULL) and each entry is dropped as its last session ends,
 * until the table is within size. Its memory is then that of the live
 * entries at the time of the call (at most the old size's), not of size.
 * Any thread, while others admit and release (they wait for the move, which
 * is O(entries); the arrays are allocated before the lock is taken).
 * Returns 0, -EINVAL for a size out of range, -ENOMEM (t unchanged). */
int source_table_resize(struct source_table *t, size_t size);

void source_table_free(struct source_table *t);

/* Decides whether a new session from sa may start at now_ms. max_conns and
 * max_rate of 0 mean no limit. When both are 0 do not call it (nor
 * release). Limits are compared in this order: connections, rate. */
enum source_verdict source_admit(struct source_table *t, const struct sockaddr *sa,
				 uint64_t now_ms, unsigned max_conns, unsigned max_rate);

/* source_admit without limits and without counting an arrival in the
 * rate: a session an upgrade handed over, admitted by the old process. */
enum source_verdict source_hold(struct source_table *t, const struct sockaddr *sa,
				uint64_t now_ms);

/* An upgrade's hand-over of the rate history: export calls put for each
 * source admitted in the last two seconds (its key as text, both periods'
 * counts, the current period's start); import adds one to t (a source this
 * process admitted meanwhile keeps its own counts too). -1: a key that is
 * not one, or no room. */
#define SOURCE_KEY_TEXT 40
unsigned source_table_export(struct source_table *t, uint64_t now_ms,
			     void (*put)(void *arg, const char *key, uint32_t cur, uint32_t last,
					 uint64_t start_ms),
			     void *arg);
int source_table_import(struct source_table *t, const char *key, uint32_t cur, uint32_t last,
			uint64_t start_ms, uint64_t now_ms);

/* Ends a session that source_admit() admitted (SOURCE_OK), exactly once. */
void source_release(struct source_table *t, const struct sockaddr *sa);

/* The live sessions of sa's source (0 when it has no entry). */
unsigned source_conns(struct source_table *t, const struct sockaddr *sa);

void source_table_get_stats(struct source_table *t, struct source_table_stats *st);

/* The key of sa: false for a family that is not counted. IPv6 keeps its
 * first 64 bits. */
bool source_key(const struct sockaddr *sa, struct ip *key);

#endif
