/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: the address parser (src/lib/addr.c) on any text. A parsed
 * address must format back to text that parses to the same address. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[300], err[256];
	struct addr a, b;

	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (memchr(text, '\0', size))
		return 0;
	addr_resolve_names = 0; /* numeric only: no input may reach DNS */
	for (int use = 0; use < 2; use++) {
		if (addr_parse(text, use ? ADDR_CONNECT : ADDR_LISTEN, &a, err, sizeof(err)))
			continue;
		if (addr_parse(a.text, use ? ADDR_CONNECT : ADDR_LISTEN, &b, err, sizeof(err)) ||
		    a.len != b.len || memcmp(&a.ss, &b.ss, a.len))
			abort();
	}
	return 0;
}
