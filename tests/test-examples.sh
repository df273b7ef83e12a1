#!/bin/sh
# The C examples a user copies build cleanly in every language mode they
# may be dropped into: examples/train_records.c as C99, C11 and C++ with
# -Wall -Wextra -Werror -pedantic (the C11 build run), and the C examples of
# libwharf(3)'s EXAMPLES, extracted from the page, as C (gnu11, run: one
# epoch's sum) and C++.  The CUDA example is compiled (-fsyntax-only) where
# cuda_runtime_api.h is found.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
cc=${CC:-cc}
cxx=${CXX:-c++}
libdir=$WHARF_BUILDDIR/loader/.libs
inc=$WHARF_SRCDIR/include
for c in "$cc" "$cxx"; do
	command -v "$c" >/dev/null 2>&1 ||
		{ echo "SKIP: no compiler $c (apt-get install gcc g++, or set CC and CXX)"; exit 77; }
done
[ -f "$libdir/libwharf.so" ] || { echo "FAIL: $libdir/libwharf.so is not built"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-examples-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
san=
if ldd "$libdir/libwharf.so" | grep -q libasan; then
	san="-fsanitize=address,undefined"
fi
fail=0
strict="-Wall -Wextra -Werror -pedantic $san"
link="-L$libdir -Wl,-rpath,$libdir -lwharf"

build() { # WHAT OUT COMPILER FLAGS... SOURCE: compile and link, FAIL named
	local what=$1 out=$2
	shift 2
	if "$@" -I"$inc" -o "$out" $link >"$work/cc.log" 2>&1; then
		echo "ok: $what builds"
		return 0
	fi
	cat "$work/cc.log"
	echo "FAIL: $what does not build"
	fail=1
	return 1
}

ex=$WHARF_SRCDIR/examples/train_records.c
build "train_records.c as -std=c99" "$work/tr99" $cc -std=c99 $strict "$ex"
build "train_records.c as -std=c11" "$work/tr11" $cc -std=c11 $strict "$ex" &&
	if (cd "$work" && env TMPDIR="$work" ./tr11 >"$work/tr11.out" 2>&1); then
		echo "ok: the C11 train_records ran: $(tail -1 "$work/tr11.out")"
	else
		cat "$work/tr11.out"
		echo "FAIL: the C11 build of train_records.c"
		fail=1
	fi
build "train_records.c as C++11" "$work/trxx" $cxx -x c++ -std=c++11 $strict "$ex"

# The page's examples: each .EX block that includes a wharf header, with the
# roff escapes undone.
awk -v dir="$work" '
/^\.EX/ { n++; inex = 1; next }
/^\.EE/ { inex = 0; next }
inex {
	gsub(/\\e/, "\\"); gsub(/\\-/, "-"); gsub(/\\&/, "")
	print > (dir "/man" n ".c")
}' "$WHARF_SRCDIR/man/libwharf.3"
nex=0
first=
for f in "$work"/man*.c; do
	grep -q '^#include <wharf/' "$f" || continue
	nex=$((nex + 1))
	name=$(basename "$f" .c)
	[ -n "$first" ] || first=$work/$name
	what="libwharf(3) example $nex ($(grep -m1 -o 'wharf_[a-z_]*(' "$f" | tr -d '('), ...)"
	if grep -q cuda_runtime_api.h "$f"; then
		cudainc=
		for d in ${CUDA_HOME:-} /usr/local/cuda; do
			[ -f "$d/include/cuda_runtime_api.h" ] && cudainc=$d/include && break
		done
		if [ -z "$cudainc" ]; then
			echo "SKIP: $what: no cuda_runtime_api.h (CUDA_HOME, /usr/local/cuda)"
		elif $cc -fsyntax-only $strict -I"$inc" -I"$cudainc" "$f" >"$work/cc.log" 2>&1 &&
			$cxx -x c++ -fsyntax-only $strict -I"$inc" -I"$cudainc" "$f" >>"$work/cc.log" 2>&1; then
			echo "ok: $what compiles as C and C++"
		else
			cat "$work/cc.log"
			echo "FAIL: $what does not compile"
			fail=1
		fi
		continue
	fi
	build "$what as C" "$work/$name" $cc $strict "$f"
	build "$what as C++" "$work/$name-xx" $cxx -x c++ $strict "$f"
done
[ "$nex" -ge 3 ] || { echo "FAIL: found $nex C examples in libwharf.3, not 3"; fail=1; }

# The first one (one epoch, the sum of each sample's first byte) runs on
# records whose first bytes are known.
if [ -n "$first" ] && [ -x "$first" ] && [ -x "$WHARF_BUILDDIR/cli/wharf" ]; then
	i=0
	while [ $i -lt 64 ]; do
		printf "\\$(printf %o $((i + 1)))"; head -c 4095 /dev/zero
		i=$((i + 1))
	done >"$work/shard.bin"
	if "$WHARF_BUILDDIR/cli/wharf" index build --records 4K "$work/shard.bin" \
		-o "$work/train.idx" >"$work/idx.log" 2>&1 &&
		(cd "$work" && WHARF_SHM_DIR="$work" "$first" train.idx) >"$work/man1.out" 2>&1 &&
		[ "$(cat "$work/man1.out")" = 2080 ]; then
		echo "ok: libwharf(3)'s first example sums an epoch: 2080"
	else
		cat "$work/idx.log" "$work/man1.out"
		echo "FAIL: libwharf(3)'s first example, run on 64 records (want 2080)"
		fail=1
	fi
fi
exit $fail
