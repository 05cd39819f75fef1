/* SPDX-License-Identifier: MIT */
/* timer: see timer.h. */
#include "timer.h"

#include <time.h>

#include <stdlib.h>

static void put(struct timer_heap *th, unsigned i, struct timer *t)
{
	th->h[i] = t;
	t->idx = i;
}

static void sift_up(struct timer_heap *th, unsigned i)
{
	struct timer *t = th->h[i];

	while (i) {
		unsigned p = (i - 1) / 2;
		if (th->h[p]->due_ms <= t->due_ms)
			break;
		put(th, i, th->h[p]);
		i = p;
	}
	put(th, i, t);
}

static void sift_down(struct timer_heap *th, unsigned i)
{
	struct timer *t = th->h[i];

	for (;;) {
		unsigned c = 2 * i + 1;
		if (c >= th->n)
			break;
		if (c + 1 < th->n && th->h[c + 1]->due_ms < th->h[c]->due_ms)
			c++;
		if (t->due_ms <= th->h[c]->due_ms)
			break;
		put(th, i, th->h[c]);
		i = c;
	}
	put(th, i, t);
}

int timer_set(struct timer_heap *th, struct timer *t, uint64_t due_ms)
{
	if (t->due_ms == TIMER_NONE) {
		if (th->n == th->cap) {
			unsigned cap = th->cap ? th->cap * 2 : 256;
			struct timer **h = realloc(th->h, cap * sizeof(*h));
			if (!h)
				return -1;
			th->h = h;
			th->cap = cap;
		}
		t->due_ms = due_ms;
		put(th, th->n++, t);
		sift_up(th, t->idx);
		return 0;
	}
	if (due_ms < t->due_ms) {
		t->due_ms = due_ms;
		sift_up(th, t->idx);
	} else if (due_ms > t->due_ms) {
		t->due_ms = due_ms;
		sift_down(th, t->idx);
	}
	return 0;
}

int timer_set_earlier(struct timer_heap *th, struct timer *t, uint64_t due_ms)
{
	return due_ms < t->due_ms ? timer_set(th, t, due_ms) : 0;
}

void timer_del(struct timer_heap *th, struct timer *t)
{
	unsigned i = t->idx;
	struct timer *last;

	if (t->due_ms == TIMER_NONE)
		return;
	t->due_ms = TIMER_NONE;
	last = th->h[--th->n];
	if (last == t)
		return;
	put(th, i, last);
	sift_down(th, i);
	sift_up(th, last->idx);
}

struct timer *timer_pop_due(struct timer_heap *th, uint64_t now_ms)
{
	struct timer *t;

	if (!th->n || th->h[0]->due_ms > now_ms)
		return NULL;
	t = th->h[0];
	timer_del(th, t);
	return t;
}

void timer_heap_free(struct timer_heap *th)
{
	free(th->h);
	th->h = NULL;
	th->n = th->cap = 0;
}

uint64_t now_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
