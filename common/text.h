#ifndef WHARF_TEXT_H
#define WHARF_TEXT_H
/* text: formatted messages (for `char **err` out-parameters), text made
 * safe for a terminal, hex digits, and what getopt found wrong in words. */
#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"

/* Formatted message into a malloc'd string (for `char **err` out-parameters).
 * The caller frees it.  Never returns NULL (aborts when memory is gone). */
char *strdupf(const char *fmt, ...) WHARF_PRINTF(1, 2);
void err_set(char **err, const char *fmt, ...) WHARF_PRINTF(2, 3);

/* The value of one hex digit, or -1. */
int hex_value(int c);

/*
 * s made safe for a terminal, malloc'd (NULL without memory): every C0
 * control character but those in keep ("\n\t", or ""), DEL, every C1
 * control character and every byte of invalid UTF-8 is escaped.  Text
 * (json false): as \xHH per byte, and a backslash as \\.  JSON (json
 * true, s a JSON document such as a mount's stats): controls as \u00XX
 * and a byte of invalid UTF-8 as the text \\xHH, backslashes and quotes
 * as they were, so that valid JSON stays valid and means the same.
 */
char *str_escape(const char *s, const char *keep, bool json);

struct option;
/*
 * Describes what getopt_long found wrong, for a parser run with opterr = 0
 * and an optstring that starts with ':' (or "+:"): c is what it returned
 * ('?' or ':'), argv and longopts what it was given.  Writes "unknown
 * option '-x'", "option --name needs a value" or "option --name takes no
 * value" into buf and returns buf.
 */
const char *getopt_problem(int c, char *const *argv,
			   const struct option *longopts, char *buf,
			   size_t len);

#endif
