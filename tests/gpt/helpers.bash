# tests/gpt/helpers.bash - what the GPT job tests share (pipeline.bats, jobs.bats).
# shellcheck shell=bash

# four one-GPU nodes: under --policy ed one VW of four stages
cluster4() {
    printf '[cluster]\nname = gpt4\n' > "$TMP/c4.ini"
    i=1
    for t in titanv titanrtx rtx2060 p4000; do
        printf '\n[node%d]\ngpus = %s:1\n' "$i" "$t" >> "$TMP/c4.ini"
        i=$((i + 1))
    done
}

# shellcheck disable=SC2034 # used by the files that load this one
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
