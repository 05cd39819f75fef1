/* SPDX-License-Identifier: MIT */
/* timer: a per-worker binary min-heap of deadlines. Each session owns one
 * struct timer set to its earliest deadline (connect, PROXY header, idle or
 * half-closed limit, a send queue to look at again); the worker sleeps until
 * the heap's first one and runs only the sessions that are due, instead of
 * scanning every session every 100 ms (issue 13).
 *
 * Deadlines that move with traffic (the idle limit) are kept lazily: a byte
 * does not touch the heap; when the timer fires, the session computes its
 * real deadline and is set again if it lies ahead. So the heap is touched
 * about once per idle period, not once per read. */
#ifndef SPLICER_TIMER_H
#define SPLICER_TIMER_H
#include <stdint.h>

#define TIMER_NONE UINT64_MAX

struct timer {
	uint64_t due_ms;  /* TIMER_NONE while not in the heap */
	unsigned idx;     /* position in the heap */
};

struct timer_heap {
	struct timer **h;
	unsigned n, cap;
};

/* CLOCK_MONOTONIC_COARSE in milliseconds: the loop's clock (a jiffy's
 * resolution, read through the vDSO without a system call). */
uint64_t now_monotonic_ms(void);

/* Puts t in the heap at due_ms (moves it when it is in already). Returns 0,
 * or -1 when the heap cannot grow (t is then left as it was). */
int timer_set(struct timer_heap *th, struct timer *t, uint64_t due_ms);

/* Sets t to due_ms only when that is earlier than its deadline now. */
int timer_set_earlier(struct timer_heap *th, struct timer *t, uint64_t due_ms);

void timer_del(struct timer_heap *th, struct timer *t);

/* The first deadline, TIMER_NONE when the heap is empty. */
static inline uint64_t timer_next(const struct timer_heap *th)
{
	return th->n ? th->h[0]->due_ms : TIMER_NONE;
}

/* Takes out and returns the first timer due at now_ms, or NULL. */
struct timer *timer_pop_due(struct timer_heap *th, uint64_t now_ms);

void timer_heap_free(struct timer_heap *th);

#endif
