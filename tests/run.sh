#!/bin/sh
# Run test tiers and end with one summary line "N passed, N failed, N skipped".
#
#   sh tests/run.sh [TIER...]        (default: unit fast; make check, check-slurm, check-long,
#                                     check-san and check-all call it)
#
#   unit   the Check unit tests ($UNIT_TESTS, build/tests/unit_tests)
#   fast   the bats files marked "# tier: fast": the command line and local jobs (seconds each)
#   slurm  "# tier: slurm": a real Slurm cluster on this machine (tests/slurm/cluster.sh)
#   long   "# tier: long": convergence runs and other long jobs
#   san    the unit tests and the bats files marked "# sanitizers: yes", against hetpipe and
#          hetpipe-rank built with AddressSanitizer and with UndefinedBehaviorSanitizer (built
#          here: make BUILD=build-address|build-undefined SANITIZER=... HP_CUDA=0)
#
# Every bats file under tests/ names its tier on a line "# tier: NAME"; one without is an
# error (so no file is left out). tests/README.md says which file covers which module.
# Exit status: 0 only if nothing failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
UNIT_TESTS=${UNIT_TESTS:-$root/build/tests/unit_tests}
HETPIPE=${HETPIPE:-$root/build/hetpipe}
MAKE=${MAKE:-make}
export HETPIPE
# Many ranks share 2 cores; tests are deterministic with one BLAS thread.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

log=$(mktemp -d /tmp/hetpipe-tests.XXXXXX)
trap 'rm -rf "$log"' EXIT
passed=0
failed=0
skipped=0
tiers=${*:-unit fast}
# every failure, one line each, printed again just above the summary (a CI log's tail)
recap="$log/recap"
: > "$recap"

# the bats files of a tier, sorted; "san": those marked for the sanitizer builds
files_of() {
    find "$here" -name '*.bats' -not -path '*/fuzz/*' | sort | while read -r f; do
        t=$(sed -n 's/^# tier: *\([a-z]*\).*/\1/p' "$f" | head -1)
        if [ -z "$t" ]; then
            echo "MISSING-TIER:$f"
        elif [ "$1" = san ]; then
            grep -q '^# sanitizers: yes' "$f" && echo "$f"
        elif [ "$t" = "$1" ]; then
            echo "$f"
        fi
    done
}

unit() { # unit BINARY LABEL
    out="$log/unit.$2.out"
    "$1" > "$out" 2>&1
    rc=$?
    grep -E '^[0-9]+%: Checks:|:[FE]:|runtime error|ERROR: ' "$out" | sed "s/^/  [$2] /"
    grep -E ':[FE]:' "$out" | cut -c1-200 | sed "s/^/[$2] /" >> "$recap"
    line=$(grep -E '^[0-9]+%: Checks:' "$out" | tail -1)
    if [ -n "$line" ]; then
        n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
        f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
        e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
        passed=$((passed + n - f - e))
        failed=$((failed + f + e))
        if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then # a sanitizer's report at exit
            echo "  [$2] the unit tests exited $rc:"
            tail -40 "$out"
            echo "[$2] the unit tests exited $rc (a sanitizer's report)" >> "$recap"
            failed=$((failed + 1))
        fi
    else
        echo "  [$2] the unit tests did not run to the end (exit $rc):"
        tail -20 "$out"
        echo "[$2] the unit tests did not run to the end (exit $rc)" >> "$recap"
        failed=$((failed + 1))
    fi
}

bats_files() { # bats_files LABEL FILE...
    label=$1
    shift
    [ $# -gt 0 ] || return 0
    out="$log/bats.$label.out"
    bats --tap --timing "$@" > "$out" 2>&1
    grep -E '^(not ok|ok)' "$out" | sed "s/^/  [$label] /"
    # what passing tests print on fd 3 (figures) comes before their "ok" line
    awk '/^(not )?ok /{bad = /^not ok /; next} /^#/ && !bad' "$out" | head -60
    # each failing test's output (bats prints it after the "not ok" line), its last 150 lines,
    # then where each failed: the end of this log is what a CI summary shows
    awk 'function flush(  i) {
             print "== " hdr
             for (i = n > 150 ? n - 150 : 0; i < n; i++) print buf[i]
         }
         /^not ok /{if (bad) flush(); bad = 1; n = 0; hdr = $0; next}
         /^ok /{if (bad) flush(); bad = 0; next}
         bad {buf[n++] = $0}
         END {if (bad) flush()}' "$out"
    # and into the recap, each failing test and where it failed, on one line
    awk -v l="$label" -v recap="$recap" '
         function done() { if (t != "") print substr("[" l "] " t w, 1, 300) >> recap; t = w = "" }
         /^not ok /{done(); t = $0; next}
         /^ok /{done(); next}
         /^# \(in test file/{print "  " t ": " substr($0, 3); w = " " substr($0, 3)}
         /^#   `.*'"'"' failed/{print "    " substr($0, 5)}
         END {done()}' "$out"
    p=$(grep '^ok' "$out" | grep -vc '# skip')
    k=$(grep '^ok' "$out" | grep -c '# skip')
    f=$(grep -c '^not ok' "$out")
    planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$out" | head -1)
    if [ -n "$planned" ] && [ $((p + k + f)) -lt "$planned" ]; then
        echo "  [$label] bats stopped after $((p + k + f)) of $planned tests:"
        tail -20 "$out"
        echo "[$label] bats stopped after $((p + k + f)) of $planned tests" >> "$recap"
        f=$((f + planned - p - k - f))
    fi
    passed=$((passed + p))
    skipped=$((skipped + k))
    failed=$((failed + f))
}

# The sanitizer builds: hetpipe, hetpipe-rank and the unit tests in build-$san.
san_build() {
    mkdir -p "$root/build-$1"
    (cd "$root" && $MAKE -j"$(nproc)" BUILD="build-$1" SANITIZER="$1" HP_CUDA=0 \
        "build-$1/tests/unit_tests" "build-$1/hetpipe" "build-$1/hetpipe-rank" \
        "build-$1/tests/gpu_check_ops") > "$root/build-$1/make.log" 2>&1 || {
        tail -40 "$root/build-$1/make.log"
        echo "  [$1] the sanitizer build failed"
        failed=$((failed + 1))
        return 1
    }
}

missing=$(files_of none | sed -n 's/^MISSING-TIER://p')
if [ -n "$missing" ]; then
    echo "these bats files name no tier (a line '# tier: fast|slurm|long'):"
    echo "$missing" | sed 's/^/  /'
    failed=$((failed + 1))
fi
if ! command -v bats > /dev/null 2>&1; then
    echo "bats not found (run tests/deps.sh)"
    failed=$((failed + 1))
    tiers=$(echo "$tiers" | sed 's/fast\|slurm\|long\|san//g')
fi

for tier in $tiers; do
    t0=$(date +%s)
    echo "== tier $tier"
    case $tier in
    unit) unit "$UNIT_TESTS" unit ;;
    fast | slurm | long)
        # shellcheck disable=SC2046
        bats_files "$tier" $(files_of "$tier") ;;
    san)
        for san in address undefined; do
            san_build "$san" || continue
            unit "$root/build-$san/tests/unit_tests" "$san"
            keep=$HETPIPE
            HETPIPE="$root/build-$san/hetpipe"
            HETPIPE_SANITIZER=$san
            export HETPIPE_SANITIZER
            # shellcheck disable=SC2046
            bats_files "$san" $(files_of san)
            HETPIPE=$keep
            unset HETPIPE_SANITIZER
        done ;;
    *)
        echo "unknown tier '$tier' (allowed: unit, fast, slurm, long, san)"
        failed=$((failed + 1)) ;;
    esac
    echo "== tier $tier: $(($(date +%s) - t0)) s"
done

if [ -s "$recap" ]; then
    echo "== what failed ($(wc -l < "$recap") lines; the whole output of each is above)"
    cat "$recap"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
