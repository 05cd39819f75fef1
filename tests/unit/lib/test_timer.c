/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/timer.c: the per-worker deadline heap that replaced
 * the 100 ms scan of every session (issue 13, defect 6). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "timer.h"

#define N 1000

static struct timer t[N];

static void fresh(void)
{
	for (int i = 0; i < N; i++)
		t[i].due_ms = TIMER_NONE;
}

Test(unit_timer, pops_in_deadline_order_and_only_when_due)
{
	struct timer_heap th = { 0 };

	fresh();
	srand(7);
	for (int i = 0; i < N; i++)
		cr_assert_eq(timer_set(&th, &t[i], 1000 + (uint64_t)(rand() % 5000)), 0);
	cr_assert_null(timer_pop_due(&th, 999), "nothing is due before the first deadline");
	uint64_t last = 0, due;
	int n = 0;
	for (struct timer *x; (due = timer_next(&th)), (x = timer_pop_due(&th, 6000)); n++) {
		cr_assert_geq(due, last, "popped out of order");
		cr_assert_eq(x->due_ms, TIMER_NONE, "a popped timer is out of the heap");
		last = due;
	}
	cr_assert_eq(n, N);
	cr_assert_eq(timer_next(&th), TIMER_NONE);
	timer_heap_free(&th);
}

Test(unit_timer, moving_and_deleting_keep_the_heap_right)
{
	struct timer_heap th = { 0 };

	fresh();
	for (int i = 0; i < N; i++)
		timer_set(&th, &t[i], 10000 + (uint64_t)i);
	/* every third deleted, every fifth moved earlier, every seventh later */
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			timer_del(&th, &t[i]);
		else if (i % 5 == 0)
			timer_set_earlier(&th, &t[i], 100 + (uint64_t)i);
		else if (i % 7 == 0)
			timer_set(&th, &t[i], 50000 + (uint64_t)i);
	}
	cr_assert_eq(timer_next(&th), 105, "the earliest is the fifth moved earlier (i = 5)");
	/* set_earlier never moves a deadline later */
	timer_set_earlier(&th, &t[5], 99999);
	cr_assert_eq(t[5].due_ms, 105);
	uint64_t last = 0, due;
	unsigned n = 0;
	for (struct timer *x; (due = timer_next(&th)), (x = timer_pop_due(&th, UINT64_MAX - 1)); n++) {
		cr_assert_geq(due, last, "popped out of order");
		cr_assert_eq(due, (uint64_t)(x - t) % 5 == 0 && (x - t) % 3 ? 100 + (uint64_t)(x - t) :
				  (x - t) % 7 == 0 && (x - t) % 3 ? 50000 + (uint64_t)(x - t) :
								     10000 + (uint64_t)(x - t),
			     "timer %d came out at %llu", (int)(x - t), (unsigned long long)due);
		last = due;
	}
	cr_assert_eq(n, N - (N + 2) / 3, "every timer not deleted comes out once");
	timer_heap_free(&th);
}

Test(unit_timer, deleting_what_is_not_in_the_heap_is_harmless)
{
	struct timer_heap th = { 0 };
	struct timer a = { .due_ms = TIMER_NONE }, b = { .due_ms = TIMER_NONE };

	timer_del(&th, &a);
	timer_set(&th, &a, 5);
	timer_set(&th, &b, 7);
	timer_del(&th, &a);
	timer_del(&th, &a);
	cr_assert_eq(timer_next(&th), 7);
	cr_assert_eq(timer_pop_due(&th, 7), &b);
	cr_assert_eq(timer_next(&th), TIMER_NONE);
	timer_heap_free(&th);
}
