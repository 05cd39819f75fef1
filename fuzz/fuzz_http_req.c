/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: the stats endpoint's request parser (src/proto/http_req.c).
 * An accepted request must have a method of capital letters and a path
 * that starts with '/' and holds no query, space or control character. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char method[16], path[256];
	int r = http_req_parse((const char *)data, size, method, path);

	if (r == HTTP_REQ_OK) {
		size_t m = strlen(method);
		if (!m || m > 15 || strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != m)
			abort();
		if (path[0] != '/' || strchr(path, '?') || strlen(path) > 255)
			abort();
		for (const char *p = path; *p; p++)
			if (*p <= ' ' || *p > '~')
				abort();
	} else if (r != HTTP_REQ_MORE && r != 400 && r != 431) {
		abort();
	}
	return 0;
}
