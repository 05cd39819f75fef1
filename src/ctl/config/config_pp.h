/* SPDX-License-Identifier: MIT */
/* config_pp: the PROXY v2 TLV settings of a route (proxy_tlv.h):
 * proxy_protocol_tlvs (which fields splicer sends) and proxy_protocol_pass
 * (which fields of a client's own PROXY v2 header go on to the backend):
 * their value kinds for the settings table, the set of types pass stands
 * for, and the checks that need more than one key. */
#ifndef SPLICER_CONFIG_PP_H
#define SPLICER_CONFIG_PP_H
#include "config.h"
#include "config_table.h"

extern const struct setting_kind kind_pp_tlvs, kind_pp_pass;

/* r->pp_pass from r->o.pp_pass_text (checked when it was read). */
void config_pp_resolve(struct route *r);

/* proxy_protocol_tlvs without proxy_protocol = v2, proxy_protocol_pass
 * without v2 or without accept_proxy: each printed as FILE:LINE: at the
 * key's line. Returns how many. */
int config_pp_check(const struct config *c, const struct route *r);

#endif
