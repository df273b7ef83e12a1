#!/bin/sh
# A CUDA-enabled libwharf loads the CUDA runtime with dlopen at first use:
# readelf -d lists no CUDA library among its NEEDED (it loads on a machine
# without CUDA), and a program linked against libwharf alone has libcudart
# mapped only after its first CUDA call, which then answers from it.  As
# root, with the runtime hidden (a mount namespace with the toolkit's lib64
# and the system's library directories' libcudart out of sight), that call
# fails with a message naming libcudart and what to install.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
lib=$WHARF_BUILDDIR/loader/.libs/libwharf.so.0
grep -q '^#define HAVE_CUDA 1' "$WHARF_BUILDDIR/config.h" 2>/dev/null ||
	{ echo "SKIP: test-cuda-lazy: this build has no CUDA (configure --with-cuda)"; exit 77; }
command -v readelf >/dev/null 2>&1 || { echo "SKIP: no readelf (apt-get install binutils)"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib is not built"; exit 1; }
fail=0
needed=$(readelf -d "$lib" | grep NEEDED)
if echo "$needed" | grep -q -i -e cuda -e nvidia; then
	echo "FAIL: libwharf NEEDs a CUDA library, so it does not load without CUDA:"
	echo "$needed" | grep -i -e cuda -e nvidia
	fail=1
else
	echo "ok: libwharf NEEDs no CUDA library"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-cuda-lazy-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
san=
ldd "$lib" | grep -q libasan && san="-fsanitize=address,undefined"
libdir=$(dirname "$lib")
if ! ${CC:-cc} $san -Wall -Wextra -Werror -I"$WHARF_SRCDIR/include" \
	-o "$work/lazy" "$WHARF_SRCDIR/tests/cuda/lazy.c" -L"$libdir" \
	-Wl,-rpath,"$libdir" -lwharf >"$work/cc.log" 2>&1; then
	cat "$work/cc.log"
	echo "FAIL: tests/cuda/lazy.c does not build"
	fail=1
elif env -u LD_PRELOAD "$work/lazy"; then
	echo "ok: the runtime is loaded at the first CUDA call, not before"
else
	echo "FAIL: tests/cuda/lazy.c (above)"
	fail=1
fi
cudalib=$(sed -n 's/^#define WHARF_CUDA_LIBDIR "\(.*\)"$/\1/p' "$WHARF_BUILDDIR/config.h")
cudalib=$(realpath -m "$cudalib")
# The directories of the libcudart ld.so's cache knows, other than cudalib.
elsewhere=$(ldconfig -p 2>/dev/null | sed -n 's/.*libcudart.* => //p' |
	while read -r f; do dirname "$(realpath -m "$f")"; done |
	grep -v -x "$cudalib")
if [ "$fail" = 1 ]; then
	:
elif [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1; then
	echo "SKIP: test-cuda-lazy: the missing-runtime check needs root and unshare"
elif [ -n "$elsewhere" ]; then
	echo "SKIP: test-cuda-lazy: a libcudart outside $cudalib is in ld.so's cache; the missing-runtime check hides only $cudalib"
else
	mkdir "$work/empty"
	if unshare -m sh -c 'mount --bind "$1" "$2" && exec env -u LD_PRELOAD "$3" missing' \
		sh "$work/empty" "$cudalib" "$work/lazy"; then
		echo "ok: without the runtime the first CUDA call says what to install"
	else
		echo "FAIL: with $cudalib hidden, wharf_cuda_available's message (above)"
		fail=1
	fi
fi
exit $fail
