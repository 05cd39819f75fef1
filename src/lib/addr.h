/* addr: the address forms of the command line and config, for listeners and
 * backends alike:
 *   host:port      "127.0.0.1:80", "localhost:8080" (resolved once, first result)
 *   [v6]:port      "[::1]:443"
 *   :port          all addresses (listen: 0.0.0.0; backend: 127.0.0.1)
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

/* Parses s into *a. Returns 0, or -EINVAL with a sentence in err naming the
 * problem ("missing port", "port 70000 out of range 0..65535", ...). A port of
 * 0 is only accepted for ADDR_LISTEN (ephemeral port). */
int addr_parse(const char *s, enum addr_use use, struct addr *a, char *err, unsigned errlen);

/* 0: host names are refused (AI_NUMERICHOST), so parsing never sends a DNS
 * query; the fuzzers set it, since their inputs must not reach the network. */
extern int addr_resolve_names;

/* Formats any socket address the way addr_parse's text reads:
 * "1.2.3.4:80", "[::1]:80", "unix:/path", "unix:@abstract", "unix:" (unnamed). */
void addr_format(const struct sockaddr *sa, socklen_t len, char *buf, unsigned buflen);

/* True for AF_INET and AF_INET6 (where TCP options apply). */
int addr_is_inet(const struct addr *a);

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
