/* SPDX-License-Identifier: MIT */
/* session_handoff: an upgrade hands the old process's sessions to the new
 * one (ctl/admin/handoff.h runs the exchange; this file is the session's
 * side of it and the wire format).
 *
 * A session is one SOCK_SEQPACKET message: a struct handoff_rec (a fixed
 * layout, named by HANDOFF_VERSION: a new binary that reads another
 * version leaves the old process to drain), and SCM_RIGHTS descriptors in
 * this order: the client socket; the backend socket (connecting or
 * connected) when it has one; each direction's pipe (read end, write end)
 * when a splice direction holds bytes; a memfd with the bytes read and not
 * yet written (copy directions: up's, then down's) and the client's PROXY
 * header TLVs, when there are any. The kernel keeps what the sockets and
 * pipes hold; nothing is read from or written to them here, so every byte
 * is delivered once and in order by whichever process holds it.
 *
 * What moves: sessions whose engines hand over (engine.h: hands_over,
 * hand_out, hand_in: copy and splice, so auto too) in every state:
 * reading a PROXY header or a ClientHello (peeked, never consumed: the new
 * process reads them again from the socket), waiting for a backend slot,
 * connecting, open (half-closed, idle, ending before an RST, expiring).
 * What stays and drains in the old process: sessions of engines that do not
 * (uring: operations in flight in its ring; sockmap: the sockets are in
 * its BPF map), and those the new config cannot take (their route, backend
 * or listener gone, a smaller copy buffer than their unsent bytes). */
#ifndef SPLICER_SESSION_HANDOFF_H
#define SPLICER_SESSION_HANDOFF_H
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

struct worker;
struct session;

#define HANDOFF_VERSION 1
#define HANDOFF_MAGIC   0x53504831u /* "SPH1" */
#define HANDOFF_MAX_FDS 7
#define HANDOFF_ENGINE_MAX 16

struct handoff_dir_rec {
	uint64_t bytes;         /* written so far */
	int32_t err;
	uint32_t len;           /* copy: bytes waiting, in the memfd */
	uint32_t in_pipe;       /* splice: bytes in the pipe (its two descriptors follow) */
	uint32_t aux;           /* the engine's word (engine.h: dir_handoff) */
	uint8_t eof, rst, shut, dead, urg_state, lowat_set, used, err_at_dst;
	uint8_t pipe;           /* 1: its pipe's descriptors are in the message */
	char urg_byte;
	char eng[HANDOFF_ENGINE_MAX], stream[HANDOFF_ENGINE_MAX]; /* stream "": none */
	uint8_t why;            /* enum dir_why (in what was padding: 0 from older builds) */
};

struct handoff_rec {
	uint32_t magic;
	uint16_t version;
	uint16_t size;          /* sizeof(struct handoff_rec): the layout's check */
	uint64_t id;            /* in the old process (its log lines) */
	uint64_t uid[2];        /* the PROXY v2 unique id's halves (session_pp.h) */
	uint8_t state, ending, expiring, expire_why, counted, attempted, opened, routed;
	uint8_t src_held, ended_by, answered, cli_broken, srv_broken, has_srv, has_data, refused;
	uint8_t header_read;     /* S_HELLO: its PROXY header was read (peer is its source) */
	uint8_t pad[7];
	uint32_t tries, first, tfo_sent, rate_div, hello_lowat, pp_rx_len;
	uint32_t outq[2];
	int32_t fail_err, conn_err;
	uint64_t start_ms, active_ms, connect_start_ms, open_ms, connect_deadline_ms;
	uint64_t expire_ms, queued_ms, log_last_ms, rate_next_ms;
	uint64_t connect_us, open_us, first_up_us;
	uint64_t reported[2];
	struct handoff_dir_rec dir[2]; /* up, down */
	uint32_t peerlen;
	struct sockaddr_storage peer;
	char fail[48];          /* the close reason of the first error ("": none) */
	char engine[HANDOFF_ENGINE_MAX]; /* the session's engine */
	char route[ROUTE_NAME_MAX];
	char backend[ADDR_TEXT_MAX]; /* its address text ("": none chosen) */
	char listen[ADDR_TEXT_MAX];  /* the listener it came in on */
	uint8_t authority_len, alpn_len;
	char authority[256], alpn[256];
};

/* The new process, as the old one sees it: where sessions go and what it
 * can take. Filled in by ctl/admin/handoff.c before the workers look. */
struct handoff_target {
	int fd;                 /* SOCK_SEQPACKET to the new process */
	int pid;
	const char **names;     /* its catalog, sorted (handoff.c: catalog_line) */
	unsigned nnames;
	uint64_t buf_size;      /* its copy buffers: larger unsent bytes stay here */
	const char *refuse;     /* non-NULL: every session stays here, for this reason */
	/* the workers' counts (atomic) */
	unsigned handed, kept, failed, workers_done;
};

/* Old process, on worker w's thread, once it stops accepting: every
 * session of w that can move is sent to t and leaves w; the others stay to
 * drain. Counted in t. */
void session_hand_over(struct worker *w, struct handoff_target *t);

/* What the new process received: one session. */
struct handoff_msg {
	struct handoff_msg *next;
	struct handoff_rec rec;
	int fds[HANDOFF_MAX_FDS];
	unsigned nfds;
	char *data;             /* the memfd's bytes (up's, down's, the TLVs) */
	uint64_t len;
};

/* Reads one message from fd (blocking): 1 with *m (a session), 0 at EOF,
 * -errno; a message that is not a session of HANDOFF_VERSION is given to
 * *other (its bytes, NUL-ended, up to len) and returns 2, its
 * descriptors closed. */
int handoff_recv(int fd, struct handoff_msg **m, char *other, unsigned len);

/* Frees m, closing the descriptors it still holds. */
void handoff_msg_free(struct handoff_msg *m);

/* New process, on worker w's thread: m becomes a session of w (the
 * descriptors are its). Returns 0, or -1 when it could not be adopted
 * (the route, backend, listener or engine is not there after all: then
 * closed with an RST; counted by the caller). m is freed. */
int session_adopt(struct worker *w, struct handoff_msg *m);

#endif
