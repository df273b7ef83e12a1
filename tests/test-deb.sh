#!/bin/sh
# The Debian packages (debian/, README): debian/changelog's version is
# configure.ac's; dpkg-buildpackage -us -uc -b builds wharf, libwharf0,
# libwharf-dev and python3-wharf from a release tree (make distdir); each
# lands its files where it should and no file is in two packages.  Then,
# from the packages unpacked with dpkg -x into a scratch root (the system's
# packages stay as they are): wharf --help, a real mount of a local origin
# by `wharf mount` and by the mount.fuse.wharf name, man wharf and
# man libwharf, pkg-config --libs wharf and a program built with it, and
# import wharf with the unpacked package and library only.
# The package build takes about a minute on two busy cores.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
build=$(cd "$WHARF_BUILDDIR" && pwd)
py=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-deb-XXXXXX") || exit 1
mnt=$work/mnt
origin_pid=
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	[ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# What the packaged things run with: nothing of the build tree's, nor of
# the make that runs this test.
clean_env() {
	env -u WHARF_LIBRARY -u PYTHONPATH -u WHARF_BUILDDIR -u WHARF_SRCDIR \
		-u LD_LIBRARY_PATH -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		-u PKG_CONFIG_PATH "$@"
}
# A part that cannot run here: the others still run, and the test as a whole
# is then a skip (77) unless one of them failed.
skipped=
skip_part() { echo "SKIP: $*"; skipped="${skipped:+$skipped; }$*"; }
# Ends the test: a skip (77) with its reason unless a check failed.
skip_rest() {
	echo "SKIP: $*"
	[ "$fail" = 0 ] && exit 77
	exit 1
}

# One version: AC_INIT's (as configure made it) is debian/changelog's.
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$build/config.h")
deb_version=$(sed -n '1s/^wharf (\([^)]*\)).*/\1/p' "$WHARF_SRCDIR/debian/changelog")
if [ -n "$version" ] && [ "$version" = "$deb_version" ]; then
	ok "debian/changelog's version is configure.ac's ($version)"
else
	bad "debian/changelog says '$deb_version', configure.ac's AC_INIT '$version': make them agree (a new debian/changelog entry)"
fi

for t in dpkg-buildpackage dpkg-checkbuilddeps dpkg-architecture; do
	command -v $t >/dev/null 2>&1 ||
		skip_rest "no $t (apt-get install dpkg-dev debhelper)"
done
command -v dh >/dev/null 2>&1 || skip_rest "no dh (apt-get install debhelper)"
# The packages do not depend on this build's configuration: the plain
# build's run checks them, the sanitizer and fuzzing builds do not again.
case $("$build/config.status" --config 2>/dev/null) in
*enable-sanitizers* | *enable-fuzzing*)
	skip_rest "the packages are checked in a plain build's make check" ;;
esac

# distdir relative to the build tree: automake's recursion takes no other.
src=$work/wharf-$version
if ! clean_env make -C "$build" distdir \
	distdir="$(realpath -m --relative-to="$build" "$src")" \
	>"$work/distdir.log" 2>&1; then
	tail -20 "$work/distdir.log"
	bad "make distdir"
	exit 1
fi
if ! unmet=$(cd "$src" && dpkg-checkbuilddeps 2>&1); then
	skip_rest "build dependencies missing: $(echo "$unmet" |
		sed 's/.*Unmet build dependencies: //') (apt-get install them; quickstart does)"
fi

# The build.  DEB_BUILD_OPTIONS names nothing but the parallel jobs.
started=$(date +%s)
if ! (cd "$src" && clean_env DEB_BUILD_OPTIONS=parallel=2 \
	dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	tail -40 "$work/build.log"
	bad "dpkg-buildpackage -us -uc -b"
	exit 1
fi
ok "dpkg-buildpackage -us -uc -b ($(($(date +%s) - started)) s)"
if grep -q 'dpkg-gensymbols: warning: some new symbols' "$work/build.log"; then
	echo "note: libwharf exports symbols debian/libwharf0.symbols does not list:"
	sed -n '/^+ *wharf_.*@WHARF/p' "$work/build.log"
fi

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
root=$work/root
mkdir "$root"
for p in wharf:$arch libwharf0:$arch libwharf-dev:$arch python3-wharf:all; do
	deb=$work/${p%:*}_${version}_${p#*:}.deb
	if ! [ -f "$deb" ]; then
		bad "no ${deb##*/}"
		continue
	fi
	dpkg-deb -x "$deb" "$root" || bad "dpkg-deb -x ${deb##*/}"
	dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's,^\./,/,' \
		>"$work/${p%:*}.files"
	dpkg-deb -f "$deb" Depends >"$work/${p%:*}.depends"
done

# Files (path [-> link target]) each package must hold.
before=$fail
has() { # PACKAGE PATH [LINK-TARGET]
	local f=$root$2
	if ! grep -qx "$2" "$work/$1.files" 2>/dev/null; then
		bad "$1 lacks $2"
	elif [ -n "${3:-}" ] && [ "$(readlink "$f")" != "$3" ]; then
		bad "$1's $2 is not a link to $3 ($(readlink "$f"))"
	fi
}
has wharf /usr/bin/wharf
has wharf /sbin/mount.fuse.wharf /usr/bin/wharf
has wharf /usr/share/man/man1/wharf.1.gz
has wharf /usr/share/man/man8/mount.fuse.wharf.8.gz ../man1/wharf-mount.1.gz
for c in mount cache prefetch hints stats index shm bench; do
	has wharf "/usr/share/man/man1/wharf-$c.1.gz"
done
has wharf /etc/logrotate.d/wharf
# The units and site-cache configurations wharf(1) points to.
for f in mnt-imagenet.mount mnt-imagenet.automount nginx-wharf.conf \
	squid-wharf.conf squid-wharf-storeid; do
	has wharf "/usr/share/doc/wharf/examples/$f"
done
dpkg-deb -f "$work/wharf_${version}_$arch.deb" Description 2>/dev/null |
	grep -q 'Azure' || bad "wharf's description leaves out Azure"
has libwharf0 "/usr/lib/$ma/libwharf.so.0" libwharf.so.0.0.0
has libwharf0 "/usr/lib/$ma/libwharf.so.0.0.0"
has libwharf-dev "/usr/lib/$ma/libwharf.so" libwharf.so.0.0.0
has libwharf-dev "/usr/lib/$ma/pkgconfig/wharf.pc"
has libwharf-dev /usr/include/wharf/loader.h
has libwharf-dev /usr/share/man/man3/libwharf.3.gz
has python3-wharf /usr/lib/python3/dist-packages/wharf/__init__.py
has python3-wharf /usr/lib/python3/dist-packages/wharf/_lib.py
# An Architecture: all package holds no multiarch path: _installed.py
# would name one, so it is left out and the linker's path finds libwharf.
if grep -q '_installed' "$work/python3-wharf.files" 2>/dev/null; then
	bad "python3-wharf holds _installed.py (a libdir of one architecture)"
fi
twice=$(cat "$work"/*.files | sort | uniq -d)
[ -z "$twice" ] || bad "files in two packages: $twice"
soname=$(readelf -d "$root/usr/lib/$ma/libwharf.so.0" 2>&1 |
	sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libwharf.so.0 ] || bad "libwharf's SONAME is '$soname', not libwharf.so.0 (the package is libwharf0)"
grep -q 'libwharf0 (>= ' "$work/wharf.depends" 2>/dev/null ||
	bad "wharf does not depend on libwharf0: $(cat "$work/wharf.depends")"
grep -q 'fuse3' "$work/wharf.depends" 2>/dev/null ||
	bad "wharf does not depend on fuse3 (fusermount3 for wharf umount)"
grep -q 'python3-numpy' "$work/python3-wharf.depends" 2>/dev/null &&
	grep -q "libwharf0 (>= $version)" "$work/python3-wharf.depends" ||
	bad "python3-wharf's Depends: $(cat "$work/python3-wharf.depends")"
[ "$fail" = "$before" ] && ok "each package holds its files, SONAME libwharf.so.0, Depends"
# What each package needs is there to install (apt only simulates).
if ! command -v apt-get >/dev/null 2>&1; then
	skip_part "apt-get install -s: no apt-get"
elif (cd "$work" && apt-get install -s --no-install-recommends \
	./wharf_*.deb ./libwharf0_*.deb ./libwharf-dev_*.deb \
	./python3-wharf_*.deb) >"$work/apt.out" 2>&1; then
	ok "apt-get install -s of the four packages: their Depends resolve"
else
	bad "apt-get install -s of the packages: $(tail -8 "$work/apt.out")"
fi

# The unpacked tree's programs find the unpacked libwharf (the system has
# none, or another version): its libdir on LD_LIBRARY_PATH.
run() { clean_env LD_LIBRARY_PATH="$root/usr/lib/$ma" "$@"; }
if run "$root/usr/bin/wharf" --help >"$work/help.out" 2>&1 &&
	grep -q 'mount' "$work/help.out" && grep -q 'Azure' "$work/help.out"; then
	ok "wharf --help (Azure among the origins)"
else
	bad "wharf --help: $(tail -5 "$work/help.out")"
fi
loaded=$(run ldd "$root/usr/bin/wharf" | awk '/libwharf/ {print $3}')
case $loaded in
"$root"/*) ;;
*) bad "the unpacked wharf loads libwharf from '$loaded', not $root" ;;
esac
# mount(8) runs /sbin/mount.fuse.wharf, a link: wharf knows that name.
mkdir "$work/sbin"
ln -s "$root/usr/bin/wharf" "$work/sbin/mount.fuse.wharf"
run "$work/sbin/mount.fuse.wharf" >"$work/helper.out" 2>&1
grep -q '^Usage: mount.fuse.wharf SOURCE DIR' "$work/helper.out" ||
	bad "wharf run as mount.fuse.wharf: $(cat "$work/helper.out")"

# A real mount of a local origin (bench/origin, built by the package
# build), once by `wharf mount`, once as mount(8) would: every file read
# back equal.
mount_check() { # LABEL COMMAND...
	local label=$1 f before=$fail
	shift
	rm -rf "$work/cache"
	mkdir -p "$mnt"
	if ! run "$@" >"$work/mount.out" 2>&1; then
		bad "$label: $(tail -5 "$work/mount.out")"
		return
	fi
	for f in a/f0 a/f1 b/f2; do
		cmp -s "$work/data/$f" "$mnt/$f" || bad "$label: $f read back differs"
	done
	run "$root/usr/bin/wharf" umount "$mnt" >>"$work/mount.out" 2>&1 ||
		bad "$label: wharf umount: $(tail -3 "$work/mount.out")"
	mountpoint -q "$mnt" && bad "$label: still mounted after wharf umount"
	[ "$fail" = "$before" ] && ok "$label: files read back equal, unmounted"
}
if ! [ -c /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	skip_part "mount: no /dev/fuse or fusermount3 here (apt-get install fuse3)"
elif ! [ -x "$src/build/deb/bench/origin" ]; then
	bad "no bench/origin in the package build ($src/build/deb)"
else
	mkdir -p "$work/data/a" "$work/data/b"
	for f in a/f0 a/f1 b/f2; do
		head -c 100000 /dev/urandom >"$work/data/$f"
	done
	"$src/build/deb/bench/origin" --port-file "$work/port" "$work/data" \
		>"$work/origin.log" 2>&1 &
	origin_pid=$!
	i=0
	while ! [ -s "$work/port" ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	url=http://127.0.0.1:$(cat "$work/port" 2>/dev/null)/
	mount_check "wharf mount" "$root/usr/bin/wharf" mount \
		--cache-dir "$work/cache" "$url" "$mnt"
	mount_check "mount.fuse.wharf" "$work/sbin/mount.fuse.wharf" \
		"$url" "$mnt" -o "cache_dir=$work/cache"
fi

# man wharf, a command's page, man libwharf: the pages as the packages
# hold them render.
if ! command -v man >/dev/null 2>&1; then
	skip_part "man: no man here (apt-get install man-db)"
else
	for page in 1:wharf 1:wharf-mount 1:wharf-index 3:libwharf; do
		if clean_env MANWIDTH=80 man -M "$root/usr/share/man" "${page%:*}" \
			"${page#*:}" >"$work/man.out" 2>&1 &&
			grep -q "^NAME" "$work/man.out" &&
			[ "$(wc -l <"$work/man.out")" -gt 50 ]; then
			ok "man ${page#*:}"
		else
			bad "man ${page#*:}: $(head -5 "$work/man.out")"
		fi
	done
fi

# pkg-config, as for an installed libwharf-dev: the .pc file's paths under
# the scratch root (PKG_CONFIG_SYSROOT_DIR).  A program built with its flags
# links and runs with the unpacked library.
pc() {
	clean_env PKG_CONFIG_PATH="$root/usr/lib/$ma/pkgconfig" \
		PKG_CONFIG_SYSROOT_DIR="$root" pkg-config "$@"
}
libs=$(pc --libs wharf 2>&1)
case " $libs " in
*" -lwharf "*) ok "pkg-config --libs wharf: $libs" ;;
*) bad "pkg-config --libs wharf: $libs" ;;
esac
[ "$(pc --modversion wharf 2>&1)" = "$version" ] ||
	bad "pkg-config --modversion wharf: $(pc --modversion wharf 2>&1), not $version"
cat >"$work/v.c" <<'C'
#include <stdio.h>
#include <wharf/loader.h>
int main(void)
{
	unsigned v = wharf_version_number();
	printf("%u.%u.%u\n", v / 10000, v / 100 % 100, v % 100);
	return 0;
}
C
cflags=$(pc --cflags wharf)
if ! cc -o "$work/v" "$work/v.c" $cflags -L"$root/usr/lib/$ma" $libs \
	>"$work/cc.out" 2>&1; then
	bad "cc with pkg-config's flags: $(tail -5 "$work/cc.out")"
elif [ "$(run "$work/v")" = "$version" ]; then
	ok "a program built with pkg-config --cflags --libs wharf runs ($version)"
else
	bad "the program built with pkg-config's flags printed '$(run "$work/v" 2>&1)', not $version"
fi

# import wharf: the unpacked package and library only (from elsewhere, so
# no checkout is near), one index built over the data.
mkdir -p "$work/elsewhere" "$work/data/a"
head -c 64 /dev/urandom >"$work/data/a/one"
if (cd "$work/elsewhere" &&
	run PYTHONPATH="$root/usr/lib/python3/dist-packages" "$py" -c '
import os, sys
import wharf
root, version, data = sys.argv[1:4]
libs = {l.split()[-1] for l in open("/proc/self/maps") if "libwharf" in l}
where = [os.path.realpath(p) for p in [wharf.__file__] + sorted(libs)]
if len(where) < 2 or not all(p.startswith(root + os.sep) for p in where):
    sys.exit("wharf and libwharf from %s, not all under %s" % (where, root))
if wharf.__version__ != version:
    sys.exit("wharf.__version__ is %s, not %s" % (wharf.__version__, version))
ix = wharf.Index.build(os.path.join(root, "..", "x.idx"), dir=data)
print("import wharf %s, libwharf %s, an index of %d samples"
      % (version, sorted(libs)[0], len(ix)))' "$(cd "$root" && pwd -P)" \
	"$version" "$work/data") >"$work/py.out" 2>&1; then
	ok "$(tail -1 "$work/py.out")"
else
	bad "import wharf from the unpacked python3-wharf: $(tail -5 "$work/py.out")"
fi
[ "$fail" = 0 ] || exit 1
[ -z "$skipped" ] || skip_rest "$skipped"
