/* SPDX-License-Identifier: MIT */
/* config_sockopt: the settings of a route's sockets (issue 24: keepalive,
 * user timeouts, source addresses, mptcp, fastopen, mark, tos,
 * defer_accept, interface, backlog, rate limits): their value kinds for the
 * settings table, and what config_finalize builds from them (struct route's
 * cli_so, srv_so and src; struct listen_group's lso) with the checks that
 * need more than one key. */
#ifndef SPLICER_CONFIG_SOCKOPT_H
#define SPLICER_CONFIG_SOCKOPT_H
#include "config.h"
#include "config_table.h"

extern const struct setting_kind kind_keepalive, kind_rate, kind_mark, kind_tos, kind_iface,
	kind_source;

/* After the listen groups are built (config_listen_groups): each route's
 * socket options, each group's listener options. Prints every problem as
 * FILE:LINE: (routes that share a listener and disagree on its options,
 * mptcp with an option MPTCP sockets refuse, a source pool without an
 * address of a backend's family; with config_host_checks, an interface
 * that does not exist, a source address not of this host, MPTCP off) and
 * returns how many there were. */
int config_sockopt_build(struct config *c);

/* Why c needs CAP_NET_ADMIN at run time ("mark", "source = client"), or
 * NULL when it does not: the proxy then keeps it after dropping root. */
const char *config_net_admin_need(const struct config *c);

/* A backend line's source= (ADDR or client) into *ip / *client. Returns 0,
 * or -1 with why. */
int config_backend_source(const char *text, struct sock_ip *ip, uint8_t *client, char *why,
			  size_t len);

#endif
