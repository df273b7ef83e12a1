/* json: the pull scanner of JSON that origins answer (see json.h). */
#include "config.h"

#include "json.h"
#include "text.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A cursor over one JSON text held in memory.  No tree is built: callers
 * walk the shape they expect and skip the rest, so a listing page of any
 * length costs no allocation.
 */

#define JSON_DEPTH_MAX 64 /* nesting json_skip follows before refusing */

void json_init(struct json *s, const char *text, size_t len, const char *what,
	       char **err)
{
	s->p = s->start = text;
	s->end = text + len;
	s->what = what;
	s->err = err;
}

void json_ws(struct json *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' ||
				 *s->p == '\r' || *s->p == '\t'))
		s->p++;
}

int json_fail(struct json *s, const char *what)
{
	err_set(s->err, "%s, byte %zu: %s", s->what, (size_t)(s->p - s->start),
		what);
	return -EINVAL;
}

static int json_hex4(struct json *s, unsigned *out)
{
	unsigned v = 0;
	int i, h;

	if (s->end - s->p < 4)
		return json_fail(s, "truncated \\u escape");
	for (i = 0; i < 4; i++) {
		h = hex_value((unsigned char)s->p[i]);
		if (h < 0)
			return json_fail(s, "bad \\u escape");
		v = v << 4 | (unsigned)h;
	}
	s->p += 4;
	*out = v;
	return 0;
}

/* Decodes a string at s->p (on the opening quote) into out (cap bytes). */
int json_string(struct json *s, char *out, size_t cap, size_t *outlen)
{
	size_t n = 0;

	if (s->p >= s->end || *s->p != '"')
		return json_fail(s, "expected a string");
	s->p++;
	for (;;) {
		char tmp[4];
		size_t k = 1;
		unsigned c;

		if (s->p >= s->end)
			return json_fail(s, "unterminated string");
		c = (unsigned char)*s->p++;
		if (c == '"')
			break;
		if (c < 0x20)
			return json_fail(s, "control character in a string");
		tmp[0] = (char)c;
		if (c == '\\') {
			if (s->p >= s->end)
				return json_fail(s, "unterminated string");
			c = (unsigned char)*s->p++;
			switch (c) {
			case '"':
			case '\\':
			case '/':
				tmp[0] = (char)c;
				break;
			case 'b':
				tmp[0] = '\b';
				break;
			case 'f':
				tmp[0] = '\f';
				break;
			case 'n':
				tmp[0] = '\n';
				break;
			case 'r':
				tmp[0] = '\r';
				break;
			case 't':
				tmp[0] = '\t';
				break;
			case 'u': {
				unsigned u, lo;

				if (json_hex4(s, &u))
					return -EINVAL;
				if (u >= 0xd800 && u < 0xdc00) {
					if (s->end - s->p < 2 ||
					    s->p[0] != '\\' || s->p[1] != 'u')
						return json_fail(
						    s, "lone surrogate");
					s->p += 2;
					if (json_hex4(s, &lo))
						return -EINVAL;
					if (lo < 0xdc00 || lo >= 0xe000)
						return json_fail(
						    s, "bad surrogate pair");
					u = 0x10000 + ((u - 0xd800) << 10) +
					    (lo - 0xdc00);
				} else if (u >= 0xdc00 && u < 0xe000) {
					return json_fail(s, "lone surrogate");
				}
				if (u == 0)
					return json_fail(s, "NUL in a string");
				if (u < 0x80) {
					tmp[0] = (char)u;
				} else if (u < 0x800) {
					tmp[0] = (char)(0xc0 | u >> 6);
					tmp[1] = (char)(0x80 | (u & 0x3f));
					k = 2;
				} else if (u < 0x10000) {
					tmp[0] = (char)(0xe0 | u >> 12);
					tmp[1] = (char)(0x80 | (u >> 6 & 0x3f));
					tmp[2] = (char)(0x80 | (u & 0x3f));
					k = 3;
				} else {
					tmp[0] = (char)(0xf0 | u >> 18);
					tmp[1] =
					    (char)(0x80 | (u >> 12 & 0x3f));
					tmp[2] = (char)(0x80 | (u >> 6 & 0x3f));
					tmp[3] = (char)(0x80 | (u & 0x3f));
					k = 4;
				}
				break;
			}
			default:
				return json_fail(s, "bad escape in a string");
			}
		}
		if (n + k >= cap)
			return json_fail(s, "string too long");
		memcpy(out + n, tmp, k);
		n += k;
	}
	out[n] = '\0';
	*outlen = n;
	return 0;
}

/* Skips a scalar value we do not use (number, true, false, null). */
int json_scalar(struct json *s, const char **tok, size_t *toklen)
{
	const char *b = s->p;

	while (s->p < s->end && (isalnum((unsigned char)*s->p) ||
				 *s->p == '-' || *s->p == '+' || *s->p == '.'))
		s->p++;
	if (s->p == b)
		return json_fail(s, "expected a value");
	*tok = b;
	*toklen = (size_t)(s->p - b);
	return 0;
}

int json_expect(struct json *s, char c)
{
	char msg[16];

	json_ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return 0;
	}
	snprintf(msg, sizeof(msg), "expected '%c'", c);
	return json_fail(s, msg);
}

int json_next(struct json *s, char close, bool *first)
{
	json_ws(s);
	if (s->p >= s->end)
		return json_fail(s, "truncated");
	if (*s->p == close) {
		s->p++;
		return 0;
	}
	if (*first) {
		*first = false;
		return 1;
	}
	if (*s->p != ',')
		return json_fail(s, close == '}' ? "expected ',' or '}'"
						 : "expected ',' or ']'");
	s->p++;
	json_ws(s);
	return 1;
}

int json_key(struct json *s, char *key, size_t cap)
{
	size_t n;

	json_ws(s);
	if (json_string(s, key, cap, &n))
		return -EINVAL;
	if (json_expect(s, ':'))
		return -EINVAL;
	json_ws(s);
	return 0;
}

/* Skips one value; strings are walked, not decoded. */
static int skip_value(struct json *s, int depth)
{
	const char *t;
	size_t n;
	bool first = true;
	int rc;

	json_ws(s);
	if (s->p >= s->end)
		return json_fail(s, "expected a value");
	if (depth > JSON_DEPTH_MAX)
		return json_fail(s, "nested too deeply");
	if (*s->p == '"') {
		for (s->p++; s->p < s->end && *s->p != '"'; s->p++)
			if (*s->p == '\\' && s->p + 1 < s->end)
				s->p++;
		if (s->p >= s->end)
			return json_fail(s, "unterminated string");
		s->p++;
		return 0;
	}
	if (*s->p == '{' || *s->p == '[') {
		char close = *s->p == '{' ? '}' : ']';

		s->p++;
		while ((rc = json_next(s, close, &first)) == 1) {
			if (close == '}') {
				json_ws(s);
				if (skip_value(s, depth + 1) ||
				    json_expect(s, ':'))
					return -EINVAL;
			}
			if (skip_value(s, depth + 1))
				return -EINVAL;
		}
		return rc;
	}
	return json_scalar(s, &t, &n);
}

int json_skip(struct json *s)
{
	return skip_value(s, 0);
}

int json_num_text(struct json *s, char *num, size_t cap)
{
	const char *t;
	size_t n;

	json_ws(s);
	if (s->p < s->end && *s->p == '"')
		return json_string(s, num, cap, &n);
	if (json_scalar(s, &t, &n))
		return -EINVAL;
	if (n >= cap)
		return json_fail(s, "number too long");
	memcpy(num, t, n);
	num[n] = '\0';
	return 0;
}

int json_u64(struct json *s, uint64_t *out)
{
	char num[32];
	char *end;

	if (json_num_text(s, num, sizeof(num)))
		return -EINVAL;
	errno = 0;
	*out = strtoull(num, &end, 10);
	if (errno || *end || end == num || !isdigit((unsigned char)num[0]))
		return json_fail(s, "expected an unsigned integer");
	return 0;
}

int json_end(struct json *s)
{
	json_ws(s);
	if (s->p != s->end)
		return json_fail(s, "junk after the value");
	return 0;
}
