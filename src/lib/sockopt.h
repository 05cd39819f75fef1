/* SPDX-License-Identifier: MIT */
/* sockopt: the socket options a route asks for on its listening sockets,
 * its client connections and its backend connections (issue 24):
 *
 *   keepalive    SO_KEEPALIVE + TCP_KEEPIDLE/KEEPINTVL/KEEPCNT   "60s,10s,5"
 *   user timeout TCP_USER_TIMEOUT: unacknowledged data this long ends the connection
 *   mark, tos    SO_MARK (CAP_NET_ADMIN), IP_TOS / IPV6_TCLASS
 *   interface    SO_BINDTODEVICE (a device or a VRF), before bind()
 *   mptcp        IPPROTO_MPTCP at socket() (a peer without it falls back to TCP)
 *   pacing       SO_MAX_PACING_RATE: the kernel paces what the socket sends
 *                (TCP's internal pacing since Linux 4.13, no fq qdisc needed)
 *   listeners    backlog, TCP_FASTOPEN (queue), TCP_DEFER_ACCEPT
 *   source       bind(ADDR:0) with IP_BIND_ADDRESS_NO_PORT before connect, or
 *                the client's own address with IP_TRANSPARENT
 *
 * The parsers here serve the settings table (src/ctl/config); the appliers
 * serve listener.c and the session. Plain libc: no config type is known. */
#ifndef SPLICER_SOCKOPT_H
#define SPLICER_SOCKOPT_H
#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

/* keepalive: idle and interval in seconds, count of probes; on = 0: off */
struct sock_ka {
	uint16_t idle_s, intvl_s;
	uint8_t cnt;
	uint8_t on;
};

/* What one side's sockets get. All zero: nothing (a plain socket). */
struct sock_opts {
	uint8_t mptcp;             /* socket(..., IPPROTO_MPTCP) */
	uint8_t tos;               /* IP_TOS / IPV6_TCLASS; 0: the default */
	uint32_t mark;             /* SO_MARK; 0: none */
	char iface[IF_NAMESIZE];   /* SO_BINDTODEVICE; "": none */
	struct sock_ka ka;
	uint32_t user_timeout_ms;  /* TCP_USER_TIMEOUT; 0: the kernel's */
	uint64_t pacing;           /* SO_MAX_PACING_RATE, bytes/s; 0: none */
};

/* A listening socket's: the accepted connections inherit so's mark, tos,
 * device, keepalive and user timeout from it (Linux copies them at accept). */
struct listen_opts {
	struct sock_opts so;
	uint32_t backlog;          /* 0: SOCKOPT_BACKLOG */
	uint32_t fastopen;         /* TCP_FASTOPEN queue length; 0: off */
	uint32_t defer_accept_s;   /* TCP_DEFER_ACCEPT; 0: off */
};
#define SOCKOPT_BACKLOG 4096 /* the kernel caps it at net.core.somaxconn */

/* An address to connect from: family 0 is none. */
struct sock_ip {
	sa_family_t family;       /* AF_INET or AF_INET6 */
	uint8_t b[16];
};

#define SOCKOPT_SOURCES_MAX 16
/* Where a route's (or a backend's) connections come from. */
struct sock_source {
	uint8_t n;                 /* addresses in the pool; 0 and !client: the kernel's choice */
	uint8_t client;            /* transparent: the client's own address */
	struct sock_ip ip[SOCKOPT_SOURCES_MAX];
};

/* ---- parsers (the settings table's) ---------------------------------------- */

/* A keepalive packed into a setting's uint64_t (0: off). */
uint64_t sockopt_ka_pack(const struct sock_ka *ka);
struct sock_ka sockopt_ka_unpack(uint64_t v);

/* "off", or "IDLE,INTERVAL,COUNT": two durations of whole seconds (1s..32767s,
 * units required: "60s", "2m") and a count 1..127. Returns 0 with *out packed,
 * or -1 with why. */
int sockopt_parse_keepalive(const char *text, uint64_t *out, char *why, size_t len);

/* A rate: "0" (off), or a number (a decimal fraction allowed) with a unit of
 * bits per second, kbit, mbit, gbit (powers of 1000, as tc writes them), or
 * of bytes per second, kB, MB, GB; "/source" after it makes it the client
 * address's share: every session of one source together. Returns 0 with
 * *out packed (bytes per second, SOCKOPT_RATE_PER_SOURCE), or -1 with why. */
#define SOCKOPT_RATE_PER_SOURCE (1ULL << 63)
int sockopt_parse_rate(const char *text, uint64_t *out, char *why, size_t len);
/* "10mbit", "1.5gbit", "800kbit/source": a rate as a user reads it. */
void sockopt_format_rate(uint64_t packed, char *buf, size_t len);

/* "client", or numeric addresses without a port ("10.0.0.5 10.0.0.6",
 * "2001:db8::5", "[2001:db8::5]"), at most SOCKOPT_SOURCES_MAX. Returns 0 with
 * *src filled (may be NULL: a check only), or -1 with why. */
int sockopt_parse_source(const char *text, struct sock_source *src, char *why, size_t len);

/* An interface name: 1..15 bytes, no '/', blank or ':' ("off": none). Only
 * the syntax: whether it exists is the host's business (sockopt_iface_exists). */
int sockopt_check_iface(const char *text, char *why, size_t len);
int sockopt_iface_exists(const char *name);

/* 1 when the kernel takes MPTCP sockets (net.mptcp.enabled = 1). */
int sockopt_mptcp_available(void);

/* ---- appliers ------------------------------------------------------------- */

/* The protocol for socket(): IPPROTO_MPTCP or 0. */
static inline int sockopt_protocol(const struct sock_opts *o)
{
	return o && o->mptcp ? IPPROTO_MPTCP : 0;
}

/* Before bind() or connect(): the device (a listener bound to a VRF takes
 * only its connections; the same port may be bound in another). Returns 0
 * or -errno with why naming the option. */
int sockopt_apply_early(int fd, const struct sock_opts *o, char *why, size_t len);

/* Everything else of o on an inet socket of `family`: mark, tos,
 * keepalive, user timeout, pacing. fresh: a socket with the kernel's
 * defaults (a new connection): only what o gives is set, one system call
 * each; else (a listener a reload keeps) each option is compared and set
 * back to the default too when o drops it. Returns 0 or the first -errno
 * with why (every option is still tried). */
int sockopt_apply(int fd, int family, const struct sock_opts *o, int fresh, char *why, size_t len);

/* SO_MAX_PACING_RATE alone (bytes/s; 0: none, ~0UL lifts it). 0 or -errno. */
int sockopt_pacing(int fd, uint64_t bytes_per_s);

/* A listening socket's own options (after listen(), and again on a socket
 * a reload keeps or an upgrade hands over, since each can change on a live
 * socket): the backlog (a second listen() updates it), TCP_FASTOPEN,
 * TCP_DEFER_ACCEPT, and sockopt_apply's. Returns 0 or -errno with why. */
int sockopt_apply_listen(int fd, int family, const struct listen_opts *o, char *why, size_t len);

/* 1 when the listening socket fd is what o asks at socket() and bind():
 * MPTCP or not, its device. A socket a reload would keep (or an upgrade
 * inherits) that differs is replaced by a new one instead: neither can
 * change on a bound socket. The other options are applied to it
 * (sockopt_apply_listen). */
int sockopt_listen_same_kind(int fd, const struct listen_opts *o);

/* Binds fd to ip (port 0; IP_BIND_ADDRESS_NO_PORT: the port is chosen at
 * connect() with the whole 4-tuple, so each source address holds a full
 * port range per backend), with IP_TRANSPARENT / IPV6_TRANSPARENT when
 * transparent (the address is not this host's: the client's). Returns 0 or
 * -errno. */
int sockopt_bind_source(int fd, const struct sock_ip *ip, int transparent);

/* The source of a connection to a backend of `family`: the pool's address
 * number `pick` (mod the addresses of that family), or the client's
 * (transparent; a v4-mapped client counts as IPv4). Returns 1 with *ip,
 * 0 when the pool has nothing for the family (no source: the kernel
 * chooses), -EAFNOSUPPORT when client is asked and the client's family is
 * not the backend's (or not inet at all). */
int sockopt_source_pick(const struct sock_source *src, int family, unsigned pick,
			const struct sockaddr *client, struct sock_ip *ip);
/* How many addresses of `family` the pool has. */
unsigned sockopt_source_count(const struct sock_source *src, int family);

/* "10.0.0.5" / "2001:db8::5". */
void sockopt_ip_format(const struct sock_ip *ip, char *buf, size_t len);

#endif
