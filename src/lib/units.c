/* SPDX-License-Identifier: MIT */
/* units: number parsing with suffixes, strict (no atoi): the whole string
 * must be consumed, overflow is reported, negative numbers are rejected. */
#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Reads the leading decimal digits of s; *end points past them. */
static int parse_digits(const char *s, uint64_t *v, const char **end)
{
	uint64_t acc = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (acc > (UINT64_MAX - d) / 10)
			return -ERANGE;
		acc = acc * 10 + d;
	}
	*v = acc;
	*end = p;
	return 0;
}

static int mul_checked(uint64_t v, uint64_t m, uint64_t *out)
{
	if (m && v > UINT64_MAX / m)
		return -ERANGE;
	*out = v * m;
	return 0;
}

int parse_uint(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int r = parse_digits(s, &v, &end);

	if (r)
		return r;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v, mult = 1;
	int r = parse_digits(s, &v, &end);

	if (r)
		return r;
	switch (tolower((unsigned char)*end)) {
	case '\0': break;
	case 'k': mult = 1ULL << 10; end++; break;
	case 'm': mult = 1ULL << 20; end++; break;
	case 'g': mult = 1ULL << 30; end++; break;
	case 'b': break;
	default: return -EINVAL;
	}
	if (mult > 1 && (!strcasecmp(end, "ib") || !strcasecmp(end, "b")))
		end += strlen(end);
	else if (mult == 1 && !strcasecmp(end, "b"))
		end++;
	if (*end)
		return -EINVAL;
	return mul_checked(v, mult, out);
}

int parse_duration_ms(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v, mult;
	int r = parse_digits(s, &v, &end);

	if (r)
		return r;
	if (!*end)
		return v ? -EDOM : (*out = 0, 0);
	if (!strcasecmp(end, "s"))
		mult = 1000;
	else if (!strcasecmp(end, "ms"))
		mult = 1;
	else if (!strcasecmp(end, "m"))
		mult = 60 * 1000;
	else if (!strcasecmp(end, "h"))
		mult = 3600 * 1000;
	else
		return -EINVAL;
	return mul_checked(v, mult, out);
}

void format_size(uint64_t v, char *buf, unsigned len)
{
	if (v && !(v % (1ULL << 30)))
		snprintf(buf, len, "%llug", (unsigned long long)(v >> 30));
	else if (v && !(v % (1ULL << 20)))
		snprintf(buf, len, "%llum", (unsigned long long)(v >> 20));
	else if (v && !(v % (1ULL << 10)))
		snprintf(buf, len, "%lluk", (unsigned long long)(v >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

void format_duration_ms(uint64_t ms, char *buf, unsigned len)
{
	if (ms && !(ms % 3600000))
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms && !(ms % 60000))
		snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
	else if (!(ms % 1000))
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
}
