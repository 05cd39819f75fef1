/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/cidr.c: range parsing and its messages, host bits,
 * v4-mapped clients, and the allow/deny decision. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#include "cidr.h"

static struct cidr parse_ok(const char *s, char *warn)
{
	struct cidr c;
	char err[256];
	cr_assert_eq(cidr_parse(s, &c, err, sizeof err, warn, 256), 0, "'%s': %s", s, err);
	return c;
}

static void parse_bad(const char *s, const char *want)
{
	struct cidr c;
	char err[256];
	cr_assert_eq(cidr_parse(s, &c, err, sizeof err, NULL, 0), -1, "'%s' accepted", s);
	cr_assert(strstr(err, want), "'%s': '%s' does not say '%s'", s, err, want);
}

static struct ip ip_of(const char *s)
{
	struct sockaddr_storage ss = { 0 };
	struct ip ip;
	if (strchr(s, ':')) {
		struct sockaddr_in6 *s6 = (void *)&ss;
		s6->sin6_family = AF_INET6;
		cr_assert_eq(inet_pton(AF_INET6, s, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (void *)&ss;
		s4->sin_family = AF_INET;
		cr_assert_eq(inet_pton(AF_INET, s, &s4->sin_addr), 1);
	}
	cr_assert(ip_from_sockaddr((void *)&ss, &ip));
	return ip;
}

static bool in(const char *range, const char *addr)
{
	struct cidr c = parse_ok(range, NULL);
	struct ip ip = ip_of(addr);
	return cidr_match(&c, &ip);
}

Test(unit_cidr, forms_and_formatting)
{
	char warn[256], out[64];
	struct cidr c;

	c = parse_ok("10.0.0.0/8", warn);
	cr_assert_str_empty(warn);
	cidr_format(&c, out, sizeof out);
	cr_assert_str_eq(out, "10.0.0.0/8");
	c = parse_ok("2001:db8::/32", warn);
	cidr_format(&c, out, sizeof out);
	cr_assert_str_eq(out, "2001:db8::/32");
	c = parse_ok("192.0.2.7", warn);
	cr_assert_eq(c.plen, 32, "a bare IPv4 address is a /32");
	c = parse_ok("2001:db8::1", warn);
	cr_assert_eq(c.plen, 128, "a bare IPv6 address is a /128");
	c = parse_ok("0.0.0.0/0", warn);
	cr_assert_eq(c.plen, 0);
	c = parse_ok("::ffff:10.1.0.0/112", warn);
	cidr_format(&c, out, sizeof out);
	cr_assert_str_eq(out, "10.1.0.0/16", "a v4-mapped range is the IPv4 range");
}

Test(unit_cidr, host_bits_are_cleared_with_a_warning)
{
	char warn[256], out[64];
	struct cidr c = parse_ok("10.1.2.3/8", warn);

	cidr_format(&c, out, sizeof out);
	cr_assert_str_eq(out, "10.0.0.0/8");
	cr_assert(strstr(warn, "host bits set: it means 10.0.0.0/8"), "%s", warn);
	c = parse_ok("2001:db8::1/64", warn);
	cr_assert(strstr(warn, "2001:db8::/64"), "%s", warn);
	c = parse_ok("10.1.3.0/23", warn);
	cr_assert(strstr(warn, "10.1.2.0/23"), "a set bit inside the prefix byte: %s", warn);
	parse_ok("10.1.2.0/24", warn);
	cr_assert_str_empty(warn);
}

Test(unit_cidr, errors_are_specific)
{
	parse_bad("10.0.0.0/33", "bad prefix length 33 for IPv4 (0..32)");
	parse_bad("2001:db8::/129", "bad prefix length 129 for IPv6 (0..128)");
	parse_bad("10.0.0.0/", "must be a number");
	parse_bad("10.0.0.0/-1", "must be a number");
	parse_bad("10.0.0.0/08", "must be a number");
	parse_bad("10.0.0.0/ 8", "must be a number");
	parse_bad("10.0.0/8", "'10.0.0' is not an IPv4 or IPv6 address");
	parse_bad("10.0.0.256", "not an IPv4 or IPv6 address");
	parse_bad("fe80::1%eth0", "not an IPv4 or IPv6 address");
	parse_bad("example.com/24", "not an IPv4 or IPv6 address");
	parse_bad("/8", "not an IPv4 or IPv6 address");
	parse_bad("", "not an IPv4 or IPv6 address");
}

Test(unit_cidr, matching_and_v4_mapped_clients)
{
	cr_assert(in("10.0.0.0/8", "10.255.0.1"));
	cr_assert(!in("10.0.0.0/8", "11.0.0.1"));
	cr_assert(in("10.0.0.0/8", "::ffff:10.9.8.7"), "a v4-mapped client meets IPv4 rules");
	cr_assert(!in("10.0.0.0/8", "::a00:1"), "an IPv6 client with the same bytes does not");
	cr_assert(!in("::/0", "10.0.0.1"), "::/0 is all of IPv6, not IPv4 too");
	cr_assert(in("::/0", "2001:db8::5"));
	cr_assert(in("2001:db8::/32", "2001:db8:ffff::1"));
	cr_assert(!in("2001:db8::/32", "2001:db9::1"));
	cr_assert(in("10.1.2.0/23", "10.1.3.255"));
	cr_assert(!in("10.1.2.0/23", "10.1.4.0"));
	cr_assert(in("0.0.0.0/0", "192.0.2.1"));
	cr_assert(in("192.0.2.7", "192.0.2.7"));
	cr_assert(!in("192.0.2.7", "192.0.2.6"));
	cr_assert(in("::ffff:10.0.0.0/104", "10.3.3.3"));
}

Test(unit_cidr, allow_and_deny)
{
	struct acl acl = { 0 };
	char err[256], warn[256];
	struct sockaddr_un un = { .sun_family = AF_UNIX };

	struct ip a = ip_of("10.1.1.1"), b = ip_of("10.9.1.1"), c = ip_of("192.0.2.1"),
		  d = ip_of("2001:db8::1"), e = ip_of("::ffff:10.9.0.1");
	cr_assert(acl_allows(&acl, &c), "empty lists let everyone in");
	cr_assert(acl_allows_sockaddr(&acl, (void *)&un));
	cr_assert_eq(cidr_list_parse(&acl.allow, "10.0.0.0/8 2001:db8::/32", err, sizeof err, warn,
				     sizeof warn), 0, "%s", err);
	cr_assert_eq(cidr_list_parse(&acl.deny, "10.9.0.0/16", err, sizeof err, warn, sizeof warn), 0);
	cr_assert(acl_allows(&acl, &a));
	cr_assert(!acl_allows(&acl, &b), "deny wins over allow");
	cr_assert(!acl_allows(&acl, &e), "also for a v4-mapped client");
	cr_assert(!acl_allows(&acl, &c), "not in allow");
	cr_assert(acl_allows(&acl, &d));
	cr_assert(!acl_allows_sockaddr(&acl, (void *)&un), "a Unix client matches no allow rule");
	cidr_list_free(&acl.allow);
	cr_assert(!acl_allows(&acl, &b), "deny alone");
	cr_assert(acl_allows(&acl, &c));
	cidr_list_free(&acl.deny);
}

Test(unit_cidr, lists)
{
	struct cidr_list l = { 0 };
	char err[256], warn[256];

	cr_assert_eq(cidr_list_parse(&l, " 10.0.0.0/8,192.0.2.1\t2001:db8::/33 ", err, sizeof err,
				     warn, sizeof warn), 0, "%s", err);
	cr_assert_eq(l.n, 3);
	cr_assert_str_empty(warn);
	cr_assert_eq(cidr_list_parse(&l, "172.16.0.0/12 10.0.0.0/33", err, sizeof err, warn,
				     sizeof warn), -1);
	cr_assert_eq(l.n, 3, "nothing of a bad list is kept");
	cr_assert(strstr(err, "bad prefix length 33"), "%s", err);
	cr_assert_eq(cidr_list_parse(&l, "  ", err, sizeof err, warn, sizeof warn), -1);
	cr_assert(strstr(err, "empty"), "%s", err);
	cr_assert_eq(cidr_list_parse(&l, "172.16.0.1/12", err, sizeof err, warn, sizeof warn), 0);
	cr_assert(strstr(warn, "172.16.0.0/12"), "%s", warn);
	cr_assert_eq(l.n, 4);
	char longone[200];
	memset(longone, '1', sizeof longone - 1);
	longone[sizeof longone - 1] = '\0';
	cr_assert_eq(cidr_list_parse(&l, longone, err, sizeof err, warn, sizeof warn), -1);
	cidr_list_free(&l);
}
