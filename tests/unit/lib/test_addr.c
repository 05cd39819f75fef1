/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/addr.c: addr_parse for every address form (and the
 * error sentences of the bad ones), addr_format and addr_is_inet. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"

#define ADDR_ERR_LEN 512

/* Parses s, which must succeed; returns the result in *a. */
static void parse_ok(const char *s, enum addr_use use, struct addr *a)
{
	char err[ADDR_ERR_LEN] = "";
	int r = addr_parse(s, use, a, err, sizeof(err));

	cr_assert_eq(r, 0, "addr_parse(\"%s\", %s) returned %d: %s", s,
		     use == ADDR_LISTEN ? "LISTEN" : "CONNECT", r, err);
}

/* Parses s, which must fail with -EINVAL and an error sentence containing
 * frag and, unless it is NULL, frag2. */
static void parse_bad(const char *s, enum addr_use use, const char *frag, const char *frag2)
{
	struct addr a;
	char err[ADDR_ERR_LEN];
	int r;

	memset(err, 0, sizeof(err));
	r = addr_parse(s, use, &a, err, sizeof(err));
	cr_assert_eq(r, -EINVAL, "addr_parse(\"%s\", %s) returned %d, want -EINVAL (text '%s')",
		     s, use == ADDR_LISTEN ? "LISTEN" : "CONNECT", r, a.text);
	cr_expect(strstr(err, frag) != NULL, "error for \"%s\" is \"%s\", want it to contain \"%s\"",
		  s, err, frag);
	if (frag2)
		cr_expect(strstr(err, frag2) != NULL,
			  "error for \"%s\" is \"%s\", want it to contain \"%s\"", s, err, frag2);
}

static void expect_in4(const struct addr *a, const char *ip, unsigned port)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&a->ss;
	char got[INET_ADDRSTRLEN] = "";

	cr_assert_eq(a->ss.ss_family, AF_INET, "family %d, want AF_INET", a->ss.ss_family);
	cr_expect_eq(a->len, sizeof(struct sockaddr_in), "len %u", (unsigned)a->len);
	inet_ntop(AF_INET, &sin->sin_addr, got, sizeof(got));
	cr_expect_str_eq(got, ip, "address %s, want %s", got, ip);
	cr_expect_eq(ntohs(sin->sin_port), port, "port %u, want %u", ntohs(sin->sin_port), port);
}

static void expect_in6(const struct addr *a, const char *ip, unsigned port)
{
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&a->ss;
	struct in6_addr want;

	cr_assert_eq(a->ss.ss_family, AF_INET6, "family %d, want AF_INET6", a->ss.ss_family);
	cr_expect_eq(a->len, sizeof(struct sockaddr_in6), "len %u", (unsigned)a->len);
	cr_assert_eq(inet_pton(AF_INET6, ip, &want), 1);
	cr_expect(!memcmp(&sin6->sin6_addr, &want, sizeof(want)), "address is not %s", ip);
	cr_expect_eq(ntohs(sin6->sin6_port), port, "port %u, want %u", ntohs(sin6->sin6_port), port);
}

static void make_sun(struct sockaddr_un *sun, const char *path, size_t n)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, n);
}

static void expect_format(const void *sa, socklen_t len, const char *want)
{
	char buf[ADDR_TEXT_MAX];

	memset(buf, 'X', sizeof(buf));
	addr_format(sa, len, buf, sizeof(buf));
	cr_expect_str_eq(buf, want, "addr_format gave \"%s\", want \"%s\"", buf, want);
}

/* ---- the good forms ---- */

Test(unit_addr, ipv4_with_port)
{
	struct addr a;

	parse_ok("127.0.0.1:80", ADDR_CONNECT, &a);
	expect_in4(&a, "127.0.0.1", 80);
	cr_expect_str_eq(a.text, "127.0.0.1:80");
	cr_expect(addr_is_inet(&a));

	parse_ok("10.1.2.3:65535", ADDR_LISTEN, &a);
	expect_in4(&a, "10.1.2.3", 65535);
	cr_expect_str_eq(a.text, "10.1.2.3:65535");
}

Test(unit_addr, ipv4_port_zero_for_listen)
{
	struct addr a;

	parse_ok("127.0.0.1:0", ADDR_LISTEN, &a);
	expect_in4(&a, "127.0.0.1", 0);
	cr_expect_str_eq(a.text, "127.0.0.1:0");
}

Test(unit_addr, hostname_resolves_to_loopback)
{
	struct addr a;

	parse_ok("localhost:8080", ADDR_CONNECT, &a);
	cr_assert(addr_is_inet(&a), "family %d", a.ss.ss_family);
	/* First getaddrinfo() result: 127.0.0.1 on most systems, ::1 on some. */
	if (a.ss.ss_family == AF_INET) {
		expect_in4(&a, "127.0.0.1", 8080);
		cr_expect_str_eq(a.text, "127.0.0.1:8080");
	} else {
		expect_in6(&a, "::1", 8080);
		cr_expect_str_eq(a.text, "[::1]:8080");
	}
}

Test(unit_addr, ipv6_with_port)
{
	struct addr a;

	parse_ok("[::1]:443", ADDR_CONNECT, &a);
	expect_in6(&a, "::1", 443);
	cr_expect_str_eq(a.text, "[::1]:443");
	cr_expect(addr_is_inet(&a));
}

Test(unit_addr, ipv6_text_is_canonical)
{
	struct addr a;

	parse_ok("[0:0:0:0:0:0:0:1]:443", ADDR_CONNECT, &a);
	expect_in6(&a, "::1", 443);
	cr_expect_str_eq(a.text, "[::1]:443");

	parse_ok("[2001:DB8:0::1]:8080", ADDR_CONNECT, &a);
	expect_in6(&a, "2001:db8::1", 8080);
	cr_expect_str_eq(a.text, "[2001:db8::1]:8080");
}

Test(unit_addr, ipv6_any_port_zero_for_listen)
{
	struct addr a;

	parse_ok("[::]:0", ADDR_LISTEN, &a);
	expect_in6(&a, "::", 0);
	cr_expect_str_eq(a.text, "[::]:0");
}

Test(unit_addr, port_only_listen_is_any)
{
	struct addr a;

	parse_ok(":8080", ADDR_LISTEN, &a);
	expect_in4(&a, "0.0.0.0", 8080);
	cr_expect_str_eq(a.text, "0.0.0.0:8080");
}

Test(unit_addr, port_only_connect_is_loopback)
{
	struct addr a;

	parse_ok(":8080", ADDR_CONNECT, &a);
	expect_in4(&a, "127.0.0.1", 8080);
	cr_expect_str_eq(a.text, "127.0.0.1:8080");
}

Test(unit_addr, port_only_zero_for_listen)
{
	struct addr a;

	parse_ok(":0", ADDR_LISTEN, &a);
	expect_in4(&a, "0.0.0.0", 0);
	cr_expect_str_eq(a.text, "0.0.0.0:0");
}

Test(unit_addr, unix_path)
{
	struct addr a;
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&a.ss;

	parse_ok("unix:/tmp/x.sock", ADDR_LISTEN, &a);
	cr_assert_eq(a.ss.ss_family, AF_UNIX);
	cr_expect_str_eq(sun->sun_path, "/tmp/x.sock");
	/* Path plus its terminating NUL. */
	cr_expect_eq(a.len, offsetof(struct sockaddr_un, sun_path) + strlen("/tmp/x.sock") + 1,
		     "len %u", (unsigned)a.len);
	cr_expect_str_eq(a.text, "unix:/tmp/x.sock");
	cr_expect(!addr_is_inet(&a));

	parse_ok("unix:relative.sock", ADDR_CONNECT, &a);
	cr_expect_str_eq(sun->sun_path, "relative.sock");
	cr_expect_str_eq(a.text, "unix:relative.sock");
}

Test(unit_addr, unix_path_longest)
{
	char s[5 + 107 + 1];
	struct addr a;
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&a.ss;

	memcpy(s, "unix:/", 6);
	memset(s + 6, 'p', 106);
	s[5 + 107] = '\0';
	parse_ok(s, ADDR_LISTEN, &a);
	cr_assert_eq(a.ss.ss_family, AF_UNIX);
	cr_expect_eq(strnlen(sun->sun_path, sizeof(sun->sun_path)), 107);
	cr_expect_eq(a.len, sizeof(struct sockaddr_un), "len %u", (unsigned)a.len);
	cr_expect_str_eq(a.text, s);
}

Test(unit_addr, unix_abstract)
{
	struct addr a;
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&a.ss;

	parse_ok("unix:@abstract", ADDR_LISTEN, &a);
	cr_assert_eq(a.ss.ss_family, AF_UNIX);
	cr_expect_eq(sun->sun_path[0], '\0', "abstract name must start with NUL");
	cr_expect(!memcmp(sun->sun_path + 1, "abstract", 8), "name is '%.8s'", sun->sun_path + 1);
	/* Leading NUL + 8 name bytes, no trailing NUL. */
	cr_expect_eq(a.len, offsetof(struct sockaddr_un, sun_path) + 1 + 8, "len %u",
		     (unsigned)a.len);
	cr_expect_str_eq(a.text, "unix:@abstract");
	cr_expect(!addr_is_inet(&a));
}

Test(unit_addr, unix_sockets_actually_bind)
{
	/* The lengths addr_parse computes are accepted by the kernel, and
	 * getsockname() comes back formatted as the same text. */
	struct addr a;
	struct sockaddr_storage got;
	socklen_t glen = sizeof(got);
	char name[64], text[ADDR_TEXT_MAX];
	int fd;

	/* Unique per process: concurrent runs must not collide. */
	snprintf(name, sizeof(name), "unix:@splicer-unit-addr-%d", (int)getpid());
	parse_ok(name, ADDR_LISTEN, &a);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a.ss, a.len), 0, "bind: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&got, &glen), 0);
	cr_expect_eq(glen, a.len);
	addr_format((struct sockaddr *)&got, glen, text, sizeof(text));
	cr_expect_str_eq(text, name);
	cr_expect_str_eq(a.text, name);
	close(fd);
}

/* ---- the bad forms ---- */

Test(unit_addr, bad_missing_port_part)
{
	parse_bad("127.0.0.1", ADDR_CONNECT, "'127.0.0.1'", "missing ':port'");
	parse_bad("localhost", ADDR_LISTEN, "'localhost'", "missing ':port'");
	parse_bad("", ADDR_LISTEN, "missing ':port'", NULL);
}

Test(unit_addr, bad_empty_port)
{
	parse_bad("127.0.0.1:", ADDR_CONNECT, "'127.0.0.1:'", "missing port");
	parse_bad(":", ADDR_LISTEN, "missing port", NULL);
	parse_bad("[::1]:", ADDR_CONNECT, "missing port", NULL);
}

Test(unit_addr, bad_port_not_a_number)
{
	parse_bad("1.2.3.4:http", ADDR_CONNECT, "port 'http' is not a number", NULL);
	parse_bad("1.2.3.4:80x", ADDR_CONNECT, "port '80x' is not a number", NULL);
	parse_bad("1.2.3.4:-1", ADDR_CONNECT, "port '-1' is not a number", NULL);
	parse_bad("1.2.3.4:+80", ADDR_CONNECT, "not a number", NULL);
	parse_bad("1.2.3.4: 80", ADDR_CONNECT, "not a number", NULL);
	parse_bad("1.2.3.4:0x50", ADDR_CONNECT, "not a number", NULL);
}

Test(unit_addr, bad_port_out_of_range)
{
	parse_bad("1.2.3.4:70000", ADDR_CONNECT, "70000", "out of range 0..65535");
	parse_bad("1.2.3.4:65536", ADDR_LISTEN, "65536", "out of range");
	parse_bad("[::1]:99999999999999999999999", ADDR_LISTEN, "out of range", NULL);
}

Test(unit_addr, bad_port_zero_for_connect)
{
	parse_bad("1.2.3.4:0", ADDR_CONNECT, "port 0", "listener");
	parse_bad(":0", ADDR_CONNECT, "port 0", "listener");
	parse_bad("[::1]:0", ADDR_CONNECT, "port 0", "listener");
}

Test(unit_addr, bad_ipv6_without_brackets)
{
	parse_bad("::1:80", ADDR_CONNECT, "'::1:80'", "need brackets");
	parse_bad("fe80::1:80", ADDR_LISTEN, "need brackets", NULL);
}

Test(unit_addr, bad_ipv6_bracket_forms)
{
	parse_bad("[::1]80", ADDR_CONNECT, "expected ':port' after ']'", NULL);
	parse_bad("[::1]", ADDR_CONNECT, "expected ':port' after ']'", NULL);
	parse_bad("[::1", ADDR_CONNECT, "missing ']'", NULL);
	parse_bad("[]:80", ADDR_CONNECT, "bad IPv6 address", NULL);
	/* Bracketed hosts are numeric only: no DNS lookup. */
	parse_bad("[localhost]:80", ADDR_CONNECT, "cannot resolve 'localhost'", NULL);
	parse_bad("[::g]:80", ADDR_CONNECT, "cannot resolve '::g'", NULL);
}

Test(unit_addr, bad_unix_empty)
{
	parse_bad("unix:", ADDR_LISTEN, "'unix:'", "empty Unix socket path");
}

Test(unit_addr, bad_unix_too_long)
{
	char s[5 + 200 + 1];

	memcpy(s, "unix:/", 6);
	memset(s + 6, 'a', 199);
	s[205] = '\0';
	parse_bad(s, ADDR_LISTEN, "Unix socket path longer than 107 bytes", NULL);

	/* One past the longest accepted path (see unix_path_longest). */
	memset(s + 6, 'b', 107);
	s[5 + 108] = '\0';
	parse_bad(s, ADDR_LISTEN, "longer than 107 bytes", NULL);
}

Test(unit_addr, bad_host_name_too_long)
{
	char s[300 + 4];

	memset(s, 'h', 300);
	memcpy(s + 300, ":80", 4);
	parse_bad(s, ADDR_CONNECT, "host name too long", NULL);
}

Test(unit_addr, bad_unresolvable_host)
{
	parse_bad("no-such-host.invalid:80", ADDR_CONNECT, "cannot resolve 'no-such-host.invalid'",
		  NULL);
}

/* ---- addr_format ---- */

Test(unit_addr, format_inet)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(80);
	sin.sin_addr.s_addr = htonl(0x01020304);
	expect_format(&sin, sizeof(sin), "1.2.3.4:80");

	sin.sin_port = htons(65535);
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	expect_format(&sin, sizeof(sin), "0.0.0.0:65535");
}

Test(unit_addr, format_inet6)
{
	struct sockaddr_in6 sin6;

	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(80);
	sin6.sin6_addr = in6addr_loopback;
	expect_format(&sin6, sizeof(sin6), "[::1]:80");

	cr_assert_eq(inet_pton(AF_INET6, "2001:db8::42", &sin6.sin6_addr), 1);
	sin6.sin6_port = htons(8443);
	expect_format(&sin6, sizeof(sin6), "[2001:db8::42]:8443");

	cr_assert_eq(inet_pton(AF_INET6, "::ffff:1.2.3.4", &sin6.sin6_addr), 1);
	sin6.sin6_port = htons(1);
	expect_format(&sin6, sizeof(sin6), "[::ffff:1.2.3.4]:1");
}

Test(unit_addr, format_unix_path)
{
	struct sockaddr_un sun;
	socklen_t base = offsetof(struct sockaddr_un, sun_path);

	make_sun(&sun, "/run/x.sock", 11);
	/* With the trailing NUL, without it, and padded to the full struct. */
	expect_format(&sun, base + 12, "unix:/run/x.sock");
	expect_format(&sun, base + 11, "unix:/run/x.sock");
	expect_format(&sun, sizeof(sun), "unix:/run/x.sock");
	/* A length shorter than the path cuts it. */
	expect_format(&sun, base + 4, "unix:/run");
}

Test(unit_addr, format_unix_abstract)
{
	struct sockaddr_un sun;
	socklen_t base = offsetof(struct sockaddr_un, sun_path);

	make_sun(&sun, "\0abstract", 9);
	expect_format(&sun, base + 9, "unix:@abstract");
	expect_format(&sun, base + 4, "unix:@abs");
}

Test(unit_addr, format_unix_unnamed)
{
	struct sockaddr_un sun;

	make_sun(&sun, "", 0);
	expect_format(&sun, sizeof(sa_family_t), "unix:");
	expect_format(&sun, offsetof(struct sockaddr_un, sun_path), "unix:");
	expect_format(&sun, 0, "unix:");
}

Test(unit_addr, format_unnamed_from_socketpair)
{
	int sv[2];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char buf[ADDR_TEXT_MAX];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(getsockname(sv[0], (struct sockaddr *)&ss, &len), 0);
	addr_format((struct sockaddr *)&ss, len, buf, sizeof(buf));
	cr_expect_str_eq(buf, "unix:");
	close(sv[0]);
	close(sv[1]);
}

Test(unit_addr, format_unknown_family)
{
	struct sockaddr sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_family = AF_APPLETALK;
	expect_format(&sa, sizeof(sa), "family-5");
}

Test(unit_addr, format_truncates_to_buffer)
{
	struct sockaddr_in sin;
	char buf[8];

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(80);
	sin.sin_addr.s_addr = htonl(0x7f000001);
	memset(buf, 'X', sizeof(buf));
	addr_format((struct sockaddr *)&sin, sizeof(sin), buf, sizeof(buf));
	cr_expect_str_eq(buf, "127.0.0");
}

Test(unit_addr, text_reparses_to_same_address)
{
	static const char *const forms[] = {
		"127.0.0.1:80", "[::1]:443", ":8080", "[2001:db8::7]:1", "unix:/tmp/x.sock",
		"unix:@abstract", "localhost:8080",
	};

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct addr a, b;

		parse_ok(forms[i], ADDR_CONNECT, &a);
		parse_ok(a.text, ADDR_CONNECT, &b);
		cr_expect_str_eq(b.text, a.text, "\"%s\" -> \"%s\" -> \"%s\"", forms[i], a.text,
				 b.text);
		cr_expect_eq(b.len, a.len, "\"%s\": len %u then %u", forms[i], (unsigned)a.len,
			     (unsigned)b.len);
		cr_expect(!memcmp(&b.ss, &a.ss, a.len), "\"%s\": sockaddr differs after reparse",
			  forms[i]);
	}
}

Test(unit_addr, is_inet)
{
	struct addr a;

	memset(&a, 0, sizeof(a));
	a.ss.ss_family = AF_INET;
	cr_expect_eq(addr_is_inet(&a), 1);
	a.ss.ss_family = AF_INET6;
	cr_expect_eq(addr_is_inet(&a), 1);
	a.ss.ss_family = AF_UNIX;
	cr_expect_eq(addr_is_inet(&a), 0);
	a.ss.ss_family = AF_UNSPEC;
	cr_expect_eq(addr_is_inet(&a), 0);
}

Test(unit_addr, brackets_refuse_ipv4)
{
	parse_bad("[127.0.0.1]:80", ADDR_CONNECT, "cannot resolve", "127.0.0.1");
}

Test(unit_addr, unix_abstract_may_fill_sun_path)
{
	struct addr a;
	char s[8 + 108];

	memcpy(s, "unix:@", 6);
	memset(s + 6, 'a', 107);
	s[6 + 107] = '\0';
	parse_ok(s, ADDR_LISTEN, &a);
	cr_assert_eq(a.len, offsetof(struct sockaddr_un, sun_path) + 108);
	s[6 + 107] = 'a';
	s[6 + 108] = '\0';
	parse_bad(s, ADDR_LISTEN, "longer than 107", NULL);
}

Test(unit_addr, unix_abstract_empty_is_refused)
{
	parse_bad("unix:@", ADDR_LISTEN, "empty Unix socket path", NULL);
}

Test(unit_addr, ipv6_scope_survives_the_text)
{
	struct addr a, b;

	parse_ok("[fe80::1%lo]:80", ADDR_CONNECT, &a);
	cr_assert_str_eq(a.text, "[fe80::1%lo]:80");
	parse_ok(a.text, ADDR_CONNECT, &b);
	cr_assert_eq(((struct sockaddr_in6 *)&b.ss)->sin6_scope_id,
		     ((struct sockaddr_in6 *)&a.ss)->sin6_scope_id);
	cr_assert_neq(((struct sockaddr_in6 *)&a.ss)->sin6_scope_id, 0);
}

/* Found by fuzz/fuzz_addr: a scope on an address that is not link-local was
 * written as an interface name, which getaddrinfo refuses to read back. */
Test(unit_addr, scope_on_a_global_address_round_trips)
{
	struct addr a, b;

	parse_ok("[0:fe80::1%1]:6", ADDR_CONNECT, &a);
	cr_assert_str_eq(a.text, "[0:fe80::1%1]:6");
	parse_ok(a.text, ADDR_CONNECT, &b);
	cr_assert_eq(a.len, b.len);
	cr_assert(!memcmp(&a.ss, &b.ss, a.len));
}

/* Issue 12, item 17: [::ffff:127.0.0.1]:P as a listen address failed at
 * bind() with only "Invalid argument" (IPv6 listeners are IPv6-only). It is
 * refused at parse time with the IPv4 form to write; as a backend it still
 * connects (an IPv6 socket reaches the IPv4 address). */
Test(unit_addr, bad_v4_mapped_listen_names_the_ipv4_form)
{
	struct addr a;
	char err[ADDR_ERR_LEN] = "";

	cr_assert_eq(addr_parse("[::ffff:127.0.0.1]:8080", ADDR_LISTEN, &a, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "address '[::ffff:127.0.0.1]:8080': an IPv4-mapped IPv6 address cannot "
			      "be listened on; write 127.0.0.1:8080");
	parse_ok("[::ffff:127.0.0.1]:8080", ADDR_CONNECT, &a);
	expect_in6(&a, "::ffff:127.0.0.1", 8080);
}

/* Issue 12, defect 13: addr_loops_to() finds a backend that reaches the
 * listener itself: the same address, or a wildcard listener's port on an
 * address of this host (loopback, or an interface's from getifaddrs). */
Test(unit_addr, loops_to_own_listener)
{
	struct addr l, b;
	struct ifaddrs *ifa, *i;
	char text[80], ip[INET_ADDRSTRLEN];

	parse_ok("127.0.0.1:7000", ADDR_LISTEN, &l);
	parse_ok("127.0.0.1:7000", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_SAME);
	parse_ok("[::ffff:127.0.0.1]:7000", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_SAME, "v4-mapped is the IPv4 address");
	parse_ok(":7000", ADDR_LISTEN, &l);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_LOCAL);
	parse_ok("198.51.100.77:7000", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_NONE, "not an address of this host");
	parse_ok("127.0.0.1:7001", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_NONE, "another port");
	parse_ok(":0", ADDR_LISTEN, &l);
	parse_ok("127.0.0.1:1", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_NONE, "port 0 is the kernel's pick");
	parse_ok("unix:@x", ADDR_LISTEN, &l);
	parse_ok("unix:@x", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_SAME);
	parse_ok("unix:@xy", ADDR_CONNECT, &b);
	cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_NONE);

	/* a non-loopback interface address of this host, if it has one */
	cr_assert_eq(getifaddrs(&ifa), 0);
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			break;
	if (i) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof(ip));
		snprintf(text, sizeof(text), "%s:7000", ip);
		parse_ok(":7000", ADDR_LISTEN, &l);
		parse_ok(text, ADDR_CONNECT, &b);
		cr_assert_eq(addr_loops_to(&b, &l), ADDR_LOOP_LOCAL, "%s is this host's", text);
	}
	freeifaddrs(ifa);
}

/* ---- issue 14: every address a form stands for (addr_parse_all) ---- */

static int have_ipv6(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* "*:port" is both wildcards (it once went to getaddrinfo("*") and listened
 * on [::1] only); ":port" stays the IPv4 one, as HAProxy's "bind :80". */
Test(unit_addr, star_port_is_both_wildcards)
{
	struct addr a[4];
	char err[ADDR_ERR_LEN] = "";
	int n = addr_parse_all("*:8080", ADDR_LISTEN, a, 4, err, sizeof(err));

	cr_assert_eq(n, have_ipv6() ? 2 : 1, "*:8080 gave %d addresses (%s)", n, err);
	expect_in4(&a[0], "0.0.0.0", 8080);
	cr_expect_str_eq(a[0].text, "0.0.0.0:8080");
	if (n == 2) {
		expect_in6(&a[1], "::", 8080);
		cr_expect_str_eq(a[1].text, "[::]:8080");
	}
	cr_assert_eq(addr_parse_all(":8080", ADDR_LISTEN, a, 4, err, sizeof(err)), 1);
	expect_in4(&a[0], "0.0.0.0", 8080);
	/* addr_parse (one address, for the tools) takes the first */
	parse_ok("*:81", ADDR_LISTEN, &a[0]);
	expect_in4(&a[0], "0.0.0.0", 81);
}

Test(unit_addr, star_is_for_listening_only)
{
	parse_bad("*:80", ADDR_CONNECT, "'*' (every address of this host) is for listening", NULL);
	/* getaddrinfo("*") is the loopback: never let it get there */
	parse_bad("[*]:80", ADDR_LISTEN, "'*' is not an IPv6 address", NULL);
}

/* The count is every distinct address even when fewer fit: the caller
 * names how many a name stands for. */
Test(unit_addr, parse_all_counts_beyond_max)
{
	struct addr a[1];
	char err[ADDR_ERR_LEN] = "";
	int n;

	if (!have_ipv6())
		cr_skip_test("no IPv6");
	n = addr_parse_all("*:80", ADDR_LISTEN, a, 1, err, sizeof(err));
	cr_assert_eq(n, 2, "got %d", n);
	expect_in4(&a[0], "0.0.0.0", 80);
	cr_assert_eq(addr_parse_all("[::1]:80", ADDR_CONNECT, a, 1, err, sizeof(err)), 1);
	cr_assert_eq(addr_parse_all("127.0.0.1:80", ADDR_CONNECT, a, 1, err, sizeof(err)), 1);
}

/* A name gives every address the resolver has for it, each once, with
 * numeric text (what /etc/hosts says of localhost here: at least 127.0.0.1). */
Test(unit_addr, name_gives_every_address_once)
{
	struct addr a[8];
	char err[ADDR_ERR_LEN] = "";
	int n = addr_parse_all("localhost:80", ADDR_CONNECT, a, 8, err, sizeof(err)), v4 = 0;

	cr_assert(n >= 1 && n <= 8, "localhost gave %d (%s)", n, err);
	for (int i = 0; i < n; i++) {
		v4 += !strcmp(a[i].text, "127.0.0.1:80");
		for (int j = 0; j < i; j++)
			cr_expect_str_neq(a[i].text, a[j].text, "%s twice", a[i].text);
	}
	cr_expect_eq(v4, 1, "127.0.0.1:80 not among localhost's addresses");
}
