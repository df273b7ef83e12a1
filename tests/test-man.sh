#!/bin/sh
# Lints the man pages: they must render without a single warning, in
# groff and, where it is installed, mandoc's lint.  A lint that cannot run
# here says so in a line "SKIP: NAME: REASON" (quickstart counts it as
# skipped, not passed).
set -u
src=${WHARF_SRCDIR:-$(dirname "$0")/..}
fail=0
have_groff=1
have_mandoc=1
if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff_render: no groff (apt-get install groff)"
	have_groff=0
fi
if ! command -v mandoc >/dev/null 2>&1; then
	echo "SKIP: mandoc_lint: no mandoc (apt-get install mandoc)"
	have_mandoc=0
fi
for page in "$src"/man/*.1 "$src"/man/*.3; do
	if [ $have_groff = 1 ]; then
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 \
			groff -man -ww -z -Tutf8 "$page" 2>&1)
		if [ -n "$out" ]; then
			echo "FAIL: $page: $out"; fail=1
			continue
		fi
		echo "ok: $page renders in groff without warnings"
	fi
	if [ $have_mandoc = 1 ]; then
		out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
		if [ -n "$out" ]; then
			echo "FAIL: $page: $out"; fail=1; continue
		fi
		echo "ok: $page passes mandoc's lint"
	fi
done
# Neither could run: nothing was checked, the whole of it skipped.
if [ $have_groff = 0 ] && [ $have_mandoc = 0 ]; then
	exit 77
fi
exit $fail
