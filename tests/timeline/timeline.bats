#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# timeline.bats - hetpipe run --timeline FILE: every rank's forward and backward passes, sends
# and receives, pushes, pulls and WSP waits merged into one Chrome trace (tests/timeline/timeline_check.py
# checks it against the run's own stats).

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

@test "timeline: a 4-stage pipeline with Nm 4 fills and runs one-forward-one-backward; passes per rank match its minibatches; a flow from every send to its receive; broken parts named, the others merged" {
    run "$HETPIPE" run --local --cluster local4 --policy np --nm 4 --epochs 1 \
        --train-limit 3000 --test-limit 500 --emulate off --run-dir "$TMP/run" \
        --timeline "$TMP/t.json"
    echo "$output" | tail -4
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "^timeline: .* events and [1-9][0-9]* flows of 5 ranks in $TMP/t.json"
    for r in 0 1 2 3 4; do [ -s "$TMP/run/timeline.$r" ]; done
    run python3 tests/timeline/timeline_check.py "$TMP/t.json" "$TMP/run" --pipeline
    echo "$output"
    [ "$status" -eq 0 ]
    # the checker fails on a timeline that lost one backward pass, or a flow's finish
    python3 - "$TMP/t.json" "$TMP/bad1.json" "$TMP/bad2.json" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
i = next(k for k, e in enumerate(ev) if e.get("cat") == "bwd" and e["tid"] == 2)
json.dump(dict(d, traceEvents=ev[:i] + ev[i + 1:]), open(sys.argv[2], "w"))
i = next(k for k, e in enumerate(ev) if e["ph"] == "f")
json.dump(dict(d, traceEvents=ev[:i] + ev[i + 1:]), open(sys.argv[3], "w"))
EOF
    run python3 tests/timeline/timeline_check.py "$TMP/bad1.json" "$TMP/run"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "FAIL: rank 2: 45 bwd events, its stats say 46 minibatches"
    run python3 tests/timeline/timeline_check.py "$TMP/bad2.json" "$TMP/run"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "FAIL: flow ids without a pair"
    # on rank 0's host the clocks are one: no offset
    [ "$(grep -h '^clock_offset_s = 0.000000000$' "$TMP"/run/timeline.* | wc -l)" -eq 5 ]
    # parts read back by the merge: one cut short, one from another rank
    head -20 "$TMP/run/timeline.1" > "$TMP/cut"
    mv "$TMP/cut" "$TMP/run/timeline.1"
    cp "$TMP/run/timeline.0" "$TMP/run/timeline.2"
    run "$HETPIPE" timeline "$TMP/run" --out "$TMP/m.json"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "timeline.1: .* events of the .* announced (cut short?)"
    echo "$output" | grep -q "timeline.2 is the part of rank 0, not of rank 2"
    echo "$output" | grep -q "2 of 5 ranks' parts are missing"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert {e['tid'] for e in d['traceEvents'] if e['ph']=='X' and e['cat']!='data'} == {0, 3, 4}" "$TMP/m.json"
    run "$HETPIPE" timeline "$TMP"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "'$TMP' is not a run or job directory"
}

@test "timeline: under WSP (D = 0) the VWs of faster emulated GPUs wait for the slowest one" {
    run "$HETPIPE" run --local --cluster local4 --policy ed --staleness 0 --epochs 1 \
        --train-limit 4000 --test-limit 500 --run-dir "$TMP/run" --timeline "$TMP/t.json"
    echo "$output" | tail -3
    [ "$status" -eq 0 ]
    run python3 tests/timeline/timeline_check.py "$TMP/t.json" "$TMP/run" --wsp-waits
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "^wsp waits: VW 0"
}

@test "timeline: the clock offset to rank 0 is measured (within 5 ms on one host); a target that cannot take the timeline is refused before training" {
    run "$HETPIPE" run --local --epochs 1 --train-limit 1000 --timeline "$TMP"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "cannot write the timeline to '$TMP': it is a directory"
    ! echo "$output" | grep -q "^emulation:"
    HETPIPE_CLOCK_SYNC=measure run "$HETPIPE" run --local --cluster local4 --policy ed \
        --epochs 1 --train-limit 1000 --test-limit 100 --emulate off --run-dir "$TMP/run" \
        --timeline "$TMP/t.json"
    [ "$status" -eq 0 ]
    grep -h clock_offset_s "$TMP"/run/timeline.*
    awk -F' = ' '/^clock_offset_s/ { n++; if ($2 > 0.005 || $2 < -0.005) bad++ }
        END { exit !(n == 5 && !bad) }' "$TMP"/run/timeline.*
    # measured, not 0 (a true offset of 0 measures as a few microseconds of noise)
    [ "$(grep -h '^clock_offset_s = 0.000000000$' "$TMP"/run/timeline.* | wc -l)" -lt 5 ]
}


@test "progress: one updating line on a terminal (clocks, ETA), plain lines with --verbose (and without a terminal: every other test), none with --quiet" {
    command -v script > /dev/null || skip "no script(1) to give the run a terminal"
    args="run --local --cluster local4 --policy ed --epochs 1 --train-limit 2560 --test-limit 100 --emulate 5 --log-every 5"
    # shellcheck disable=SC2086
    script -qfc "$HETPIPE $args --run-dir $TMP/a" /dev/null > "$TMP/tty" 2>&1
    grep -a -q "$(printf '\r\033\\[K')epoch 1/1 step [0-9]*/10 loss .* img/s | clocks .* | ETA [0-9]*:[0-9][0-9]" "$TMP/tty"
    ! grep -a -q "^epoch 1/1 step 5/10 loss" "$TMP/tty"
    # evaluations on a line of their own: the updating line cleared first
    grep -a -q "$(printf '\033\\[K')epoch 1/1 test loss .* accuracy [0-9.]*%.\$" "$TMP/tty"
    # shellcheck disable=SC2086
    script -qfc "$HETPIPE $args --verbose --run-dir $TMP/b" /dev/null > "$TMP/verbose" 2>&1
    grep -a -q "^epoch 1/1 step 5/10 loss .* img/s | clocks" "$TMP/verbose"
    ! grep -a -q "ETA" "$TMP/verbose"
    # shellcheck disable=SC2086
    run $HETPIPE $args --quiet --run-dir "$TMP/d"
    [ "$status" -eq 0 ]
    ! echo "$output" | grep -q "step 10/10\|^VW 0"
    echo "$output" | grep -q "^epoch 1/1 test loss"
    # shellcheck disable=SC2086
    run $HETPIPE $args --quiet --verbose
    [ "$status" -eq 2 ]
    echo "$output" | grep -q "options '--quiet' and '--verbose' exclude each other"
}
