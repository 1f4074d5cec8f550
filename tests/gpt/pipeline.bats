#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# GPT-style text models through the pipelined ranks (runtime/worker.c, runtime/vwsync.c):
# token labels with the activations, AdamW, clipping by the global norm of a VW's stages, the
# tied head's gradient summed with its embed's between the first and the last stage.

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

# four one-GPU nodes: under --policy ed one VW of four stages
cluster4() {
    printf '[cluster]\nname = gpt4\n' > "$TMP/c4.ini"
    i=1
    for t in titanv titanrtx rtx2060 p4000; do
        printf '\n[node%d]\ngpus = %s:1\n' "$i" "$t" >> "$TMP/c4.ini"
        i=$((i + 1))
    done
}

GPT_OPTS=(--model gpt-tiny --epochs 1 --train-limit 320 --test-limit 128 --batch 16
          --optimizer adamw --lr 0.002 --warmup 5 --weight-decay 0.1 --clip 0.5 --log-every 0)

# tied_equal FIRST LAST: the token matrix (the first V x d floats of the first stage's
# parameters) and the head's tied copy (the last V x d floats of the last stage's) are the
# same bytes (a job's ranks write FILE.<rank>; one file for both: hetpipe train, a replica)
tied_equal() {
    python3 - "$1" "$2" <<'PY'
import sys
n = 256 * 128 * 4
a = open(sys.argv[1], "rb").read()[:n]
b = open(sys.argv[2], "rb").read()[-n:]
assert len(a) == n and len(b) == n
if a != b:
    sys.exit("the tied copies differ")
print("tied copies identical")
PY
}

@test "gpt-tiny: 4 stages, Nm 1, AdamW, clipping and a tied head give hetpipe train's losses and weights bit for bit" {
    cluster4
    run "$HETPIPE" run --local --cluster "$TMP/c4.ini" --policy ed --nm 1 --emulate off \
        "${GPT_OPTS[@]}" --step-log "$TMP/pipe.csv" --timeline "$TMP/trace.json" \
        --save-params "$TMP/pipe.bin"
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
    # the clipping norm's reduction between the stages is on the timeline
    grep -q '"vwsync"' "$TMP/trace.json"
}

# copies_close FIRST LAST LIMIT: the token matrix and the tied copy differ by at most LIMIT of
# the matrix's norm (relative Frobenius distance)
copies_close() {
    python3 - "$@" <<'PY'
import math, struct, sys
n = 256 * 128
a = struct.unpack(f"{n}f", open(sys.argv[1], "rb").read()[:4 * n])
b = struct.unpack(f"{n}f", open(sys.argv[2], "rb").read()[-4 * n:])
d = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b))) / math.sqrt(sum(x * x for x in a))
print(f"tied copies: relative distance {d:.3g}")
sys.exit(0 if d <= float(sys.argv[3]) else 1)
PY
}

# Under WSP each stage pulls its units' global weights at its own gate, so a VW's two copies
# hold the other VWs' updates pulled at different moments (the shards add pushes in the order
# they arrive): equal updates, close but not bit-identical copies. Measured: 7e-8 and 6e-3.
@test "gpt-tiny under WSP, two VWs split differently (Nm 2): the tied copies stay close, the loss falls" {
    run "$HETPIPE" run --local --cluster "$BATS_TEST_DIRNAME/../clusters/mix2.ini" --policy np \
        --emulate off "${GPT_OPTS[@]}" --train-limit 640 --save-params "$TMP/np.bin" \
        --metrics "$TMP/m.csv"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"2 virtual workers"* ]]
    # VW 0 is ranks 0 and 1, VW 1 ranks 2 and 3 (the plan's order)
    copies_close "$TMP/np.bin.0" "$TMP/np.bin.1" 0.05
    copies_close "$TMP/np.bin.2" "$TMP/np.bin.3" 0.05
    head -1 "$TMP/m.csv" | grep -qx 'split,epoch,step,seconds,loss,perplexity,bits_per_byte,tokens_per_s'
    # validation loss below the uniform guess over 256 bytes (ln 256 = 5.545)
    awk -F, '$1 == "test" { exit !($5 < 4.5) }' "$TMP/m.csv"
}

@test "gpt-tiny: dp over 4 replicas at batch 8 follows hetpipe train at batch 32 within float tolerance" {
    run "$HETPIPE" run --local --policy dp --cluster "$BATS_TEST_DIRNAME/../clusters/mix2.ini" \
        --emulate off "${GPT_OPTS[@]}" --train-limit 640 --batch 8 --metrics "$TMP/dp.csv" \
        --save-params "$TMP/dp.bin"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"dp over 4 replicas"* ]]
    run "$HETPIPE" train --threads 1 "${GPT_OPTS[@]}" --train-limit 640 --batch 32 \
        --metrics "$TMP/t.csv"
    [ "$status" -eq 0 ]
    dp=$(awk -F, '$1 == "test" { print $5 }' "$TMP/dp.csv")
    tr=$(awk -F, '$1 == "test" { print $5 }' "$TMP/t.csv")
    echo "validation loss: dp $dp, train $tr"
    awk -v a="$dp" -v b="$tr" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * b) }'
    tied_equal "$TMP/dp.bin.0" "$TMP/dp.bin.0"
    cmp "$TMP/dp.bin.0" "$TMP/dp.bin.3" # the replicas stay identical
}

@test "gpt-tiny with AdamW (4 stages, Nm 4, clipping, a tied head): killed after a checkpoint and resumed, it ends bit for bit where an uninterrupted run does; another optimizer is refused" {
    load ../ckpt/helpers
    cluster4
    killed_and_resumed gpt --cluster "$TMP/c4.ini" --policy ed --nm 4 --emulate off \
        "${GPT_OPTS[@]}" --epochs 2 --checkpoint-every 100
    grep -q "the same plan: every rank restored exactly" "$resumed"
    a=$(hash_of "$full") b=$(hash_of "$resumed")
    echo "uninterrupted $a, resumed $b"
    [ -n "$a" ]
    [ "$a" = "$b" ]
    grep -qx 'optimizer = adamw' "$TMP"/gpt.ck/ckpt-*/MANIFEST 2>/dev/null ||
        grep -rqx 'optimizer = adamw' "$TMP/gpt.ck"
    run "$HETPIPE" run --local --cluster "$TMP/c4.ini" --policy ed --nm 4 --emulate off \
        "${GPT_OPTS[@]}" --epochs 2 --optimizer sgd --checkpoint-dir "$TMP/gpt.ck" --resume auto
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"it was taken with --optimizer adamw; this job has --optimizer sgd"* ]]
}
