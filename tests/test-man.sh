#!/bin/sh
# Lints the man pages: they must render without a single warning.
set -u
src=${WHARF_SRCDIR:-$(dirname "$0")/..}
fail=0
for page in "$src"/man/wharf.1 "$src"/man/libwharf.3; do
	out=$(LC_ALL=C.UTF-8 MANWIDTH=80 groff -man -ww -z -Tutf8 "$page" 2>&1)
	if [ -n "$out" ]; then
		echo "FAIL: $page: $out"; fail=1
		continue
	fi
	if command -v mandoc >/dev/null 2>&1; then
		out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
		if [ -n "$out" ]; then
			echo "FAIL: $page: $out"; fail=1; continue
		fi
	fi
	if [ -z "$out" ]; then
		echo "ok: $page renders without warnings"
	fi
done
exit $fail
