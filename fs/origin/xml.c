/* xml: the small XML reader of origin answers (see xml.h). */
#include "config.h"

#include "text.h"
#include "xml.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void xml_init(struct xml *x, const char *s, size_t n,
	      int (*end)(void *arg, struct xml *x), void *arg)
{
	memset(x, 0, sizeof(*x));
	x->s = s;
	x->n = n;
	x->end = end;
	x->arg = arg;
}

int xml_fail(struct xml *x, const char *what)
{
	if (!x->err)
		x->err = strdupf("malformed XML at byte %zu: %s", x->i, what);
	return -EIO;
}

static void text_add(struct xml *x, const char *s, size_t n)
{
	if (x->tlen + n >= sizeof(x->text)) {
		x->text_full = true;
		return;
	}
	memcpy(x->text + x->tlen, s, n);
	x->tlen += n;
}

static void text_utf8(struct xml *x, unsigned long cp)
{
	char b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	text_add(x, b, n);
}

/* At '&': decodes one entity reference into the text. */
static int xml_entity(struct xml *x)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {{"lt", '<'},
		     {"gt", '>'},
		     {"amp", '&'},
		     {"quot", '"'},
		     {"apos", '\''}};
	const char *p = x->s + x->i + 1;
	const char *semi = memchr(p, ';', x->n - x->i - 1);
	size_t len, k;

	if (!semi || semi - p > 10)
		return xml_fail(x, "'&' that starts no entity");
	len = (size_t)(semi - p);
	if (len > 1 && p[0] == '#') {
		unsigned long cp = 0;
		bool hex = p[1] == 'x';

		for (k = hex ? 2 : 1; k < len; k++) {
			int d = hex ? hex_value(p[k])
				    : (isdigit((unsigned char)p[k]) ? p[k] - '0'
								    : -1);

			if (d < 0)
				return xml_fail(x, "bad character reference");
			cp = cp * (hex ? 16 : 10) + (unsigned long)d;
			if (cp > 0x10ffff)
				return xml_fail(x, "bad character reference");
		}
		if (k == (hex ? 2u : 1u) || cp == 0)
			return xml_fail(x, "bad character reference");
		text_utf8(x, cp);
	} else {
		for (k = 0; k < ARRAY_SIZE(named); k++)
			if (strlen(named[k].name) == len &&
			    !memcmp(named[k].name, p, len))
				break;
		if (k == ARRAY_SIZE(named))
			return xml_fail(x, "unknown entity");
		text_add(x, &named[k].c, 1);
	}
	x->i = (size_t)(semi - x->s) + 1;
	return 0;
}

/* Skips to just past `end`; fails if it never comes. */
static int xml_skip_past(struct xml *x, const char *end, const char *what)
{
	size_t el = strlen(end);

	while (x->i + el <= x->n) {
		if (!memcmp(x->s + x->i, end, el)) {
			x->i += el;
			return 0;
		}
		x->i++;
	}
	return xml_fail(x, what);
}

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' ||
	       c == ':';
}

static int xml_tag(struct xml *x)
{
	const char *s = x->s;
	bool closing = s[x->i + 1] == '/';
	size_t start = x->i + 1 + closing, k = start;
	char quote = 0;
	int rc;

	while (k < x->n && name_char(s[k]))
		k++;
	if (k == start || k - start >= XML_NAME)
		return xml_fail(x, "bad element name");
	if (closing) {
		while (k < x->n && isspace((unsigned char)s[k]))
			k++;
		if (k >= x->n || s[k] != '>')
			return xml_fail(x, "unterminated end tag");
		if (x->depth == 0 ||
		    strlen(x->names[x->depth - 1]) != k - start ||
		    memcmp(x->names[x->depth - 1], s + start, k - start))
			return xml_fail(x, "end tag does not match");
		if (x->text_full)
			return xml_fail(x, "element text too long");
		x->text[x->tlen] = '\0';
		rc = x->end(x->arg, x);
		if (rc)
			return rc;
		x->depth--;
		x->tlen = 0;
		x->i = k + 1;
		return 0;
	}
	if (x->depth == XML_DEPTH)
		return xml_fail(x, "nested too deep");
	if (x->depth == 0 && x->names[0][0])
		return xml_fail(x, "a second root element");
	memcpy(x->names[x->depth], s + start, k - start);
	x->names[x->depth][k - start] = '\0';
	x->depth++;
	x->tlen = 0;
	x->text_full = false;
	/* Attributes are skipped, quotes respected. */
	for (; k < x->n; k++) {
		if (quote) {
			if (s[k] == quote)
				quote = 0;
		} else if (s[k] == '"' || s[k] == '\'') {
			quote = s[k];
		} else if (s[k] == '>') {
			break;
		}
	}
	if (k >= x->n)
		return xml_fail(x, "unterminated start tag");
	x->i = k + 1;
	if (s[k - 1] == '/') { /* <Empty/> */
		x->text[0] = '\0';
		rc = x->end(x->arg, x);
		x->depth--;
		return rc;
	}
	return 0;
}

int xml_walk(struct xml *x)
{
	int rc = 0;

	while (!rc && x->i < x->n) {
		const char *p = x->s + x->i;
		size_t left = x->n - x->i;

		if (*p == '<') {
			if (left >= 2 && p[1] == '?')
				rc = xml_skip_past(x, "?>", "unterminated <?");
			else if (left >= 4 && !memcmp(p, "<!--", 4))
				rc = xml_skip_past(x, "-->",
						   "unterminated comment");
			else if (left >= 9 && !memcmp(p, "<![CDATA[", 9)) {
				size_t from = x->i + 9;

				rc = xml_skip_past(x, "]]>",
						   "unterminated CDATA");
				if (!rc && x->depth)
					text_add(x, x->s + from,
						 x->i - 3 - from);
			} else if (left >= 2 && p[1] == '!')
				/* No DTDs: no store sends one, and entity
				 * expansion is how XML parsers get hurt. */
				rc = xml_fail(x, "DOCTYPE not accepted");
			else if (left >= 2)
				rc = xml_tag(x);
			else
				rc = xml_fail(x, "truncated");
		} else if (*p == '&') {
			rc = xml_entity(x);
		} else {
			if (x->depth)
				text_add(x, p, 1);
			else if (!isspace((unsigned char)*p))
				rc = xml_fail(x, "text outside the root");
			x->i++;
		}
	}
	if (!rc && x->depth)
		rc = xml_fail(x, "truncated: elements left open");
	if (!rc && !x->names[0][0])
		rc = xml_fail(x, "no root element");
	return rc;
}
