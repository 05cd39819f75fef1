/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/units.c: parse_size, parse_duration_ms, parse_uint and
 * the format_* helpers. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "units.h"

/* Marks *out before a parse so a failed parse can be shown not to write it. */
#define UNITS_SENTINEL UINT64_C(0xdeadbeefcafef00d)

typedef int (*units_parse_fn)(const char *, uint64_t *);

static void expect_ok(units_parse_fn fn, const char *name, const char *s, uint64_t want)
{
	uint64_t v = UNITS_SENTINEL;
	int r = fn(s, &v);

	cr_expect_eq(r, 0, "%s(\"%s\") returned %d, want 0", name, s, r);
	cr_expect_eq(v, want, "%s(\"%s\") gave %llu, want %llu", name, s,
		     (unsigned long long)v, (unsigned long long)want);
}

static void expect_err(units_parse_fn fn, const char *name, const char *s, int want)
{
	uint64_t v = UNITS_SENTINEL;
	int r = fn(s, &v);

	cr_expect_eq(r, want, "%s(\"%s\") returned %d, want %d", name, s, r, want);
	cr_expect_eq(v, UNITS_SENTINEL, "%s(\"%s\") failed but wrote %llu to *out", name, s,
		     (unsigned long long)v);
}

/* ---- parse_size ---- */

Test(unit_units, size_plain_and_suffixes)
{
	expect_ok(parse_size, "parse_size", "4096", 4096);
	expect_ok(parse_size, "parse_size", "0", 0);
	expect_ok(parse_size, "parse_size", "64k", 64ULL << 10);
	expect_ok(parse_size, "parse_size", "64K", 64ULL << 10);
	expect_ok(parse_size, "parse_size", "1m", 1ULL << 20);
	expect_ok(parse_size, "parse_size", "1M", 1ULL << 20);
	expect_ok(parse_size, "parse_size", "2g", 2ULL << 30);
	expect_ok(parse_size, "parse_size", "2G", 2ULL << 30);
	expect_ok(parse_size, "parse_size", "0k", 0);
}

Test(unit_units, size_byte_suffixes)
{
	expect_ok(parse_size, "parse_size", "64kb", 64ULL << 10);
	expect_ok(parse_size, "parse_size", "64KB", 64ULL << 10);
	expect_ok(parse_size, "parse_size", "1MiB", 1ULL << 20);
	expect_ok(parse_size, "parse_size", "1mib", 1ULL << 20);
	expect_ok(parse_size, "parse_size", "3GiB", 3ULL << 30);
	expect_ok(parse_size, "parse_size", "512b", 512);
	expect_ok(parse_size, "parse_size", "512B", 512);
}

Test(unit_units, size_rejects_garbage)
{
	expect_err(parse_size, "parse_size", "", -EINVAL);
	expect_err(parse_size, "parse_size", "k", -EINVAL);
	expect_err(parse_size, "parse_size", "-1", -EINVAL);
	expect_err(parse_size, "parse_size", "+1", -EINVAL);
	expect_err(parse_size, "parse_size", "1x", -EINVAL);
	expect_err(parse_size, "parse_size", "1.5m", -EINVAL);
	expect_err(parse_size, "parse_size", " 1", -EINVAL);
	expect_err(parse_size, "parse_size", "1 k", -EINVAL);
	expect_err(parse_size, "parse_size", "1k ", -EINVAL);
	expect_err(parse_size, "parse_size", "1kk", -EINVAL);
	expect_err(parse_size, "parse_size", "1kbb", -EINVAL);
	expect_err(parse_size, "parse_size", "1ib", -EINVAL);
	expect_err(parse_size, "parse_size", "1bb", -EINVAL);
	expect_err(parse_size, "parse_size", "1t", -EINVAL);
}

Test(unit_units, size_overflow)
{
	expect_ok(parse_size, "parse_size", "18446744073709551615", UINT64_MAX);
	expect_err(parse_size, "parse_size", "18446744073709551616", -ERANGE);
	expect_err(parse_size, "parse_size", "99999999999999999999", -ERANGE);
	expect_err(parse_size, "parse_size", "20000000000g", -ERANGE);
	/* 2^34 g is exactly 2^64: one past the top. */
	expect_err(parse_size, "parse_size", "17179869184g", -ERANGE);
	expect_ok(parse_size, "parse_size", "17179869183g", UINT64_C(17179869183) << 30);
	expect_err(parse_size, "parse_size", "18014398509481984k", -ERANGE);
}

/* ---- parse_duration_ms ---- */

Test(unit_units, duration_units)
{
	expect_ok(parse_duration_ms, "parse_duration_ms", "250ms", 250);
	expect_ok(parse_duration_ms, "parse_duration_ms", "5s", 5000);
	expect_ok(parse_duration_ms, "parse_duration_ms", "10m", 600000);
	expect_ok(parse_duration_ms, "parse_duration_ms", "1h", 3600000);
	expect_ok(parse_duration_ms, "parse_duration_ms", "0", 0);
	expect_ok(parse_duration_ms, "parse_duration_ms", "0ms", 0);
	expect_ok(parse_duration_ms, "parse_duration_ms", "2H", 7200000);
	expect_ok(parse_duration_ms, "parse_duration_ms", "7MS", 7);
}

Test(unit_units, duration_rejects_garbage)
{
	expect_err(parse_duration_ms, "parse_duration_ms", "5x", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "ms", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "-5s", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "5 s", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "5sec", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "1.5s", -EINVAL);
	expect_err(parse_duration_ms, "parse_duration_ms", "5ss", -EINVAL);
}

/* A bare number once meant seconds: 30000 (HAProxy's milliseconds) became
 * 8.3 hours. Now it is refused (-EDOM, for the caller's suggestion), but 0
 * (off, in any unit). */
Test(unit_units, duration_needs_a_unit_but_zero)
{
	expect_err(parse_duration_ms, "parse_duration_ms", "5", -EDOM);
	expect_err(parse_duration_ms, "parse_duration_ms", "30000", -EDOM);
	expect_err(parse_duration_ms, "parse_duration_ms", "1", -EDOM);
	expect_ok(parse_duration_ms, "parse_duration_ms", "0", 0);
	expect_ok(parse_duration_ms, "parse_duration_ms", "000", 0);
	expect_err(parse_duration_ms, "parse_duration_ms", "99999999999999999999", -ERANGE);
}

Test(unit_units, duration_overflow)
{
	expect_ok(parse_duration_ms, "parse_duration_ms", "18446744073709551615ms", UINT64_MAX);
	expect_err(parse_duration_ms, "parse_duration_ms", "18446744073709551616ms", -ERANGE);
	/* UINT64_MAX / 1000 = 18446744073709551, so one more second overflows. */
	expect_ok(parse_duration_ms, "parse_duration_ms", "18446744073709551s",
		  UINT64_C(18446744073709551000));
	expect_err(parse_duration_ms, "parse_duration_ms", "18446744073709552s", -ERANGE);
	expect_err(parse_duration_ms, "parse_duration_ms", "18446744073709552", -EDOM);
	expect_err(parse_duration_ms, "parse_duration_ms", "9999999999999999h", -ERANGE);
}

/* ---- parse_uint ---- */

Test(unit_units, uint_ok)
{
	expect_ok(parse_uint, "parse_uint", "0", 0);
	expect_ok(parse_uint, "parse_uint", "42", 42);
	expect_ok(parse_uint, "parse_uint", "007", 7);
	expect_ok(parse_uint, "parse_uint", "18446744073709551615", UINT64_MAX);
}

Test(unit_units, uint_rejects)
{
	expect_err(parse_uint, "parse_uint", "", -EINVAL);
	expect_err(parse_uint, "parse_uint", "-1", -EINVAL);
	expect_err(parse_uint, "parse_uint", "+1", -EINVAL);
	expect_err(parse_uint, "parse_uint", " 1", -EINVAL);
	expect_err(parse_uint, "parse_uint", "1 ", -EINVAL);
	expect_err(parse_uint, "parse_uint", "64k", -EINVAL);
	expect_err(parse_uint, "parse_uint", "0x10", -EINVAL);
	expect_err(parse_uint, "parse_uint", "18446744073709551616", -ERANGE);
	expect_err(parse_uint, "parse_uint", "99999999999999999999", -ERANGE);
}

/* ---- format_size / format_duration_ms ---- */

static void expect_size_text(uint64_t v, const char *want)
{
	char buf[32];

	memset(buf, 'X', sizeof(buf));
	format_size(v, buf, sizeof(buf));
	cr_expect_str_eq(buf, want, "format_size(%llu) = \"%s\", want \"%s\"",
			 (unsigned long long)v, buf, want);
}

static void expect_duration_text(uint64_t ms, const char *want)
{
	char buf[32];

	memset(buf, 'X', sizeof(buf));
	format_duration_ms(ms, buf, sizeof(buf));
	cr_expect_str_eq(buf, want, "format_duration_ms(%llu) = \"%s\", want \"%s\"",
			 (unsigned long long)ms, buf, want);
}

Test(unit_units, format_size_text)
{
	expect_size_text(0, "0");
	expect_size_text(1, "1");
	expect_size_text(1000, "1000");
	expect_size_text(1023, "1023");
	expect_size_text(1024, "1k");
	expect_size_text(64 << 10, "64k");
	expect_size_text(1536, "1536");
	expect_size_text(1 << 20, "1m");
	expect_size_text(1536 << 10, "1536k");
	expect_size_text(2ULL << 30, "2g");
	expect_size_text(UINT64_MAX, "18446744073709551615");
}

Test(unit_units, format_duration_text)
{
	expect_duration_text(0, "0s");
	expect_duration_text(1, "1ms");
	expect_duration_text(250, "250ms");
	expect_duration_text(1500, "1500ms");
	expect_duration_text(5000, "5s");
	expect_duration_text(90000, "90s");
	expect_duration_text(600000, "10m");
	expect_duration_text(5400000, "90m");
	expect_duration_text(3600000, "1h");
	expect_duration_text(7200000, "2h");
}

Test(unit_units, format_truncates_to_buffer)
{
	char buf[3];

	memset(buf, 'X', sizeof(buf));
	format_size(123456, buf, sizeof(buf));
	cr_expect_str_eq(buf, "12");
	memset(buf, 'X', sizeof(buf));
	format_duration_ms(250, buf, sizeof(buf));
	cr_expect_str_eq(buf, "25");
}

static const uint64_t units_samples[] = {
	0, 1, 7, 999, 1000, 1023, 1024, 1025, 1500, 4096, 5000, 60000, 65536, 90000,
	600000, 1 << 20, 3600000, 5400000, 1ULL << 30, 3ULL << 30, 86400000,
	UINT64_C(17179869183) << 30, UINT64_C(18446744073709551000),
	UINT64_MAX / 3600000 * 3600000, UINT64_MAX - 1, UINT64_MAX,
};

Test(unit_units, format_size_round_trip)
{
	for (size_t i = 0; i < sizeof(units_samples) / sizeof(units_samples[0]); i++) {
		char buf[32];
		uint64_t v = UNITS_SENTINEL;
		int r;

		format_size(units_samples[i], buf, sizeof(buf));
		r = parse_size(buf, &v);
		cr_expect_eq(r, 0, "parse_size(format_size(%llu) = \"%s\") returned %d",
			     (unsigned long long)units_samples[i], buf, r);
		cr_expect_eq(v, units_samples[i], "round trip %llu -> \"%s\" -> %llu",
			     (unsigned long long)units_samples[i], buf, (unsigned long long)v);
	}
}

Test(unit_units, format_duration_round_trip)
{
	for (size_t i = 0; i < sizeof(units_samples) / sizeof(units_samples[0]); i++) {
		char buf[32];
		uint64_t v = UNITS_SENTINEL;
		int r;

		format_duration_ms(units_samples[i], buf, sizeof(buf));
		r = parse_duration_ms(buf, &v);
		cr_expect_eq(r, 0, "parse_duration_ms(format_duration_ms(%llu) = \"%s\") returned %d",
			     (unsigned long long)units_samples[i], buf, r);
		cr_expect_eq(v, units_samples[i], "round trip %llu -> \"%s\" -> %llu",
			     (unsigned long long)units_samples[i], buf, (unsigned long long)v);
	}
}
