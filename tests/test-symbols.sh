#!/bin/sh
# debian/libwharf0.symbols lists every symbol libwharf.so exports, and only
# those: a symbol added to loader/libwharf.map without its line would ship
# with no minimum version (dpkg-gensymbols only warns), one dropped is an
# ABI break.  Names the symbols to add or remove.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
lib=$WHARF_BUILDDIR/loader/.libs/libwharf.so.0
list=$WHARF_SRCDIR/debian/libwharf0.symbols
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm (apt-get install binutils)"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib is not built"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-symbols-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
nm -D --defined-only "$lib" | awk '{ sub(/@.*/, "", $3); print $3 }' |
	sort -u >"$work/exported"
sed -n 's/^ \([A-Za-z0-9_]*\)@.*/\1/p' "$list" | sort -u >"$work/listed"
n=$(wc -l <"$work/exported")
[ "$n" -gt 10 ] || { echo "FAIL: only $n symbols read from $lib"; exit 1; }
missing=$(comm -23 "$work/exported" "$work/listed")
extra=$(comm -13 "$work/exported" "$work/listed")
fail=0
if [ -n "$missing" ]; then
	echo "FAIL: libwharf exports symbols that debian/libwharf0.symbols does not list; add each with the version that adds it:"
	echo "$missing" | sed 's/^/  /'
	fail=1
fi
if [ -n "$extra" ]; then
	echo "FAIL: debian/libwharf0.symbols lists symbols libwharf no longer exports (an ABI break: a new soname and package name):"
	echo "$extra" | sed 's/^/  /'
	fail=1
fi
[ "$fail" = 0 ] && echo "ok: the $n exported symbols are the ones debian/libwharf0.symbols lists"
exit $fail
