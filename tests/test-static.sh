#!/bin/sh
# configure --enable-static: libwharf.a's only global symbols are wharf_*
# (a program's own ring_open, strdupf or error_set does not clash with
# libwharf's internals), and a program linked statically against it with
# wharf.pc's Libs.private runs.  SKIPs in a build without the archive.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
lib=$WHARF_BUILDDIR/loader/.libs/libwharf.a
pc=$WHARF_BUILDDIR/wharf.pc
[ -f "$lib" ] || { echo "SKIP: test-static: no libwharf.a (configure --enable-static)"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm (apt-get install binutils)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-static-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
others=$(nm -g --defined-only "$lib" | awk 'NF == 3 && $3 !~ /^wharf_/ { print $3 }' | sort -u)
if [ -n "$others" ]; then
	echo "FAIL: libwharf.a defines global symbols other than wharf_*, which clash with a program's own:"
	echo "$others" | head -20 | sed 's/^/  /'
	fail=1
else
	echo "ok: libwharf.a's global symbols are all wharf_*"
fi
private=$(sed -n 's/^Libs.private: *//p' "$pc")
cat >"$work/prog.c" <<'C'
#include <stdio.h>
#include <wharf/loader.h>
/* Names libwharf uses inside: the program's own must win, silently. */
int ring_open(void);
int ring_open(void) { return 42; }
char *strdupf(const char *fmt, ...);
char *strdupf(const char *fmt, ...) { (void)fmt; return NULL; }
int main(void)
{
	struct wharf_options o;
	wharf_options_init(&o);
	printf("%u %d\n", wharf_version_number(), ring_open());
	return o.batch_size == 32 && ring_open() == 42 ? 0 : 1;
}
C
if ${CC:-cc} -static-libgcc -I"$WHARF_SRCDIR/include" -o "$work/prog" "$work/prog.c" \
	"$lib" $private >"$work/cc.log" 2>&1 && "$work/prog" >"$work/out" 2>&1; then
	echo "ok: a program with its own ring_open and strdupf links libwharf.a with Libs.private ($private) and runs"
else
	cat "$work/cc.log" "$work/out" 2>/dev/null
	echo "FAIL: linking libwharf.a with wharf.pc's Libs.private ($private)"
	fail=1
fi
exit $fail
