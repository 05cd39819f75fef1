/* SPDX-License-Identifier: MIT */
/* http_req: see http_req.h. */
#include "http_req.h"

#include <string.h>

/* The end of the head: a blank line, with CRLF or bare LF endings. */
static int head_complete(const char *buf, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (buf[i] == '\n' && (buf[i + 1] == '\n' ||
				       (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n')))
			return 1;
	return 0;
}

int http_req_parse(const char *buf, size_t n, char method[16], char path[256])
{
	const char *end, *sp1, *sp2;
	size_t len, mlen, plen;

	if (memchr(buf, '\0', n))
		return 400;
	if (!head_complete(buf, n))
		return n >= HTTP_REQ_MAX ? 431 : HTTP_REQ_MORE;
	end = memchr(buf, '\n', n);
	len = (size_t)(end - buf);
	if (len && buf[len - 1] == '\r')
		len--;
	sp1 = memchr(buf, ' ', len);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - buf)) : NULL;
	if (!sp1 || !sp2)
		return 400;
	mlen = (size_t)(sp1 - buf);
	plen = (size_t)(sp2 - sp1 - 1);
	if (mlen < 1 || mlen > 15 || plen < 1 || plen > 255 || sp1[1] != '/')
		return 400;
	for (size_t i = 0; i < mlen; i++)
		if (buf[i] < 'A' || buf[i] > 'Z')
			return 400;
	for (size_t i = 0; i < plen; i++)
		if (sp1[1 + i] <= ' ' || sp1[1 + i] > '~')
			return 400;
	if ((size_t)(buf + len - (sp2 + 1)) != 8 ||
	    (memcmp(sp2 + 1, "HTTP/1.1", 8) && memcmp(sp2 + 1, "HTTP/1.0", 8)))
		return 400;
	memcpy(method, buf, mlen);
	method[mlen] = '\0';
	memcpy(path, sp1 + 1, plen);
	path[plen] = '\0';
	path[strcspn(path, "?")] = '\0';
	return HTTP_REQ_OK;
}
