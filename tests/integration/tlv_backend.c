/* SPDX-License-Identifier: MIT */
/* tlv_backend: see tlv_backend.h. */
#define _GNU_SOURCE
#include "tlv_backend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy_proto.h"
#include "proxy_tlv.h"

/* Records the TLVs of the complete header hdr[0..n). Caller holds t->mu. */
static void record(struct tlv_seen *t, const uint8_t *hdr, size_t n)
{
	size_t off = proxy_tlv_offset(hdr, n), at = 0, vlen;
	const uint8_t *val;
	uint8_t type;

	while (proxy_tlv_next(hdr + off, n - off, &at, &type, &val, &vlen)) {
		size_t k = vlen < sizeof t->val[0] - 1 ? vlen : sizeof t->val[0] - 1;
		t->has[type]++;
		memcpy(t->val[type], val, k);
		t->val[type][k] = 0;
	}
}

void tlv_backend_conn(struct h_server *s, int fd, int index, void *arg)
{
	struct tlv_seen *t = arg;
	uint8_t buf[PROXY_HDR_MAX + 4096];
	struct sockaddr_storage src;
	socklen_t srclen;
	size_t have = 0;
	int r = 0;
	(void)s;
	(void)index;

	while (have < sizeof buf && r == 0) {
		ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
		if (n <= 0)
			return;
		have += (size_t)n;
		pthread_mutex_lock(&t->mu);
		r = proxy_parse(buf, have, &src, &srclen, t->why, sizeof t->why);
		pthread_mutex_unlock(&t->mu);
	}
	pthread_mutex_lock(&t->mu);
	if (r > 0)
		record(t, buf, (size_t)r);
	t->version = buf[0] == 'P' ? 1 : 2;
	t->done = r > 0 ? 1 : -1;
	pthread_mutex_unlock(&t->mu);
	if (r <= 0)
		return;
	if (have > (size_t)r && h_send_all(fd, buf + r, have - (size_t)r, h_now_ms() + 2000))
		return;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n <= 0 || h_send_all(fd, buf, (size_t)n, h_now_ms() + 2000))
			break;
	}
	shutdown(fd, SHUT_WR);
}

void tlv_seen_reset(struct tlv_seen *t)
{
	pthread_mutex_lock(&t->mu);
	t->done = 0;
	t->version = 0;
	t->why[0] = 0;
	memset(t->has, 0, sizeof t->has);
	pthread_mutex_unlock(&t->mu);
}

void tlv_seen_wait(struct tlv_seen *t, const char *what)
{
	int done = 0;

	for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_sleep_ms(5)) {
		pthread_mutex_lock(&t->mu);
		done = t->done;
		pthread_mutex_unlock(&t->mu);
		if (done)
			break;
	}
	H_CHECK(done == 1, "%s: the backend got %s (%s)", what,
		done ? "a header it refused" : "no header", t->why);
}

void tlv_seen_types(struct tlv_seen *t, char *out, size_t len)
{
	size_t n = 0;
	char name[8];

	out[0] = 0;
	pthread_mutex_lock(&t->mu);
	for (unsigned type = 0; type < 256; type++)
		if (t->has[type] && n < len)
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "",
					      proxy_tlv_name((uint8_t)type, name));
	pthread_mutex_unlock(&t->mu);
	if (!out[0])
		snprintf(out, len, "-");
}

size_t tlv_front_header(uint8_t *out, size_t cap)
{
	struct sockaddr_in c = { .sin_family = AF_INET, .sin_port = htons(4242) };
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(443) };

	inet_pton(AF_INET, "203.0.113.9", &c.sin_addr);
	inet_pton(AF_INET, "198.51.100.1", &d.sin_addr);
	if (cap < PROXY_HDR_MAX)
		return 0;
	return proxy_build(2, (struct sockaddr *)&c, sizeof c, (struct sockaddr *)&d, sizeof d, out);
}
