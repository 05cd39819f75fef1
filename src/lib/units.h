/* SPDX-License-Identifier: MIT */
/* units: parse sizes ("64k", "1m") and durations ("500ms", "5s", "10m").
 * Both return 0 on success or -EINVAL (not a number / bad suffix) or
 * -ERANGE (overflow); *out is only written on success. */
#ifndef SPLICER_UNITS_H
#define SPLICER_UNITS_H
#include <stdint.h>

/* "4096", "64k", "1m", "2g" (binary multiples, case-insensitive, optional
 * trailing 'b'/"ib": "64kb", "1MiB"). */
int parse_size(const char *s, uint64_t *out);

/* "250ms", "5s", "10m", "1h". Result in ms. A number without a unit is
 * -EDOM, except "0" (off, or nothing to wait, in every unit): a bare number
 * meant seconds once, and `idle_timeout = 30000` written with HAProxy's
 * milliseconds in mind became 8.3 hours without a word. */
int parse_duration_ms(const char *s, uint64_t *out);

/* Unsigned decimal integer with no suffix. */
int parse_uint(const char *s, uint64_t *out);

/* Human-readable forms for --help and logs: "64k", "1m", "5s", "10m". */
void format_size(uint64_t v, char *buf, unsigned len);
void format_duration_ms(uint64_t ms, char *buf, unsigned len);

#endif
