/* SPDX-License-Identifier: MIT */
/* loop_guard: see loop_guard.h. */
#include "loop_guard.h"

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#define LG_BUCKETS 1024

static struct loop_entry *bucket[LG_BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long entries; /* atomic: a lookup is skipped while 0 */

static int key_of(const struct sockaddr *sa, socklen_t len, struct loop_key *k)
{
	memset(k, 0, sizeof(*k));
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		k->port = in->sin_port;
		memcpy(k->ip, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		k->port = in6->sin6_port;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			k->family = AF_INET;
			memcpy(k->ip, &in6->sin6_addr.s6_addr[12], 4);
			return 0;
		}
		memcpy(k->ip, &in6->sin6_addr, 16);
	} else {
		return -1;
	}
	k->family = (uint8_t)sa->sa_family;
	return 0;
}

static unsigned hash(const struct loop_key *k)
{
	uint32_t h = 2166136261u;
	const uint8_t *p = (const uint8_t *)k;

	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 16777619u;
	return h % LG_BUCKETS;
}

void loop_guard_add(struct loop_entry *e, int fd, const struct sockaddr *to, socklen_t tolen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned b;

	if (key_of(to, tolen, &e->remote) || getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    key_of((struct sockaddr *)&ss, len, &e->key))
		return;
	b = hash(&e->key);
	pthread_mutex_lock(&lock);
	e->next = bucket[b];
	bucket[b] = e;
	__atomic_add_fetch(&entries, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
}

void loop_guard_del(struct loop_entry *e)
{
	struct loop_entry **pp;

	if (!e->key.family)
		return;
	pthread_mutex_lock(&lock);
	for (pp = &bucket[hash(&e->key)]; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			__atomic_sub_fetch(&entries, 1, __ATOMIC_RELAXED);
			break;
		}
	pthread_mutex_unlock(&lock);
	e->key.family = 0;
}

int loop_guard_hit(int fd, const struct sockaddr *peer, socklen_t len)
{
	struct sockaddr_storage ss;
	socklen_t slen = sizeof(ss);
	struct loop_key k, local, remote = { 0 };
	int hit = 0;

	if (!__atomic_load_n(&entries, __ATOMIC_RELAXED) || key_of(peer, len, &k))
		return 0;
	pthread_mutex_lock(&lock);
	for (struct loop_entry *e = bucket[hash(&k)]; e && !hit; e = e->next)
		if (!memcmp(&e->key, &k, sizeof(k))) {
			remote = e->remote;
			hit = 1;
		}
	pthread_mutex_unlock(&lock);
	/* rare: only now is the accepted socket's own end worth a syscall */
	if (hit && (getsockname(fd, (struct sockaddr *)&ss, &slen) ||
		    key_of((struct sockaddr *)&ss, slen, &local) || memcmp(&local, &remote, sizeof(local))))
		hit = 0;
	return hit;
}
