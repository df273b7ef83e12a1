#ifndef WHARF_FS_ORIGIN_XML_H
#define WHARF_FS_ORIGIN_XML_H
/*
 * xml: a small XML reader, enough for the answers of object stores (Azure
 * List Blobs; S3's ListObjectsV2 has the same reader in source_s3.c, which
 * can move here), strict about form: one root, tags that match, the five
 * named entities and character references, CDATA, comments and <?...?>
 * skipped, attributes skipped, no DTD (entity expansion is how XML parsers
 * get hurt).  The text of one element is bounded (XML_TEXT); no allocation
 * but the error message.
 */
#include <stdbool.h>
#include <stddef.h>

#define XML_DEPTH 8
#define XML_NAME 64
#define XML_TEXT 4096

struct xml {
	const char *s; /* the document, n bytes; i: where the reader is */
	size_t n, i;
	char names[XML_DEPTH][XML_NAME];
	int depth;
	char text[XML_TEXT];
	size_t tlen;
	bool text_full;
	/* Called at each element's end: depth 1 is the root, names[] the
	 * open elements, text the element's decoded text.  0 goes on. */
	int (*end)(void *arg, struct xml *x);
	void *arg;
	char *err; /* set by xml_fail; the caller frees it */
};

/* Walks the whole document (x zeroed but for s, n, end and arg).
 * @return 0, -EIO with x->err saying where and why, or end's error. */
int xml_walk(struct xml *x);
/* Records "malformed XML at byte N: what" (the first one only).
 * @return -EIO. */
int xml_fail(struct xml *x, const char *what);

#endif
