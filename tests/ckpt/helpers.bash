# tests/ckpt/helpers.bash - what the checkpoint tests share (load helpers): the jobs' helpers
# (tests/helpers.bash) and a job killed after its first checkpoint and resumed.

load ../helpers

hash_of() {
    sed -n 's/^hetpipe: parameters hash \([0-9a-f]*\)$/\1/p' "$1" | tail -1
}

acc_of() {
    sed -n 's/^epoch [0-9]*\/[0-9]* test loss .* accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1
}

# killed_and_resumed TAG ARGS...: run ARGS with checkpoints to the end (hash A); run them again,
# kill -9 hetpipe run at a random moment after its first checkpoint, resume with --resume auto;
# sets $full and $resumed (the two outputs)
killed_and_resumed() {
    local tag=$1
    shift
    full=$TMP/$tag.full resumed=$TMP/$tag.resumed
    "$HETPIPE" run --local "$@" --checkpoint-dir "$TMP/$tag.ck0" > "$full" 2>&1
    "$HETPIPE" run --local "$@" --checkpoint-dir "$TMP/$tag.ck" --run-dir "$TMP/$tag.run" \
        > "$TMP/$tag.killed" 2>&1 &
    local pid=$!
    for _ in $(seq 300); do
        grep -q '^checkpoint 1:' "$TMP/$tag.killed" && break
        sleep 0.1
    done
    grep -q "^checkpoint 1:" "$TMP/$tag.killed" || { tail -20 "$TMP/$tag.killed"; false; }
    sleep "0.$((RANDOM % 10))"
    kill -9 "$pid"
    wait "$pid" || true
    for _ in $(seq 50); do
        pgrep -f "hetpipe-rank.*$TMP/$tag.run" > /dev/null || break
        sleep 0.1
    done
    [ -z "$(pgrep -f "hetpipe-rank.*$TMP/$tag.run")" ] # ranks die with the launcher
    grep '^checkpoint' "$TMP/$tag.killed" | tail -1
    "$HETPIPE" run --local "$@" --checkpoint-dir "$TMP/$tag.ck" --resume auto > "$resumed" 2>&1
    grep -E '^(resum|run: resum|hetpipe: param)' "$resumed"
    grep -q "resumed from checkpoint" "$resumed"
}
