#!/bin/sh
# campaign.sh [NAME...] - the long fuzzing campaign (tests/fuzz/README.md): each harness in
# turn (one process at a time) for $CAMPAIGN_SECONDS (default 600) on a scratch copy of its
# corpus, then what it found merged (-merge=1: only inputs that add coverage) into
# tests/fuzz/corpus/NAME. A crash does not end a harness's time: its input is kept in
# $LOGDIR/crash-NAME-*, counted, and the run goes on for the time left (at most 5 restarts).
# As each harness finishes its row in tests/fuzz/campaign.md is (re)written: executions,
# coverage (edges) and features at the end, the corpus after the merge, crashes.
# Logs: $LOGDIR (default /tmp/fuzzlogs)/NAME.log. Run from the repository root, after
# make fuzz-build. Without NAMEs: every harness built.
set -u
. tests/fuzz/common.sh
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${CAMPAIGN_SECONDS:-600}
LOGDIR=${LOGDIR:-/tmp/fuzzlogs}
TABLE=tests/fuzz/campaign.md
ORDER="siteconf model cluster plan binding address msgheader options plugstack gres manifest timeline"
mkdir -p "$LOGDIR"
[ $# -gt 0 ] || set -- $(for n in $ORDER; do [ -x "$FUZZ_BUILD/fuzz_$n" ] && echo "$n"; done)

now() { date +%s; }

# The table's header and its rows for every harness in ORDER that has a result.
write_table() {
    {
        echo "# Fuzzing campaign"
        echo
        echo "Written by tests/fuzz/campaign.sh as each harness finishes: one libFuzzer process at a"
        echo "time (no -jobs, -workers or -fork) under ASan and UBSan, on $(uname -m) with"
        echo "$(nproc) cores; execs/s over the whole run. cov: edges covered at the end; ft: features;"
        echo "corpus: files and bytes of tests/fuzz/corpus/NAME after the merge. Crashes must be 0."
        echo
        echo "| harness | seconds | executions | execs/s | cov (edges) | ft | corpus | crashes | date |"
        echo "|---|---:|---:|---:|---:|---:|---|---:|---|"
        for n in $ORDER; do
            if [ -f "$LOGDIR/result-$n" ]; then cat "$LOGDIR/result-$n"; fi
        done
    } > "$TABLE.tmp"
    mv "$TABLE.tmp" "$TABLE"
}

for name in "$@"; do
    bin=$FUZZ_BUILD/fuzz_$name
    log=$LOGDIR/$name.log
    scratch=$LOGDIR/corpus-$name
    rm -rf "$scratch"
    mkdir -p "$scratch"
    cp tests/fuzz/corpus/"$name"/* "$scratch/" 2> /dev/null
    rm -f "$LOGDIR"/crash-"$name"-*
    : > "$log"
    start=$(now)
    execs=0 crashes=0 restarts=0
    while :; do
        left=$((SECONDS_EACH - ($(now) - start)))
        [ "$left" -gt 0 ] || break
        rc=0
        # shellcheck disable=SC2046 # fuzz_opts is a list of options
        "$bin" $(fuzz_opts "$name") -max_total_time="$left" \
            -artifact_prefix="$LOGDIR/crash-$name-" "$scratch" > "$log.part" 2>&1 || rc=$?
        cat "$log.part" >> "$log"
        set -- $(fuzz_stats "$log.part") "$@"
        execs=$((execs + $1)) cov=$2 ft=$3
        shift 4
        [ "$rc" -eq 0 ] && break
        crashes=$((crashes + 1))
        restarts=$((restarts + 1))
        [ "$restarts" -le 5 ] || break
    done
    rm -f "$log.part"
    secs=$(($(now) - start))
    # what the scratch corpus adds to the repository's, nothing else
    "$bin" -merge=1 -max_len="$(fuzz_maxlen "$name")" -timeout=20 -rss_limit_mb=2560 \
        tests/fuzz/corpus/"$name" "$scratch" >> "$LOGDIR/$name.merge.log" 2>&1
    files=$(find tests/fuzz/corpus/"$name" -type f | wc -l)
    bytes=$(du -sb tests/fuzz/corpus/"$name" | cut -f1)
    printf '| %s | %d | %d | %d | %s | %s | %d files, %d KiB | %d | %s |\n' "$name" "$secs" \
        "$execs" $((execs / (secs > 0 ? secs : 1))) "$cov" "$ft" "$files" $((bytes / 1024)) \
        "$crashes" "$(date -u +%Y-%m-%dT%H:%MZ)" > "$LOGDIR/result-$name"
    write_table
    echo "campaign $name: $execs execs in $secs s, cov $cov, ft $ft, $crashes crashes"
done
