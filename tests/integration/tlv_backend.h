/* SPDX-License-Identifier: MIT */
/* A test backend that reads the PROXY header in front of each connection
 * (v1 or v2, checked by splicer's own parser, the CRC32C included), keeps
 * the TLVs of the last one by type, then echoes the stream. For the PROXY
 * v2 TLV cases (tests/integration/test_pp_tlv.c) and their differential
 * row (tests/peer/test_peer_pp_tlv.c). */
#ifndef SPLICER_IT_TLV_BACKEND_H
#define SPLICER_IT_TLV_BACKEND_H
#include <pthread.h>

#include "harness.h"

struct tlv_seen {
	pthread_mutex_t mu;
	int done;              /* 1: a valid header; -1: one the parser refused */
	int version;           /* 1 or 2 */
	char why[128];         /* the parser's reason, when refused */
	int has[256];          /* TLVs of each type */
	char val[256][300];    /* the last value of each, NUL-terminated (cut) */
};

#define TLV_SEEN_INIT { .mu = PTHREAD_MUTEX_INITIALIZER }

/* h_server_start's connection function; arg: a struct tlv_seen. */
void tlv_backend_conn(struct h_server *s, int fd, int index, void *arg);

void tlv_seen_reset(struct tlv_seen *t);

/* Waits (3 s) for the next header; asserts it was valid. */
void tlv_seen_wait(struct tlv_seen *t, const char *what);

/* A v2 PROXY header, as a front proxy sends it, for a client
 * 203.0.113.9:4242 that connected to 198.51.100.1:443, without TLVs (add
 * them with proxy_tlv_add, seal with proxy_tlv_seal). Returns its length. */
size_t tlv_front_header(uint8_t *out, size_t cap);

/* The names of the TLV types t holds, comma-separated ("-": none). */
void tlv_seen_types(struct tlv_seen *t, char *out, size_t len);

#endif
