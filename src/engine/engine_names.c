/* SPDX-License-Identifier: MIT */
/* engine_names: the names of the registry's choices (engine_list.h), for the
 * config's `engine` setting; apart from the registry so that the config
 * reader links without the engines (the config fuzzer). */
#include <stddef.h>

const char *const engine_names[] = {
#define ENGINE_CHOICE(name, session, start, stream, fallback, hidden, help) name,
#include "engine_list.h"
#undef ENGINE_CHOICE
	NULL
};
