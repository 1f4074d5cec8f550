#!/bin/sh
# run.sh SECONDS NAME... - run each harness $FUZZ_BUILD/fuzz_NAME (make fuzz-build) for SECONDS
# on a scratch copy of tests/fuzz/corpus/NAME (the repository's corpus is left as it is), one
# after the other. One line per harness: "fuzz NAME: N execs, cov C, K crashes". A crash
# leaves its input in $FUZZ_BUILD/crash-NAME-* and the log's tail on the terminal; the exit
# status is 1 when any harness crashed or failed to start. Run from the repository root.
set -u
. tests/fuzz/common.sh
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
seconds=$1
shift
failed=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/hp-fuzz-run.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
for name in "$@"; do
    bin=$FUZZ_BUILD/fuzz_$name
    log=$FUZZ_BUILD/fuzz-$name.log
    rm -rf "$scratch/corpus"
    mkdir -p "$scratch/corpus"
    cp tests/fuzz/corpus/"$name"/* "$scratch/corpus/" 2> /dev/null
    rc=0
    # shellcheck disable=SC2046 # fuzz_opts is a list of options
    "$bin" $(fuzz_opts "$name") -max_total_time="$seconds" \
        -artifact_prefix="$FUZZ_BUILD/crash-$name-" "$scratch/corpus" > "$log" 2>&1 || rc=$?
    set -- $(fuzz_stats "$log") "$@"
    execs=$1 cov=$2
    shift 4
    if [ "$rc" -eq 0 ]; then
        echo "fuzz $name: $execs execs, cov $cov, 0 crashes"
    else
        echo "fuzz $name: $execs execs, cov $cov, 1 crash (exit $rc; log $log):"
        grep -E 'ERROR|SUMMARY|^ *#[0-9] |Test unit written' "$log" | head -20 | sed 's/^/    /'
        failed=1
    fi
done
exit $failed
