#!/bin/sh
# The Python binding's tests (tests/python/test_*.py) with Debian's
# /usr/bin/python3 and numpy.  Without torch the tests that need it skip,
# each with its SKIP line, and the others run.  Skips (77) without numpy.
: "${WHARF_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${WHARF_BUILDDIR:=$(pwd)/..}"
py=/usr/bin/python3
if ! [ -x "$py" ]; then
	echo "SKIP: python: no $py"
	exit 77
fi
if ! "$py" -c 'import numpy' 2>/dev/null; then
	echo "SKIP: python: $py lacks numpy (apt-get install python3-numpy)"
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
# unittest's summary is not Check's, and it loses skips: one inside a
# subTest leaves its test counted as a pass, one in setUpClass names no
# test.  So each skip is a check of its own with a "SKIP: NAME: REASON"
# line (the fixture's fx_skip line, which quickstart counts): a subTest's
# as TEST.ITS_PARAMETERS, a class's (or module's) once for each of its
# tests.  Then Check's summary line.
exec "$py" - "$WHARF_SRCDIR/tests/python" <<'EOF'
import re
import sys
import unittest

suite = unittest.defaultTestLoader.discover(sys.argv[1], pattern="test_*.py")


def tests_of(s):
    for t in s:
        if isinstance(t, unittest.TestSuite):
            yield from tests_of(t)
        else:
            yield t


every = list(tests_of(suite))


def name(text):
    """text as a name the SKIP line's pattern takes: [A-Za-z0-9_.]."""
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text).strip("_.")


def skipped_names(test):
    """The names of the checks that one skip stands for."""
    if hasattr(test, "test_case"):
        # A subTest: its test's id and its parameters.
        return [name(test.test_case.id()) + "." +
                name(test._subDescription())]
    if isinstance(test, unittest.TestCase):
        return [name(test.id())]
    # setUpClass or setUpModule (an _ErrorHolder: "setUpClass
    # (mod.Class)"): every test of that class or module.
    m = re.match(r"\w+ \((.*)\)$", test.description)
    where = m.group(1) if m else ""
    got = [name(t.id()) for t in every
           if where and (t.id() + ".").startswith(where + ".")]
    return got or [name(test.description)]


class Result(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.skip_lines = []
        self.extra_checks = 0  # skips that testsRun does not count

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        names = skipped_names(test)
        why = " ".join(str(reason).split())
        self.skip_lines += ["SKIP: %s: %s" % (n, why) for n in names]
        if not isinstance(test, unittest.TestCase) or hasattr(
                test, "test_case"):
            # A subTest's skip comes on top of its test's own check; a
            # class's tests never ran.
            self.extra_checks += len(names)


runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2,
                                 resultclass=Result)
result = runner.run(suite)
sys.stderr.flush()
for line in result.skip_lines:
    print(line)
run = result.testsRun + result.extra_checks
failures = len(result.failures) + len(result.unexpectedSuccesses)
errors = len(result.errors)
print("%d%%: Checks: %d, Failures: %d, Errors: %d"
      % ((run - failures - errors) * 100 // run if run else 0, run, failures,
         errors))
if run == 0:
    print("FAIL: no tests found in %s" % sys.argv[1])
sys.exit(0 if run and result.wasSuccessful() else 1)
EOF
