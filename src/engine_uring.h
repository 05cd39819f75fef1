/* engine_uring: a session whose route has engine uring is driven by the
 * worker's io_uring once its backend is connected (accept, connect, the
 * PROXY header and timers stay on epoll). See engine_uring.c. */
#ifndef SPLICER_ENGINE_URING_H
#define SPLICER_ENGINE_URING_H

struct worker;
struct session;
struct dir;

/* 0 if io_uring with multishot recv and provided-buffer rings works here,
 * else -errno with err filled (main falls back to copy). */
int uring_probe(char *err, unsigned errlen);

/* The worker's ring, buffers and fixed file table, made by worker_init when
 * a route uses uring (else by the first such session, after a reload).
 * 0 or -errno. */
int uring_worker_init(struct worker *w);

/* Takes an open session off epoll and arms its receives. 0 or -errno. */
int uring_session_start(struct session *s);

/* Session close, before the session closes its sides: the engine takes
 * both sockets (fixed slots, or plain descriptors: s->cli.fd and s->srv.fd
 * become -1) and closes them, with SO_LINGER 0 where asked, once no
 * operation naming them can run any more. Returns the number of resets;
 * 0 when s is not on the ring. */
int uring_sides_close(struct session *s, int reset_cli, int reset_srv);

/* Session close: cancels the direction's operations and detaches it; the
 * engine frees its part once the last completion of both directions came
 * back (cancels included). */
void uring_dir_release(struct worker *w, struct dir *d);

/* d's source was reset (its recv failed): the session turned the error into
 * an end (d->eof, d->err cleared); forward it as a FIN once every queued
 * byte is sent. The ring holds the sockets in its fixed table, where
 * SIOCOUTQ cannot be asked, so an RST could discard delivered bytes; a FIN
 * after them is what HAProxy and nginx send too. */
void uring_dir_ended(struct dir *d);

/* Worker loop hooks: submit queued SQEs (top of each turn), reap CQEs
 * (the ring's fd is in epoll), 1 while detached operations are in flight
 * (the worker does not exit before), teardown. */
void uring_flush(struct worker *w);
void uring_reap(struct worker *w);
int uring_busy(const struct worker *w);
void uring_destroy(struct worker *w);

#endif
