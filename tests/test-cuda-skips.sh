#!/bin/sh
# test-cuda where it cannot reach a device: each GPU test it leaves out has a
# SKIP line of its own, "SKIP: NAME: REASON" as quickstart's summarize counts
# them, and the program passes on the checks it ran (an exit of 77 would
# have the summary show one of those lines for all).
set -u
bin="${WHARF_BUILDDIR:-..}/tests/test-cuda"
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
	echo "SKIP: test-cuda-skips: a GPU is here: test-cuda runs its tests"
	exit 77
fi
out=$("$bin" 2>&1)
rc=$?
# Shown, but not as SKIP lines of this script (summarize would count them
# twice).
echo "$out" | sed 's/^/test-cuda: /'
fail=0
if [ "$rc" != 0 ]; then
	echo "FAIL: test-cuda exited $rc without a device, not 0"
	fail=1
fi
skips=$(echo "$out" | grep -E '^SKIP: ' || true)
named=$(echo "$out" | grep -cE '^SKIP: [A-Za-z_][A-Za-z0-9_.]*: .' || true)
names=$(echo "$skips" | sed -n 's/^SKIP: \([^:]*\): .*/\1/p' | sort -u | wc -l)
if [ -z "$skips" ]; then
	echo "FAIL: no SKIP line from test-cuda without a device"
	fail=1
elif [ "$named" != "$(echo "$skips" | wc -l)" ] || [ "$names" != "$named" ]; then
	echo "FAIL: SKIP lines not one a test, each \"SKIP: NAME: REASON\""
	fail=1
fi
exit $fail
