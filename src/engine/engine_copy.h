/* SPDX-License-Identifier: MIT */
/* engine_copy's direction state: a buffer from the worker's pool and the
 * bytes [head, tail) waiting in it. Apart from engine_copy.c only for
 * engines that copy through the same state (sockmap, for what its program
 * passes to user space); the core never sees it. */
#ifndef SPLICER_ENGINE_COPY_H
#define SPLICER_ENGINE_COPY_H
#include <stdint.h>

#include "engine.h"

struct copy_dir {
	char *buf;           /* from the worker's pool, NULL when empty */
	uint32_t head, tail; /* bytes [head, tail) wait to be sent */
	uint32_t full_reads; /* auto: big reads in a row (AUTO_STREAM_READS) */
};

static inline struct copy_dir *copy_state(struct dir *d)
{
	return ENGINE_STATE(struct copy_dir, d);
}

extern struct engine engine_copy;

#endif
