#ifndef WHARF_COMMON_JSON_H
#define WHARF_COMMON_JSON_H
/*
 * json: a small pull scanner for the JSON that origins answer (nginx
 * listings, GCS pages and token responses).  The caller walks the shape it
 * expects; every input is untrusted, so strings are bounded by the caller's
 * buffer and errors say "WHAT, byte N: problem" in *err (caller frees).
 * Every function returns 0 (or 1, see json_next) or -EINVAL.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"


struct json {
	const char *p, *end, *start;
	const char *what; /* names the text in messages: "GCS listing" */
	char **err;
};

void json_init(struct json *s, const char *text, size_t len, const char *what,
	       char **err);
/* Skips white space. */
void json_ws(struct json *s);
/* Sets *err to "WHAT, byte N: msg"; @return -EINVAL. */
int json_fail(struct json *s, const char *msg);
/* Decodes the string at s->p into out (cap bytes, NUL-terminated); a
 * longer string, an escaped NUL or a lone surrogate is an error. */
int json_string(struct json *s, char *out, size_t cap,
		size_t *outlen) WHARF_CHECK;
/* A number, true, false or null at s->p: its text in *tok, *toklen. */
int json_scalar(struct json *s, const char **tok, size_t *toklen) WHARF_CHECK;
/* White space, then the character c. */
int json_expect(struct json *s, char c) WHARF_CHECK;
/*
 * Steps through the members of an object or the elements of an array whose
 * opening '{' or '[' was consumed: @return 1 when another member follows
 * (its key or value is next), 0 after the closing `close`, or -EINVAL.
 * *first starts true.
 */
int json_next(struct json *s, char close, bool *first) WHARF_CHECK;
/* An object key and its ':' into key (cap bytes). */
int json_key(struct json *s, char *key, size_t cap) WHARF_CHECK;
/* Skips any one value, nested ones included. */
int json_skip(struct json *s) WHARF_CHECK;
/* The text of a number, bare or quoted, into num (cap bytes), unchecked. */
int json_num_text(struct json *s, char *num, size_t cap) WHARF_CHECK;
/* An unsigned integer, bare or quoted ("123": GCS sends int64 as strings). */
int json_u64(struct json *s, uint64_t *out) WHARF_CHECK;
/* Only white space is left. */
int json_end(struct json *s) WHARF_CHECK;

#endif
