#!/usr/bin/env bats
# tier: long
# Resumed jobs keep learning: four VWs under WSP killed after a checkpoint and resumed reach the
# uninterrupted run's accuracy band; a checkpoint of four GPU types resumes on three others,
# re-planned and loaded by unit.

load helpers

setup() {
    common_setup
}

teardown() {
    pkill -9 -f "hetpipe.*$TMP" 2> /dev/null || true
    common_teardown
}

@test "four VWs under WSP: killed after a checkpoint and resumed, it reaches the uninterrupted run's accuracy band" {
    killed_and_resumed wsp --cluster local4 --policy ed --emulate off --epochs 2 \
        --train-limit 12800 --test-limit 2000 --checkpoint-every 3000 --log-every 0
    a=$(acc_of "$full") b=$(acc_of "$resumed")
    echo "uninterrupted $a%, resumed $b%"
    # WSP's timing varies between runs: uninterrupted, these 2 epochs gave 74.8-80.6% (7 runs);
    # the resumed run must land in that band (with a margin of 2.5 below it)
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 72 && b > 72 && b > a - 7) }'
}

@test "a checkpoint of 4 GPUs of four types resumes on 3 GPUs of other types: re-planned, loaded by unit, learning" {
    "$HETPIPE" run --local --cluster local4 --policy ed --epochs 1 --train-limit 12800 \
        --test-limit 2000 --checkpoint-dir "$TMP/ck" --checkpoint-every 6000 --log-every 0 \
        --emulate off > "$TMP/first" 2>&1
    first=$(acc_of "$TMP/first")
    ls "$TMP/ck"
    for policy in np ed; do
        run "$HETPIPE" run --local --cluster tests/clusters/other3.ini --policy "$policy" \
            --epochs 2 --train-limit 12800 --test-limit 2000 --checkpoint-dir "$TMP/ck" \
            --resume auto --log-every 0 --emulate off
        echo "$output" | grep -E '^(VW|resum|epoch)'
        [ "$status" -eq 0 ]
        echo "$output" | grep -q "another plan: each unit loaded where this plan puts it"
        # resumed at the start of epoch 2 from 73-80% after one epoch: it keeps what it learnt
        acc=$(echo "$output" | sed -n 's/^epoch 2\/2 test loss .* accuracy \([0-9.]*\)%.*/\1/p')
        echo "after epoch 1 on local4: $first%; after epoch 2 on other3 ($policy): $acc%"
        awk -v a="$first" -v b="$acc" 'BEGIN { exit !(b >= a - 1 && b > 75) }'
    done
}
