#!/bin/sh
# Run every test suite and end with one summary line "N passed, N failed, N skipped".
#   unit tests (Check): $UNIT_TESTS        CLI tests (bats): tests/cli.bats with $HETPIPE
# Exit status: 0 only if nothing failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
UNIT_TESTS=${UNIT_TESTS:-$here/../build/tests/unit_tests}
HETPIPE=${HETPIPE:-$here/../build/hetpipe}
export HETPIPE
# Many ranks share 2 cores; tests are deterministic with one BLAS thread.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

log=$(mktemp -d /tmp/hetpipe-tests.XXXXXX)
trap 'rm -rf "$log"' EXIT
passed=0
failed=0
skipped=0

echo "== unit tests (Check)"
"$UNIT_TESTS" > "$log/unit.out" 2>&1
unit_rc=$?
grep -E '^[0-9]+%: Checks:|:[FE]:' "$log/unit.out"
line=$(grep -E '^[0-9]+%: Checks:' "$log/unit.out" | tail -1)
if [ -n "$line" ]; then
    n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
    f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
    e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
    passed=$((passed + n - f - e))
    failed=$((failed + f + e))
else
    echo "unit tests did not run to the end (exit $unit_rc):"
    tail -20 "$log/unit.out"
    failed=$((failed + 1))
fi

echo "== CLI tests (bats)"
if command -v bats > /dev/null 2>&1; then
    bats --tap --timing "$here"/*.bats > "$log/bats.out" 2>&1
    grep -E '^(not ok|ok)' "$log/bats.out" | sed 's/^/  /'
    # what passing tests print on fd 3 (figures) comes before their "ok" line
    awk '/^(not )?ok /{bad = /^not ok /; next} /^#/ && !bad' "$log/bats.out" | head -60
    # each failing test's output (bats prints it after the "not ok" line), its last 150 lines,
    # then where each failed: the end of this log is what a CI summary shows
    awk 'function flush(  i) {
             print "== " hdr
             for (i = n > 150 ? n - 150 : 0; i < n; i++) print buf[i]
         }
         /^not ok /{if (bad) flush(); bad = 1; n = 0; hdr = $0; next}
         /^ok /{if (bad) flush(); bad = 0; next}
         bad {buf[n++] = $0}
         END {if (bad) flush()}' "$log/bats.out"
    awk '/^not ok /{t = $0; next} /^# \(in test file/{print "  " t ": " substr($0, 3)}
         /^#   `.*'"'"' failed/{print "    " substr($0, 5)}' "$log/bats.out"
    p=$(grep '^ok' "$log/bats.out" | grep -vc '# skip')
    k=$(grep '^ok' "$log/bats.out" | grep -c '# skip')
    f=$(grep -c '^not ok' "$log/bats.out")
    passed=$((passed + p))
    skipped=$((skipped + k))
    failed=$((failed + f))
else
    echo "bats not found (run tests/deps.sh)"
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
