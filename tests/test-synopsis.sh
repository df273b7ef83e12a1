#!/bin/sh
# libwharf(3)'s SYNOPSIS lists every function libwharf exports (the wharf_*
# that loader/libwharf.map lets out of the built library), and no function
# it does not export.  Names the ones to add or remove.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
lib=$WHARF_BUILDDIR/loader/.libs/libwharf.so.0
page=$WHARF_SRCDIR/man/libwharf.3
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm (apt-get install binutils)"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib is not built"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-synopsis-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# Functions only (T, W): the version node WHARF_0 is an A.
nm -D --defined-only "$lib" |
	awk '$2 ~ /^[TW]$/ { sub(/@.*/, "", $3); print $3 }' | sort -u >"$work/exported"
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$page" | grep -o 'wharf_[A-Za-z0-9_]*(' |
	tr -d '(' | sort -u >"$work/synopsis"
n=$(wc -l <"$work/exported")
[ "$n" -gt 10 ] || { echo "FAIL: only $n functions read from $lib"; exit 1; }
missing=$(comm -23 "$work/exported" "$work/synopsis")
extra=$(comm -13 "$work/exported" "$work/synopsis")
fail=0
if [ -n "$missing" ]; then
	echo "FAIL: man/libwharf.3's SYNOPSIS leaves out these exported functions; add each with its prototype from include/wharf/*.h:"
	echo "$missing" | sed 's/^/  /'
	fail=1
fi
if [ -n "$extra" ]; then
	echo "FAIL: man/libwharf.3's SYNOPSIS lists functions libwharf does not export:"
	echo "$extra" | sed 's/^/  /'
	fail=1
fi
[ "$fail" = 0 ] && echo "ok: the SYNOPSIS lists the $n functions libwharf exports"
exit $fail
