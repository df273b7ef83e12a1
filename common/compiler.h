#ifndef WHARF_COMPILER_H
#define WHARF_COMPILER_H
/* compiler: the attributes and macros every other header may use, in a
 * header of their own so that using them pulls in nothing else. */

/* A result that must be checked. */
#define WHARF_CHECK __attribute__((warn_unused_result))
/* Argument a is a printf format for the arguments from b on. */
#define WHARF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
