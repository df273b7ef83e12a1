/* jsonw: the JSON writer (see jsonw.h). */
#include "config.h"

#include "jsonw.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/*
 * Everything goes out through put(), which counts the column: an inline
 * container remembers where its first member began, so that jsonw_break
 * can line the next one up under it.
 */
static void put(struct jsonw *w, const char *s, size_t n)
{
	const char *nl = memrchr(s, '\n', n);

	fwrite(s, 1, n, w->f);
	w->col = nl ? (unsigned long)(s + n - nl - 1) : w->col + n;
}

static void put_text(struct jsonw *w, const char *s)
{
	put(w, s, strlen(s));
}

static void newline(struct jsonw *w, unsigned long indent)
{
	static const char spaces[] = "                                ";

	put(w, "\n", 1);
	while (indent) {
		const size_t k =
		    indent < sizeof(spaces) - 1 ? indent : sizeof(spaces) - 1;

		put(w, spaces, k);
		indent -= k;
	}
}

/* s quoted: runs of bytes that need nothing are written at once. */
static void put_string(struct jsonw *w, const char *s)
{
	put(w, "\"", 1);
	while (*s) {
		size_t n = 0;
		char esc[8];

		while (s[n] && s[n] != '"' && s[n] != '\\' &&
		       (unsigned char)s[n] >= 0x20)
			n++;
		put(w, s, n);
		s += n;
		if (!*s)
			break;
		if (*s == '"' || *s == '\\')
			snprintf(esc, sizeof(esc), "\\%c", *s);
		else
			snprintf(esc, sizeof(esc), "\\u%04x",
				 (unsigned char)*s);
		put_text(w, esc);
		s++;
	}
	put(w, "\"", 1);
}

/* What comes before a value: the separator, the line break, the key. */
static void member(struct jsonw *w, const char *key)
{
	struct jsonw_level *lv;

	if (!w->depth) {
		assert(!key);
		return;
	}
	lv = &w->level[w->depth - 1];
	assert(lv->object == (key != NULL));
	if (lv->block) {
		if (lv->any)
			put(w, ",", 1);
		newline(w, 2ul * w->depth);
	} else if (lv->any && lv->brk) {
		put(w, ",", 1);
		newline(w, lv->col);
	} else if (lv->any) {
		put(w, ", ", 2);
	}
	lv->any = true;
	lv->brk = false;
	if (key) {
		put_string(w, key);
		put(w, ": ", 2);
	}
}

/* After a value: the newline that ends a document. */
static void value_done(struct jsonw *w)
{
	if (!w->depth)
		put(w, "\n", 1);
}

static void open_container(struct jsonw *w, const char *key,
			   enum jsonw_layout layout, bool object)
{
	struct jsonw_level *lv;
	const bool block = layout == JSONW_BLOCK &&
			   (!w->depth || w->level[w->depth - 1].block);

	member(w, key);
	assert(w->depth < JSONW_DEPTH);
	put(w, object ? "{" : "[", 1);
	lv = &w->level[w->depth++];
	lv->object = object;
	lv->block = block;
	lv->any = false;
	lv->brk = false;
	lv->col = w->col;
}

void jsonw_init(struct jsonw *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
}

void jsonw_object(struct jsonw *w, const char *key, enum jsonw_layout layout)
{
	open_container(w, key, layout, true);
}

void jsonw_array(struct jsonw *w, const char *key, enum jsonw_layout layout)
{
	open_container(w, key, layout, false);
}

void jsonw_end(struct jsonw *w)
{
	const struct jsonw_level *lv;

	assert(w->depth > 0);
	lv = &w->level[--w->depth];
	if (lv->block && lv->any)
		newline(w, 2ul * w->depth);
	put(w, lv->object ? "}" : "]", 1);
	value_done(w);
}

void jsonw_break(struct jsonw *w)
{
	if (w->depth && !w->level[w->depth - 1].block)
		w->level[w->depth - 1].brk = true;
}

/* A value that is one piece of text: a number, true, false or null. */
static void scalar(struct jsonw *w, const char *key, const char *text)
{
	member(w, key);
	put_text(w, text);
	value_done(w);
}

void jsonw_str(struct jsonw *w, const char *key, const char *s)
{
	if (!s) {
		scalar(w, key, "null");
		return;
	}
	member(w, key);
	put_string(w, s);
	value_done(w);
}

void jsonw_u64(struct jsonw *w, const char *key, uint64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, v);
	scalar(w, key, num);
}

void jsonw_i64(struct jsonw *w, const char *key, int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRId64, v);
	scalar(w, key, num);
}

void jsonw_double(struct jsonw *w, const char *key, double v, int digits)
{
	char num[352]; /* DBL_MAX has 309 digits before the point */

	assert(digits >= 0 && digits <= 17);
	if (!isfinite(v)) {
		scalar(w, key, "null");
		return;
	}
	snprintf(num, sizeof(num), "%.*f", digits, v);
	scalar(w, key, num);
}

void jsonw_bool(struct jsonw *w, const char *key, bool v)
{
	scalar(w, key, v ? "true" : "false");
}

void jsonw_null(struct jsonw *w, const char *key)
{
	scalar(w, key, "null");
}

int jsonw_raw(struct jsonw *w, const char *key, const char *text)
{
	struct json s;
	char *err = NULL;
	int rc = 0;

	if (text) {
		json_init(&s, text, strlen(text), "value", &err);
		rc = json_skip(&s);
		if (!rc)
			rc = json_end(&s);
		free(err);
	}
	scalar(w, key, rc || !text ? "null" : text);
	return rc;
}
