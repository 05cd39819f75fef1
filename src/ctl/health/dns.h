/* SPDX-License-Identifier: MIT */
/* dns: backend names given with resolve=DURATION (struct dns_name), looked
 * up with c-ares: A and AAAA, or with srv an SRV name's records, whose
 * targets are then looked up for their addresses (the lowest priority's
 * targets only: the others are its fallbacks). Every address is a backend
 * with the line's options.
 *
 * At start, `check` and each reload, dns_fill() gives every name of a new
 * config its addresses; then the resolver thread looks each one up again
 * every interval. When a name's addresses change, dns_changed() says so to
 * the main thread, which builds a new config generation from the running
 * one with the new answers (reload_dns): new sessions take the new set, and
 * sessions on an address that went finish where they are.
 *
 * A lookup that fails (timeout, SERVFAIL, and also NXDOMAIN or an answer
 * without an address: a name that vanishes for a moment must not empty the
 * pool) keeps the last answer; it is counted and logged, once and then at
 * most every DNS_FAIL_LOG_MS per name. A name without an answer at start
 * leaves its route without those backends, said in the log (`check`: a
 * note), and is looked up again every interval. */
#ifndef SPLICER_DNS_H
#define SPLICER_DNS_H
#include <stdint.h>

#include "config.h"

#define DNS_TIMEOUT_MS  1000  /* per try and server; c-ares doubles it each round */
#define DNS_TRIES       2
#define DNS_FAIL_LOG_MS 60000

enum dns_when {
	DNS_START,  /* look up now; say what failed in the log */
	DNS_CHECK,  /* look up now; a failure is a note on stderr (FILE:LINE: note:) */
	DNS_RELOAD, /* names the resolver thread follows: its last answer; others looked up now */
	DNS_REGEN,  /* the resolver thread's last answers only: never waits */
};

/* Adds to every route of c the backends of its resolve= names (c is not
 * finalized yet). Returns 0, or -1 after saying why (a bad `resolvers`
 * value, as FILE:LINE: for the file's). */
int dns_fill(struct config *c, enum dns_when when);

/* The names to follow: the running config's (the start's, then each new
 * generation's). Names it no longer has are forgotten; new ones start from
 * the addresses c has for them. */
void dns_set_config(const struct config *c);

/* Starts the resolver thread (dns_set_config first). Returns 0 or -errno. */
int dns_start(void);
/* Stops it (at exit); the names are forgotten. */
void dns_stop(void);

/* 1, once, when an answer differs from the running config's addresses
 * (the main thread then calls reload_dns). */
int dns_changed(void);

/* /metrics: each followed name with its counters. */
struct dns_stat {
	char route[ROUTE_NAME_MAX];
	char name[ADDR_TEXT_MAX];
	uint64_t resolutions, failures;
	unsigned addresses;
};
/* Fills up to max entries; returns how many names there are. */
unsigned dns_stats(struct dns_stat *out, unsigned max);

#endif
