/* SPDX-License-Identifier: MIT */
/* cidr: address ranges for a route's `allow` and `deny`, and the one way
 * splicer reads a client's IP address (also the source table's key).
 *
 * Forms: "10.0.0.0/8", "2001:db8::/32", and bare addresses ("10.1.2.3" is
 * /32, "2001:db8::1" is /128). An IPv4-mapped IPv6 client (::ffff:a.b.c.d,
 * on a dual-stack [::] listener) is the IPv4 client a.b.c.d: IPv4 rules
 * match it, and a rule written as ::ffff:a.b.c.d/96+N is read as the IPv4
 * rule a.b.c.d/N. Otherwise an IPv4 rule matches only IPv4 clients and an
 * IPv6 rule only IPv6 clients (::/0 does not let in all of IPv4). A client
 * that is not IP (a Unix socket) matches no rule.
 *
 * Host bits set ("10.0.0.1/8") are accepted as HAProxy and nginx accept
 * them: the range is 10.0.0.0/8, and cidr_parse() says so in its warning
 * for `check` to print, since it is often a typo for a /32. */
#ifndef SPLICER_CIDR_H
#define SPLICER_CIDR_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CIDR_TEXT_MAX 64 /* "ffff:...:ffff/128" and a NUL */

/* An IP address as splicer compares it: IPv4 (and v4-mapped IPv6) as the
 * 4 bytes in a[0..4), IPv6 as 16 bytes. */
struct ip {
	uint8_t a[16];
	uint8_t v4; /* 1: IPv4, in a[0..4) */
};

struct cidr {
	struct ip ip;  /* host bits cleared */
	uint8_t plen;  /* 0..32 for IPv4, 0..128 for IPv6 */
};

/* The IP address of sa (AF_INET, AF_INET6; v4-mapped IPv6 becomes IPv4).
 * Returns false for any other family. */
bool ip_from_sockaddr(const struct sockaddr *sa, struct ip *ip);

/* Parses one range. Returns 0, or -1 with a sentence in err ("bad prefix
 * length 33 for IPv4 (0..32)", "'10.0.0/8' is not an IPv4 or IPv6
 * address", ...). warn (may be NULL) is set to "" or to a sentence that
 * check prints (host bits set). */
int cidr_parse(const char *s, struct cidr *c, char *err, size_t errlen, char *warn,
	       size_t warnlen);

/* Whether ip is inside c. */
bool cidr_match(const struct cidr *c, const struct ip *ip);

/* Writes c as "10.0.0.0/8" or "2001:db8::/32". */
void cidr_format(const struct cidr *c, char *buf, size_t buflen);

/* A route's allow and deny lists. An empty allow list lets every source in;
 * deny wins over allow. Lookup is a scan of the lists: they are short. */
struct cidr_list {
	struct cidr *v;
	size_t n;
};

struct acl {
	struct cidr_list allow, deny;
};

/* Appends the ranges of value (separated by spaces, tabs or commas) to *l.
 * Returns 0, or -1 with err naming the first bad one (nothing is appended
 * then). warn (may be NULL) gets the first warning. */
int cidr_list_parse(struct cidr_list *l, const char *value, char *err, size_t errlen, char *warn,
		    size_t warnlen);

void cidr_list_free(struct cidr_list *l);

bool cidr_list_match(const struct cidr_list *l, const struct ip *ip);

/* Whether the ACL lets ip in: not in deny, and in allow (or allow empty). */
bool acl_allows(const struct acl *acl, const struct ip *ip);

/* The same for a client address: a non-IP client is let in only when the
 * allow list is empty. */
bool acl_allows_sockaddr(const struct acl *acl, const struct sockaddr *sa);

#endif
