#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# Ranks that pipeline: hetpipe run --local forks hetpipe-rank processes that talk over UCX.

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

# cluster_of TYPE... : a cluster of one-GPU nodes, so that --policy ed makes one VW of them
cluster_of() {
    {
        echo "[cluster]"
        echo "name = test$#"
        i=1
        for t in "$@"; do
            printf '\n[node%d]\ngpus = %s:1\n' "$i" "$t"
            i=$((i + 1))
        done
    } > "$TMP/c$#.ini"
    echo "$TMP/c$#.ini"
}

# equal_to_train K [OPTION...]: a K-stage VW with Nm = 1 (and the options) gives hetpipe
# train's per-step losses and final parameters, bit for bit (tolerance 0), over 50 steps
equal_to_train() {
    k=$1
    shift
    # shellcheck disable=SC2046
    c=$(cluster_of $(echo titanv titanrtx rtx2060 p4000 | cut -d' ' -f1-"$k"))
    run "$HETPIPE" run --local --cluster "$c" --policy ed --nm 1 --emulate off --epochs 1 \
        --train-limit 3200 --test-limit 500 --log-every 0 --step-log "$TMP/pipe.csv" "$@"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"this one of $k stages, Nm 1"* ]]
    pipe_out=$output
    pipe_hash=$(echo "$output" | sed -n 's/.*parameters hash \([0-9a-f]*\).*/\1/p')
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --train-limit 3200 --test-limit 500 \
        --log-every 0 --step-log "$TMP/train.csv"
    [ "$status" -eq 0 ]
    train_hash=$(echo "$output" | sed -n 's/.*parameter hash \([0-9a-f]*\).*/\1/p')
    [ "$(wc -l < "$TMP/pipe.csv")" -eq 51 ]
    diff "$TMP/pipe.csv" "$TMP/train.csv"
    [ -n "$pipe_hash" ]
    [ "$pipe_hash" = "$train_hash" ]
}

@test "2 stages, Nm 1, shared memory: the same losses and weights as hetpipe train" {
    equal_to_train 2
}

@test "3 stages, Nm 1, shared memory: the same losses and weights as hetpipe train" {
    equal_to_train 3
}

@test "4 stages, Nm 1, shared memory: the same losses and weights as hetpipe train" {
    equal_to_train 4
}

@test "3 stages, Nm 1, every stage recomputing its forward pass: the same as hetpipe train" {
    equal_to_train 3 --recompute always
    # the plan says so: in its header, and on every stage's row
    [[ "$pipe_out" == *"minibatch 64, recompute always"* ]]
    [ "$(echo "$pipe_out" | grep -cE '^  [0-9] .* yes$')" -eq 3 ]
}

@test "4 stages, Nm 1, TCP on loopback: the same losses and weights as hetpipe train" {
    export UCX_TLS=tcp,self UCX_NET_DEVICES=lo
    equal_to_train 4
}

@test "weight stashing: every backward pass uses its forward pass's weights (Nm 4)" {
    c=$(cluster_of titanv titanrtx rtx2060 p4000)
    run "$HETPIPE" run --local --cluster "$c" --policy ed --nm 4 --emulate off --epochs 1 \
        --train-limit 1920 --test-limit 200 --log-every 0 --weight-log "$TMP/w"
    [ "$status" -eq 0 ]
    # columns: vw,stage,minibatch,fwd_version,bwd_version,updates_at_bwd,fwd_hash,bwd_hash
    for r in 0 1 2 3; do
        [ "$(wc -l < "$TMP/w.$r")" -eq 31 ]
        awk -F, 'NR > 1 && ($4 != $5 || $7 != $8) { bad++ } END { exit bad > 0 }' "$TMP/w.$r"
    done
    # the test means something: on stage 0 updates happen between forward and backward
    awk -F, 'NR > 1 && $6 > $4 { n++ } END { exit !(n >= 20) }' "$TMP/w.0"
    # and without stashing the same check fails
    run "$HETPIPE" run --local --cluster "$c" --policy ed --nm 4 --emulate off --epochs 1 \
        --train-limit 1920 --test-limit 200 --log-every 0 --weight-log "$TMP/n" --no-stash
    [ "$status" -eq 0 ]
    ! awk -F, 'NR > 1 && $7 != $8 { bad++ } END { exit bad > 0 }' "$TMP/n.0"
}

@test "killing one rank: the others stop within 10 s and run names the dead rank" {
    c=$(cluster_of titanv titanrtx rtx2060 p4000)
    kill_a_rank 7 3 --local --cluster "$c" --policy ed --emulate 400 --epochs 1 --log-every 0
}

@test "hetpipe run refuses bad input clearly" {
    run "$HETPIPE" run --cluster demo
    [ "$status" -eq 2 ]
    [[ "$output" == *"only --local is supported"* ]]
    run "$HETPIPE" run --local --frobnicate 3
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--frobnicate'"* ]]
    run "$HETPIPE" run --local --policy ed --cluster etc/clusters/nosuch.ini --epochs 1
    [ "$status" -ne 0 ]
    [[ "$output" == *"nosuch.ini"* ]]
    run "$HETPIPE" run --local --epochs 0 --train-limit 640
    [ "$status" -ne 0 ]
    [[ "$output" == *"--epochs=0: must be an integer from 1 to 10000"* ]]
}

@test "emulation: a p4000 stage is slower than a titanv stage by the database's ratio (10%)" {
    # a sanitizer slows some code more than other code: no wall-clock ratio under one
    [ -z "${HETPIPE_SANITIZER:-}" ] || skip "wall-clock ratios are not measured under a sanitizer"
    for t in titanv p4000; do
        c=$(cluster_of "$t")
        mv "$c" "$TMP/$t.ini"
        run "$HETPIPE" run --local --cluster "$TMP/$t.ini" --policy ed --emulate 200 \
            --epochs 1 --train-limit 1280 --test-limit 64 --log-every 0 --stats "$TMP/$t"
        [ "$status" -eq 0 ]
    done
    get() { sed -n "s/^$2 = //p" "$TMP/$1.0"; }
    measured=$(awk -v a="$(get titanv images_per_s)" -v b="$(get p4000 images_per_s)" 'BEGIN { print a / b }')
    predicted=$(awk -v a="$(get titanv predicted_images_per_s)" \
        -v b="$(get p4000 predicted_images_per_s)" 'BEGIN { print a / b }')
    echo "titanv/p4000 speed: measured $measured, database $predicted"
    awk -v m="$measured" -v p="$predicted" 'BEGIN { exit !(p > 1.5 && m / p > 0.9 && m / p < 1.1) }'
}

