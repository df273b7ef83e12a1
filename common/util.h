#ifndef WHARF_UTIL_H
#define WHARF_UTIL_H
/*
 * util: for now, an umbrella over the helpers' families, so that files
 * not yet moved to the family headers still build.  Include the family
 * you use instead (/work/briefs/fix-includes.py rewrites the includes):
 *   compiler.h  WHARF_CHECK, WHARF_PRINTF, ARRAY_SIZE
 *   units.h     sizes and times: parse_size, format_*, now_ns
 *   text.h      strdupf, err_set, hex_value, str_escape, getopt_problem
 *   url.h       url_encode, url_redact, url_scrub
 *   fileio.h    path_absolute, read_file_capped, open_nofollow
 *   child.h     run_capture, run_capture_stop
 *   log.h       wlog, log_*: included here only until every file that
 *               logs includes it itself.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "child.h"
#include "compiler.h"
#include "fileio.h"
#include "text.h"
#include "units.h"
#include "url.h"

#include "log.h"

#endif
