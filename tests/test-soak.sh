#!/bin/sh
# bench/soak for 60 seconds (issue 44's make-check soak): wharf.Loader with
# 2 workers over a default mount whose cache fills its tmpfs, while the
# origin goes down (5 s), answers 503, resets and cuts bodies, the log is
# rotated with SIGHUP and the mount is killed -9 once (remount, resume).
# Fails on a wrong byte, a read error, or a mount whose descriptors or
# threads grew; the figures are in the log.  Root (FUSE, tmpfs) and
# Debian's python3 with numpy; the plain build only (the loader runs in
# this Python process, which a sanitizer build's library cannot join
# without its runtime preloaded; the sanitizer runs check the parts).
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
build=$(cd "$WHARF_BUILDDIR" && pwd)
py=/usr/bin/python3
[ "$(id -u)" = 0 ] || { echo "SKIP: soak: needs root (FUSE mounts, a tmpfs)"; exit 77; }
[ -c /dev/fuse ] || { echo "SKIP: soak: no /dev/fuse"; exit 77; }
[ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null ||
	{ echo "SKIP: soak: $py lacks numpy (apt-get install python3-numpy)"; exit 77; }
case $("$build/config.status" --config 2>/dev/null) in
*enable-sanitizers* | *enable-fuzzing*)
	echo "SKIP: soak: run in a plain build's make check"; exit 77 ;;
esac
exec "$py" "$WHARF_SRCDIR/bench/soak" 60s --period 30s --down 5s \
	--files 200 --build "$build"
