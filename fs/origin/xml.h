#ifndef WHARF_FS_ORIGIN_XML_H
#define WHARF_FS_ORIGIN_XML_H
/*
 * xml: a small XML reader, enough for S3's and Azure's listings and STS's
 * answers, and strict about form: one root, matched tags, the five named
 * entities and character references, CDATA; no DTD (entity expansion is
 * how XML parsers get hurt), attributes skipped.  Element text is bounded
 * (XML_TEXT); a longer one is an error, not a cut.
 */
#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"


#define XML_DEPTH 8
#define XML_NAME 64
#define XML_TEXT 4096

struct xml {
	const char *s;
	size_t n, i;
	char names[XML_DEPTH][XML_NAME];
	int depth;
	char text[XML_TEXT];
	size_t tlen;
	bool text_full;
	/* Called at each element's end: depth 1 is the root, names[] the
	 * open elements, text the element's decoded text. */
	int (*end)(void *arg, struct xml *x);
	void *arg;
	char *err;
};

/* Readies x to read s[0, n), calling end at each element's end (~4.6 KiB:
 * keep x off small stacks). */
void xml_init(struct xml *x, const char *s, size_t n,
	      int (*end)(void *arg, struct xml *x), void *arg);
/* Reads the whole text.  @return 0, end's error, or -EIO with x->err
 * (malloc'd, the caller frees it) saying where and what. */
int xml_walk(struct xml *x) WHARF_CHECK;
/* Sets x->err (once) to "malformed XML at byte N: what"; @return -EIO.
 * For end callbacks that find the document's shape wrong. */
int xml_fail(struct xml *x, const char *what);

#endif
