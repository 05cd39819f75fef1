/* SPDX-License-Identifier: MIT */
/* engine_names: the names and descriptions of the registry's choices
 * (engine_list.h), for the config's `engine` setting, --help and the
 * generated reference; apart from the registry so that the config code
 * links without the engines (the config fuzzer). */
#include <stddef.h>

#include "engine.h"

const char *const engine_names[] = {
#define ENGINE_CHOICE(name, session, start, stream, turns, fallback, hidden, help) name,
#include "engine_list.h"
#undef ENGINE_CHOICE
	NULL
};

const struct engine_choice_doc engine_docs[] = {
#define ENGINE_CHOICE(name, session, start, stream, turns, fallback, hidden, help) \
	{ name, help, fallback, hidden },
#include "engine_list.h"
#undef ENGINE_CHOICE
	{ NULL, NULL, NULL, 0 }
};
