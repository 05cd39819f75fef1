/* SPDX-License-Identifier: MIT */
/* session_sock: see session_sock.h. */
#define _GNU_SOURCE
#include "session_sock.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sockopt.h"
#include "source_table.h"
#include "worker.h"

/* What a SYN may carry: one segment's worth (the kernel sends what fits
 * the MSS in the SYN, the rest after the handshake). */
#define TFO_MAX 1400

static int opt_warned; /* a refused socket option was logged (atomic) */

static int inet(int family)
{
	return family == AF_INET || family == AF_INET6;
}

/* A per-source rate's share for s: the packed rate over the sessions of its
 * source (at least 1); a per-session rate as it is; 0: none. */
static uint64_t share(const struct session *s, uint64_t packed)
{
	uint64_t v = packed & ~SOCKOPT_RATE_PER_SOURCE;

	if (!(packed & SOCKOPT_RATE_PER_SOURCE))
		return v;
	v /= s->rate_div ? s->rate_div : 1;
	return v ? v : 1;
}

static unsigned source_sessions(const struct session *s)
{
	unsigned n = 0;

	if (s->route->sources && s->src_held)
		n = source_conns(s->route->sources, (const struct sockaddr *)&s->peer);
	return n ? n : 1;
}

static void warn_once(const struct session *s, const char *what, const char *why)
{
	if (!__atomic_exchange_n(&opt_warned, 1, __ATOMIC_RELAXED))
		log_warn("route %s: %s: %s; the session's backend connection is not made (logged "
			 "once, counted in splicer_connect_local_errors_total)", s->route->name, what,
			 why);
	log_verbose("session %llx: %s: %s", (unsigned long long)s->id, what, why);
}

/* The address the connection comes from, bound. Returns 0 or -errno. */
static int bind_source(struct session *s, int fd, const struct backend_conf *b)
{
	static const struct sock_source client = { .client = 1 };
	const struct sock_source *src = &s->route->src;
	struct sock_ip ip;
	char t[64], why[160];
	int r, fam = b->addr.ss.ss_family;

	if (b->source.family)
		ip = b->source;
	else if ((r = sockopt_source_pick(b->source_client ? &client : src, fam,
					  (unsigned)s->id, (const struct sockaddr *)&s->peer, &ip)) <= 0) {
		if (r == -EAFNOSUPPORT)
			warn_once(s, "source = client", "the client's address family is not the "
				  "backend's (or the client has no IP address)");
		return r;
	}
	if ((r = sockopt_bind_source(fd, &ip, b->source_client || src->client)) < 0) {
		sockopt_ip_format(&ip, t, sizeof(t));
		snprintf(why, sizeof(why), "%s: %s%s", t, strerror(-r),
			 r == -EPERM ? " (IP_TRANSPARENT needs CAP_NET_ADMIN)"
			 : r == -EADDRNOTAVAIL ? " (not an address of this host, or no policy "
						 "routing for transparent mode)" : "");
		warn_once(s, b->source_client || src->client ? "source = client" : "source", why);
	}
	return r;
}

int session_sock_backend(struct session *s, const struct backend_conf *b)
{
	const struct route *r = s->route;
	int fam = b->addr.ss.ss_family, one = 1, fd, rc;
	char why[160] = "";

	fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    inet(fam) ? sockopt_protocol(&r->srv_so) : 0);
	if (fd < 0)
		return -errno;
	if (!inet(fam))
		return fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((rc = sockopt_apply_early(fd, &r->srv_so, why, sizeof(why))) < 0 ||
	    (rc = sockopt_apply(fd, fam, &r->srv_so, 1, why, sizeof(why))) < 0) {
		warn_once(s, "backend socket", why);
		goto fail;
	}
	if ((r->o.rate_up & SOCKOPT_RATE_PER_SOURCE) && (rc = sockopt_pacing(fd, share(s, r->o.rate_up))) < 0) {
		warn_once(s, "rate_limit_up", strerror(-rc));
		goto fail;
	}
	if ((rc = bind_source(s, fd, b)) < 0)
		goto fail;
	return fd;
fail:
	close(fd);
	return rc;
}

int session_sock_connect(struct session *s, int fd, const struct backend_conf *b)
{
	const struct sockaddr *to = (const struct sockaddr *)&b->addr.ss;
	char buf[TFO_MAX];
	int q = 0;
	ssize_t n, k;

	/* Fast Open: a header of ours would have to go first (proxy_protocol) */
	if (s->route->fastopen_backend && !s->route->o.proxy_protocol && s->cli.fd >= 0 &&
	    inet(b->addr.ss.ss_family) && !ioctl(s->cli.fd, SIOCINQ, &q) && q > 0 &&
	    (n = recv(s->cli.fd, buf, (size_t)q < sizeof(buf) ? (size_t)q : sizeof(buf),
		      MSG_PEEK | MSG_DONTWAIT)) > 0) {
		/* bytes in the SYN with a cookie from an earlier connection; else
		 * a plain SYN asking for one, nothing sent (EINPROGRESS) */
		k = sendto(fd, buf, (size_t)n, MSG_FASTOPEN | MSG_DONTWAIT | MSG_NOSIGNAL, to,
			   b->addr.len);
		if (k >= 0) {
			s->tfo_sent = (uint32_t)k;
			return -EINPROGRESS;
		}
		if (errno != EOPNOTSUPP) /* the client side of net.ipv4.tcp_fastopen off */
			return -errno;
	}
	return connect(fd, to, b->addr.len) ? -errno : 0;
}

int session_sock_opened(struct session *s)
{
	char buf[TFO_MAX];
	uint32_t n = s->tfo_sent;

	s->tfo_sent = 0;
	if (!n)
		return 0;
	/* peeked at connect, and nothing reads the client before this */
	if (recv(s->cli.fd, buf, n, MSG_DONTWAIT) != (ssize_t)n)
		return -EIO;
	return (int)n;
}

void session_sock_client(struct session *s)
{
	const struct route *r = s->route;
	int fam = s->listen ? s->listen->ss.ss_family : AF_UNSPEC;
	char why[160] = "";

	if (s->cli.fd < 0 || !inet(fam))
		return;
	if (!r->cli_inherited && (r->cli_so.ka.on || r->cli_so.user_timeout_ms)) {
		struct sock_opts so = { .mptcp = r->cli_so.mptcp, .ka = r->cli_so.ka,
					.user_timeout_ms = r->cli_so.user_timeout_ms };
		if (sockopt_apply(s->cli.fd, fam, &so, 1, why, sizeof(why)) < 0)
			log_verbose("session %llx: client socket: %s", (unsigned long long)s->id, why);
	}
	if (r->cli_so.pacing)
		sockopt_pacing(s->cli.fd, r->cli_so.pacing);
	if ((r->o.rate_up | r->o.rate_down) & SOCKOPT_RATE_PER_SOURCE)
		session_sock_rate_share(s);
}

void session_sock_rate_share(struct session *s)
{
	const struct route *r = s->route;
	unsigned n = source_sessions(s);

	s->rate_next_ms = s->w->now_ms + RATE_SHARE_MS;
	if (n == s->rate_div)
		return;
	s->rate_div = n;
	if ((r->o.rate_down & SOCKOPT_RATE_PER_SOURCE) && s->cli.fd >= 0)
		sockopt_pacing(s->cli.fd, share(s, r->o.rate_down));
	if ((r->o.rate_up & SOCKOPT_RATE_PER_SOURCE) && s->srv.fd >= 0)
		sockopt_pacing(s->srv.fd, share(s, r->o.rate_up));
}
