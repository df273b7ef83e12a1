#!/bin/sh
# include/wharf/wharf.hpp, as a C++ trainer uses it: tests/cxx/read_epochs.cpp
# built as C++11 and as C++17 with -Wall -Wextra -Werror (and -pedantic)
# against the built libwharf, then run: three epochs, every sample once.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
cxx=${CXX:-c++}
libdir=$WHARF_BUILDDIR/loader/.libs
command -v "$cxx" >/dev/null 2>&1 ||
	{ echo "SKIP: no C++ compiler $cxx (apt-get install g++, or set CXX)"; exit 77; }
[ -f "$libdir/libwharf.so" ] || { echo "FAIL: $libdir/libwharf.so is not built"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-cxx-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# A sanitizer build of libwharf needs the program linked with the same.
san=
if ldd "$libdir/libwharf.so" | grep -q libasan; then
	san="-fsanitize=address,undefined"
fi
fail=0
for std in c++11 c++17; do
	if ! $cxx -std=$std -Wall -Wextra -Werror -pedantic $san \
		-I"$WHARF_SRCDIR/include" -o "$work/read_epochs-$std" \
		"$WHARF_SRCDIR/tests/cxx/read_epochs.cpp" \
		-L"$libdir" -Wl,-rpath,"$libdir" -lwharf >"$work/cc.log" 2>&1
	then
		cat "$work/cc.log"
		echo "FAIL: tests/cxx/read_epochs.cpp does not build as -std=$std -Wall -Wextra -Werror"
		fail=1
		continue
	fi
	mkdir -p "$work/run-$std"
	if "$work/read_epochs-$std" "$work/run-$std"; then
		echo "ok: -std=$std"
	else
		echo "FAIL: read_epochs built as -std=$std"
		fail=1
	fi
done
exit $fail
