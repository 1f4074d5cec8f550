#!/usr/bin/env bats
# tier: fast
# Checkpoints and resume (runtime/ckpt.h): a job killed after a checkpoint and resumed ends
# where an uninterrupted one does; signals checkpoint and stop; another plan resumes by unit;
# bad checkpoints are named; faults end a job within its deadline and leave no process.

load helpers

setup() {
    common_setup
}

teardown() {
    pkill -9 -f "hetpipe.*$TMP" 2> /dev/null || true
    common_teardown
}

@test "one VW pipelined (Nm 3, PS shards): killed after a checkpoint and resumed, it ends bit for bit where an uninterrupted run does" {
    killed_and_resumed pipe --cluster demo --emulate off --epochs 2 --train-limit 6400 \
        --test-limit 500 --checkpoint-every 1000 --log-every 0
    grep -q "the same plan: every rank restored exactly" "$resumed"
    a=$(hash_of "$full") b=$(hash_of "$resumed")
    echo "uninterrupted $a, resumed $b"
    [ -n "$a" ]
    [ "$a" = "$b" ]
}

@test "dp: killed after a checkpoint and resumed, it ends bit for bit where an uninterrupted run does" {
    killed_and_resumed dp --cluster local4 --policy dp --emulate off --epochs 2 \
        --train-limit 6400 --test-limit 500 --checkpoint-every 1000 --log-every 0
    a=$(hash_of "$full") b=$(hash_of "$resumed")
    echo "uninterrupted $a, resumed $b"
    [ -n "$a" ]
    [ "$a" = "$b" ]
}

# signalled SIG: a job gets SIG after its first checkpoint; it must checkpoint at a pause,
# stop with status 75 within 30 s, and resume
signalled() {
    "$HETPIPE" run --local --cluster demo --emulate 50 --epochs 2 --train-limit 6400 \
        --test-limit 500 --checkpoint-dir "$TMP/ck" --checkpoint-every 1000 --log-every 0 \
        > "$TMP/out" 2>&1 &
    local pid=$!
    for _ in $(seq 300); do
        grep -q '^checkpoint 1:' "$TMP/out" && break
        sleep 0.1
    done
    kill -"$1" "$pid"
    start=$(date +%s)
    wait "$pid" && st=0 || st=$?
    end=$(date +%s)
    cat "$TMP/out" | grep -E '^(checkpoint|run|hetpipe)'
    [ "$st" -eq 75 ]
    [ $((end - start)) -le 30 ]
    grep -q "checkpoint at a pause and stop" "$TMP/out"
    grep -q "stopped on request (a signal) after checkpoint 2" "$TMP/out"
    [ -s "$TMP/ck/ckpt-2/manifest" ]
    run "$HETPIPE" run --local --cluster demo --emulate off --epochs 2 --train-limit 6400 \
        --test-limit 500 --checkpoint-dir "$TMP/ck" --checkpoint-every 1000 --log-every 0 \
        --resume auto
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "resumed from checkpoint 2"
}

@test "SIGTERM: the job checkpoints at a pause and exits 75; it resumes" {
    signalled TERM
}

@test "SIGUSR1: the job checkpoints at a pause and exits 75; it resumes" {
    signalled USR1
}

# training: wait until the job in the background ($pid, output $TMP/out) reports its tenth step
training() {
    for _ in $(seq 600); do
        grep -q '^epoch 1/1 step 10/' "$TMP/out" && return 0
        sleep 0.05
    done
    false
}

# paused SIG ARGS...: a job with checkpoints on but no interval (no job point before the
# epoch's end) gets SIG once it trains; it must checkpoint at a pause and be gone within 5 s
paused() {
    local sig=$1
    shift
    "$HETPIPE" run --local "$@" --emulate 50 --epochs 1 --train-limit 25600 --test-limit 500 \
        --checkpoint-dir "$TMP/ck" --log-every 10 > "$TMP/out" 2>&1 &
    local pid=$!
    training
    start=$(date +%s%N)
    kill -"$sig" "$pid"
    wait "$pid" && st=0 || st=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    grep -E '^(checkpoint|hetpipe: (info|stopped))' "$TMP/out"
    echo "# $sig to all ranks gone: $ms ms" >&3
    [ "$st" -eq 75 ]
    [ "$ms" -le 5000 ] # 1 s plus a wave or two on a loaded machine
    grep -q "pauses at its minibatch" "$TMP/out"
    # the checkpoint is within the epoch, not at its end (the only job point)
    line=$(grep '^checkpoint 1:' "$TMP/out")
    mb=$(echo "$line" | sed -n 's/^checkpoint 1: epoch 1, minibatch \([0-9]*\) of \([0-9]*\),.*/\1 \2/p')
    [ -n "$mb" ] && [ "${mb% *}" -lt "${mb#* }" ]
    run "$HETPIPE" run --local "$@" --emulate off --epochs 1 --train-limit 25600 \
        --test-limit 500 --checkpoint-dir "$TMP/ck" --log-every 0 --resume auto
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "resumed from checkpoint 1"
}

@test "SIGUSR1 to four WSP virtual workers: a pause within a wave or two, checkpointed, gone within 5 s; it resumes" {
    paused USR1 --cluster local4 --policy ed --staleness 1
}

@test "SIGTERM to dp replicas: a pause at the next minibatch, checkpointed, gone within 5 s; it resumes" {
    paused TERM --cluster local4 --policy dp
}

@test "a checkpoint at a pause holds bit for bit what one at a job point at the same minibatch holds" {
    # one VW (demo): the pause is where stage 0 of VW 0 is when it hears the signal
    args=(--cluster demo --epochs 1 --train-limit 12800 --test-limit 500 --log-every 10)
    "$HETPIPE" run --local "${args[@]}" --emulate 50 --checkpoint-dir "$TMP/ck" > "$TMP/out" 2>&1 &
    pid=$!
    training
    kill -USR1 "$pid"
    wait "$pid" || true
    line=$(grep '^checkpoint 1:' "$TMP/out")
    echo "$line"
    samples=$(echo "$line" | sed -n 's/.* \([0-9]*\) samples:.*/\1/p')
    [ -n "$samples" ] && [ "$samples" -lt 12800 ]
    # the same job, no signal, its first checkpoint at that minibatch
    run "$HETPIPE" run --local "${args[@]}" --emulate off --checkpoint-dir "$TMP/ck2" \
        --checkpoint-every "$samples" --checkpoint-keep 1000
    [ "$status" -eq 0 ]
    n=0
    for f in "$TMP"/ck/ckpt-1/*.part; do
        cmp "$f" "$TMP/ck2/ckpt-1/${f##*/}"
        n=$((n + 1))
    done
    echo "$n parts equal"
    [ "$n" -ge 4 ]
}

@test "checkpoints written in the background hold bit for bit what waited-for ones hold; the job ends the same" {
    args=(--cluster demo --emulate off --epochs 1 --train-limit 6400 --test-limit 500
        --log-every 0 --checkpoint-every 1600 --checkpoint-keep 100)
    run "$HETPIPE" run --local "${args[@]}" --checkpoint-dir "$TMP/bg"
    [ "$status" -eq 0 ]
    a=$(echo "$output" | sed -n 's/^hetpipe: parameters hash //p')
    run "$HETPIPE" run --local "${args[@]}" --checkpoint-dir "$TMP/wait" --checkpoint-write wait
    [ "$status" -eq 0 ]
    b=$(echo "$output" | sed -n 's/^hetpipe: parameters hash //p')
    echo "background $a, wait $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
    n=0
    for d in "$TMP"/wait/ckpt-*; do
        for f in "$d"/*.part; do
            cmp "$f" "$TMP/bg/${d##*/}/${f##*/}"
            n=$((n + 1))
        done
    done
    echo "$n files equal"
    [ "$n" -ge 24 ] # 3 checkpoints (none at the end) of 8 parts
}

@test "a checkpoint whose part cannot be written is removed, naming it; the one before is kept and training goes on" {
    args=(--cluster demo --emulate off --epochs 2 --train-limit 6400 --test-limit 500
        --log-every 0 --checkpoint-every 3200 --checkpoint-dir "$TMP/ck")
    run "$HETPIPE" run --local "${args[@]}" --epochs 1
    [ "$status" -eq 0 ]
    before=$(ls "$TMP/ck")
    # a file-size limit fails every part's write from now on (the ranks ignore SIGXFSZ; UCX over
    # TCP: its shared-memory transport writes files too)
    run env UCX_TLS=tcp,self bash -c 'ulimit -f 300 && exec "$@"' sh "$HETPIPE" run --local \
        "${args[@]}" --resume auto
    echo "$output" | grep -E '^(hetpipe: (warning|param)|resumed)'
    [ "$status" -eq 0 ]
    echo "$output" | grep -Eq "warning: checkpoint [0-9]+ failed \(rank [0-9]+ could not write rank-[0-9]+\.part\): $TMP/ck/ckpt-[0-9]+ removed, the checkpoints before it kept"
    [ "$(ls "$TMP/ck")" = "$before" ]
    for d in "$TMP"/ck/ckpt-*; do [ -s "$d/manifest" ]; done
}

@test "bad checkpoints are named and refused; --resume auto without one starts afresh" {
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --test-limit 200 --emulate off \
        --checkpoint-dir "$TMP/ck" --checkpoint-every 320 --log-every 0 --resume auto
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "no checkpoint in $TMP/ck: starting from the beginning"
    ck=$(ls -d "$TMP"/ck/ckpt-* | tail -1)
    [ -s "$ck/manifest" ]
    args=(run --local --epochs 1 --train-limit 640 --test-limit 200 --emulate off --log-every 0)
    # a part changed by one byte
    cp -r "$ck" "$TMP/bad1"
    printf 'X' | dd of="$TMP/bad1/rank-2.part" bs=1 seek=100 conv=notrunc 2> /dev/null
    run "$HETPIPE" "${args[@]}" --resume "$TMP/bad1"
    echo "$output"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "is not a valid checkpoint: rank-2.part fails its checksum (corrupt)"
    # no manifest
    cp -r "$ck" "$TMP/bad2"
    rm "$TMP/bad2/manifest"
    run "$HETPIPE" "${args[@]}" --resume "$TMP/bad2"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "it has no manifest (an incomplete checkpoint)"
    # a manifest edited by hand
    cp -r "$ck" "$TMP/bad3"
    sed -i 's/^epoch = .*/epoch = 0/; s/^minibatch = .*/minibatch = 1/' "$TMP/bad3/manifest"
    run "$HETPIPE" "${args[@]}" --resume "$TMP/bad3"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "the checksum does not match its contents"
    # a part cut short
    cp -r "$ck" "$TMP/bad4"
    truncate -s 1000 "$TMP/bad4/rank-2.part"
    run "$HETPIPE" "${args[@]}" --resume "$TMP/bad4"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "rank-2.part has 1000 bytes, the manifest says"
    # another model, another seed
    run "$HETPIPE" "${args[@]}" --model mlp --resume "$ck"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "was taken for model 'cnn'"
    run "$HETPIPE" "${args[@]}" --seed 2 --resume "$ck"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "with --seed 1 --batch 64; this job is model 'cnn' with --seed 2"
    # --resume auto among broken ones takes the newest valid
    cp -r "$TMP/bad1" "$TMP/ck/ckpt-99"
    run "$HETPIPE" "${args[@]}" --epochs 2 --checkpoint-dir "$TMP/ck" --resume auto
    [ "$status" -eq 0 ]
    # a longer job goes on, and says what that does to the schedule
    echo "$output" | grep -q "it was taken in a job of --epochs 1; this job has --epochs 2: the cosine schedule"
    echo "$output" | grep -q "ckpt-99 is not valid (skipped): rank-2.part fails its checksum"
    echo "$output" | grep -q "resumed from checkpoint"
}

@test "checkpoint options: bad values are named with what is allowed, before any rank starts" {
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --checkpoint-dir "$TMP/ck" \
        --checkpoint-every 10parsecs
    [ "$status" -eq 2 ]
    echo "$output" | grep -qF -- "--checkpoint-every=10parsecs: must be N training samples (an integer from 1 to 1125899906842624), or a training time: Nmin (minutes), Nh (hours)"
    for bad in 0 -5 1e3 0min banana; do
        run "$HETPIPE" run --local --checkpoint-dir "$TMP/ck" --checkpoint-every "$bad"
        [ "$status" -eq 2 ]
        echo "$output" | grep -qF -- "--checkpoint-every=$bad: must be N training samples"
    done
    # without --checkpoint-dir: refused before planning, so before any rank
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --checkpoint-every 100
    [ "$status" -eq 2 ]
    echo "$output" | grep -q "run: option '--checkpoint-every' needs '--checkpoint-dir DIR'"
    [[ "$output" != *"plan:"* ]]
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --resume auto
    [ "$status" -eq 2 ]
    echo "$output" | grep -q "run: option '--resume auto' needs '--checkpoint-dir DIR'"
    [[ "$output" != *"plan:"* ]]
    run "$HETPIPE" run --local --resume "" --checkpoint-dir "$TMP/ck"
    [ "$status" -eq 2 ]
    echo "$output" | grep -qF -- "--resume=: empty; must be auto, or a path"
    run "$HETPIPE" run --local --resume "$(printf 'ck\tx')" --checkpoint-dir "$TMP/ck"
    [ "$status" -eq 2 ]
    echo "$output" | grep -qF -- '--resume=ck\x09x: a control character in the path'
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --checkpoint-keep 0 \
        --checkpoint-dir "$TMP/ck"
    [ "$status" -eq 2 ]
    # a rank resumes from a directory: auto is resolved by run and launch
    run "$(dirname "$HETPIPE")/hetpipe-rank" --plan "$TMP/none.ini" --resume auto
    [ "$status" -eq 2 ]
    echo "$output" | grep -q "option '--resume': auto is for hetpipe run and hetpipe launch"
}

# fault WHAT RANK [TIMEOUT]: a local4 ed job with --timeout TIMEOUT (default 5); after training
# started, WHAT (STOP or KILL) its rank RANK (4: the PS shard), or KILL-LAUNCHER (stop rank 2,
# kill -9 hetpipe run); prints the time until no process of the job is left, which must be
# within the target: 10 s after the deadline (--timeout) for a stopped rank, 10 s for a death;
# sets $st, hetpipe run's exit status
fault() {
    local what=$1 rank=$2 d=$TMP/run victim
    # HANG: a stopped rank that only the deadlines find (as on another host: no /proc watch)
    [ "$what" = HANG ] && export HETPIPE_LIVENESS=exit
    "$HETPIPE" run --local --cluster local4 --policy ed --epochs 2 --train-limit 60000 \
        --test-limit 500 --timeout "${3:-5}" --log-every 10 --emulate off --run-dir "$d" \
        > "$TMP/out" 2>&1 &
    local pid=$!
    for _ in $(seq 300); do
        grep -q '^epoch 1/2 step' "$TMP/out" && break
        sleep 0.1
    done
    for p in $(pgrep -f "hetpipe-rank.*$d"); do
        tr '\0' '\n' < "/proc/$p/environ" | grep -qx "HETPIPE_RANK=$rank" && victim=$p
    done
    [ -n "$victim" ]
    start=$(date +%s.%N)
    case $what in
        STOP | HANG) kill -STOP "$victim" ;;
        KILL) kill -9 "$victim" ;;
        KILL-LAUNCHER) kill -STOP "$victim" && kill -9 "$pid" ;;
    esac
    for _ in $(seq 600); do
        pgrep -f "hetpipe.*$d" > /dev/null || break
        sleep 0.1
    done
    end=$(date +%s.%N)
    wait "$pid" && st=0 || st=$?
    gone=$(echo "$end - $start" | bc)
    grep error "$TMP/out" | head -3
    echo "# fault $what rank $rank: no process left after $gone s (exit $st)" >&3
    [ -z "$(pgrep -f "hetpipe.*$d")" ]
    [ "$st" -ne 0 ]
    limit=10
    [ "$what" = STOP ] && limit=$((${3:-5} < 5 ? ${3:-5} + 10 : 15)) # at most --timeout 5, then 10 s
    if [ "$what" = HANG ]; then    # the longer deadline of waits on other VWs, then 10 s
        deadline=$(sed -n 's/.* job points, \([0-9]*\) s$/\1/p' "$TMP/out" | head -1)
        echo "# deadline of waits on other VWs: $deadline s" >&3
        [ -n "$deadline" ]
        limit=$((deadline + 10))
    fi
    awk -v g="$gone" -v l="$limit" 'BEGIN { exit !(g <= l) }'
}

@test "fault: a worker killed ends the job within 10 s, naming it; run exits 128 + SIGKILL" {
    fault KILL 2
    grep -q "rank 2 (vw 2 stage 0, rtx2060 on localhost) was killed by SIGKILL (signal 9)" "$TMP/out"
    [ "$st" -eq 137 ]
}

@test "fault: a PS shard killed ends the job within 10 s, naming it; run exits 128 + SIGKILL" {
    fault KILL 4
    grep -q "rank 4 (PS shard 0 on localhost) was killed by SIGKILL (signal 9)" "$TMP/out"
    [ "$st" -eq 137 ]
}

@test "fault: a worker stopped (SIGSTOP) ends the job within 10 s after its --timeout, naming it; run exits 128 + SIGSTOP" {
    fault STOP 2
    grep -q "rank 2 (vw 2 stage 0, rtx2060 on localhost) is stopped (SIGSTOP)" "$TMP/out"
    [ "$st" -eq 147 ]
}

@test "fault: a PS shard stopped (SIGSTOP) ends the job within 10 s after its --timeout, naming it; run exits 128 + SIGSTOP" {
    fault STOP 4
    grep -q "rank 4 (PS shard 0 on localhost) is stopped (SIGSTOP)" "$TMP/out"
    [ "$st" -eq 147 ]
}

@test "fault: a worker stopped (SIGSTOP) under the default --timeout (60 s) ends the job within 5 s, naming it" {
    fault STOP 2 60
    grep -q "rank 2 (vw 2 stage 0, rtx2060 on localhost) is stopped (SIGSTOP)" "$TMP/out"
    [ "$st" -eq 147 ]
    awk -v g="$gone" 'BEGIN { exit !(g <= 5) }'
}

@test "fault: hetpipe run killed while a rank is stopped: no rank outlives it" {
    fault KILL-LAUNCHER 2
}

@test "fault: a hung worker that only the deadlines can find (no /proc watch, as on another host) ends the job within 10 s after the plan's deadline, naming it" {
    fault HANG 2
    # the PS shard gives up the pulls that wait for vw 2 and names it; the workers whose pulls
    # it refused name the same rank
    cat "$TMP"/run/rank-*.log | grep error
    grep -q "vw 2 (rank 2: vw 2 stage 0, rtx2060 on localhost) stopped pushing" "$TMP/run/rank-4.log"
    cat "$TMP/out" "$TMP"/run/rank-*.log |
        grep -q "stops because rank 2 (vw 2 stage 0, rtx2060 on localhost) is silent"
}

@test "a PS shard that serves no unit (only parameter-less ones) waits out a job longer than the deadlines" {
    # demo, default placement: shard 3 holds pool2 alone; the job outlasts the printed deadline
    run "$HETPIPE" run --local --cluster demo --emulate off --epochs 2 --train-limit 12800 \
        --test-limit 500 --timeout 0.5 --log-every 0
    echo "$output" | grep -E '^(PS|hetpipe)'
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "node4: 1 units"
    deadline=$(echo "$output" | sed -n 's/.* job points, \([0-9]*\) s$/\1/p' | head -1)
    took=$(echo "$output" | sed -n 's/^hetpipe: trained .* in \([0-9.]*\) s:.*/\1/p')
    echo "deadline $deadline s, the job took $took s"
    awk -v t="$took" -v d="$deadline" 'BEGIN { exit !(t > d) }'
}

@test "--checkpoint-every in time: checkpoints at the first job point after each interval" {
    run "$HETPIPE" run --local --cluster demo --emulate 20 --epochs 1 --train-limit 9600 \
        --test-limit 500 --log-every 0 --checkpoint-dir "$TMP/ck" --checkpoint-every 2s \
        --checkpoint-keep 3
    echo "$output" | grep -E '^(checkpoint|hetpipe: trained)'
    [ "$status" -eq 0 ]
    n=$(echo "$output" | grep -c '^checkpoint [0-9]*:')
    took=$(echo "$output" | sed -n 's/^hetpipe: trained .* in \([0-9.]*\) s:.*/\1/p')
    echo "$n checkpoints in $took s"
    # one per 2 s of training at most (plus rounding to job points), at least one per 4 s
    awk -v n="$n" -v t="$took" 'BEGIN { exit !(n >= 1 && n <= t / 2 + 1 && n >= t / 4 - 1) }'
    [ "$(ls -d "$TMP"/ck/ckpt-* | wc -l)" -eq $((n < 3 ? n : 3)) ] # --checkpoint-keep 3
}

# rechecksum MANIFEST: the manifest's checksum line made right again after a hand edit
rechecksum() {
    python3 - "$1" << 'PY'
import sys, zlib
p = sys.argv[1]
body = open(p, "rb").read().rsplit(b"checksum = ", 1)[0]
open(p, "wb").write(body + b"checksum = %08x\n" % zlib.crc32(body))
PY
}

@test "checkpoint directory: a regular file is refused before any rank starts" {
    touch "$TMP/file"
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --checkpoint-dir "$TMP/file" \
        --checkpoint-every 320
    echo "$output"
    [ "$status" -ne 0 ]
    echo "$output" | grep -qF "run: option '--checkpoint-dir': $TMP/file: it is a regular file, not a directory"
    [[ "$output" != *"epoch 1/1"* ]]
    [ -f "$TMP/file" ] && [ ! -s "$TMP/file" ]
}

@test "checkpoint directory: a second job given it while the first runs is refused, naming the first; the first's checkpoints are kept; once it has ended the directory resumes" {
    args=(run --local --epochs 1 --train-limit 3840 --test-limit 200 --log-every 0
        --checkpoint-dir "$TMP/ck" --checkpoint-every 320 --checkpoint-keep 1)
    # the first job runs well past the second's check (a lock is another job's once held 2 s)
    "$HETPIPE" "${args[@]}" --emulate 100 > "$TMP/first" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        grep -q '^checkpoint 1:' "$TMP/first" && break
        sleep 0.1
    done
    grep -q '^checkpoint 1:' "$TMP/first"
    job=$(sed -n 's/^job = //p' "$TMP/ck/hetpipe.job")
    [ -n "$job" ]
    run "$HETPIPE" "${args[@]}" --emulate off
    echo "$output"
    [ "$status" -ne 0 ]
    echo "$output" | grep -qF "run: option '--checkpoint-dir': $TMP/ck: it is in use by another job (job $job, pid "
    echo "$output" | grep -q "two jobs would remove each other's checkpoints"
    [[ "$output" != *"epoch 1/1"* ]]
    wait "$pid"
    # the first job's newest checkpoint is there: the second one removed nothing
    n=$(grep -c '^checkpoint [0-9]*:' "$TMP/first")
    [ -s "$TMP/ck/ckpt-$n/manifest" ]
    # ended, it holds no lock: its directory resumes (and is written again)
    run "$HETPIPE" "${args[@]}" --emulate off --epochs 2 --resume auto
    echo "$output" | grep -E "resum|error"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "resumed from checkpoint $n"
    [ "$(sed -n 's/^job = //p' "$TMP/ck/hetpipe.job")" != "$job" ]
}

@test "resume: another --train-limit is refused, another --epochs said; a bad position, a linked part, a FIFO manifest are named; a manifest's control characters escaped" {
    run "$HETPIPE" run --local --epochs 1 --train-limit 640 --test-limit 200 --emulate off \
        --checkpoint-dir "$TMP/ck" --checkpoint-every 320 --log-every 0
    [ "$status" -eq 0 ]
    ck=$TMP/ck/ckpt-1
    [ -s "$ck/manifest" ]
    args=(run --local --epochs 1 --test-limit 200 --emulate off --log-every 0)
    run "$HETPIPE" "${args[@]}" --train-limit 1280 --resume "$ck"
    echo "$output"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "it was taken in a job of 640 training samples; this job has 1280 (--train-limit): the data order"
    # a position past the epoch's end (the manifest edited, its checksum made right)
    cp -r "$ck" "$TMP/pos"
    sed -i 's/^minibatch = .*/minibatch = 500/' "$TMP/pos/manifest"
    rechecksum "$TMP/pos/manifest"
    run "$HETPIPE" "${args[@]}" --train-limit 640 --resume "$TMP/pos"
    echo "$output"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "its position (epoch 1, minibatch 500) is past the end of an epoch (640 samples at batch 64 over 1 VWs: 10 minibatches per VW and epoch"
    [[ "$output" != *"leaves nothing to train"* ]]
    # a part that is a symbolic link to a good copy of itself
    cp -r "$ck" "$TMP/link"
    mv "$TMP/link/rank-2.part" "$TMP/rank-2.part"
    ln -s "$TMP/rank-2.part" "$TMP/link/rank-2.part"
    run "$HETPIPE" "${args[@]}" --train-limit 640 --resume "$TMP/link"
    echo "$output"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "rank-2.part is a symbolic link, not a regular file"
    # a FIFO as the manifest: named, never waited on, by --resume DIR and by --resume auto
    mkdir "$TMP/ck2"
    cp -r "$ck" "$TMP/ck2/ckpt-1"
    cp -r "$ck" "$TMP/ck2/ckpt-2"
    rm "$TMP/ck2/ckpt-2/manifest"
    mkfifo "$TMP/ck2/ckpt-2/manifest"
    run timeout 30 "$HETPIPE" "${args[@]}" --train-limit 640 --resume "$TMP/ck2/ckpt-2"
    echo "$output"
    [ "$status" -ne 124 ]
    echo "$output" | grep -q "cannot read its manifest: it is a FIFO, not a regular file"
    run timeout 30 "$HETPIPE" "${args[@]}" --train-limit 640 --epochs 2 \
        --checkpoint-dir "$TMP/ck2" --resume auto
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "ckpt-2 is not valid (skipped): cannot read its manifest: it is a FIFO"
    echo "$output" | grep -q "resumed from checkpoint 1"
    # a value with a terminal escape in it: quoted escaped
    cp -r "$ck" "$TMP/esc"
    sed -i 's/^batch = .*/batch = 64\x1b]0;owned\x07/' "$TMP/esc/manifest"
    rechecksum "$TMP/esc/manifest"
    run "$HETPIPE" "${args[@]}" --train-limit 640 --resume "$TMP/esc"
    [ "$status" -ne 0 ]
    echo "$output" | cat -v
    [[ "$output" != *$'\033'* && "$output" != *$'\007'* ]]
    echo "$output" | grep -qF "batch: bad value '64\\x1b]0;owned\\x07'"
}
