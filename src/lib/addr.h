/* SPDX-License-Identifier: MIT */
/* addr: the address forms of the command line and config, for listeners and
 * backends alike:
 *   host:port      "127.0.0.1:80", "localhost:8080" (a name: every address it
 *                  resolves to, see addr_parse_all)
 *   [v6]:port      "[::1]:443"
 *   :port          every IPv4 address (listen: 0.0.0.0; backend: 127.0.0.1), as
 *                  HAProxy's "bind :80"
 *   *:port         listen only: every address of both families, 0.0.0.0:port and
 *                  [::]:port (two sockets, the IPv6 one IPV6_V6ONLY)
 *   unix:/path     a Unix stream socket ("unix:@name" is the abstract namespace)
 */
#ifndef SPLICER_ADDR_H
#define SPLICER_ADDR_H
#include <sys/socket.h>

#define ADDR_TEXT_MAX 128

struct addr {
	struct sockaddr_storage ss; /* ready for bind()/connect() */
	socklen_t len;              /* length to pass with ss */
	char text[ADDR_TEXT_MAX];   /* canonical text, e.g. "[::1]:80", "unix:/run/x" */
};

enum addr_use { ADDR_LISTEN, ADDR_CONNECT };

/* Parses s into out[]: every address it stands for, in getaddrinfo()'s order,
 * without repeats. Returns how many there are (1 or more; only the first max
 * are written), or -EINVAL with a sentence in err naming the problem
 * ("missing port", "port 70000 out of range 0..65535", ...). A port of 0 is
 * only accepted for ADDR_LISTEN (ephemeral port). A name is resolved now,
 * through the resolver (/etc/hosts, DNS): callers parse the config at start,
 * at every reload and in `check`, and these are the moments a name's
 * addresses are (re)read; a name never reaches the event loop. */
int addr_parse_all(const char *s, enum addr_use use, struct addr *out, unsigned max, char *err,
		   unsigned errlen);

/* addr_parse_all() for one address: the first (a name's first result,
 * "*:port"'s 0.0.0.0). Returns 0 or -EINVAL with err. For tools that take
 * one address; routes take every one. */
int addr_parse(const char *s, enum addr_use use, struct addr *a, char *err, unsigned errlen);

/* The host and port of "host:port" or "[v6]:port" (no name resolved; host
 * may be "" for ":port"). Returns 0 or -EINVAL with err, as addr_parse_all.
 * For names looked up elsewhere (resolve=, src/ctl/health/dns.c). */
int addr_split(const char *s, enum addr_use use, char *host, unsigned hostlen, unsigned *port,
	       char *err, unsigned errlen);

/* a = the AF_INET or AF_INET6 address sa with port (host order), and its text. */
void addr_from_inet(struct addr *a, const struct sockaddr *sa, unsigned port);

/* 0: host names are refused (AI_NUMERICHOST), so parsing never sends a DNS
 * query; the fuzzers set it, since their inputs must not reach the network. */
extern int addr_resolve_names;

/* Formats any socket address the way addr_parse's text reads:
 * "1.2.3.4:80", "[::1]:80", "unix:/path", "unix:@abstract", "unix:" (unnamed). */
void addr_format(const struct sockaddr *sa, socklen_t len, char *buf, unsigned buflen);

/* True for AF_INET and AF_INET6 (where TCP options apply). */
int addr_is_inet(const struct addr *a);

/* True when a and b are the same socket address, byte for byte (an
 * ephemeral port bound since is the kernel's, so ":0" meets no other). */
int addr_equal(const struct addr *a, const struct addr *b);

/* Whether a connection to backend would reach a socket listening on listen
 * on this host: ADDR_LOOP_SAME for the same address (a v4-mapped IPv6
 * backend counts as its IPv4 form; Unix: the same path or name),
 * ADDR_LOOP_LOCAL when listen is the wildcard of the backend's family on its
 * port and the backend's address is this host's (loopback, unspecified, or
 * an interface's, from getifaddrs()), else ADDR_LOOP_NONE. A listen port of
 * 0 never loops (the kernel picks it). */
enum addr_loop { ADDR_LOOP_NONE, ADDR_LOOP_SAME, ADDR_LOOP_LOCAL };
/* 1 when a connect() to inet address a would reach this host (loopback,
 * the unspecified address, an interface's address). */
int addr_is_this_host(const struct addr *a);

enum addr_loop addr_loops_to(const struct addr *backend, const struct addr *listen);

#endif
