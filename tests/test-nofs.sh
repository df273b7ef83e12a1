#!/bin/sh
# configure --disable-fs builds the `wharf` command without FUSE, curl or
# zstd (fuse3 is shadowed by a module too old to build the mount with):
# index, bench, shm and hints work, and the mount's commands say that they
# were not built and how to get them.
set -u
src=$(cd "${WHARF_SRCDIR:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-nofs-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$work/pc" "$work/build" "$work/data/a"
printf 'Name: fuse3\nDescription: too old\nVersion: 3.0.0\nLibs:\nCflags:\n' \
	>"$work/pc/fuse3.pc"
cd "$work/build" || exit 1
if ! PKG_CONFIG_PATH="$work/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
	"$src/configure" -q --disable-fs --without-cuda --cache-file=/dev/null \
	>log 2>&1; then
	tail -5 log
	echo "FAIL: configure --disable-fs needs what it should not"
	exit 1
fi
for d in include common loader cli; do
	if ! make -C "$d" -j2 >>log 2>&1; then
		tail -20 log
		echo "FAIL: make in $d"
		exit 1
	fi
done
wharf=$work/build/cli/wharf
[ -x "$wharf" ] && ok "wharf is built" || { bad "no cli/wharf"; exit 1; }
# libtool's wrapper script runs the real binary from .libs.
needed=$(readelf -d "$work/build/cli/.libs/wharf" 2>&1 | grep NEEDED)
if [ -z "$needed" ]; then
	bad "readelf -d found no libraries: $needed"
elif echo "$needed" | grep -q -e libfuse3 -e libcurl -e libzstd; then
	bad "wharf links the mount's libraries: $needed"
else
	ok "wharf links no FUSE, curl or zstd"
fi

for cmd in index bench shm hints prefetch; do
	if "$wharf" "$cmd" --help >out 2>&1; then
		ok "wharf $cmd --help"
	else
		bad "wharf $cmd --help: $(head -2 out)"
	fi
done
printf 'hello' >"$work/data/a/x"
printf 'world!' >"$work/data/a/y"
if "$wharf" index build --dir "$work/data" -o "$work/idx" >out 2>&1 &&
	"$wharf" index info "$work/idx" >info 2>&1 &&
	grep -q '^samples: *2$' info; then
	ok "wharf index build and info"
else
	bad "wharf index: $(cat out info 2>/dev/null | head -3)"
fi
"$wharf" shm ls >out 2>&1 && ok "wharf shm ls" || bad "wharf shm ls: $(head -2 out)"
# Reading a directory that is not a wharf mount fills no cache: refused,
# unless --any says so.
if "$wharf" prefetch -q "$work/data" >out 2>&1; then
	bad "wharf prefetch of a plain directory exited 0"
elif grep -q "is not on a wharf mount" out; then
	ok "wharf prefetch refuses a path off a wharf mount"
else
	bad "wharf prefetch refusal: $(head -2 out)"
fi
"$wharf" prefetch -q --any "$work/data" >out 2>&1 &&
	ok "wharf prefetch --any reads it" || bad "prefetch --any: $(head -2 out)"

for cmd in mount umount cache stats; do
	"$wharf" "$cmd" x y >out 2>&1
	rc=$?
	if [ $rc = 1 ] && grep -q "built without the filesystem" out &&
		grep -q "apt-get install libfuse3-dev" out; then
		ok "wharf $cmd says it was not built and how to get it"
	else
		bad "wharf $cmd (exit $rc): $(head -2 out)"
	fi
done
"$wharf" --help >out 2>&1
grep -q "mount .*(not built)" out && ok "wharf --help marks mount not built" ||
	bad "wharf --help: $(cat out)"
exit $fail
