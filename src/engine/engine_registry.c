/* SPDX-License-Identifier: MIT */
/* engine_registry: every engine, and every choice a route can make. Adding
 * an engine is its file and a row in each table below. */
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "log.h"

/* every engine a row names */
#define ENGINE_CHOICE(name, session, start, stream, turns, fallback, hidden, help) \
	extern struct engine session, start;
#include "engine_list.h"
#undef ENGINE_CHOICE

const struct engine_choice engine_choices[] = {
#define ENGINE_CHOICE(name, session, start, stream, turns, fallback, hidden, help) \
	{ name, help, &session, &start, stream, turns, fallback, hidden },
#include "engine_list.h"
#undef ENGINE_CHOICE
};
const unsigned engine_nchoices = sizeof(engine_choices) / sizeof(engine_choices[0]);

/* by id: every engine the rows name, once, in order (engine_registry_init) */
const struct engine *engines[ENGINE_MAX];
unsigned engine_nengines;

static void add(const struct engine *e)
{
	if (!e)
		return;
	for (unsigned i = 0; i < engine_nengines; i++)
		if (engines[i] == e)
			return;
	if (engine_nengines == ENGINE_MAX)
		die("more than %d engines: raise ENGINE_MAX (worker.h)", ENGINE_MAX);
	((struct engine *)e)->id = (uint8_t)engine_nengines;
	engines[engine_nengines++] = e;
}

void engine_registry_init(void)
{
	if (engine_nengines)
		return;
	for (unsigned i = 0; i < engine_nchoices; i++) {
		add(engine_choices[i].session);
		add(engine_choices[i].start);
		add(engine_choices[i].stream);
		add(engine_choices[i].turns);
	}
	for (unsigned i = 0; i < engine_nengines; i++)
		if (engines[i]->ncounters >= ENGINE_COUNTERS || !engines[i]->pump)
			die("engine %s: no pump, or %u counters of its own (ENGINE_COUNTERS is %d)",
			    engines[i]->name, engines[i]->ncounters, ENGINE_COUNTERS);
}

int engine_hidden(const struct engine *e)
{
	for (unsigned i = 0; i < engine_nchoices; i++)
		if (engine_choices[i].session == e && !engine_choices[i].hidden)
			return 0;
	for (unsigned i = 0; i < engine_nchoices; i++)
		if (engine_choices[i].start == e || engine_choices[i].stream == e)
			if (!engine_choices[i].hidden)
				return 0;
	return 1;
}

static unsigned choice_index(const char *name)
{
	for (unsigned i = 0; i < engine_nchoices; i++)
		if (!strcmp(engine_choices[i].name, name))
			return i;
	return 0;
}

/* 0 when engine e can run here; the verdict is kept for one check. */
static int engine_ok(const struct config *cfg, const struct engine *e, int *verdict, char *why,
		     unsigned len)
{
	if (!e)
		return 0;
	if (verdict[e->id] <= 0) {
		if (verdict[e->id] == 0) {
			why[0] = '\0';
			verdict[e->id] = 1;
			if ((e->probe && e->probe(why, len)) || (e->setup && e->setup(cfg, why, len)))
				verdict[e->id] = -1;
		}
	}
	return verdict[e->id] < 0 ? -1 : 0;
}

/* The engine a route's sessions move to once they behave as
 * request/response (auto: io_uring), when it can run here and the route
 * asks for it (auto_uring_turns); NULL: they stay where they are, as on a
 * kernel without io_uring, and nothing else about the route changes. */
static const struct engine *turns_engine(const struct config *cfg, const struct route *rt,
					 int *verdict, char (*why)[256])
{
	const struct engine *e = engine_choices[rt->o.engine].turns;
	static int said;

	if (!e || !rt->o.auto_uring_turns)
		return NULL;
	if (engine_ok(cfg, e, verdict, why[e->id], sizeof(why[0]))) {
		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) /* once a process */
			log_info("auto: request/response sessions stay on copy (%s engine "
				 "unavailable: %s)", e->name, why[e->id][0] ? why[e->id] : "its probe failed");
		return NULL;
	}
	return e;
}

unsigned engine_routes_check(struct config *cfg)
{
	int verdict[ENGINE_MAX] = { 0 };
	char why[ENGINE_MAX][256];
	unsigned said[ENGINE_MAX] = { 0 };
	unsigned moved = 0;

	for (unsigned r = 0; r < cfg->nroutes; r++) {
		struct route *rt = cfg->route[r];

		for (unsigned hop = 0; hop < engine_nchoices; hop++) {
			const struct engine_choice *c = &engine_choices[rt->o.engine];
			const struct engine *bad = NULL;

			if (engine_ok(cfg, c->session, verdict, why[c->session->id], sizeof(why[0])))
				bad = c->session;
			else if (engine_ok(cfg, c->start, verdict, why[c->start->id], sizeof(why[0])))
				bad = c->start;
			else if (c->stream && engine_ok(cfg, c->stream, verdict, why[c->stream->id], sizeof(why[0])))
				bad = c->stream;
			if (!bad || !c->fallback)
				break;
			if (!said[bad->id]++) /* once per engine, not per route */
				log_warn("%s engine unavailable: %s; using %s", bad->name,
					 why[bad->id][0] ? why[bad->id] : "its probe failed", c->fallback);
			log_verbose("route %s: engine %s instead of %s", rt->name, c->fallback, c->name);
			rt->o.engine = choice_index(c->fallback);
			moved++;
		}
		rt->turns = turns_engine(cfg, rt, verdict, why);
	}
	return moved;
}

int engine_routes_use_pipes(const struct config *cfg)
{
	for (unsigned r = 0; r < cfg->nroutes; r++) {
		const struct engine_choice *c = &engine_choices[cfg->route[r]->o.engine];
		if (c->session->uses_pipes || c->start->uses_pipes || (c->stream && c->stream->uses_pipes))
			return 1;
	}
	return 0;
}

int engine_routes_need_setup(const struct config *cfg)
{
	for (unsigned r = 0; r < cfg->nroutes; r++) {
		const struct engine_choice *c = &engine_choices[cfg->route[r]->o.engine];
		if (c->session->setup || c->start->setup || (c->stream && c->stream->setup))
			return 1;
	}
	return 0;
}
