/* SPDX-License-Identifier: MIT */
/* handoff: see handoff.h. */
#define _GNU_SOURCE
#include "handoff.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "engine.h"
#include "log.h"
#include "worker.h"

#define CATALOG_MSG   8192  /* bytes per catalog message */
#define CATALOG_WAIT  2     /* s: the new process sends it before it answers */
#define SEND_WAIT     2     /* s a session's message may wait for room */
#define WORKERS_WAIT  10000 /* ms for the workers to hand theirs over */
#define CATALOG_LINES (1u << 20) /* lines at most: far above MAX_ROUTES' backends */

int handoff_pair(int *mine, int *theirs)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	*mine = sv[0];
	*theirs = sv[1];
	return 0;
}

static void timeouts(int fd, int rcv_s, int snd_s)
{
	struct timeval r = { rcv_s, 0 }, s = { snd_s, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof(r));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &s, sizeof(s));
}

/* ---- the old process -------------------------------------------------------- */

static int by_text(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void target_free_names(struct handoff_target *t)
{
	for (unsigned i = 0; i < t->nnames; i++)
		free((char *)t->names[i]);
	free(t->names);
	t->names = NULL;
	t->nnames = 0;
}

/* One catalog message's lines into t. 0, 1 at "end", -1 on nonsense. */
static int catalog_take(struct handoff_target *t, char *msg, unsigned *cap)
{
	char *save = NULL;

	if (!strcmp(msg, "end\n"))
		return 1;
	if (strncmp(msg, "catalog\n", 8))
		return -1;
	for (char *l = strtok_r(msg + 8, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned long long size;
		if (sscanf(l, "buf %llu", &size) == 1) {
			t->buf_size = size;
			continue;
		}
		if (t->nnames == CATALOG_LINES)
			return -1;
		if (t->nnames == *cap) {
			unsigned ncap = *cap ? *cap * 2 : 256;
			const char **n = realloc(t->names, ncap * sizeof(*n));
			if (!n)
				return -1;
			t->names = n;
			*cap = ncap;
		}
		if (!(t->names[t->nnames] = strdup(l)))
			return -1;
		t->nnames++;
	}
	return 0;
}

/* Reads the new process's catalog into t. 0, or -1 (logged). */
static int catalog_read(struct handoff_target *t, int fd, int pid)
{
	char msg[CATALOG_MSG + 1];
	unsigned cap = 0;
	int r = 0;

	while (r == 0) {
		ssize_t n = recv(fd, msg, CATALOG_MSG, 0);
		if (n <= 0) {
			log_warn("upgrade: the new process %d sent no catalog of what it takes (%s): "
				 "every session drains here", pid, n ? strerror(errno) : "it closed");
			return -1;
		}
		msg[n] = '\0';
		if ((r = catalog_take(t, msg, &cap)) < 0)
			log_warn("upgrade: the new process %d's catalog is not understood: every "
				 "session drains here", pid);
	}
	if (r < 0)
		return -1;
	qsort(t->names, t->nnames, sizeof(*t->names), by_text);
	return 0;
}

struct handoff_target *handoff_begin(int fd, int pid, unsigned version, int drain)
{
	struct handoff_target *t = calloc(1, sizeof(*t));

	if (!t) {
		close(fd);
		return NULL;
	}
	t->fd = fd;
	t->pid = pid;
	timeouts(fd, CATALOG_WAIT, SEND_WAIT);
	if (!version) {
		t->refuse = "the new process takes no sessions (an older binary)";
	} else if (version != HANDOFF_VERSION) {
		log_warn("upgrade: the new process %d reads hand-over format %u, this one writes %u: "
			 "every session drains here", pid, version, HANDOFF_VERSION);
		t->refuse = "the new process reads another hand-over format";
	} else if (catalog_read(t, fd, pid)) {
		target_free_names(t);
		t->refuse = "the new process sent no catalog";
	} else if (drain) {
		t->refuse = "upgrade_sessions = drain";
	}
	return t;
}

void handoff_finish(struct handoff_target *t, unsigned nw, uint64_t ready_ms, char *why,
		    unsigned len)
{
	uint64_t end = now_monotonic_ms() + WORKERS_WAIT, took;
	unsigned done, handed, kept;
	char msg[96];
	int n;

	while ((done = __atomic_load_n(&t->workers_done, __ATOMIC_ACQUIRE)) < nw &&
	       now_monotonic_ms() < end)
		usleep(1000);
	handed = __atomic_load_n(&t->handed, __ATOMIC_RELAXED);
	kept = __atomic_load_n(&t->kept, __ATOMIC_RELAXED);
	took = now_monotonic_ms() - ready_ms;
	if (done < nw)
		log_warn("upgrade: %u of %u workers did not hand their sessions over within %d ms; "
			 "they drain theirs here", nw - done, nw, WORKERS_WAIT);
	n = snprintf(msg, sizeof(msg), "done handed=%u kept=%u\n", handed, kept);
	if (send(t->fd, msg, (size_t)n, MSG_NOSIGNAL) != n)
		log_warn("upgrade: the new process did not take the hand-over's counts (%s)",
			 strerror(errno));
	/* a worker still sending (one that was late) finds it closed: its
	 * sessions stay here */
	shutdown(t->fd, SHUT_RDWR);
	log_info("upgrade: handed %u sessions over to process %d in %llu ms; %u stay here and "
		 "drain%s%s%s", handed, t->pid, (unsigned long long)took, kept,
		 t->refuse ? " (" : "", t->refuse ? t->refuse : "", t->refuse ? ")" : "");
	snprintf(why, len, "process %d serves now; %u sessions handed over in %llu ms, %u drain "
		 "here%s%s%s; this one (%d) %s", t->pid, handed, (unsigned long long)took, kept,
		 t->refuse ? " (" : "", t->refuse ? t->refuse : "", t->refuse ? ")" : "",
		 (int)getpid(), kept ? "exits once they are done (drain_timeout at most)"
				     : "exits now");
}

void handoff_target_free(struct handoff_target *t)
{
	if (!t)
		return;
	target_free_names(t);
	close(t->fd);
	free(t);
}

/* ---- the new process -------------------------------------------------------- */

static uint64_t drained; /* atomic */

uint64_t handoff_drained(void)
{
	return __atomic_load_n(&drained, __ATOMIC_RELAXED);
}

struct adopter {
	int fd;
	char *catalog;
	size_t len;
	struct worker *ws;
	unsigned nw;
};

/* The catalog's lines, built when the process answers (its config then),
 * sent by the thread. NULL when out of memory. */
static char *catalog_build(const struct config *c, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	fprintf(f, "buf %llu\n", (unsigned long long)c->buffer_size);
	for (unsigned k = 0; k < c->nlst; k++)
		fprintf(f, "L\t%s\n", c->lst[k].addr->text);
	for (unsigned i = 0; i < c->nroutes; i++) {
		const struct route *rt = c->route[i];
		fprintf(f, "R\t%s\n", rt->name);
		for (unsigned b = 0; b < rt->nbackend; b++)
			fprintf(f, "B\t%s\t%s\n", rt->name, rt->backend[b].addr.text);
	}
	for (unsigned i = 0; i < engine_nengines; i++)
		if (engines[i]->hands_over && engines[i]->hand_in)
			fprintf(f, "E\t%s\n", engines[i]->name);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The lines in messages of at most CATALOG_MSG bytes, cut between lines,
 * then "end". 0, or -1 when the old process does not take them. */
static int catalog_send(int fd, const char *text, size_t len)
{
	char msg[CATALOG_MSG];
	const size_t head = 8; /* "catalog\n" */

	memcpy(msg, "catalog\n", head);
	while (len) {
		size_t n = head;
		while (len) {
			const char *nl = memchr(text, '\n', len);
			size_t k = nl ? (size_t)(nl - text) + 1 : len;
			if (n + k > sizeof(msg)) {
				if (n == head) { /* a line longer than a message: not one the config takes */
					text += k;
					len -= k;
					continue;
				}
				break;
			}
			memcpy(msg + n, text, k);
			n += k;
			text += k;
			len -= k;
		}
		if (n > head && send(fd, msg, n, MSG_NOSIGNAL) != (ssize_t)n)
			return -1;
	}
	return send(fd, "end\n", 4, MSG_NOSIGNAL) == 4 ? 0 : -1;
}

/* The thread and its socket, for handoff_adopt_stop. */
static struct {
	pthread_mutex_t lock;
	pthread_t thr;
	int started;
	int fd; /* -1 once the thread closed it */
} adopter_ctl = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static void adopter_close(void)
{
	pthread_mutex_lock(&adopter_ctl.lock);
	if (adopter_ctl.fd >= 0)
		close(adopter_ctl.fd);
	adopter_ctl.fd = -1;
	pthread_mutex_unlock(&adopter_ctl.lock);
}

void handoff_adopt_stop(void)
{
	pthread_mutex_lock(&adopter_ctl.lock);
	if (adopter_ctl.fd >= 0) /* an old process that never closed it: the read ends */
		shutdown(adopter_ctl.fd, SHUT_RDWR);
	pthread_mutex_unlock(&adopter_ctl.lock);
	if (adopter_ctl.started)
		pthread_join(adopter_ctl.thr, NULL);
	adopter_ctl.started = 0;
}

/* No session comes any more: a draining worker may end (worker.c). */
static void adopting_done(const struct adopter *a)
{
	__atomic_store_n(&a->ws[0].sh->adopting, 0, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < a->nw; i++)
		worker_wake(&a->ws[i]);
}

static void *adopter_main(void *arg)
{
	struct adopter a = *(struct adopter *)arg;
	unsigned long long got = 0;
	unsigned next = 0;
	char other[256];
	int r;

	free(arg);
	r = catalog_send(a.fd, a.catalog, a.len);
	free(a.catalog);
	if (r) {
		log_warn("upgrade: the catalog of what this process takes did not reach the old one "
			 "(%s): it drains its sessions", strerror(errno));
		adopter_close();
		adopting_done(&a);
		return NULL;
	}
	for (;;) {
		struct handoff_msg *m = NULL;
		r = handoff_recv(a.fd, &m, other, sizeof(other));
		if (r == 1) {
			worker_adopt(&a.ws[next++ % a.nw], m);
			got++;
			continue;
		}
		if (r == 2) {
			unsigned h, k;
			if (sscanf(other, "done handed=%u kept=%u", &h, &k) == 2)
				__atomic_store_n(&drained, (uint64_t)k, __ATOMIC_RELAXED);
			else
				log_warn("upgrade: the old process sent what this one does not read (a "
					 "session of another format?): ignored");
			continue;
		}
		if (r < 0)
			log_warn("upgrade: reading the old process's sessions: %s", strerror(-r));
		break;
	}
	adopter_close();
	log_info("upgrade: %llu session%s taken over from the old process; %llu stay there to "
		 "drain", got, got == 1 ? "" : "s", (unsigned long long)handoff_drained());
	adopting_done(&a);
	return NULL;
}

int handoff_adopt_start(int fd, const struct config *cfg, struct worker *ws, unsigned nw)
{
	struct adopter *a = malloc(sizeof(*a));
	int r;

	if (!a || !nw || !(a->catalog = catalog_build(cfg, &a->len))) {
		free(a);
		close(fd);
		return -ENOMEM;
	}
	a->fd = fd;
	a->ws = ws;
	a->nw = nw;
	timeouts(fd, 0, SEND_WAIT);
	__atomic_store_n(&ws[0].sh->adopting, 1, __ATOMIC_RELEASE);
	adopter_ctl.fd = fd;
	if ((r = pthread_create(&adopter_ctl.thr, NULL, adopter_main, a))) {
		__atomic_store_n(&ws[0].sh->adopting, 0, __ATOMIC_RELEASE);
		adopter_ctl.fd = -1;
		free(a->catalog);
		free(a);
		close(fd);
		return -r;
	}
	adopter_ctl.started = 1;
	return 0;
}
