#ifndef WHARF_UNITS_H
#define WHARF_UNITS_H
/* units: sizes and times, as numbers and as text for people, and the
 * monotonic clock. */
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

/* "4M", "512k", "10G", "123" (bytes; binary multiples) -> bytes.
 * @return 0, or -EINVAL for anything else (negative, overflow, junk). */
int parse_size(const char *s, uint64_t *out) WHARF_CHECK;

/* "10m", "90s", "2h", "1d", "500ms", "45" (seconds) -> milliseconds.
 * @return 0, or -EINVAL for anything else (negative, overflow, junk). */
int parse_duration(const char *s, uint64_t *ms) WHARF_CHECK;

/* Formats bytes as "1.5 GiB" into buf; returns buf. */
const char *format_size(uint64_t bytes, char *buf, size_t len);
/* Formats an age in seconds as "3d4h", "2h10m", "5m12s" or "40s" (a
 * negative one, from a clock set back, as "0s"); returns buf. */
const char *format_age(int64_t seconds, char *buf, size_t len);
/* Formats epoch seconds as an HTTP date (RFC 9110, "Sun, 06 Nov 1994
 * 08:49:37 GMT", English whatever the locale) into buf (30 bytes do).
 * @return buf, or NULL when t is out of range or len too small. */
const char *format_http_date(int64_t t, char *buf, size_t len);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);

#endif
