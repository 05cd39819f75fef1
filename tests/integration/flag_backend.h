/* SPDX-License-Identifier: MIT */
/* A test backend whose health the test flips: it greets every connection
 * with "UP t\n" or "DOWN t\n" (t: its one-letter tag), so a route with
 * `check = expect:"UP"` marks it up or down on the test's word while the
 * sessions it holds stay open; after the greeting it echoes. One thread
 * polls every connection (health checks come and go without limit); a
 * connection whose first byte after the greeting is "S" (one byte alone)
 * is instead handed the stream armed by fb_stream_next: a thread of its
 * own writes it, blocking on the peer as a bulk sender does. */
#ifndef SPLICER_IT_FLAG_BACKEND_H
#define SPLICER_IT_FLAG_BACKEND_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "harness.h"

#define FB_MAX_CONNS 256

struct flag_backend {
	int lfd, port;
	char tag;
	char text[32];               /* "127.0.0.1:PORT" */
	_Atomic int down;            /* greet with DOWN */
	_Atomic int stop;
	_Atomic int accepted;        /* connections, health checks included */
	_Atomic int open;            /* connections open now */
	/* fb_stream_next: the next connection to ask ("S") gets stream_len bytes of
	 * h_gen(seed) */
	_Atomic int stream_armed;
	uint64_t stream_len, stream_seed;
	_Atomic uint64_t streamed;   /* bytes the stream's send() took */
	_Atomic int stream_end;      /* 0 running; 1 all sent; -errno when a send failed */
	pthread_t thr, sthr;
	int sthr_started;
};

/* Listens on 127.0.0.1:port (0: any) and serves. Asserts. */
void fb_start(struct flag_backend *b, char tag, int port);
void fb_stop(struct flag_backend *b);
/* From now on greets with DOWN (1) or UP (0). */
void fb_set_down(struct flag_backend *b, int down);
/* The next connection that sends "S" is sent len bytes of stream seed
 * instead of an echo. */
void fb_stream_next(struct flag_backend *b, uint64_t len, uint64_t seed);

/* Reads a greeting line ("UP A\n") from fd; returns the tag, or 0. */
char fb_greeting(int fd);

/* ---- what the backend tests share ---------------------------------------- */

/* Writes text to the temp dir's file name and starts the proxy on it
 * (-c; asserts). */
void fb_proxy(struct h_proxy *p, const char *bin, const char *name, const char *text);
/* A new session through a: the tag of the backend that greeted it (0: none);
 * with keep, left open in *keep. */
char fb_tag_of(const struct h_addr *a, int *keep);
/* A session that reached backend want (8 tries; asserts), open. */
int fb_session_on(const struct h_addr *a, char want);
/* 1000 bytes of stream seed through a held session and back. */
int fb_echo_ok(int fd, uint64_t seed);
/* Waits (5 s at most; asserts) until n lines of the proxy's log hold a
 * and b (b may be NULL); returns when. The log is written by a thread of
 * its own: a line may come a moment after what it reports. */
int64_t fb_wait_log(const struct h_proxy *p, const char *a, const char *b, int n);
/* splicer_backend_checks_total of backend 127.0.0.1:port, result ok or
 * failed (-1: not there). */
long long fb_checks(const struct h_proxy *p, const char *route, int port, const char *result);
/* Waits for the mark-down line of backend 127.0.0.1:port with why in it. */
void fb_down_because(const struct h_proxy *p, int port, const char *why);

#endif
