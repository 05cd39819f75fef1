/* SPDX-License-Identifier: MIT */
/* route_keys: sni, alpn, allow and deny in a [route] (route_keys.h). */
#define _GNU_SOURCE
#include "route_keys.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cidr.h"
#include "config_listen.h"
#include "sni_match.h"

int route_text_key(const char *name)
{
	return !strcmp(name, "sni") || !strcmp(name, "alpn") || !strcmp(name, "allow") ||
	       !strcmp(name, "deny");
}

/* "a.example.com" or "*.example.com" (one or more labels before it). */
static int sni_check(const char *w, char *why, size_t len)
{
	char err[300];

	if (sni_pattern_valid(w, err, sizeof(err)))
		return 0;
	snprintf(why, len, "sni %s", err);
	return -1;
}

static int alpn_check(const char *w, char *why, size_t len)
{
	if (strlen(w) > 255) {
		snprintf(why, len, "alpn '%.40s...': a protocol name is at most 255 bytes", w);
		return -1;
	}
	return 0;
}

/* Appends word to list (space-separated), unless it is there already. */
static int append(char *list, size_t cap, const char *word, const char *key, int nocase,
		  char *why, size_t len)
{
	char copy[SETTING_TEXT_MAX * 4], *save, *t;
	size_t n = strlen(list);

	snprintf(copy, sizeof(copy), "%s", list);
	for (t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
		if (nocase ? !strcasecmp(t, word) : !strcmp(t, word)) {
			snprintf(why, len, "%s: '%s' given twice", key, word);
			return -1;
		}
	if (n + !!n + strlen(word) + 1 > cap) {
		snprintf(why, len, "%s: the list is longer than %zu bytes", key, cap - 1);
		return -1;
	}
	snprintf(list + n, cap - n, "%s%s", n ? " " : "", word);
	return 0;
}

int route_text_set(struct route *r, const char *name, const char *value, unsigned line,
		   char *why, size_t len, char *note, size_t notelen)
{
	char words[SETTING_TEXT_MAX * 4], *save, *w;
	int sni = !strcmp(name, "sni"), alpn = !strcmp(name, "alpn");
	char *list = sni ? r->sni : alpn ? r->alpn : name[0] == 'a' ? r->allow : r->deny;
	size_t cap = sni ? sizeof(r->sni) : alpn ? sizeof(r->alpn) : sizeof(r->allow);
	unsigned *at = sni ? &r->sni_line : alpn ? &r->alpn_line
			  : name[0] == 'a' ? &r->allow_line : &r->deny_line;

	if (strlen(value) >= sizeof(words)) {
		snprintf(why, len, "%s: the value is longer than %zu bytes", name, sizeof(words) - 1);
		return -1;
	}
	snprintf(words, sizeof(words), "%s", value);
	for (w = strtok_r(words, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
		if (sni) {
			for (char *p = w; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			if (sni_check(w, why, len))
				return -1;
		} else if (alpn) {
			if (alpn_check(w, why, len))
				return -1;
		} else {
			struct cidr c;
			char err[160], warn[160] = "";
			if (cidr_parse(w, &c, err, sizeof(err), warn, sizeof(warn))) {
				snprintf(why, len, "%s: %s", name, err);
				return -1;
			}
			if (warn[0] && !note[0])
				snprintf(note, notelen, "%s: %s", name, warn);
		}
		if (append(list, cap, w, name, sni, why, len))
			return -1;
	}
	if (!*at)
		*at = line;
	return 0;
}

/* Whether range d holds all of range a. */
static int cidr_covers(const struct cidr *d, const struct cidr *a)
{
	return d->ip.v4 == a->ip.v4 && d->plen <= a->plen && cidr_match(d, &a->ip);
}

/* Whether every allow range lies inside one deny range: deny wins, so no
 * client gets in. (A range that only several deny ranges cover together
 * is not found: that is rare, and this is a note.) */
static int acl_admits_nobody(const struct route *r)
{
	struct cidr_list allow = { 0 }, deny = { 0 };
	char err[160];
	int nobody = 0;

	if (!r->allow[0] || !r->deny[0] ||
	    cidr_list_parse(&allow, r->allow, err, sizeof(err), NULL, 0) ||
	    cidr_list_parse(&deny, r->deny, err, sizeof(err), NULL, 0))
		goto out;
	nobody = 1;
	for (size_t i = 0; i < allow.n && nobody; i++) {
		int covered = 0;
		for (size_t j = 0; j < deny.n && !covered; j++)
			covered = cidr_covers(&deny.v[j], &allow.v[i]);
		nobody = covered;
	}
out:
	cidr_list_free(&allow);
	cidr_list_free(&deny);
	return nobody;
}

int route_keys_check(const struct config *c, const struct route *r)
{
	char at[300];
	int bad = 0;

	if (r->alpn[0] && !r->sni[0]) {
		config_where(c, r->alpn_line, at, sizeof(at));
		fprintf(stderr, "%salpn needs sni in the same route: route '%s' has no sni, so it "
			"takes every client of its listeners that no sni route takes, whatever it "
			"offers\n", at, r->name);
		bad++;
	}
	if (acl_admits_nobody(r)) {
		config_where(c, r->deny_line, at, sizeof(at));
		char ref[300];
		fprintf(stderr, "%snote: deny covers every range of allow (%s), and deny wins: "
			"route '%s' lets no client in\n", at,
			config_line_ref(c, r->allow_line, ref, sizeof(ref)), r->name);
	}
	return bad;
}
