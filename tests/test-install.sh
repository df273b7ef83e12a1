#!/bin/sh
# Installing wharf the usual ways (README, libwharf(3) Python):
#  (a) pip install --no-build-isolation of the source tree into a fresh venv
#      gives a package with libwharf inside it that needs nothing else: from
#      another directory, without WHARF_LIBRARY or PYTHONPATH, wharf.torch
#      reads one epoch equal to the files;
#  (b) make install to a prefix gives a wharf that runs (rpath) and a package
#      that imports with the installed library; as root, an install into a
#      directory of the system's library path runs ldconfig;
#  (c) a small CMake project finds the installed package (find_package(wharf),
#      wharf::wharf), builds against it and runs: from that prefix and from
#      a make install DESTDIR=STAGE staging.
# (a) builds libwharf once more (autoreconf for a git checkout, configure
# --disable-fs): 30 to 60 s on two busy cores; (b) a few seconds.  The source
# tree is copied for (a), since pip builds in the tree it is given, and
# distcheck's is read-only.
set -u
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
build=$(cd "$WHARF_BUILDDIR" && pwd)
py=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/wharf-install-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
skipped=
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# A part that cannot run here: the others still run, and the test as a whole
# is then a skip (77) unless one of them failed.
skip_part() { echo "SKIP: $*"; skipped="${skipped:+$skipped; }$*"; }
# The runs of the installed things see nothing of the build tree's.
clean_env() {
	env -u WHARF_LIBRARY -u PYTHONPATH -u WHARF_BUILDDIR -u WHARF_SRCDIR \
		-u LD_LIBRARY_PATH -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "$@"
}

if ! [ -x "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
	echo "SKIP: $py with numpy is needed (apt-get install python3-numpy)"
	exit 77
fi

# Six files of 64 bytes in two class folders, and the script that reads one
# epoch of them: KIND (numpy or torch), DATA, and the directory
# wharf.library_path must be under.
mkdir -p "$work/data/a" "$work/data/b" "$work/shm" "$work/elsewhere"
for i in 0 1 2 3 4 5; do
	d=a; [ $i -ge 3 ] && d=b
	head -c 64 /dev/urandom >"$work/data/$d/f$i"
done
cat >"$work/epoch.py" <<'PY'
import os
import sys

import wharf

kind, data, want, work = sys.argv[1:5]
lib = os.path.realpath(wharf.library_path)
if not lib.startswith(os.path.realpath(want) + os.sep):
    sys.exit("wharf.library_path is %s, not under %s" % (lib, want))
ix = wharf.Index.build(os.path.join(work, kind + ".idx"), dir=data)
if kind == "torch":
    import wharf.torch
    cls = wharf.torch.Loader
else:
    cls = wharf.Loader
rows = []
with cls(ix, batch_size=2, num_workers=2, shm_dir=os.path.join(work, "shm"),
         decode=wharf.decode.raw(64)) as loader:
    for x, y in loader:
        rows += [bytes(r) for r in (x.numpy() if kind == "torch" else x)]
files = []
for top, _, names in os.walk(data):
    for name in names:
        with open(os.path.join(top, name), "rb") as f:
            files.append(f.read())
if sorted(rows) != sorted(files):
    sys.exit("the epoch's %d samples differ from the %d files"
             % (len(rows), len(files)))
print("%s: one epoch of %d samples equal to the files, library %s"
      % (kind, len(rows), lib))
PY

# (a) pip install into a fresh venv.
need=
"$py" -c 'import ensurepip, venv' 2>/dev/null || need="$need python3-venv"
"$py" -m pip --version >/dev/null 2>&1 || need="$need python3-pip"
"$py" -c 'import setuptools, wheel' 2>/dev/null ||
	need="$need python3-setuptools python3-wheel"
"$py" -c 'import torch' 2>/dev/null || need="$need python3-torch"
if [ -n "$need" ]; then
	skip_part "pip install into a venv: $py lacks what it needs (apt-get install$need)"
else
	# A git checkout is copied as a fresh clone has it (no configure:
	# setup.py runs autoreconf), a release tree without its build outputs.
	mkdir "$work/src"
	srcdir=$(cd "$WHARF_SRCDIR" && pwd -P)
	if [ "$(cd "$srcdir" && git rev-parse --show-toplevel 2>/dev/null)" = \
		"$srcdir" ]; then
		(cd "$srcdir" && git ls-files --cached --others --exclude-standard |
			tar -cf - -T - 2>/dev/null)
	else
		(cd "$WHARF_SRCDIR" && tar -cf - --exclude=./build \
			--exclude=./autom4te.cache --exclude=./config.status \
			--exclude='*.egg-info' --exclude=__pycache__ \
			--exclude=.libs --exclude=.deps --exclude='*.o' \
			--exclude='*.lo' --exclude='*.la' .)
	fi | (cd "$work/src" && tar -xf -) || bad "copying $WHARF_SRCDIR"
	chmod -R u+w "$work/src"
	if ! clean_env "$py" -m venv --system-site-packages "$work/venv" \
		>"$work/venv.log" 2>&1; then
		bad "python3 -m venv: $(tail -3 "$work/venv.log")"
	elif ! (cd "$work/elsewhere" && clean_env "$work/venv/bin/pip" install \
		--no-build-isolation --no-index --no-cache-dir "$work/src" \
		>"$work/pip.log" 2>&1); then
		tail -30 "$work/pip.log"
		bad "pip install --no-build-isolation --no-index of the source tree"
	else
		ok "pip install --no-build-isolation --no-index (offline)"
		site=$("$work/venv/bin/python" -c \
			'import sysconfig; print(sysconfig.get_path("platlib"))')
		lib=$site/wharf/libwharf.so.0
		needed=$(readelf -d "$lib" 2>&1 | grep NEEDED)
		if [ -z "$needed" ]; then
			bad "no $lib, or readelf found no NEEDED: $needed"
		elif echo "$needed" | grep -q -e cudart -e fuse -e curl -e zstd; then
			bad "the bundled libwharf needs CUDA or the mount's libraries: $needed"
		else
			ok "the bundled libwharf needs neither CUDA nor FUSE, curl, zstd"
		fi
		# setup.py's version (configure.ac's AC_INIT) is the library's.
		if (cd "$work/elsewhere" && clean_env "$work/venv/bin/python" -c '
import importlib.metadata, sys
import wharf, wharf.torch
pip = importlib.metadata.version("wharf")
sys.exit(None if pip == wharf.__version__ else
         "pip says version %s, the library %s" % (pip, wharf.__version__))' &&
			clean_env "$work/venv/bin/python" "$work/epoch.py" torch \
				"$work/data" "$work/venv" "$work") >"$work/a.out" 2>&1; then
			ok "$(tail -1 "$work/a.out")"
		else
			bad "the pip-installed package: $(tail -5 "$work/a.out")"
		fi
	fi
fi

# (b) make install to a prefix, of this build tree.  Every directory that
# loader/, cli/ and python/ install into is named, so that a build tree
# configured with its own --libdir cannot install outside the prefix.
pre=$work/prefix
inst() { # LOG [make variables...]: make install in loader, cli and python
	local log=$1 d
	shift
	for d in include cmake loader cli python; do
		clean_env make -C "$build/$d" install prefix="$pre" \
			exec_prefix="$pre" bindir="$pre/bin" sbindir="$pre/sbin" \
			libdir="$pre/lib" includedir="$pre/include" \
			pythondir_wharf="$pre/python" "$@" \
			>>"$log" 2>&1 || return 1
	done
}
# ldconfig stand-in: -v lists $LISTED as a directory of the system's path;
# a run that would rebuild the cache leaves a mark.
mkdir "$work/fakebin"
cat >"$work/fakebin/ldconfig" <<SH
#!/bin/sh
case "\$*" in
*-v*) echo "\$LISTED: (from test-install)" ;;
*) touch "$work/ldconfig-ran" ;;
esac
SH
chmod +x "$work/fakebin/ldconfig"
if ! LISTED=/nonexistent PATH="$work/fakebin:$PATH" inst "$work/install.log"
then
	tail -20 "$work/install.log"
	bad "make install prefix=$pre"
else
	ok "make install prefix=$pre"
	if (cd "$work/elsewhere" && clean_env "$pre/bin/wharf" index build \
		--dir "$work/data" -o "$work/cli.idx" &&
		clean_env "$pre/bin/wharf" index info "$work/cli.idx" |
		grep -q '^samples: *6$') >"$work/b.out" 2>&1; then
		ok "the installed wharf index build runs (no LD_LIBRARY_PATH)"
	else
		bad "the installed wharf: $(tail -5 "$work/b.out")"
	fi
	resolved=$(clean_env ldd "$pre/bin/wharf" | awk '/libwharf/ {print $3}')
	case $resolved in
	"$pre"/*) ok "the installed wharf loads $resolved" ;;
	*) bad "the installed wharf loads libwharf from '$resolved', not $pre/lib" ;;
	esac
	# An ASan build of libwharf needs its runtime loaded first.
	asan=
	if ldd "$pre/lib/libwharf.so.0" | grep -q libasan; then
		asan=$(ldd "$pre/lib/libwharf.so.0" | awk '/libasan/ {print $3}')
	fi
	if (cd "$work/elsewhere" && clean_env PYTHONPATH="$pre/python" \
		${asan:+LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0} \
		"$py" "$work/epoch.py" numpy "$work/data" "$pre/lib" "$work") \
		>"$work/py.out" 2>&1; then
		ok "the installed package: $(tail -1 "$work/py.out")"
	else
		bad "the installed package (PYTHONPATH=$pre/python): $(tail -5 "$work/py.out")"
	fi
	if [ -e "$work/ldconfig-ran" ]; then
		bad "make install ran ldconfig for a libdir outside the system's path"
	fi
fi
if [ "$(id -u)" != 0 ]; then
	skip_part "make install's ldconfig runs only as root"
elif LISTED="$pre/lib" PATH="$work/fakebin:$PATH" \
	inst "$work/install2.log" && [ -e "$work/ldconfig-ran" ]; then
	ok "as root, make install into the system's library path runs ldconfig"
else
	tail -5 "$work/install2.log"
	bad "make install into a directory ldconfig lists did not run ldconfig"
fi

# (c) A CMake project against the prefix, and against a DESTDIR staging of
# the configured prefix (found through CMAKE_PREFIX_PATH): it builds an
# index of records and reads one epoch through wharf.hpp.
mkdir "$work/cmake-src"
cat >"$work/cmake-src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.10)
project(wharf_consumer CXX)
find_package(wharf 0.1 REQUIRED)
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE wharf::wharf)
CM
cat >"$work/cmake-src/consumer.cpp" <<'CPP'
#include <wharf/wharf.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	const std::string dir = argv[1];
	{
		std::ofstream out((dir + "/recs").c_str(), std::ios::binary);
		for (uint64_t i = 0; i < 100; i++)
			out.write(reinterpret_cast<const char *>(&i), sizeof(i));
	}
	wharf::index::build_records(8, std::vector<std::string>(1, dir + "/recs"),
				    dir + "/recs.idx");
	wharf::index idx(dir + "/recs.idx");
	wharf::options opt;
	opt.batch_size = 10;
	opt.shm_dir = dir.c_str();
	wharf::loader loader(idx, opt);
	uint64_t sum = 0;
	for (wharf::batch &b : loader.epoch(0))
		for (uint64_t v : b.samples<uint64_t>())
			sum += v;
	std::printf("sum %llu\n", static_cast<unsigned long long>(sum));
	return sum == 4950 ? 0 : 1;
}
CPP
cmake_project() { # NAME PREFIX: configure, build and run the project
	local bdir=$work/cmake-$1 rt=
	mkdir -p "$bdir/run"
	if ! command -v cmake >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
		skip_part "the CMake project ($1): no cmake or c++ (apt-get install cmake g++)"
	elif ! (clean_env cmake -S "$work/cmake-src" -B "$bdir" \
		-DCMAKE_PREFIX_PATH="$2" && clean_env cmake --build "$bdir") \
		>"$bdir.log" 2>&1; then
		tail -20 "$bdir.log"
		bad "a CMake project with find_package(wharf) against $2"
	elif rt=$(ldd "$bdir/consumer" | awk '/libasan/ {print $3}') &&
		# An ASan build of libwharf needs its runtime loaded first.
		(cd "$work/elsewhere" && clean_env \
		${rt:+LD_PRELOAD="$rt" ASAN_OPTIONS=detect_leaks=0} \
		"$bdir/consumer" "$bdir/run") \
		>"$bdir.out" 2>&1 && grep -q '^sum 4950$' "$bdir.out"; then
		ok "a CMake project finds wharf::wharf in $2, links it and reads an epoch (no LD_LIBRARY_PATH)"
	else
		bad "the CMake project's program against $2: $(tail -5 "$bdir.out")"
	fi
}
if [ -f "$pre/lib/cmake/wharf/wharfConfig.cmake" ]; then
	cmake_project prefix "$pre"
else
	bad "make install put no $pre/lib/cmake/wharf/wharfConfig.cmake"
fi
stage=$work/stage
for d in include cmake loader; do
	clean_env make -C "$build/$d" install DESTDIR="$stage" \
		>>"$work/stage.log" 2>&1 || bad "make install DESTDIR=$stage in $d: $(tail -3 "$work/stage.log")"
done
libdir=$(clean_env make -s -C "$build/cmake" -f Makefile -f - print-libdir <<'MK'
print-libdir:
	@echo $(libdir)
MK
)
prefixdir=$(clean_env make -s -C "$build/cmake" -f Makefile -f - print-prefix <<'MK'
print-prefix:
	@echo $(prefix)
MK
)
if [ -f "$stage$libdir/cmake/wharf/wharfConfig.cmake" ]; then
	cmake_project stage "$stage$prefixdir"
else
	bad "make install DESTDIR=$stage put no $stage$libdir/cmake/wharf/wharfConfig.cmake"
fi

if [ "$fail" = 0 ] && [ -n "$skipped" ]; then
	echo "SKIP: $skipped"
	exit 77
fi
exit $fail
