#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# GPT-style text models through the pipelined ranks (runtime/worker.c, runtime/vwsync.c):
# token labels with the activations, AdamW, clipping by the global norm of a VW's stages, the
# tied head's gradient summed with its embed's between the first and the last stage.

load ../helpers
load helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

@test "gpt-tiny: 4 stages, Nm 1, AdamW, clipping and a tied head give hetpipe train's losses and weights bit for bit" {
    cluster4
    run "$HETPIPE" run --local --cluster "$TMP/c4.ini" --policy ed --nm 1 --emulate off \
        "${GPT_OPTS[@]}" --step-log "$TMP/pipe.csv" --timeline "$TMP/trace.json" \
        --save-params "$TMP/pipe.bin" --run-dir "$TMP/rd" --metrics "$TMP/rd/metrics.csv" \
        --stats "$TMP/st"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"this one of 4 stages, Nm 1"* ]]
    [[ "$output" == *"validation loss "*" ppl "*" bpb "* ]]
    pipe_hash=$(echo "$output" | sed -n 's/.*parameters hash \([0-9a-f]*\).*/\1/p')
    run "$HETPIPE" train --threads 1 "${GPT_OPTS[@]}" --step-log "$TMP/train.csv" \
        --save-params "$TMP/train.bin"
    echo "$output"
    [ "$status" -eq 0 ]
    train_hash=$(echo "$output" | sed -n 's/.*parameter hash \([0-9a-f]*\).*/\1/p')
    [ "$(wc -l < "$TMP/pipe.csv")" -eq 21 ]
    diff "$TMP/pipe.csv" "$TMP/train.csv"
    [ -n "$pipe_hash" ]
    [ "$pipe_hash" = "$train_hash" ]
    cat "$TMP/pipe.bin".[0-3] | cmp - "$TMP/train.bin"
    tied_equal "$TMP/pipe.bin.0" "$TMP/pipe.bin.3"
    tied_equal "$TMP/train.bin" "$TMP/train.bin"
    # every stage's device memory as the planner predicted it, to the byte (the first stage
    # keeps the tied head's gradient beside its net, AdamW's second moment in each)
    for f in "$TMP"/st.[0-3]; do
        awk -F' = ' '$1 == "mem_peak" { p = $2 } $1 == "mem_predicted" { q = $2 }
                     END { exit !(p > 0 && p == q) }' "$f"
    done
    # the clipping norm's reduction between the stages is on the timeline
    grep -q '"vwsync"' "$TMP/trace.json"
    # the job's report: validation loss, perplexity and bits per byte, no accuracy
    run "$HETPIPE" report "$TMP/rd"
    [ "$status" -eq 0 ]
    grep -Eq 'validation reached</dt><dd>loss [0-9.]+ per token, perplexity [0-9.]+, [0-9.]+ bits per byte' \
        "$TMP/rd/report.html"
    ! grep -q 'accuracy reached' "$TMP/rd/report.html"
}

@test "gpt-tiny: --stop-at is a validation loss for a text model: the job stops at the first evaluation at or below it" {
    cluster4
    run "$HETPIPE" run --local --cluster "$TMP/c4.ini" --policy ed --emulate off \
        "${GPT_OPTS[@]}" --train-limit 960 --eval-every 160 --stop-at 5.3 --metrics "$TMP/m.csv"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hetpipe: stopped: validation loss "*" <= 5.3 (--stop-at) after "*" samples"* ]]
    # the last evaluation is the first at or below 5.3, and the job stopped before its end
    awk -F, '$1 == "test" { n++; last = $5; if ($5 <= 5.3 && !hit) hit = n }
             END { exit !(hit == n && last <= 5.3) }' "$TMP/m.csv"
    [ "$(awk -F, '$1 == "test" { s = $3 } END { print s }' "$TMP/m.csv")" -lt 60 ]
}
