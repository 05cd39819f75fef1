/* SPDX-License-Identifier: MIT */
/* config: the settings table, the command-line parser, route resolution and
 * --help. The config file's reader is config_file.c; both set values through
 * setting_parse() so a value means the same wherever it is written. */
#define _GNU_SOURCE
#include "config.h"
#include "config_table.h"
#include "backend.h"
#include "config_doc.h"
#include "check_spec.h"
#include "config_listen.h"
#include "config_pp.h"
#include "config_sockopt.h"
#include "route_admit.h"
#include "route_hist.h"
#include "route_keys.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access_log.h"
#include "privs.h"
#include "syslog_out.h"
#include "units.h"

static const char *const log_forms[] = { "FILE|-|syslog|syslog:udp://HOST[:PORT]|syslog:unix:PATH|off",
					 NULL };
static const char *const stats_forms[] = { "ADDRESS|off", NULL };
static const char *const user_forms[] = { "NAME|off", NULL };
static const char *const admin_forms[] = { "PATH|off", NULL };
static const char *const resolver_forms[] = { "IP[:PORT] ...|system", NULL };
static const char *const proxy_versions[] = { "off", "v1", "v2", NULL };
static const char *const no_yes[] = { "no", "yes", NULL };
static const char *const check_forms[] = { "none|tcp|redis|redis-primary|pgsql|mysql|smtp|tls|"
					   "http[:[METHOD ]PATH[ STATUS]]|[send:\"...\"] expect:\"...\"",
					   NULL };
static const char *const down_actions[] = { "keep", "close", NULL };
static const char *const upgrade_modes[] = { "handover", "drain", NULL };
const char *const balance_names[] = { "roundrobin", "leastconn", "maglev", NULL };
/* mptcp and fastopen: which of a route's sockets (SIDE_LISTEN, SIDE_BACKEND bits) */
static const char *const sides[] = { "no", "listen", "backend", "yes", NULL };

/* `check`: what check_spec_parse accepts, with its sentence. */
static int check_valid(const char *val, char *why, size_t len)
{
	struct check_spec c;

	return check_spec_parse(val, &c, why, len);
}

#define G(field) offsetof(struct config, field)
#define R(field) offsetof(struct route_opts, field)
#define KiB 1024ULL
#define MiB (1024ULL * 1024)
#define DAY_MS (24ULL * 3600 * 1000)

const struct setting settings[] = {
	{ "engine", 'e', SET_ENUM, 0, 0, "auto", 0, engine_names, SCOPE_ROUTE, R(engine),
	  "how bytes move: copy (recv/send), splice (socket->pipe->socket), auto (copy, then splice for streams, io_uring for request/response), "
	  "sockmap (experimental: eBPF redirects in the kernel; needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, else splice), "

	  "uring (io_uring recvs into provided buffers + a gathering sendmsg; experimental as a route's engine; "
	  "auto moves request/response sessions to it: auto-uring-turns)" },
	{ "auto-uring-turns", 0, SET_UINT, 0, 1000000, "16", 0, NULL, SCOPE_ROUTE, R(auto_uring_turns),
	  "engine = auto: a session whose bytes changed direction this many times (requests and "
	  "answers), with nothing in flight and no stream seen, moves to io_uring; a direction of it "
	  "that streams later, and an upgrade's hand-over, bring it back to copy "
	  "(0: never; a kernel without io_uring: never)" },
	{ "balance", 0, SET_ENUM, 0, 0, "roundrobin", 0, balance_names, SCOPE_ROUTE, R(balance),
	  "how a session picks its backend: roundrobin (by weight), leastconn (fewest sessions per weight), "
	  "maglev (consistent hash of the client IP)" },
	{ "workers", 'w', SET_UINT, 1, 256, "auto", SET_AUTO_OK, NULL, SCOPE_GLOBAL, G(workers),
	  "worker threads, each with its own epoll loop and SO_REUSEPORT listener (auto: one per CPU)" },
	{ "buffer-size", 0, SET_SIZE, 1 * KiB, 64 * MiB, "64k", 0, NULL, SCOPE_GLOBAL, G(buffer_size),
	  "copy engine buffer per direction" },
	{ "pipe-size", 0, SET_SIZE, 4 * KiB, 64 * MiB, "512k", SET_ZERO_OK, NULL, SCOPE_GLOBAL, G(pipe_size),
	  "splice engine pipe size, at least a page (0: kernel default, 64k); see doc/performance.md" },
	{ "lowat", 0, SET_SIZE, 0, 64 * MiB, "0", 0, NULL, SCOPE_ROUTE, R(lowat),
	  "SO_RCVLOWAT on spliced sources so readiness waits for a batch (0: off; bulk routes only)" },
	{ "busy-poll", 0, SET_UINT, 0, 100000, "0", 0, NULL, SCOPE_GLOBAL, G(busy_poll_us),
	  "microseconds a worker keeps polling without sleeping after its last event: lower latency, more CPU (0: off)" },
	{ "max-pipes", 0, SET_UINT, 0, 1000000, "auto", SET_AUTO_OK, NULL, SCOPE_GLOBAL, G(max_pipes),
	  "pipes per process, shared out among workers (auto: a quarter of the fd limit)" },
	{ "max-conns", 0, SET_UINT, 1, 10000000, "auto", SET_AUTO_OK, NULL, SCOPE_GLOBAL, G(max_conns),
	  "concurrent sessions; beyond it accepting pauses (auto: a quarter of the fd limit)" },
	{ "connect-timeout", 0, SET_DURATION, 1, DAY_MS, "5s", 0, NULL, SCOPE_ROUTE, R(connect_timeout_ms),
	  "backend connect attempt limit before trying the next backend" },
	{ "idle-timeout", 0, SET_DURATION, 1, 365 * DAY_MS, "10m", 0, NULL, SCOPE_ROUTE, R(idle_timeout_ms),
	  "close a session after this long without a byte either way" },
	{ "half-close-timeout", 0, SET_DURATION, 1, 365 * DAY_MS, "1m", 0, NULL, SCOPE_ROUTE,
	  R(half_close_timeout_ms),
	  "once one direction has ended (FIN or reset), close the session after this long without a byte "
	  "either way (or without the peer taking what is left to deliver)" },
	{ "log", 0, SET_TEXT, 0, 0, "off", 0, log_forms, SCOPE_GLOBAL, G(access_log),
	  "access log, a line per session: a file (SIGUSR1 reopens it), - (stdout), syslog (the "
	  "local daemon through syslog(3)), syslog:udp://HOST[:PORT] (port 514 if left out) or "
	  "syslog:unix:PATH (RFC 5424 datagrams, non-blocking: lines a receiver cannot take are "
	  "dropped and counted), or off" },
	{ "log-format", 0, SET_ENUM, 0, 0, "kv", 0, access_log_formats, SCOPE_GLOBAL, G(log_format),
	  "access log lines: kv (key=value) or json (one object per line, the same fields; "
	  "doc/operations.md)" },
	{ "log-facility", 0, SET_ENUM, 0, 0, "daemon", 0, syslog_facility_names, SCOPE_GLOBAL,
	  G(log_facility), "the syslog facility of access log messages (log = syslog and syslog:...)" },
	{ "log-interval", 0, SET_DURATION, 1000, DAY_MS, "0", SET_ZERO_OK, NULL, SCOPE_GLOBAL, G(log_interval_ms),
	  "access log: an interim line (reason=interim, bytes so far) for each open session this often "
	  "(at least 1s; 0: off, lines only at close)" },
	{ "log-connect", 0, SET_ENUM, 0, 0, "no", 0, no_yes, SCOPE_GLOBAL, G(log_connect),
	  "access log: a line (reason=connect) when a session's backend connection is up" },
	{ "proxy-protocol", 0, SET_ENUM, 0, 0, "off", 0, proxy_versions, SCOPE_ROUTE, R(proxy_protocol),
	  "send a PROXY protocol header with the client's addresses to backends (v1: text, v2: binary)" },
	{ "accept-proxy", 0, SET_ENUM, 0, 0, "no", 0, no_yes, SCOPE_ROUTE, R(accept_proxy),
	  "require a PROXY header (v1 or v2) from clients; its address is the one logged, hashed and forwarded" },
	{ "proxy-protocol-tlvs", 0, SET_CUSTOM, 0, 0, "none", 0, NULL, SCOPE_ROUTE, R(pp_tlvs),
	  "proxy_protocol = v2: TLVs added to the header: authority (the server name of the "
	  "client's TLS ClientHello), alpn (the first protocol it offers: splicer does not see "
	  "the one negotiated), unique_id (the session's id, 32 hex digits, as the access log's "
	  "unique_id), crc32c (a checksum of the header). authority and alpn make the route's "
	  "listeners read the ClientHello before connecting, as sni routes do; a client without "
	  "one (not TLS, no SNI, no ALPN) gets no such TLV, and one still silent at "
	  "tls_hello_timeout goes on without them when its listener has no sni route" },
	{ "proxy-protocol-pass", 0, SET_TEXT, 0, 0, "none", 0, NULL, SCOPE_ROUTE, R(pp_pass_text),
	  "accept_proxy and proxy_protocol = v2: the TLVs of a client's PROXY v2 header that go on "
	  "to the backend's header (all, or the types listed); a type splicer sends itself "
	  "(proxy_protocol_tlvs) goes once, with splicer's value when it has one" },
	{ "proxy-timeout", 0, SET_DURATION, 1, DAY_MS, "3s", 0, NULL, SCOPE_ROUTE, R(proxy_timeout_ms),
	  "accept-proxy: a client that has not sent its whole header by then is closed" },
	{ "check", 0, SET_TEXT, 0, 0, "none", 0, check_forms, SCOPE_ROUTE, R(check_text),
	  "active health checks: tcp (a connect that succeeds within check-timeout); a protocol's: redis "
	  "(PING, +PONG), redis-primary (INFO replication says role:master), pgsql (an SSLRequest answered), "
	  "mysql (the server's greeting), smtp (220), tls (a ServerHello to a ClientHello), "
	  "http:GET /health 2xx (a status of the list); or send:\"BYTES\" expect:\"BYTES\" "
	  "(or expect-regex:\"RE\"), with escapes \\r \\n \\t \\0 \\xHH. Any of them also "
	  "enables passive marking" },
	{ "check-interval", 0, SET_DURATION, 10, DAY_MS, "2s", 0, NULL, SCOPE_ROUTE, R(check_interval_ms),
	  "time between two checks of a backend" },
	{ "check-timeout", 0, SET_DURATION, 1, DAY_MS, "1s", 0, NULL, SCOPE_ROUTE, R(check_timeout_ms),
	  "a check that has not connected by then failed" },
	{ "rise", 0, SET_UINT, 1, 1000, "2", 0, NULL, SCOPE_ROUTE, R(rise),
	  "good checks in a row that bring a down backend up" },
	{ "fall", 0, SET_UINT, 1, 1000, "3", 0, NULL, SCOPE_ROUTE, R(fall),
	  "failed checks, or failed session connects, in a row that mark a backend down" },
	{ "on-backend-down", 0, SET_ENUM, 0, 0, "keep", 0, down_actions, SCOPE_ROUTE, R(on_backend_down),
	  "what a backend's running sessions do when it is marked down or removed (reload, DNS, "
	  "ctl backend del): keep (they finish) or close (within a check interval: the bytes "
	  "already read from the backend reach the client, then the client gets an RST, the "
	  "backend an RST; for failover of databases and Redis)" },
	{ "slowstart", 0, SET_DURATION, 100, DAY_MS, "0", SET_ZERO_OK, NULL, SCOPE_ROUTE, R(slowstart_ms),
	  "a backend that comes up (marked up by its checks, enabled, or added while running) takes a "
	  "share of new sessions rising linearly to its weight's over this long (roundrobin and "
	  "leastconn: its weight; maglev: its table slots; 0: at once)" },
	{ "stats", 0, SET_TEXT, 0, 0, "off", 0, stats_forms, SCOPE_GLOBAL, G(stats),
	  "serve GET /metrics (Prometheus) and GET /health over HTTP on this address" },
	{ "user", 0, SET_TEXT, 0, 0, "off", 0, user_forms, SCOPE_GLOBAL, G(user),
	  "after binding every socket, drop root and run as this user" },
	{ "sandbox", 0, SET_ENUM, 0, 0, "yes", 0, no_yes, SCOPE_GLOBAL, G(sandbox),
	  "once started: no_new_privs, a seccomp allow-list of system calls and Landlock file rules "
	  "(doc/security.md); no only to tell whether a problem is the sandbox's" },
	{ "admin", 0, SET_TEXT, 0, 0, "off", 0, admin_forms, SCOPE_GLOBAL, G(admin),
	  "the admin socket for `splicer ctl` (a Unix socket, mode 0600, the run-as user's): show, drain, disable, weight, kill, reload" },
	{ "verbose", 0, SET_UINT, 0, 2, "0", 0, NULL, SCOPE_GLOBAL, G(verbose),
	  "1: log each session at close, 2: debug (-v, -vv; --verbose without a number is -v)" },
	{ "drain-timeout", 0, SET_DURATION, 0, DAY_MS, "30s", 0, NULL, SCOPE_GLOBAL, G(drain_timeout_ms),
	  "on SIGTERM/SIGINT, how long running sessions may finish" },
	{ "lameduck", 0, SET_DURATION, 0, DAY_MS, "3s", 0, NULL, SCOPE_GLOBAL, G(lameduck_ms),
	  "on SIGTERM with stats on, /health answers 503 this long while listeners still accept, "
	  "before they close and the drain starts (0: off)" },
	{ "source-max-conns", 0, SET_UINT, 0, 10000000, "0", 0, NULL, SCOPE_ROUTE, R(source_max_conns),
	  "concurrent sessions per client address (IPv6: per /64); more are reset at once (0: no limit)" },
	{ "source-conn-rate", 0, SET_UINT, 0, 10000000, "0", 0, NULL, SCOPE_ROUTE, R(source_conn_rate),
	  "new sessions per second per client address (IPv6: per /64); more are reset at once (0: no limit)" },
	{ "source-table-size", 0, SET_UINT, 16, 10000000, "65536", 0, NULL, SCOPE_GLOBAL, G(source_table_size),
	  "client addresses each route tracks for the source limits; the least recently seen idle one makes room. "
	  "A reload resizes the running tables, keeping every source's counts (below the sources with live "
	  "sessions: new sources are refused until fewer have sessions)" },
	{ "tls-hello-timeout", 0, SET_DURATION, 1, DAY_MS, "5s", 0, NULL, SCOPE_ROUTE, R(tls_hello_timeout_ms),
	  "listeners with sni routes: a client that has not sent its whole ClientHello by then is "
	  "closed. The hello is read before a route is chosen, so routes that share a listen "
	  "address share this: the largest value among them applies (check notes when they differ)" },
	{ "tls-hello-max", 0, SET_SIZE, 512, 64 * KiB, "16k", 0, NULL, SCOPE_ROUTE, R(tls_hello_max),
	  "listeners with sni routes: the most bytes of TLS records a ClientHello may take; a "
	  "larger one is closed. As for tls_hello_timeout, the largest value among the routes that "
	  "share a listen address applies to all of them" },
	{ "queue-timeout", 0, SET_DURATION, 1, DAY_MS, "5s", 0, NULL, SCOPE_ROUTE, R(queue_timeout_ms),
	  "every backend at its maxconn: how long a client waits for a slot before it is closed" },
	{ "resolvers", 0, SET_TEXT, 0, 0, "system", 0, resolver_forms, SCOPE_GLOBAL, G(resolvers),
	  "DNS servers that backend names with resolve= are looked up on (numeric, port 53 unless "
	  "given), or system: those of /etc/resolv.conf" },
	/* a session's lifetime and the drain (session.c, worker.c) */
	{ "max-session-time", 0, SET_DURATION, 1000, 365 * DAY_MS, "0", SET_ZERO_OK, NULL, SCOPE_ROUTE,
	  R(max_session_time_ms),
	  "a session open this long is closed gracefully: both sides stop being read, every byte "
	  "already read is delivered, then each side gets a FIN (access log reason=max-session-time, "
	  "splicer_sessions_expired_total); a client of a pooled connection reconnects and is "
	  "balanced anew (0: no limit)" },
	{ "max-session-jitter", 0, SET_UINT, 0, 100, "10%", SET_PERCENT, NULL, SCOPE_ROUTE,
	  R(max_session_jitter),
	  "each session's max_session_time is shortened by a random share of up to this much, so "
	  "sessions opened together do not all end (and reconnect) together" },
	{ "upgrade-sessions", 0, SET_ENUM, 0, 0, "handover", 0, upgrade_modes, SCOPE_GLOBAL,
	  G(upgrade_sessions),
	  "at an upgrade: handover gives every session the new process can take (sockets, pipes with "
	  "their bytes, unsent bytes, state) to it over the upgrade socket, so this process exits at "
	  "once; drain keeps them here until they end or drain_timeout (uring and sockmap sessions, "
	  "and those whose route, backend or listener the new config lacks, drain either way)" },
	{ "drain-spread", 0, SET_ENUM, 0, 0, "yes", 0, no_yes, SCOPE_GLOBAL, G(drain_spread),
	  "on SIGTERM, an upgrade or ctl drain: the sessions still open are closed gracefully (as "
	  "max_session_time does) at moments spread evenly from half to 90% of drain_timeout (the "
	  "first half is theirs to end by themselves), so their clients do not all reconnect at once; no: they may run until drain_timeout, when "
	  "the ones left are cut together" },
	/* socket options (sockopt.h, config_sockopt.c) */
	{ "client-keepalive", 0, SET_CUSTOM, 0, 0, "off", 0, NULL, SCOPE_ROUTE, R(client_keepalive),
	  "TCP keepalive on client connections: after IDLE without a byte, a probe every INTERVAL; "
	  "COUNT unanswered end the session (reason=client-timeout, "
	  "splicer_dead_peers_total{side=\"client\"}): a client gone behind a NAT is told from an "
	  "idle one" },
	{ "backend-keepalive", 0, SET_CUSTOM, 0, 0, "off", 0, NULL, SCOPE_ROUTE, R(backend_keepalive),
	  "TCP keepalive on backend connections, as client_keepalive (reason=backend-timeout, "
	  "splicer_dead_peers_total{side=\"backend\"})" },
	{ "client-user-timeout", 0, SET_DURATION, 1, 24 * DAY_MS, "0", SET_ZERO_OK, NULL, SCOPE_ROUTE,
	  R(client_user_timeout_ms),
	  "TCP_USER_TIMEOUT on client connections: bytes sent to the client and not acknowledged "
	  "for this long end the session (reason=client-timeout, counted in "
	  "splicer_dead_peers_total), instead of the kernel's 15 minutes of retransmissions; it "
	  "also bounds keepalive probing (0: the kernel's)" },
	{ "backend-user-timeout", 0, SET_DURATION, 1, 24 * DAY_MS, "0", SET_ZERO_OK, NULL, SCOPE_ROUTE,
	  R(backend_user_timeout_ms), "TCP_USER_TIMEOUT on backend connections, as client_user_timeout" },
	{ "source", 0, SET_TEXT, 0, 0, "off", 0, NULL, SCOPE_ROUTE, R(source),
	  "where backend connections come from: an address of this host, or several (each new "
	  "connection takes the next, so one backend can hold a full port range per address: more "
	  "than 64k sessions), bound with IP_BIND_ADDRESS_NO_PORT; or client: the client's own "
	  "address (transparent proxying, IP_TRANSPARENT: needs CAP_NET_ADMIN and the policy "
	  "routing of doc/operations.md); a backend line's source= wins for its backend" },
	{ "mptcp", 0, SET_ENUM, 0, 0, "no", 0, sides, SCOPE_ROUTE, R(mptcp),
	  "Multipath TCP (IPPROTO_MPTCP, net.mptcp.enabled): on the route's listeners (clients that "
	  "speak it get it, others plain TCP), on its backend connections, or both (yes)" },
	{ "fastopen", 0, SET_ENUM, 0, 0, "no", 0, sides, SCOPE_ROUTE, R(fastopen),
	  "TCP Fast Open: listen: clients' data may ride in their SYN (TCP_FASTOPEN, a queue of "
	  "backlog; net.ipv4.tcp_fastopen must allow the server side, bit 2); backend: a client's "
	  "first bytes already received ride in the backend SYN (MSG_FASTOPEN; with defer_accept "
	  "they are there at accept); yes: both" },
	{ "mark", 0, SET_CUSTOM, 0, 0, "0", 0, NULL, SCOPE_ROUTE, R(mark),
	  "SO_MARK (fwmark) on the route's listeners, so on its client connections, and on its "
	  "backend connections, for policy routing and firewall rules; needs CAP_NET_ADMIN, which "
	  "the proxy then keeps after start (0: none)" },
	{ "tos", 0, SET_CUSTOM, 0, 0, "0", 0, NULL, SCOPE_ROUTE, R(tos),
	  "IP_TOS (IPv6: the traffic class) of the route's packets both ways, as 0x10 or a DSCP "
	  "shifted left by two (0xb8: EF)" },
	{ "defer-accept", 0, SET_DURATION, 1000, 3600 * 1000, "0", SET_ZERO_OK, NULL, SCOPE_ROUTE,
	  R(defer_accept_ms),
	  "TCP_DEFER_ACCEPT on the route's listeners: a connection is accepted once its first "
	  "bytes came (or this long after the handshake), so silent scanners cost no session and "
	  "no backend connection. Not for protocols where the server speaks first (0: off)" },
	{ "interface", 0, SET_TEXT, 0, 0, "off", 0, NULL, SCOPE_ROUTE, R(iface),
	  "SO_BINDTODEVICE on the route's listeners and backend connections: a device or a VRF "
	  "(the route then listens and connects in that VRF; another VRF may use the same port)" },
	{ "backlog", 0, SET_UINT, 1, 1000000, "4096", 0, NULL, SCOPE_ROUTE, R(backlog),
	  "the listen() backlog of the route's listeners (capped by net.core.somaxconn)" },
	{ "rate-limit-up", 0, SET_CUSTOM, 0, 0, "0", 0, NULL, SCOPE_ROUTE, R(rate_up),
	  "the most a session sends to its backend, paced by the kernel (SO_MAX_PACING_RATE), so "
	  "splice still moves the bytes; the client is slowed by TCP's own back-pressure. "
	  "RATE/source: every session of one client address together (each gets an even share, "
	  "looked at again every second) (0: no limit)" },
	{ "rate-limit-down", 0, SET_CUSTOM, 0, 0, "0", 0, NULL, SCOPE_ROUTE, R(rate_down),
	  "the most a session sends to its client, as rate_limit_up" },
};
const unsigned nsettings = sizeof(settings) / sizeof(settings[0]);
_Static_assert(sizeof(settings) / sizeof(settings[0]) <= SETTINGS_MAX,
	       "settings[] outgrew the masks and line arrays (SETTINGS_MAX)");

const struct setting *setting_find(const char *name)
{
	char norm[64];
	size_t i;

	/* config files often spell keys with '_' */
	for (i = 0; name[i] && i < sizeof(norm) - 1; i++)
		norm[i] = name[i] == '_' ? '-' : name[i];
	norm[i] = '\0';
	for (unsigned k = 0; k < nsettings; k++)
		if (!strcmp(norm, settings[k].name))
			return &settings[k];
	return NULL;
}

void *setting_field(struct config *c, struct route_opts *o, const struct setting *s)
{
	return s->scope == SCOPE_ROUTE ? (void *)((char *)o + s->off) : (void *)((char *)c + s->off);
}

static void range_text(const struct setting *s, char *buf, size_t len)
{
	char lo[32], hi[32];
	size_t n = 0;

	if (setting_kind(s)) {
		snprintf(buf, len, "%s", setting_kind(s)->accepts);
		return;
	}
	switch (s->type) {
	case SET_ENUM:
		buf[0] = '\0';
		/* a choice named test-* is accepted and not listed: for the suite */
		for (const char *const *ch = s->choices; *ch; ch++)
			if (strncmp(*ch, "test-", 5))
				n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", *ch);
		return;
	case SET_SIZE:
		format_size(s->min, lo, sizeof(lo));
		format_size(s->max, hi, sizeof(hi));
		snprintf(buf, len, "a size %s..%s%s (suffix k, m, g)", lo, hi, s->flags & SET_ZERO_OK ? " or 0" : "");
		return;
	case SET_DURATION:
		format_duration_ms(s->min, lo, sizeof(lo));
		format_duration_ms(s->max, hi, sizeof(hi));
		snprintf(buf, len, "a duration %s..%s (suffix ms, s, m, h)", lo, hi);
		return;
	case SET_UINT:
		snprintf(buf, len, "an integer %llu..%llu%s", (unsigned long long)s->min,
			 (unsigned long long)s->max, s->flags & SET_AUTO_OK ? " or auto" : "");
		return;
	case SET_TEXT:
		snprintf(buf, len, "%s", s->choices ? s->choices[0] : "text");
		return;
	case SET_CUSTOM:
		return;
	}
}

/* A bare number's two readings, "30000ms (30s)" and "30000s (500m)", each
 * with what it comes to when that reads differently: the one that was
 * meant is plain to see. */
static void unit_readings(uint64_t v, char *ms, size_t mslen, char *s, size_t slen)
{
	char t[32];

	format_duration_ms(v, t, sizeof(t));
	snprintf(ms, mslen, "%llums", (unsigned long long)v);
	if (strcmp(t, ms))
		snprintf(ms, mslen, "%llums (%s)", (unsigned long long)v, t);
	snprintf(s, slen, "%llus", (unsigned long long)v);
	if (v <= UINT64_MAX / 1000) {
		format_duration_ms(v * 1000, t, sizeof(t));
		if (strcmp(t, s))
			snprintf(s, slen, "%llus (%s)", (unsigned long long)v, t);
	}
}

/* A text setting whose value has a form of its own: 0, or -1 with why. */
static int text_invalid(const struct setting *s, const char *val, char *why, size_t len)
{
	static const struct {
		const char *name;
		int (*valid)(const char *val, char *why, size_t len);
	} forms[] = {
		{ "check", check_valid },
		{ "log", access_log_target_valid },
	};

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
		if (!strcmp(s->name, forms[i].name))
			return forms[i].valid(val, why, len);
	return 0;
}

int setting_parse(const struct setting *s, const char *val, void *out, char *why, size_t len)
{
	uint64_t v = 0;
	int r = 0;
	char range[160];

	if (s->type == SET_TEXT) {
		if (strlen(val) >= SETTING_TEXT_MAX) {
			snprintf(why, len, "value longer than %d characters", SETTING_TEXT_MAX - 1);
			return -1;
		}
		if ((setting_kind(s) && setting_kind(s)->parse(val, NULL, why, len)) ||
		    text_invalid(s, val, why, len))
			return -1;
		snprintf(out, SETTING_TEXT_MAX, "%s", val);
		return 0;
	}
	if (s->type == SET_CUSTOM) {
		if (setting_kind(s)->parse(val, &v, why, len))
			return -1;
		*(uint64_t *)out = v;
		return 0;
	}
	if ((s->flags & SET_AUTO_OK) && !strcmp(val, "auto")) {
		*(uint64_t *)out = SETTING_AUTO;
		return 0;
	}
	switch (s->type) {
	case SET_ENUM:
		r = -EINVAL;
		for (unsigned i = 0; s->choices[i]; i++)
			if (!strcmp(val, s->choices[i])) {
				v = i;
				r = 0;
			}
		break;
	case SET_SIZE: r = parse_size(val, &v); break;
	case SET_DURATION:
		if ((r = parse_duration_ms(val, &v)) == -EDOM)
			parse_uint(val, &v); /* the number, for the message */
		break;
	case SET_UINT:
		if ((s->flags & SET_PERCENT) && *val && val[strlen(val) - 1] == '%') {
			char num[32];
			snprintf(num, sizeof(num), "%.*s", (int)strlen(val) - 1, val);
			r = strlen(val) < sizeof(num) ? parse_uint(num, &v) : -EINVAL;
		} else {
			r = parse_uint(val, &v);
		}
		break;
	case SET_TEXT:
	case SET_CUSTOM: break;
	}
	if (!r && s->type != SET_ENUM && (v < s->min || v > s->max) && !((s->flags & SET_ZERO_OK) && !v))
		r = -ERANGE;
	if (r == -EDOM) {
		char as_ms[80], as_s[80];
		unit_readings(v, as_ms, sizeof(as_ms), as_s, sizeof(as_s));
		snprintf(why, len, "invalid value '%s': a duration needs a unit: %s or %s "
			 "(suffixes ms, s, m, h)", val, as_ms, as_s);
		return -1;
	}
	if (r) {
		range_text(s, range, sizeof(range));
		snprintf(why, len, "invalid value '%s' (expects %s)", val, range);
		return -1;
	}
	*(uint64_t *)out = v;
	return 0;
}

void config_defaults(struct config *c)
{
	char why[256];

	memset(c, 0, sizeof(*c));
	for (unsigned i = 0; i < nsettings; i++)
		if (setting_parse(&settings[i], settings[i].def, setting_field(c, &c->o, &settings[i]),
				  why, sizeof(why)))
			abort(); /* a default that does not parse is a bug in the table */
}

void config_free(struct config *c)
{
	for (unsigned i = 0; i < c->nroutes; i++) {
		backend_tables_free(c->route[i]);
		route_admit_free(c->route[i]);
		route_hist_free(c->route[i]);
		free(c->route[i]);
		c->route[i] = NULL;
	}
	c->nroutes = 0;
	config_listen_free(c);
}

struct route *config_add_route(struct config *c, const char *name, unsigned line)
{
	struct route *r;

	if (c->nroutes >= MAX_ROUTES || !(r = calloc(1, sizeof(*r))))
		return NULL;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->line = line;
	c->route[c->nroutes++] = r;
	return r;
}

int route_add_addrs(struct route *r, int backend, const char *text, unsigned line, char *why,
		    size_t len)
{
	struct addr a[MAX_BACKENDS];
	unsigned room = backend ? MAX_BACKENDS - r->nbackend : MAX_LISTENS - r->nlisten;
	int n = addr_parse_all(text, backend ? ADDR_CONNECT : ADDR_LISTEN, a, MAX_BACKENDS, why,
			       (unsigned)len);

	if (n < 0)
		return -1;
	if ((unsigned)n > room) {
		int max = backend ? MAX_BACKENDS : MAX_LISTENS;
		const char *what = backend ? "backends" : "listen addresses";
		if (n == 1)
			snprintf(why, len, "at most %d %s per route", max, what);
		else
			snprintf(why, len, "'%s' resolves to %d addresses, %u more than the route has "
				 "room for (at most %d %s per route)", text, n, (unsigned)n - room, max,
				 what);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!backend) {
			r->listen_line[r->nlisten] = line;
			r->listen[r->nlisten++] = a[i];
			continue;
		}
		struct backend_conf *b = &r->backend[r->nbackend++];
		b->addr = a[i];
		b->weight = 1;
		b->line = line;
		/* the run-time state's key (backend.c): the name as written, so
		 * a single address may change over a reload; with several, the
		 * name and each address, so each keeps its own */
		if (n == 1)
			snprintf(b->spec, sizeof(b->spec), "%.*s", (int)sizeof(b->spec) - 1, text);
		else
			snprintf(b->spec, sizeof(b->spec), "%.60s %.60s", text, a[i].text);
	}
	r->given |= backend ? ROUTE_GAVE_BACKEND : ROUTE_GAVE_LISTEN;
	return n;
}

/* Optimal string alignment distance: insertions, deletions, substitutions
 * and swaps of neighbours cost one; '-' and '_' are the same letter. */
static unsigned edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned d[40][40];

	if (la >= 40 || lb >= 40)
		return 99;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			char x = a[i - 1] == '_' ? '-' : a[i - 1], y = b[j - 1] == '_' ? '-' : b[j - 1];
			unsigned v = d[i - 1][j - 1] + (x != y);
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

const char *name_nearest(const char *word, const char *const *names, unsigned n)
{
	size_t len = strlen(word);
	unsigned limit = len < 6 ? 1 : len < 12 ? 2 : 3, best = limit + 1;
	const char *pick = NULL;

	for (unsigned i = 0; i < n; i++) {
		unsigned d = edit_distance(word, names[i]);
		if (d < best) {
			best = d;
			pick = names[i];
		}
	}
	return pick;
}

static struct route *cli_route(struct config *c)
{
	for (unsigned i = 0; i < c->nroutes; i++)
		if (!c->route[i]->line)
			return c->route[i];
	return config_add_route(c, "default", 0);
}

static int check_routes(struct config *c);
static int check_globals(struct config *c);

/* The value of -c/--config in argv into *file (NULL when absent). Returns
 * 0, or -1 after saying so when it is given twice: one file per run, and the
 * second one was silently ignored. */
static int config_file_arg(int argc, char **argv, int first, const char **file)
{
	*file = NULL;
	for (int i = first; i < argc; i++) {
		const char *opt = argv[i], *val = NULL;
		if ((!strcmp(opt, "-c") || !strcmp(opt, "--config")) && i + 1 < argc)
			val = argv[++i];
		else if (!strncmp(opt, "--config=", 9))
			val = opt + 9;
		if (!val)
			continue;
		if (*file) {
			fprintf(stderr, "splicer: option '%.*s' given twice (%s, then %s): one config "
				"file per run\n", (int)strcspn(opt, "="), opt, *file, val);
			return -1;
		}
		*file = val;
	}
	return 0;
}

/* "unknown option '--idle-timout' (did you mean '--idle-timeout'?)". */
static void unknown_option(const char *arg)
{
	const char *names[64] = { "listen", "backend", "config", "help", "version" };
	unsigned n = 5;
	const char *near;
	char name[64];

	for (unsigned k = 0; k < nsettings && n < 64; k++)
		names[n++] = settings[k].name;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg + strspn(arg, "-"), "="),
		 arg + strspn(arg, "-"));
	near = arg[1] == '-' ? name_nearest(name, names, n) : NULL;
	if (near)
		fprintf(stderr, "splicer: unknown option '%s' (did you mean '--%s'?)\n", arg, near);
	else
		fprintf(stderr, "splicer: unknown option '%s' (see --help)\n", arg);
}

/* "-v N" and "--verbose N": the next argument is the level when it is all
 * digits. No position takes a bare number, so nothing else is lost. */
static int verbose_value(int argc, char **argv, int i)
{
	const char *n = i + 1 < argc ? argv[i + 1] : "";
	return *n && strspn(n, "0123456789") == strlen(n);
}

int config_parse_args(struct config *c, int argc, char **argv, int first)
{
	const char *file;

	if (config_file_arg(argc, argv, first, &file))
		return -1;
	if (file) {
		snprintf(c->file, sizeof(c->file), "%s", file);
		int problems = config_load_file(c, file);
		/* the rest of the problems, in the same go; but with no route
		 * read, "no [route NAME] section" would only echo the problems
		 * above (a broken section header, a binary file) */
		if (problems > 0 && c->nroutes)
			check_routes(c);
		if (problems > 0) {
			/* and what start would trip on, which no line above hid */
			c->file_problems = 1;
			check_globals(c);
		}
		if (problems)
			return -1;
	}
	for (int i = first; i < argc; i++) {
		const char *arg = argv[i], *val = NULL, *eq;
		char name[64], why[256];
		const struct setting *s = NULL;
		int is_listen = 0, is_backend = 0, is_config = 0;

		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			config_print_help(argv[0]);
			return 1;
		}
		if (!strcmp(arg, "--version")) {
			printf("splicer %s\n", SPLICER_VERSION);
			return 1;
		}
		if ((!strcmp(arg, "-v") || !strcmp(arg, "--verbose")) && verbose_value(argc, argv, i)) {
			s = setting_find("verbose");
			if (setting_parse(s, argv[++i], setting_field(c, &c->o, s), why, sizeof(why))) {
				fprintf(stderr, "splicer: option '%s': %s\n", arg, why);
				return -1;
			}
			c->set_line[s - settings] = 0;
			continue;
		}
		if (arg[0] == '-' && arg[1] == 'v' && strspn(arg + 1, "v") == strlen(arg + 1)) {
			c->verbose += strlen(arg + 1);
			continue;
		}
		if (!strcmp(arg, "--verbose")) {
			c->verbose++;
			continue;
		}
		if (arg[0] != '-' || !arg[1]) {
			fprintf(stderr, "splicer: unexpected argument '%s' (see --help)\n", arg);
			return -1;
		}
		if (arg[1] == '-') { /* --name or --name=value */
			eq = strchr(arg, '=');
			snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - arg - 2 : (long)strlen(arg) - 2), arg + 2);
			if (eq)
				val = eq + 1;
			is_listen = !strcmp(name, "listen");
			is_backend = !strcmp(name, "backend");
			is_config = !strcmp(name, "config");
			if (!is_listen && !is_backend && !is_config)
				for (unsigned k = 0; k < nsettings; k++)
					if (!strcmp(name, settings[k].name))
						s = &settings[k];
		} else if (!arg[2]) { /* -x value */
			is_listen = arg[1] == 'l';
			is_backend = arg[1] == 'b';
			is_config = arg[1] == 'c';
			for (unsigned k = 0; k < nsettings; k++)
				if (settings[k].short_opt && settings[k].short_opt == arg[1])
					s = &settings[k];
		}
		if (!s && !is_listen && !is_backend && !is_config) {
			unknown_option(arg);
			return -1;
		}
		if (!val) {
			if (i + 1 >= argc) {
				fprintf(stderr, "splicer: option '%s' needs a value\n", arg);
				return -1;
			}
			val = argv[++i];
		}
		if (is_config)
			continue; /* loaded above */
		if ((is_listen || is_backend) && file) {
			fprintf(stderr, "splicer: option '%s': routes come from %s when -c is given; "
				"add the address to a [route NAME] section there\n", arg, file);
			return -1;
		}
		if (is_listen || is_backend) {
			struct route *r = cli_route(c);
			if (!r || route_add_addrs(r, is_backend, val, 0, why, sizeof(why)) < 0) {
				fprintf(stderr, "splicer: option '%s': %s\n", arg, r ? why : "out of memory");
				return -1;
			}
			continue;
		}
		if (setting_parse(s, val, setting_field(c, &c->o, s), why, sizeof(why))) {
			fprintf(stderr, "splicer: option '%s': %s\n", arg, why);
			return -1;
		}
		if (s->scope == SCOPE_ROUTE)
			c->cli_set |= SETTING_BIT(s - settings);
		else
			c->set_line[s - settings] = 0; /* the command line's, not the file's */
	}
	return 0;
}

/* "FILE:LINE: " for a route's problems, "splicer: " without a file. */
static void where(const struct config *c, unsigned line, char *buf, size_t len)
{
	config_where(c, line, buf, len);
}

static int inet_port(const struct addr *a)
{
	if (a->ss.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
	if (a->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
	return -1;
}

static int inet_any(const struct addr *a)
{
	if (a->ss.ss_family == AF_INET)
		return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	return a->ss.ss_family == AF_INET6 &&
	       !memcmp(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr, &in6addr_any,
		       sizeof(in6addr_any));
}

/* Two listen addresses that cannot both be bound: equal, or the same port
 * of one family where one side is the wildcard. Port 0 never clashes. */
static int listen_clash(const struct addr *a, const struct addr *b)
{
	if (a->ss.ss_family != b->ss.ss_family)
		return 0;
	if (a->ss.ss_family == AF_UNIX)
		return a->len == b->len && !memcmp(&a->ss, &b->ss, a->len);
	if (inet_port(a) <= 0 || inet_port(a) != inet_port(b))
		return 0;
	return inet_any(a) || inet_any(b) || (a->len == b->len && !memcmp(&a->ss, &b->ss, a->len));
}

/* Each route's settings: its own section's values, else [global]'s or the
 * default, and the command line's above both. */
static void resolve_route_opts(struct config *c, struct route *r)
{
	for (unsigned k = 0; k < nsettings; k++) {
		const struct setting *s = &settings[k];
		settings_mask bit = SETTING_BIT(k);
		if (s->scope != SCOPE_ROUTE)
			continue;
		if (!(c->cli_set & bit) && (r->set & bit))
			continue;
		if (s->type == SET_TEXT)
			memcpy(setting_field(c, &r->o, s), setting_field(c, &c->o, s), SETTING_TEXT_MAX);
		else
			*(uint64_t *)setting_field(c, &r->o, s) = *(uint64_t *)setting_field(c, &c->o, s);
	}
	/* the checker's kind, from the text every parser accepted (check_valid) */
	struct check_spec cs;
	char why[256];
	r->o.check = check_spec_parse(r->o.check_text, &cs, why, sizeof(why)) ? CHECK_TCP : cs.kind;
	config_pp_resolve(r);
}

/* A backend that is the route's own listener: each session would connect
 * to the proxy itself, which accepts it as a new session of the same route,
 * until max-conns is full. Refused where the config shows it: the same
 * address, or a wildcard listen on the port of an address of this host. */
static int check_loops(const struct config *c, const struct route *r)
{
	char at[300], ref[300];
	int bad = 0;

	for (unsigned b = 0; b < r->nbackend; b++)
		for (unsigned l = 0; l < r->nlisten; l++) {
			const struct addr *ba = &r->backend[b].addr, *la = &r->listen[l];
			enum addr_loop loop = addr_loops_to(ba, la);
			if (loop == ADDR_LOOP_NONE)
				continue;
			where(c, r->backend[b].line, at, sizeof(at));
			if (!c->file[0])
				fprintf(stderr, loop == ADDR_LOOP_SAME
					? "%s-b %s is -l %s: sessions would loop back into the proxy\n"
					: "%s-b %s is an address of this host, where -l %s listens: "
					  "sessions would loop back into the proxy\n", at, ba->text, la->text);
			else
				fprintf(stderr, loop == ADDR_LOOP_SAME
					? "%sbackend %s is listen %s of its own route (%s): "
					  "sessions would loop back into the proxy\n"
					: "%sbackend %s is an address of this host, where its own route "
					  "listens on %s (%s): sessions would loop back into the proxy\n",
					at, ba->text, la->text,
					config_line_ref(c, r->listen_line[l], ref, sizeof(ref)));
			bad++;
			break;
		}
	return bad;
}

/* A backup is used only while no primary is usable: a route whose every
 * backend (and resolve= name) is a backup would use them as primaries, which
 * is not what `backup` says. Refused at the first backup's line. */
static int check_backups(const struct config *c, const struct route *r)
{
	unsigned line = 0, primaries = 0;
	char at[300];

	for (unsigned b = 0; b < r->nbackend; b++) {
		primaries += !r->backend[b].backup && !r->backend[b].dns;
		if (r->backend[b].backup && !line)
			line = r->backend[b].line;
	}
	for (unsigned k = 0; k < r->ndns; k++) {
		primaries += !r->dns[k].backup;
		if (r->dns[k].backup && !line)
			line = r->dns[k].line;
	}
	if (primaries || (!r->nbackend && !r->ndns) || !line)
		return 0;
	where(c, line, at, sizeof(at));
	fprintf(stderr, "%sroute '%s': every backend is a backup; a backup takes sessions only "
		"while no primary backend is usable, so at least one must be a primary\n", at,
		r->name);
	return 1;
}

static int check_routes(struct config *c)
{
	char at[300], ref[300];
	int bad = 0;

	if (!c->nroutes) {
		if (c->file[0])
			fprintf(stderr, "%s: no [route NAME] section: nothing to listen on\n", c->file);
		else
			fprintf(stderr, "splicer: no listener: give -l ADDRESS (see --help)\n");
		return -1;
	}
	for (unsigned i = 0; i < c->nroutes; i++) {
		struct route *r = c->route[i];
		where(c, r->line, at, sizeof(at));
		/* a key whose every address was refused was reported at its
		 * line: "has no backend" would only say it again */
		if (!r->nlisten && !(r->given & ROUTE_GAVE_LISTEN)) {
			fprintf(stderr, c->file[0] ? "%sroute '%s' has no listen address\n"
						   : "%sno listener: give -l ADDRESS (see --help)\n",
				at, r->name);
			bad++;
		}
		if (!r->nbackend && !(r->given & ROUTE_GAVE_BACKEND)) {
			fprintf(stderr, c->file[0] ? "%sroute '%s' has no backend\n"
						   : "%sno backend: give at least one -b ADDRESS (see --help)\n",
				at, r->name);
			bad++;
		}
		for (unsigned l = 0; l < r->nlisten; l++)
			for (unsigned j = 0; j <= i; j++) {
				const struct route *q = c->route[j];
				for (unsigned m = 0; m < (j == i ? l : q->nlisten); m++) {
					if (!listen_clash(&r->listen[l], &q->listen[m]))
						continue;
					/* the same address in two routes: one shared
					 * socket (config_listen.c says when that works) */
					if (j != i && r->listen[l].len == q->listen[m].len &&
					    !memcmp(&r->listen[l].ss, &q->listen[m].ss, r->listen[l].len))
						continue;
					where(c, r->listen_line[l], at, sizeof(at));
					if (q->listen_line[m])
						fprintf(stderr, "%slisten %s clashes with %s of route '%s' "
							"(%s)\n", at, r->listen[l].text,
							q->listen[m].text, q->name,
							config_line_ref(c, q->listen_line[m], ref,
									sizeof(ref)));
					else
						fprintf(stderr, "%slisten %s given twice\n", at,
							r->listen[l].text);
					bad++;
				}
			}
		bad += check_loops(c, r);
		bad += check_backups(c, r);
		bad += route_keys_check(c, r);
	}
	return bad ? -1 : 0;
}

/* "FILE:LINE: " of a [global] setting the file set, else "splicer: ". */
static void where_global(const struct config *c, const char *name, char *buf, size_t len)
{
	where(c, c->set_line[setting_find(name) - settings], buf, len);
}

/* The stats address: parsed, and apart from every listener. */
static int check_stats(struct config *c)
{
	char why[256], at[300], line[320] = "", ref[300];

	if (!strcmp(c->stats, "off"))
		return 0;
	where_global(c, "stats", at, sizeof(at));
	if (addr_parse(c->stats, ADDR_LISTEN, &c->stats_addr, why, sizeof(why))) {
		fprintf(stderr, "%sstats: %s\n", at, why);
		return 1;
	}
	for (unsigned i = 0; i < c->nroutes; i++)
		for (unsigned l = 0; l < c->route[i]->nlisten; l++)
			if (listen_clash(&c->stats_addr, &c->route[i]->listen[l])) {
				if (c->route[i]->listen_line[l])
					snprintf(line, sizeof(line), " (%s)",
						 config_line_ref(c, c->route[i]->listen_line[l], ref,
								 sizeof(ref)));
				fprintf(stderr, "%sstats %s clashes with listen %s of route '%s'%s\n", at,
					c->stats_addr.text, c->route[i]->listen[l].text, c->route[i]->name,
					line);
				return 1;
			}
	return 0;
}

int config_host_checks = 1;

/* What start would otherwise trip on after binding: the stats address,
 * `user` (exists, and this process can become it), and the access log
 * (opened for append as that user). Returns the number of problems. */
static int check_globals(struct config *c)
{
	char why[512], at[300];
	int bad = check_stats(c);

	if (privs_check_admin_path(c->admin, why, sizeof(why))) {
		where_global(c, "admin", at, sizeof(at));
		fprintf(stderr, "%s%s\n", at, why);
		bad++;
	}
	if (!config_host_checks)
		return bad;
	int user_ok = !privs_check_user(c->user, why, sizeof(why));

	if (!user_ok) {
		where_global(c, "user", at, sizeof(at));
		fprintf(stderr, "%s%s\n", at, why);
		bad++;
	}
	/* without the user, as this process: a missing directory still shows */
	if (access_log_is_file(c->access_log) &&
	    privs_check_append(c->access_log, user_ok ? c->user : "off", why, sizeof(why))) {
		where_global(c, "log", at, sizeof(at));
		fprintf(stderr, "%saccess %s\n", at, why);
		bad++;
	}
	/* a Unix syslog socket must be there at start (syslog_out.h) */
	struct syslog_target t;
	struct stat st;
	int gone;
	if (syslog_target_is(c->access_log) && !syslog_target_parse(c->access_log, &t, why, sizeof(why)) &&
	    !t.udp && t.addr.text[5] == '/' &&
	    ((gone = stat(t.addr.text + 5, &st)) || !S_ISSOCK(st.st_mode))) {
		where_global(c, "log", at, sizeof(at));
		fprintf(stderr, "%slog: %s: %s (start the syslog daemon first)\n", at, t.addr.text + 5,
			gone ? strerror(errno) : "not a socket");
		bad++;
	}
	return bad;
}

int config_finalize(struct config *c)
{
	struct rlimit rl;
	uint64_t budget;
	unsigned nlisteners = 0;
	long cpus;
	int bad = check_routes(c) ? 1 : 0;

	bad += check_globals(c);
	if (bad)
		return -1;
	for (unsigned i = 0; i < c->nroutes; i++) {
		resolve_route_opts(c, c->route[i]);
		for (unsigned b = 0; b < c->route[i]->nbackend; b++)
			c->route[i]->backend[b].this_host = (uint8_t)addr_is_this_host(&c->route[i]->backend[b].addr);
		if (backend_tables_build(c->route[i])) {
			fprintf(stderr, "splicer: out of memory\n");
			return -1;
		}
	}
	for (unsigned i = 0; i < c->nroutes; i++) /* the keys' values as resolved */
		bad += config_pp_check(c, c->route[i]);
	if (bad)
		return -1;
	if (config_listen_groups(c) || config_sockopt_build(c) || route_admit_build(c) ||
	    route_hist_build(c))
		return -1;
	nlisteners = c->nlst;
	if (c->workers == SETTING_AUTO) {
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		c->workers = cpus > 256 ? 256 : cpus > 0 ? (uint64_t)cpus : 1; /* the option's range */
	}
	/* Each session holds two sockets and, while bytes are in flight, up to
	 * two pipes of two descriptors each: split what the fd limit leaves
	 * (after a reserve for listeners, epoll and logs) between them. */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		rl.rlim_cur = 1 << 20;
	budget = rl.rlim_cur > 64 + (8 + nlisteners) * c->workers
			 ? rl.rlim_cur - 64 - (8 + nlisteners) * c->workers : 0;
	if (c->max_conns == SETTING_AUTO)
		c->max_conns = budget / 4 ? budget / 4 : 1;
	if (c->max_pipes == SETTING_AUTO)
		c->max_pipes = budget > 2 * c->max_conns ? (budget - 2 * c->max_conns) / 2 : 0;
	if (2 * c->max_conns + 2 * c->max_pipes > budget)
		fprintf(stderr, "splicer: warning: --max-conns %llu and --max-pipes %llu need up to %llu "
			"descriptors but ulimit -n is %llu; raise the limit (ulimit -n, LimitNOFILE=) "
			"or lower them\n", (unsigned long long)c->max_conns,
			(unsigned long long)c->max_pipes,
			(unsigned long long)(2 * c->max_conns + 2 * c->max_pipes + 64),
			(unsigned long long)rl.rlim_cur);
	return 0;
}

void config_print_help(const char *prog)
{
	char range[512], optname[48];

	printf("splicer %s: a layer-4 TCP forwarding proxy with splice() engines\n\n"
	       "usage: %s -l LISTEN -b BACKEND [-b BACKEND ...] [options]\n"
	       "       %s -c FILE [options]          routes from a config file (options override it)\n"
	       "       %s check -c FILE              preflight a config: FILE:LINE: message per problem\n"
	       "                                     (user, log file as that user, addresses bound once;\n"
	       "                                     --syntax-only: the file alone, not this host)\n"
	       "       %s ctl [-s SOCKET | -c FILE] COMMAND   the admin API (splicer ctl help)\n"
	       "       %s bench [--quick] ...     measure the engines beside HAProxy, nginx, socat\n"
	       "       %s demo [--size SIZE] [--engines LIST]   a stream through each engine, checked\n"
	       "       %s recv [--method splice|vmsplice|copy] LISTEN FILE   a stream into a file\n"
	       "       %s send [--method sendfile|splice|copy] FILE ADDRESS  a file into a socket\n\n"
	       "addresses: host:port (a name: every address it resolves to, at start and at each\n"
	       "           reload), [v6addr]:port, :port (every IPv4 address), *:port (every address,\n"
	       "           IPv4 and IPv6), unix:/path, unix:@abstract\n\n"
	       "  -l, --listen ADDRESS            accept clients here (repeatable)\n"
	       "  -b, --backend ADDRESS           forward to these, round-robin, trying the next on\n"
	       "                                  connect failure (repeatable)\n"
	       "  -c, --config FILE               INI file: [global] with the options below as keys,\n"
	       "                                  [route NAME] with those marked \"per route\" and\n"
	       "                                  these keys of the file only (splicer.conf(5)):\n",
	       SPLICER_VERSION, prog, prog, prog, prog, prog, prog, prog, prog);
	config_doc_help_route_keys(stdout, 36, 80);
	for (unsigned i = 0; i < nsettings; i++) {
		const struct setting *s = &settings[i];
		const char *meta = setting_kind(s) ? setting_kind(s)->meta : s->type == SET_ENUM ? "NAME"
				   : s->type == SET_SIZE ? "SIZE" : s->type == SET_DURATION ? "DURATION"
				   : s->type == SET_TEXT ? "WHERE" : "N";
		if (s->short_opt)
			snprintf(optname, sizeof(optname), "-%c, --%s %s", s->short_opt, s->name, meta);
		else
			snprintf(optname, sizeof(optname), "    --%s %s", s->name, meta);
		range_text(s, range, sizeof(range));
		printf("  %-30s  %s\n  %-30s  [default %s; %s%s]\n", optname, s->help, "", s->def, range,
		       s->scope == SCOPE_ROUTE ? "; per route" : "");
	}
	printf("  -v, -vv, -v N                   as --verbose 1, --verbose 2, --verbose N; after -v or\n"
	       "                                  --verbose, an all-digit argument is the level\n"
	       "  -h, --help                      this text\n"
	       "      --version                   print the version\n");
}
