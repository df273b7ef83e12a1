#ifndef WHARF_COMMON_JSONW_H
#define WHARF_COMMON_JSONW_H
/*
 * jsonw: writes JSON to a FILE*, the one place that knows its commas,
 * spacing and string escaping (json.h reads it back).
 *
 * The caller opens objects and arrays, adds members and ends what it
 * opened, in order.  Every call that adds something takes a key: the
 * member's name inside an object, NULL inside an array and for the top
 * value.  Members are written "key": value, one space after the colon
 * (tests and scripts search for that text).  Once the top value is ended,
 * a newline follows it; the writer may then be used for another document.
 *
 * Strings (keys too) are quoted; '"' and '\' are escaped, bytes below 0x20
 * are written \u00XX, and every other byte as it is: a path of any bytes
 * reads back the same through json.h, and invalid UTF-8 in it stays as it
 * was (a reader strict about UTF-8 will refuse it).
 *
 * Misuse (a key missing or extra, an end with nothing open, nesting past
 * JSONW_DEPTH) is an assertion.  Errors of the stream are the caller's to
 * see with ferror() or fclose().  Not thread-safe: one writer, one thread.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "compiler.h"


#define JSONW_DEPTH 16 /* containers open at once */

enum jsonw_layout {
	/* Members on one line: {"a": 1, "b": [1, 2]}. */
	JSONW_INLINE,
	/* Each member on a line of its own, indented two spaces a level;
	 * inside an inline container, inline all the same. */
	JSONW_BLOCK,
};

struct jsonw {
	FILE *f;
	unsigned depth;	   /* containers open */
	unsigned long col; /* column the next byte goes to */
	struct jsonw_level {
		bool object, block;
		bool any;	   /* a member was written */
		bool brk;	   /* jsonw_break: a new line before the next */
		unsigned long col; /* column of the first member */
	} level[JSONW_DEPTH];
};

/* Starts a writer on f (the caller keeps f open and closes it). */
void jsonw_init(struct jsonw *w, FILE *f);

/* Opens an object or an array; jsonw_end closes the last one open. */
void jsonw_object(struct jsonw *w, const char *key, enum jsonw_layout layout);
void jsonw_array(struct jsonw *w, const char *key, enum jsonw_layout layout);
void jsonw_end(struct jsonw *w);

/*
 * In an inline container: the next member starts a line of its own,
 * under the container's first member (a long object wrapped the way a
 * reader of the file likes).  Elsewhere it does nothing.
 */
void jsonw_break(struct jsonw *w);

/* A string; NULL is written null. */
void jsonw_str(struct jsonw *w, const char *key, const char *s);
void jsonw_u64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_i64(struct jsonw *w, const char *key, int64_t v);
/* v with `digits` digits after the point ("%.*f"); NaN and infinities,
 * which JSON cannot hold, are written null. */
void jsonw_double(struct jsonw *w, const char *key, double v, int digits);
void jsonw_bool(struct jsonw *w, const char *key, bool v);
void jsonw_null(struct jsonw *w, const char *key);
/*
 * text, one JSON value that another writer made (a mount's stats file),
 * as it is, white space included (NULL: null).  Only its framing is
 * checked, with json.h (brackets and strings close, nothing follows):
 * @return 0, or -EINVAL with null written in its place.
 */
int jsonw_raw(struct jsonw *w, const char *key, const char *text) WHARF_CHECK;

#endif
