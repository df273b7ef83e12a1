#!/bin/sh
# configure refuses a library older than the code needs and names the
# Debian package to install: each library in turn is shadowed by a fake
# pkg-config module one release too old.
set -u
src=$(cd "${WHARF_SRCDIR:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-configure-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0

refused() { # MODULE VERSION WANT PACKAGE
	mod=$1 ver=$2 want=$3 pkg=$4
	mkdir -p "$work/pc-$mod" "$work/build-$mod"
	printf 'Name: %s\nDescription: too old\nVersion: %s\nLibs:\nCflags:\n' \
		"$mod" "$ver" >"$work/pc-$mod/$mod.pc"
	if (cd "$work/build-$mod" &&
		PKG_CONFIG_PATH="$work/pc-$mod${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
			"$src/configure" -q --cache-file=/dev/null >log 2>&1); then
		echo "FAIL: configure accepted $mod $ver"
		fail=1
	elif grep -qF "$want not found. On Debian/Ubuntu: apt-get install $pkg" \
		"$work/build-$mod/log"; then
		echo "ok: configure refuses $mod $ver and asks for $pkg ($want)"
	else
		echo "FAIL: configure refused $mod $ver without saying why:"
		tail -3 "$work/build-$mod/log"
		fail=1
	fi
}

refused fuse3 3.11.0 'fuse3 >= 3.12' libfuse3-dev
refused libcurl 7.67.0 'libcurl >= 7.68' libcurl4-openssl-dev
refused libcrypto 1.1.1 'libcrypto >= 3.0' libssl-dev

# --with-cuda=DIR refuses a toolkit older than CUDA 12 (cudaLibraryLoadData),
# seen in its header, and says what to do.
mkdir -p "$work/cuda11/include" "$work/cuda11/lib64" "$work/build-cuda"
printf '#define CUDART_VERSION 11080\n' \
	>"$work/cuda11/include/cuda_runtime_api.h"
if (cd "$work/build-cuda" && "$src/configure" -q --cache-file=/dev/null \
	--with-cuda="$work/cuda11" >log 2>&1); then
	echo "FAIL: configure accepted CUDA 11.8"
	fail=1
elif grep -qF "holds CUDA 11080 (CUDART_VERSION)" "$work/build-cuda/log" &&
	grep -qF "needs CUDA 12.0 or later" "$work/build-cuda/log"; then
	echo "ok: configure refuses CUDA 11.8 and asks for 12.0 or later"
else
	echo "FAIL: configure refused CUDA 11.8 without saying why:"
	tail -3 "$work/build-cuda/log"
	fail=1
fi
exit $fail
