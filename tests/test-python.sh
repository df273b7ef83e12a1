#!/bin/sh
# The Python binding's tests (tests/python/test_*.py) with Debian's
# /usr/bin/python3, which has numpy and torch.  Skips (77) without them.
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
py=/usr/bin/python3
if ! [ -x "$py" ]; then
	echo "SKIP: no $py"
	exit 77
fi
if ! "$py" -c 'import numpy, torch' 2>/dev/null; then
	echo "SKIP: $py lacks numpy or torch (apt-get install python3-numpy python3-torch)"
	exit 77
fi
lib="$WHARF_BUILDDIR/loader/.libs/libwharf.so"
if ! [ -e "$lib" ]; then
	echo "FAIL: $lib is not built"
	exit 1
fi
export WHARF_LIBRARY="$lib" WHARF_BUILDDIR WHARF_SRCDIR
export PYTHONPATH="$WHARF_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# An ASan build of libwharf needs the runtime loaded before the interpreter;
# the interpreter's own allocations are not ours to check for leaks.
if ldd "$lib" | grep -q libasan; then
	asan=$(ldd "$lib" | awk '/libasan/ {print $3}')
	export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
	export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
fi
# unittest counts a skipped test as run, and its summary is not Check's:
# print Check's summary line, and a "SKIP: NAME: REASON" line for each
# skip (the fixture's fx_skip line), which quickstart counts as skipped.
exec "$py" - "$WHARF_SRCDIR/tests/python" <<'EOF'
import sys
import unittest

suite = unittest.defaultTestLoader.discover(sys.argv[1], pattern="test_*.py")
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
sys.stderr.flush()
for test, why in result.skipped:
    print("SKIP: %s: %s" % (test.id(), " ".join(str(why).split())))
run = result.testsRun
failures = len(result.failures) + len(result.unexpectedSuccesses)
errors = len(result.errors)
print("%d%%: Checks: %d, Failures: %d, Errors: %d"
      % ((run - failures - errors) * 100 // run if run else 0, run, failures,
         errors))
if run == 0:
    print("FAIL: no tests found in %s" % sys.argv[1])
sys.exit(0 if run and result.wasSuccessful() else 1)
EOF
