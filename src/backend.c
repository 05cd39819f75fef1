/* backend: see backend.h. */
#include "backend.h"

unsigned backend_pick(struct route *r)
{
	uint64_t turn = __atomic_fetch_add(&r->rr, 1, __ATOMIC_RELAXED);
	unsigned best, n = r->nbackend;
	int64_t best_load;

	if (r->o.balance != BALANCE_LEASTCONN || n == 1)
		return r->sched[turn % r->nsched];
	/* Compare active/weight as active_i * weight_j against active_j * weight_i,
	 * starting at a rotating index so ties spread. */
	best = (unsigned)(turn % n);
	best_load = __atomic_load_n(&r->active[best], __ATOMIC_RELAXED);
	for (unsigned k = 1; k < n; k++) {
		unsigned i = (unsigned)((turn + k) % n);
		int64_t load = __atomic_load_n(&r->active[i], __ATOMIC_RELAXED);
		if (load * (int64_t)r->backend[best].weight < best_load * (int64_t)r->backend[i].weight) {
			best = i;
			best_load = load;
		}
	}
	return best;
}

void backend_hold(struct route *r, unsigned i)
{
	__atomic_add_fetch(&r->active[i], 1, __ATOMIC_RELAXED);
}

void backend_release(struct route *r, unsigned i)
{
	__atomic_sub_fetch(&r->active[i], 1, __ATOMIC_RELAXED);
}
