/* units: sizes and times, as numbers and as text for people (parse_size,
 * parse_duration, format_size, format_age, format_http_date) and the
 * monotonic clock (see units.h). */
#include "config.h"

#include "units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v, frac = 0, scale = 1;
	unsigned shift = 0;

	/* A digit first: strtoull would skip white space and take " -1" as
	 * 2^64 - 1. */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	/* A decimal fraction (1.5G): up to 9 digits, kept exact as
	 * frac / scale until the unit is known. */
	if (*end == '.') {
		end++;
		if (*end < '0' || *end > '9')
			return -EINVAL;
		for (; *end >= '0' && *end <= '9'; end++) {
			if (scale >= 1000000000ull)
				return -EINVAL;
			frac = frac * 10 + (unsigned)(*end - '0');
			scale *= 10;
		}
	}
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	/* K, KB and KiB are all 1024: one rule for every SIZE option. */
	if (shift) {
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
	}
	if (*end)
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -EINVAL;
	/* A fraction of a byte is no size: 1.5 and 1.0001K are refused.
	 * frac < 10^9 < 2^30 and shift <= 40: 128 bits hold the product. */
	unsigned __int128 scaled = (unsigned __int128)frac << shift;
	if (scale > 1 && (!shift || scaled % scale))
		return -EINVAL;
	uint64_t bytes = (uint64_t)v << shift;
	uint64_t part = (uint64_t)(scaled / scale);
	if (bytes > UINT64_MAX - part)
		return -EINVAL;
	*out = bytes + part;
	return 0;
}

int parse_duration(const char *s, uint64_t *ms)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = {{"", 1000},   {"s", 1000},	   {"ms", 1},
		     {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcmp(end, units[i].unit))
			continue;
		if (v > UINT64_MAX / units[i].ms)
			return -EINVAL;
		*ms = v * units[i].ms;
		return 0;
	}
	return -EINVAL;
}

const char *format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	unsigned i = 0;

	while (v >= 1024 && i + 1 < ARRAY_SIZE(unit)) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[i]);
	return buf;
}

const char *format_age(int64_t s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s >= 86400)
		snprintf(buf, len, "%lldd%lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, len, "%lldh%lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(buf, len, "%lldm%llds", (long long)(s / 60),
			 (long long)(s % 60));
	else
		snprintf(buf, len, "%llds", (long long)s);
	return buf;
}

const char *format_http_date(int64_t t, char *buf, size_t len)
{
	static const char *const wday[] = {"Sun", "Mon", "Tue", "Wed",
					   "Thu", "Fri", "Sat"};
	static const char *const month[] = {"Jan", "Feb", "Mar", "Apr",
					    "May", "Jun", "Jul", "Aug",
					    "Sep", "Oct", "Nov", "Dec"};
	const time_t tt = (time_t)t;
	struct tm tm;
	int n;

	if (!gmtime_r(&tt, &tm))
		return NULL;
	n = snprintf(buf, len, "%s, %02d %s %d %02d:%02d:%02d GMT",
		     wday[tm.tm_wday], tm.tm_mday, month[tm.tm_mon],
		     tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	return n > 0 && (size_t)n < len ? buf : NULL;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
