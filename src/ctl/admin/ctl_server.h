/* SPDX-License-Identifier: MIT */
/* ctl_server: the loop of a control endpoint (the stats endpoint, the admin
 * socket): one thread, one poll set, and a bounded table of clients that
 * never blocks on any of them. Each client has its own input buffer (at
 * most in_max bytes), its own answer buffer (written as its reader takes it,
 * kept in the poll set for POLLOUT meanwhile) and its own deadlines: one for
 * its request, one for a reader that stops taking its answer. A client that
 * does not read costs only its slot and its answer's bytes, and only for
 * stall_ms: a probe or a `ctl show` beside it is served at once.
 *
 * The endpoint's protocol is one callback that reads c->in and queues one
 * answer at a time with ctl_conn_answer(); while an answer is under way the
 * client's input is not read (nor parsed), so a client that pipelines
 * requests and never reads holds one answer, not all of them.
 *
 * Every client that is closed by the server rather than by its peer or its
 * protocol is counted, by endpoint and reason (ctl_server_dropped). */
#ifndef SPLICER_CTL_SERVER_H
#define SPLICER_CTL_SERVER_H
#include <stddef.h>
#include <stdint.h>

enum ctl_endpoint { CTL_EP_STATS, CTL_EP_ADMIN, CTL_EP_N };
enum ctl_drop {
	CTL_DROP_EVICTED,         /* the table (or the answers' budget) was full: the least
				     progressed gave way */
	CTL_DROP_REQUEST_TIMEOUT, /* no whole request within request_ms */
	CTL_DROP_SLOW_READER,     /* did not take its answer within stall_ms / answer_ms */
	CTL_DROP_N
};
extern const char *const ctl_endpoint_names[CTL_EP_N]; /* "stats", "admin" */
/* "evicted", "request_timeout", "slow_reader" */
extern const char *const ctl_drop_names[CTL_DROP_N];

/* One client. The protocol reads in/in_n (and may consume from it with
 * ctl_conn_consume) and answers with ctl_conn_answer; the rest is the loop's. */
struct ctl_conn {
	int fd;
	char *in;                /* bytes read and not consumed: in_n of the server's in_max */
	size_t in_n;
	char *out;               /* the answer under way (malloc'd), or NULL */
	size_t out_n, out_off;   /* its length, and how much of it was sent */
	int eof;                 /* the peer shut its side: nothing more to read */
	int close_after;         /* set by the protocol: close once the answer is sent */
	int spoke;               /* the server sent this client something */
	uint64_t progress_ms;    /* accept, or the last byte moved either way: eviction's order */
	uint64_t request_end_ms; /* the request must be whole by then (from the accept, or
				    from the last answer sent) */
	uint64_t answer_end_ms;  /* the answer must be sent by then */
};

struct ctl_server {
	/* set by the endpoint */
	enum ctl_endpoint ep;
	int lfd;                 /* listening, non-blocking not required */
	int stop_fd;             /* readable: stop accepting, finish, return */
	unsigned max_conns;      /* clients at once; one more evicts the least progressed */
	size_t in_max;           /* a client's input buffer */
	size_t out_budget;       /* answer bytes held for all clients; beyond it, slow readers give way */
	int request_ms;          /* a request's time, from accept or from the last answer sent */
	int stall_ms;            /* a reader may take nothing of its answer this long */
	int answer_ms;           /* an answer's whole time */
	int drain_ms;            /* after stop: the clients under way get this long */
	const char *last_words;  /* sent (once, never waited for) to a client closed while its
				    request was due and nothing was sent to it yet; NULL: none */
	/* The protocol: called when bytes arrived, at EOF, and after an answer
	 * was sent while input is left. Consumes what it uses from c->in and
	 * queues at most one answer. Returns 0, or -1 to close c now. With
	 * c->in full (in_max) and no answer queued, c is closed. */
	int (*on_input)(struct ctl_conn *c, void *arg);
	void *arg;
};

/* Serves s until s->stop_fd is readable, then for up to drain_ms while
 * clients are under way; closes every client and returns 0 (the listening
 * socket stays open), or -ENOMEM when the table cannot be had (or poll has
 * no memory: the endpoint stops answering). */
int ctl_server_run(struct ctl_server *s);

/* Queues buf[0..n) (malloc'd; c owns it from now, NULL is refused) as c's
 * answer. Returns 0, or -EBUSY when an answer is under way already (buf is
 * then freed). */
int ctl_conn_answer(struct ctl_conn *c, char *buf, size_t n);

/* Drops the first n bytes of c->in. */
void ctl_conn_consume(struct ctl_conn *c, size_t n);

/* Clients the servers closed for reason why, since the start. */
uint64_t ctl_server_dropped(enum ctl_endpoint ep, enum ctl_drop why);

#endif
