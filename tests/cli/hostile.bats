#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# Hostile input and careless hands: hand-edited files, odd paths, reused directories. Every
# case gets a clear error naming what is wrong, never a crash, and nothing of the user's is
# replaced.

load ../helpers

setup() {
    common_setup
    RANK=${HETPIPE_RANK:-$(dirname "$HETPIPE")/hetpipe-rank}
    "$HETPIPE" plan --cluster local4 --model cnn --policy ed --out "$TMP/p.ini" > /dev/null
}

teardown() {
    common_teardown
}

# rank_on PLAN [RANK]: hetpipe-rank loads PLAN as rank RANK (default 0); it must fail cleanly
# (exit 1, not a signal) before it waits for anyone
rank_on() {
    run timeout 20 "$RANK" --plan "$1" --rank "${2:-0}" --boot-dir "$TMP/boot"
    echo "$output"
    [ "$status" -eq 1 ]
}

@test "plan file: a negative or non-canonical section index is refused, never a crash" {
    for sec in 'vw.-1.stage.0' 'ps.-1' 'vw.-1' 'node.-1' 'vw.01' 'vw.0.stage.00' 'ps.+0' \
        'vw.0.stage.-1' 'vw.99999999999999999999' 'vw.0.stage.2147483648'; do
        { cat "$TMP/p.ini"; printf '\n[%s]\nrank = 0\n' "$sec"; } > "$TMP/bad.ini"
        rank_on "$TMP/bad.ini"
        echo "$output" | grep -qF "unknown or surplus section [$sec]"
    done
}

@test "plan file: a unit count other than the model's is refused by workers and shards alike" {
    # one unit too many (its own shard entry, the last stages ending there) and one too few
    n=$(sed -n 's/^units = //p' "$TMP/p.ini")
    sed -e "s/^units = .*/units = $((n + 1))/" -e "s/^unit_shard = \(.*\)/unit_shard = \1,0/" \
        -e "s/^end_unit = $n$/end_unit = $((n + 1))/" "$TMP/p.ini" > "$TMP/more.ini"
    sed -e "s/^units = .*/units = $((n - 1))/" -e "s/^unit_shard = 0,\(.*\)/unit_shard = \1/" \
        -e "s/^end_unit = $n$/end_unit = $((n - 1))/" "$TMP/p.ini" > "$TMP/less.ini"
    shard=$(sed -n '/^\[ps.0\]/,/^$/s/^rank = //p' "$TMP/p.ini")
    for f in more less; do
        for r in 0 "$shard"; do
            rank_on "$TMP/$f.ini" "$r"
            echo "$output" | grep -q "but model 'cnn' has $n: plan and model do not match"
        done
    done
}

@test "a tensor of 2^31 values or more per sample is refused with the unit named (flatten wrapped to 0x1x1)" {
    for input in 1x65536x65536 4x32768x16384; do
        printf '[model]\nname = big\ninput = %s\nclasses = 10\n\n[f]\ntype = flatten\n\n[fc]\ntype = linear\noutputs = 10\n' \
            "$input" > "$TMP/big.ini"
        run "$HETPIPE" model --model "$TMP/big.ini"
        echo "$output"
        [ "$status" -ne 0 ]
        echo "$output" | grep -q "unit 'f': the input of flatten ($input) has more than 2147483647"
    done
    # just below the limit it is a model (2^31 - 1 = 7 x 7 x 43826197... use 1 x 46340 x 46340)
    printf '[model]\nname = edge\ninput = 1x46340x46340\nclasses = 10\n\n[p]\ntype = maxpool\nkernel = 4096\n\n[fc]\ntype = linear\noutputs = 10\n' \
        > "$TMP/edge.ini"
    run "$HETPIPE" model --model "$TMP/edge.ini"
    echo "$output"
    [ "$status" -eq 0 ]
}

# safe outputs: a result goes to a new file renamed over a regular file or nothing
@test "outputs: a symbolic link is followed and stays a link; the old file's mode is kept (a plan's within 0600)" {
    echo old > "$TMP/real.bin"
    chmod 640 "$TMP/real.bin"
    ln -s real.bin "$TMP/link.bin"
    run "$HETPIPE" train --model cnn --epochs 1 --train-limit 320 --test-limit 100 \
        --save-params "$TMP/link.bin"
    [ "$status" -eq 0 ]
    [ -L "$TMP/link.bin" ]
    [ "$(stat -c %a "$TMP/real.bin")" = 640 ]
    [ "$(stat -c %s "$TMP/real.bin")" -eq $((421738 * 4)) ]
    # the plan holds the job's token: never more than 0600, whatever was there
    echo old > "$TMP/real.ini"
    chmod 644 "$TMP/real.ini"
    ln -s real.ini "$TMP/link.ini"
    run "$HETPIPE" plan --cluster local4 --model cnn --out "$TMP/link.ini"
    [ "$status" -eq 0 ]
    [ -L "$TMP/link.ini" ]
    [ "$(stat -c %a "$TMP/real.ini")" = 600 ]
    grep -q '^\[plan\]' "$TMP/real.ini"
    [ -z "$(find "$TMP" -name '.*.ini.*' -o -name '.*.bin.*')" ] # no temporary left
}

@test "outputs: a directory, a dangling link, a FIFO without reader and a socket are refused, unchanged" {
    mkdir "$TMP/dir"
    ln -s "$TMP/nowhere" "$TMP/dangling"
    mkfifo "$TMP/fifo"
    python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TMP/sock"
    for t in dir dangling fifo sock; do
        run timeout 10 "$HETPIPE" plan --cluster local4 --model cnn --out "$TMP/$t"
        echo "$output" | grep 'error'
        [ "$status" -eq 1 ]
        echo "$output" | grep -q "cannot write the plan to '$TMP/$t': "
    done
    [ -d "$TMP/dir" ] && [ -L "$TMP/dangling" ] && [ -p "$TMP/fifo" ] && [ -S "$TMP/sock" ]
    [ ! -e "$TMP/nowhere" ]
}

@test "outputs: a device is written in place, never replaced by a file (--save-params, plan --out)" {
    [ "$(id -u)" -eq 0 ] || skip "mknod needs root"
    mknod "$TMP/null" c 1 3 # a /dev/null of our own: a regression must not replace the real one
    mknod "$TMP/full" c 1 7
    run "$HETPIPE" plan --cluster local4 --model cnn --out "$TMP/null"
    [ "$status" -eq 0 ]
    [ -c "$TMP/null" ]
    run "$HETPIPE" train --model cnn --epochs 1 --train-limit 320 --test-limit 100 \
        --save-params "$TMP/null"
    [ "$status" -eq 0 ]
    [ -c "$TMP/null" ]
    run "$HETPIPE" plan --cluster local4 --model cnn --out "$TMP/full"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "cannot write the plan to '$TMP/full': No space left on device"
    [ -c "$TMP/full" ]
}

@test "run directory: one that exists must be empty and this user's; a symbolic link is not followed" {
    mkdir "$TMP/used"
    echo "stale" > "$TMP/used/addr.0"
    run "$HETPIPE" run --local --epochs 1 --train-limit 320 --run-dir "$TMP/used"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "run: --run-dir '$TMP/used' exists and is not empty (it holds 'addr.0')"
    [ "$(cat "$TMP/used/addr.0")" = stale ]
    mkdir "$TMP/target"
    ln -s target "$TMP/link"
    run "$HETPIPE" run --local --epochs 1 --train-limit 320 --run-dir "$TMP/link"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "a symbolic link is not followed"
    [ -z "$(ls -A "$TMP/target")" ]
    mkdir -m 755 "$TMP/empty"
    run "$HETPIPE" run --local --epochs 1 --train-limit 320 --test-limit 100 --log-every 0 \
        --run-dir "$TMP/empty"
    [ "$status" -eq 0 ]
    [ "$(stat -c %a "$TMP/empty")" = 700 ]
}

@test "run: interrupted, it exits 128 + the signal and leaves no rank; local ranks listen on loopback only" {
    "$HETPIPE" run --local --epochs 1 --train-limit 60000 --log-every 0 --run-dir "$TMP/run" \
        > "$TMP/out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        [ "$(ls "$TMP/run/boot" 2>/dev/null | grep -c '^addr')" -ge 8 ] && break
        sleep 0.1
    done
    sleep 1
    if command -v ss > /dev/null; then
        ss -ltnpH | grep '"hetpipe-rank"' > "$TMP/listen" || true
        cat "$TMP/listen"
        [ -s "$TMP/listen" ]
        ! awk '{ print $4 }' "$TMP/listen" | grep -v '^127\.'
    fi
    kill -INT "$pid"
    wait "$pid" && st=0 || st=$?
    cat "$TMP/out" | grep -E 'error|interrupted'
    [ "$st" -eq 130 ]
    sleep 0.5
    [ -z "$(pgrep -f "hetpipe-rank.*$TMP/run")" ]
}

@test "plan file: a missing list key (unit_shard, gpus) is named, never a crash (found by fuzz_plan)" {
    for key in unit_shard gpus; do
        grep -v "^$key = " "$TMP/p.ini" > "$TMP/bad.ini"
        rank_on "$TMP/bad.ini"
        echo "$output" | grep -q "missing required key '$key'"
    done
}

@test "input files: a FIFO as cluster, config, model, plan or data file is named, never waited on" {
    mkfifo "$TMP/fifo"
    for args in "plan --cluster $TMP/fifo" "plan --cluster local4 --config $TMP/fifo" \
        "plan --cluster local4 --model $TMP/fifo" "model --model $TMP/fifo"; do
        run timeout 20 "$HETPIPE" $args
        echo "$output"
        [ "$status" -ne 124 ]
        [ "$status" -ne 0 ]
        echo "$output" | grep -qF "'$TMP/fifo': it is a FIFO, not a regular file"
    done
    rank_on "$TMP/fifo"
    echo "$output" | grep -qF "'$TMP/fifo': it is a FIFO, not a regular file"
    mkdir "$TMP/data"
    mkfifo "$TMP/data/train-images-idx3-ubyte.gz"
    run timeout 20 "$HETPIPE" train --data "$TMP/data" --epochs 1 --train-limit 64
    echo "$output"
    [ "$status" -ne 124 ]
    echo "$output" | grep -q "train-images-idx3-ubyte.gz': it is a FIFO, not a regular file"
}

@test "input files: control characters in a config file are refused, naming the line; none reaches the terminal" {
    printf '[cluster]\nname = x\n\033]0;owned\007\033[2Jkey = 1\n' > "$TMP/c.ini"
    printf '[cluster]\nname = x\033[31mred\n\n[node1]\ngpus = titanv:1\n' > "$TMP/n.ini"
    printf '[cluster]\r\nname = crlf\r\n\r\n[node1]\r\ngpus =\ttitanv:1\r\n' > "$TMP/ok.ini"
    for f in c n; do
        run "$HETPIPE" plan --cluster "$TMP/$f.ini"
        echo "$output" | cat -v
        [ "$status" -ne 0 ]
        [[ "$output" != *$'\033'* && "$output" != *$'\007'* ]]
    done
    echo "$output" | grep -qF "n.ini: line 2, column 9: a control character (0x1b); the file must be text (a tab is allowed)"
    # a line break of Windows and a tab are text
    run "$HETPIPE" plan --cluster "$TMP/ok.ini" --model cnn
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "run --local: more ranks than this machine can hold are refused, naming the limit, before any rank starts" {
    { printf '[cluster]\nname = many\n'
      for i in $(seq 100); do printf '\n[n%d]\ngpus = titanv:1\n' "$i"; done; } > "$TMP/many.ini"
    cores=$(getconf _NPROCESSORS_ONLN)
    most=$((8 * cores > 64 ? 8 * cores : 64))
    run timeout 60 "$HETPIPE" run --local --cluster "$TMP/many.ini" --policy np --epochs 1 \
        --train-limit 640 --run-dir "$TMP/run"
    echo "$output"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "run: the plan has 200 ranks, more than this machine can hold: at most $most (max(64, 8 x $cores cores): every rank of a local job is a process on this machine's cores)"
    [ -z "$(ls "$TMP/run" 2> /dev/null)" ]
}
