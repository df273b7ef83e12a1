/* text: formatted messages, text made safe for a terminal, hex digits and
 * getopt's complaints in words (see text.h). */
#include "config.h"

#include "text.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *vstrdupf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

static char *vstrdupf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0) {
		fputs("wharf: out of memory formatting an error message\n",
		      stderr);
		abort();
	}
	return s;
}

char *strdupf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vstrdupf(fmt, ap);
	va_end(ap);
	return s;
}

void err_set(char **err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	*err = vstrdupf(fmt, ap);
	va_end(ap);
}

int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The long option that argv element arg ("--name" or "--name=value") names
 * with value val (an abbreviation counts), or NULL. */
static const struct option *long_option(const char *arg, int val,
					const struct option *lo)
{
	const size_t n = strcspn(arg + 2, "=");

	for (; lo && lo->name; lo++)
		if (lo->val == val && !strncmp(lo->name, arg + 2, n))
			return lo;
	return NULL;
}

const char *getopt_problem(int c, char *const *argv,
			   const struct option *longopts, char *buf,
			   size_t len)
{
	/* The element of a bad long option, and of a short one missing its
	 * value, is consumed: argv[optind - 1].  An unknown short option may
	 * sit inside an element ('x' in "-xf"), so optopt names it.  A long
	 * option is unknown (optopt 0), lacks a value, or has "=value" that it
	 * does not take. */
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	const bool is_long =
	    !strncmp(arg, "--", 2) && arg[2] &&
	    (c == ':' || optopt == 0 ||
	     (strchr(arg, '=') && long_option(arg, optopt, longopts)));
	const int n = is_long ? (int)strcspn(arg, "=") : 0;

	if (c == ':' && is_long)
		snprintf(buf, len, "option %.*s needs a value", n, arg);
	else if (c == ':')
		snprintf(buf, len, "option -%c needs a value", optopt);
	else if (is_long && optopt)
		snprintf(buf, len, "option %.*s takes no value", n, arg);
	else if (is_long)
		snprintf(buf, len, "unknown option '%.*s'", n, arg);
	else
		snprintf(buf, len, "unknown option '-%c'", optopt);
	return buf;
}

/* The length of the UTF-8 sequence at s, or 0 when it is not valid (an
 * overlong form, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

char *str_escape(const char *s, const char *keep, bool json)
{
	const unsigned char *p = (const unsigned char *)s;
	/* At most 6 bytes out for each byte in ("\\x9b" in JSON is 5). */
	char *out = malloc(strlen(s) * 6 + 1), *w = out;

	if (!out)
		return NULL;
	while (*p) {
		const size_t n = utf8_len(p);
		/* A C1 control is U+0080..U+009F: 0xc2 0x80..0x9f. */
		const unsigned cp = n == 2 && p[0] == 0xc2 ? p[1] : p[0];
		const bool control = (n == 1 && (*p < 0x20 || *p == 0x7f) &&
				      !strchr(keep, *p)) ||
				     (n == 2 && p[0] == 0xc2 && p[1] < 0xa0);

		if (n && !control) {
			if (!json && *p == '\\')
				*w++ = '\\';
			memcpy(w, p, n);
			w += n;
			p += n;
		} else if (n && json) {
			w += sprintf(w, "\\u%04x", cp);
			p += n;
		} else {
			/* Byte by byte: a C1 control as \xc2\x9b. */
			for (size_t i = 0; i < (n ? n : 1); i++, p++)
				w += sprintf(w, json ? "\\\\x%02x" : "\\x%02x",
					     *p);
		}
	}
	*w = '\0';
	return out;
}
