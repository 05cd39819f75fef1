/* SPDX-License-Identifier: MIT */
/* config_pp: see config_pp.h. */
#define _GNU_SOURCE
#include "config_pp.h"

#include <stdio.h>
#include <string.h>

#include "config_listen.h"
#include "proxy_tlv.h"

/* Each word of v (separated by spaces or commas) to fn; "none" alone is
 * the empty list. Returns 0, or fn's -1. */
static int words(const char *v, int (*fn)(const char *w, uint64_t *acc, char *why, size_t len),
		 uint64_t *acc, char *why, size_t len)
{
	char copy[SETTING_TEXT_MAX], *save, *w;

	if (!strcmp(v, "none"))
		return 0;
	snprintf(copy, sizeof(copy), "%s", v);
	if (!strtok_r(copy, " \t,", &save)) {
		snprintf(why, len, "empty value (expects none or a list)");
		return -1;
	}
	snprintf(copy, sizeof(copy), "%s", v);
	for (w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save))
		if (fn(w, acc, why, len))
			return -1;
	return 0;
}

static int tlv_word(const char *w, uint64_t *acc, char *why, size_t len)
{
	uint64_t bit = !strcmp(w, "authority") ? PP_SEND_AUTHORITY : !strcmp(w, "alpn") ? PP_SEND_ALPN
		       : !strcmp(w, "unique_id") ? PP_SEND_UNIQUE_ID : !strcmp(w, "crc32c") ? PP_SEND_CRC32C : 0;

	if (!bit) {
		snprintf(why, len, "'%s' is not a TLV splicer sends (expects none, or any of "
			 "authority, alpn, unique_id, crc32c)", w);
		return -1;
	}
	if (*acc & bit) {
		snprintf(why, len, "'%s' given twice", w);
		return -1;
	}
	*acc |= bit;
	return 0;
}

static int tlvs_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	uint64_t acc = 0;

	if (words(v, tlv_word, &acc, why, len))
		return -1;
	if (out)
		*out = acc;
	return 0;
}

/* acc: unused by the check; the set is built by config_pp_resolve. */
static int pass_word(const char *w, uint64_t *acc, char *why, size_t len)
{
	int t = proxy_tlv_type(w);

	(void)acc;
	if (!strcmp(w, "all") || !strcmp(w, "none")) {
		snprintf(why, len, "'%s' stands alone (expects none, all, or a list of types)", w);
		return -1;
	}
	if (t < 0) {
		snprintf(why, len, "'%s' is not a TLV type (expects a name: alpn, authority, "
			 "unique_id, ssl, netns; or a number 0-255, as 0xe0)", w);
		return -1;
	}
	if (t == PP2_TYPE_CRC32C || t == PP2_TYPE_NOOP) {
		snprintf(why, len, "'%s' is never passed on: %s", w, t == PP2_TYPE_CRC32C
			 ? "a checksum of the client's header, not of the one sent (use "
			   "proxy_protocol_tlvs = crc32c for one of splicer's own)"
			 : "padding of the client's header");
		return -1;
	}
	return 0;
}

static int pass_parse(const char *v, uint64_t *out, char *why, size_t len)
{
	(void)out;
	if (!strcmp(v, "all"))
		return 0;
	return words(v, pass_word, NULL, why, len);
}

const struct setting_kind kind_pp_tlvs = {
	"NAME ...", "TLV names",
	"none, or any of authority, alpn, unique_id, crc32c, separated by spaces or commas",
	tlvs_parse,
};
const struct setting_kind kind_pp_pass = {
	"none|all|TYPE ...", "TLV types",
	"none; all; or TLV types separated by spaces or commas, each a name (alpn, authority, "
	"unique_id, ssl, netns) or a number 0-255 (0xe0-0xef: the custom range); crc32c and "
	"noop are never passed",
	pass_parse,
};

void config_pp_resolve(struct route *r)
{
	char copy[SETTING_TEXT_MAX], *save, *w;

	memset(&r->pp_pass, 0, sizeof(r->pp_pass));
	if (!strcmp(r->o.pp_pass_text, "all")) {
		memset(&r->pp_pass, 0xff, sizeof(r->pp_pass));
		r->pp_pass.bits[0] &= ~(1ULL << PP2_TYPE_CRC32C | 1ULL << PP2_TYPE_NOOP);
		return;
	}
	if (!strcmp(r->o.pp_pass_text, "none"))
		return;
	snprintf(copy, sizeof(copy), "%s", r->o.pp_pass_text);
	for (w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save))
		if (proxy_tlv_type(w) >= 0)
			pp_types_add(&r->pp_pass, (unsigned)proxy_tlv_type(w));
}

/* The line of a route setting: its section's, else [global]'s. */
static unsigned line_of(const struct config *c, const struct route *r, const char *name)
{
	unsigned k = (unsigned)(setting_find(name) - settings);

	return r->key_line[k] ? r->key_line[k] : c->set_line[k] ? c->set_line[k] : r->line;
}

int config_pp_check(const struct config *c, const struct route *r)
{
	static const char *const version[] = { "off", "v1", "v2" };
	char at[300];
	int bad = 0;

	if (r->o.pp_tlvs && r->o.proxy_protocol != 2) {
		config_where(c, line_of(c, r, "proxy-protocol-tlvs"), at, sizeof(at));
		fprintf(stderr, "%sroute '%s': proxy_protocol_tlvs needs proxy_protocol = v2 (it is "
			"%s): TLVs exist only in the binary header\n", at, r->name,
			version[r->o.proxy_protocol % 3]);
		bad++;
	}
	if (strcmp(r->o.pp_pass_text, "none") && (r->o.proxy_protocol != 2 || !r->o.accept_proxy)) {
		config_where(c, line_of(c, r, "proxy-protocol-pass"), at, sizeof(at));
		fprintf(stderr, "%sroute '%s': proxy_protocol_pass needs %s: it passes the TLVs of "
			"the PROXY v2 header a client sends on to the backend's\n", at, r->name,
			r->o.accept_proxy ? "proxy_protocol = v2" : !(r->o.proxy_protocol == 2)
			? "accept_proxy = yes and proxy_protocol = v2" : "accept_proxy = yes");
		bad++;
	}
	return bad;
}
