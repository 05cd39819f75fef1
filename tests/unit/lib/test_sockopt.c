/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/sockopt.c: the parsers of the socket settings
 * (keepalive triples, rates, source pools, interface names), the source
 * pick of a pool and the appliers on real sockets (getsockopt back). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "sockopt.h"

Test(unit_sockopt, keepalive_parse)
{
	char why[256];
	uint64_t v = 1;
	struct sock_ka ka;

	cr_assert_eq(sockopt_parse_keepalive("off", &v, why, sizeof why), 0);
	cr_expect_eq(v, 0);
	cr_assert_eq(sockopt_parse_keepalive("60s,10s,5", &v, why, sizeof why), 0, "%s", why);
	ka = sockopt_ka_unpack(v);
	cr_expect(ka.on && ka.idle_s == 60 && ka.intvl_s == 10 && ka.cnt == 5);
	cr_assert_eq(sockopt_parse_keepalive(" 2m , 1s , 127 ", &v, why, sizeof why), 0, "%s", why);
	ka = sockopt_ka_unpack(v);
	cr_expect(ka.idle_s == 120 && ka.intvl_s == 1 && ka.cnt == 127);
	/* units required, whole seconds, ranges, three parts */
	cr_expect_eq(sockopt_parse_keepalive("60,10,5", &v, why, sizeof why), -1);
	cr_expect(strstr(why, "needs a unit"), "%s", why);
	cr_expect_eq(sockopt_parse_keepalive("1500ms,1s,3", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_keepalive("60s,10s,0", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_keepalive("60s,10s,128", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_keepalive("40000s,10s,3", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_keepalive("60s,10s", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_keepalive("60s,10s,3,4", &v, why, sizeof why), -1);
}

Test(unit_sockopt, rate_parse_and_format)
{
	char why[256], t[64];
	uint64_t v;

	cr_assert_eq(sockopt_parse_rate("10mbit", &v, why, sizeof why), 0, "%s", why);
	cr_expect_eq(v, 1250000);
	cr_assert_eq(sockopt_parse_rate("1.5gbit", &v, why, sizeof why), 0, "%s", why);
	cr_expect_eq(v, 187500000);
	cr_assert_eq(sockopt_parse_rate("2MB", &v, why, sizeof why), 0, "%s", why);
	cr_expect_eq(v, 2000000);
	cr_assert_eq(sockopt_parse_rate("800kbit/source", &v, why, sizeof why), 0, "%s", why);
	cr_expect_eq(v, 100000 | SOCKOPT_RATE_PER_SOURCE);
	sockopt_format_rate(v, t, sizeof t);
	cr_expect_str_eq(t, "800kbit/source");
	sockopt_format_rate(187500000, t, sizeof t);
	cr_expect_str_eq(t, "1.5gbit");
	cr_assert_eq(sockopt_parse_rate("0", &v, why, sizeof why), 0);
	cr_expect_eq(v, 0);
	cr_expect_eq(sockopt_parse_rate("10", &v, why, sizeof why), -1);   /* a unit is required */
	cr_expect_eq(sockopt_parse_rate("10mbps", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_rate("1bit", &v, why, sizeof why), -1);  /* below 8kbit */
	cr_expect_eq(sockopt_parse_rate("10mbit/client", &v, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_rate("-5mbit", &v, why, sizeof why), -1);
}

Test(unit_sockopt, source_parse_and_pick)
{
	struct sock_source s;
	struct sock_ip ip;
	struct sockaddr_in6 c6 = { .sin6_family = AF_INET6 };
	char why[256], t[64];
	unsigned seen[3] = { 0 };

	cr_assert_eq(sockopt_parse_source("10.0.0.5 10.0.0.6,[2001:db8::5] 10.0.0.7", &s, why,
					  sizeof why), 0, "%s", why);
	cr_expect_eq(s.n, 4);
	cr_expect_eq(sockopt_source_count(&s, AF_INET), 3);
	cr_expect_eq(sockopt_source_count(&s, AF_INET6), 1);
	/* round robin over the family's addresses */
	for (unsigned i = 0; i < 30; i++) {
		cr_assert_eq(sockopt_source_pick(&s, AF_INET, i, NULL, &ip), 1);
		seen[ip.b[3] - 5]++;
	}
	cr_expect(seen[0] == 10 && seen[1] == 10 && seen[2] == 10);
	cr_assert_eq(sockopt_source_pick(&s, AF_INET6, 7, NULL, &ip), 1);
	sockopt_ip_format(&ip, t, sizeof t);
	cr_expect_str_eq(t, "2001:db8::5");
	/* client: a v4-mapped client is IPv4; another family is refused */
	cr_assert_eq(sockopt_parse_source("client", &s, why, sizeof why), 0);
	inet_pton(AF_INET6, "::ffff:192.0.2.9", &c6.sin6_addr);
	cr_assert_eq(sockopt_source_pick(&s, AF_INET, 0, (struct sockaddr *)&c6, &ip), 1);
	sockopt_ip_format(&ip, t, sizeof t);
	cr_expect_str_eq(t, "192.0.2.9");
	cr_expect_eq(sockopt_source_pick(&s, AF_INET6, 0, (struct sockaddr *)&c6, &ip),
		     -EAFNOSUPPORT);
	/* refusals */
	cr_expect_eq(sockopt_parse_source("client 10.0.0.1", &s, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_source("10.0.0.1:80", &s, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_source("host.example", &s, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_source("0.0.0.0", &s, why, sizeof why), -1);
	cr_expect_eq(sockopt_parse_source("10.0.0.1 10.0.0.1", &s, why, sizeof why), -1);
	cr_expect_eq(sockopt_check_iface("vrf-blue", why, sizeof why), 0);
	cr_expect_eq(sockopt_check_iface("a/b", why, sizeof why), -1);
	cr_expect_eq(sockopt_check_iface("sixteen-chars-xx", why, sizeof why), -1);
}

static int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof v;

	cr_assert_eq(getsockopt(fd, level, name, &v, &l), 0, "getsockopt: %s", strerror(errno));
	return v;
}

/* What sockopt_apply sets is what getsockopt reads back; a kept socket
 * (fresh 0) goes back to the defaults when the options are taken away. */
Test(unit_sockopt, apply_reads_back)
{
	struct sock_opts o = { .tos = 0x10, .ka = { .on = 1, .idle_s = 7, .intvl_s = 3, .cnt = 4 },
			       .user_timeout_ms = 2500, .pacing = 125000 };
	char why[160];
	unsigned long rate = 0;
	socklen_t l = sizeof rate;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(sockopt_apply(fd, AF_INET, &o, 1, why, sizeof why), 0, "%s", why);
	cr_expect_eq(get_int(fd, IPPROTO_IP, IP_TOS), 0x10);
	cr_expect_eq(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	cr_expect_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), 7);
	cr_expect_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL), 3);
	cr_expect_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT), 4);
	cr_expect_eq(get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 2500);
	cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &l), 0);
	cr_expect_eq(rate, 125000);
	memset(&o, 0, sizeof o);
	cr_assert_eq(sockopt_apply(fd, AF_INET, &o, 0, why, sizeof why), 0, "%s", why);
	cr_expect_eq(get_int(fd, IPPROTO_IP, IP_TOS), 0);
	cr_expect_eq(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	cr_expect_eq(get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
	close(fd);
}
