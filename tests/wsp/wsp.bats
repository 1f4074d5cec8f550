#!/usr/bin/env bats
# tier: fast
# Wave Synchronous Parallel across virtual workers: the traces of real runs checked against
# the rules of WSP (runtime/wsp.c at hp_wsp_gate; tests/wsp/wsp_check.py), one VW against the pipeline alone,
# and the bytes that cross nodes under each placement against the planner's prediction.

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

# traced CLUSTER D NM [options]: a short emulated ed run with --trace $TMP/t
traced() {
    cluster=$1 d=$2 nm=$3
    shift 3
    run "$HETPIPE" run --local --cluster "$cluster" --policy ed --nm "$nm" --staleness "$d" \
        --epochs 1 --test-limit 200 --log-every 0 --trace "$TMP/t" "$@"
    echo "$output" | grep -v '^ ' | tail -3
    [ "$status" -eq 0 ]
}

# check_rules CLUSTER NVWS D NM TRAIN_LIMIT: every minibatch's record of the updates it held,
# every pull and push, against the rules; and the staleness bound and clock rule
check_rules() {
    traced "$1" "$3" "$4" --train-limit "$5" "${@:6}"
    [[ "$output" == *"$2 virtual workers"*"Nm $4"* ]]
    run python3 tests/wsp/wsp_check.py --staleness "$3" --nm "$4" "$TMP"/t.*
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"wsp_check: ok: $2 VWs, D $3, Nm $4"* ]]
}

@test "WSP rules and bounds from traces: D 0, Nm 1 (wave-level lock-step)" {
    check_rules tests/clusters/wsp2x2.ini 2 0 1 2560
}

@test "WSP rules and bounds from traces: D 0, Nm 3 (wave-level lock-step)" {
    check_rules tests/clusters/wsp2x2.ini 2 0 3 3840
}

@test "WSP rules and bounds from traces: D 1, Nm 1" {
    check_rules tests/clusters/wsp2x2.ini 2 1 1 2560
}

@test "WSP rules and bounds from traces: D 1, Nm 3" {
    check_rules tests/clusters/wsp2x2.ini 2 1 3 3840
}

@test "WSP rules and bounds from traces: D 4, Nm 1" {
    check_rules tests/clusters/wsp2x2.ini 2 4 1 2560
}

@test "WSP rules and bounds from traces: D 4, Nm 3" {
    check_rules tests/clusters/wsp2x2.ini 2 4 3 3840
}

@test "WSP rules from traces: two VWs partitioned differently (np), D 1, Nm 2, evaluations" {
    check_rules tests/clusters/mix2.ini 2 1 2 2560 --policy np --eval-every 1000
    [[ "$output" == *"6 evaluation pulls"* ]]
}

@test "WSP rules from traces: 4 VWs of one GPU, D 2, Nm 2" {
    check_rules etc/clusters/local4.ini 4 2 2 3840
}

@test "WSP rules from traces: 4 VWs of one GPU, D 0, Nm 1, 65 minibatches an epoch for 2 epochs" {
    # 65 does not split over 4 VWs: each trains 16 (one is left out), so that every VW pushes
    # the same waves and no last pull waits for a wave another VW never pushes
    check_rules etc/clusters/local4.ini 4 0 1 4160 --epochs 2
    for r in 0 1 2 3; do
        [ "$(grep -c '^mb,' "$TMP/t.$r")" -eq 32 ]
    done
}

@test "the trace checker fails on a wrong D, a corrupted record, a missing pull" {
    traced tests/clusters/wsp2x2.ini 4 3 --train-limit 3840
    run python3 tests/wsp/wsp_check.py --staleness 4 --nm 3 "$TMP"/t.*
    [ "$status" -eq 0 ]
    # the faster VW runs ahead by more than D = 0 allows
    run python3 tests/wsp/wsp_check.py --staleness 0 --nm 3 "$TMP"/t.*
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"FAILED"* ]]
    # a minibatch that claims one more wave of VW 1 than its pull got
    mkdir "$TMP/bad"
    cp "$TMP"/t.* "$TMP/bad/"
    awk -F, -v OFS=, '!done && $1 == "mb" && $5 >= 3 && $4 == 0 {
            split($13, p, ";"); split(p[2], r, ":"); p[2] = (r[1] + 1) ":" (r[2] + 1)
            $13 = p[1] ";" p[2]; done = 1 } { print }' "$TMP/t.0" > "$TMP/bad/t.0"
    ! cmp -s "$TMP/t.0" "$TMP/bad/t.0"
    run python3 tests/wsp/wsp_check.py --staleness 4 --nm 3 "$TMP"/bad/t.*
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"holds"*"expected"* ]]
    # a pull removed
    cp "$TMP/t.0" "$TMP/bad/t.0"
    awk -F, '!done && $1 == "pull" { done = 1; next } { print }' "$TMP/t.0" > "$TMP/bad/t.0"
    run python3 tests/wsp/wsp_check.py --staleness 4 --nm 3 "$TMP"/bad/t.*
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"without a pull"* ]]
}

@test "the trace checker fails on every kind of broken push, answer, gate and final evaluation" {
    # two VWs of two stages, two shards, evaluations within the epoch and a final one
    traced tests/clusters/wsp2x2.ini 1 3 --train-limit 3840 --eval-every 1280
    run python3 tests/wsp/wsp_check.py --staleness 1 --nm 3 "$TMP"/t.*
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"evaluation pulls"*"shard answers"* ]]
    # MUTATION and what the checker must say
    while IFS='|' read -r mut says; do
        rm -rf "$TMP/bad"
        run python3 tests/wsp/wsp_mutate.py "$mut" "$TMP/bad" "$TMP"/t.*
        echo "$output"
        [ "$status" -eq 0 ]
        run python3 tests/wsp/wsp_check.py --staleness 1 --nm 3 "$TMP"/bad/t.*
        echo "$mut: $output"
        [ "$status" -eq 1 ]
        [[ "$output" == *"FAILED"*$says* ]]
    done <<'EOF'
worker-last-push|pushed 9 waves of its 30 minibatches, the rule says 10
worker-mb|minibatch records, its stage 0 has
shard-push|PS shard
shard-last-push|PS shard received 9 waves of vw
shard-swap|PS shard got wave 2 of vw
shard-phantom|waves of it
gate-early|the gate is after the last minibatch of wave
gate-late|ran without a pull
threshold|the rule says
final-threshold|did not wait for every VW's last wave
final-short|the final evaluation must hold every VW's waves
EOF
}

@test "one VW: WSP through the shards gives hetpipe train's losses and weights (Nm 1), and D changes nothing (Nm 3)" {
    printf '[cluster]\nname = two\n[node1]\ngpus = titanv:1\n[node2]\ngpus = p4000:1\n' > "$TMP/two.ini"
    traced "$TMP/two.ini" 0 1 --emulate off --train-limit 3200 --step-log "$TMP/wsp.csv"
    [[ "$output" == *"1 virtual worker, this one of 2 stages, Nm 1"* ]]
    wsp_hash=$(echo "$output" | sed -n 's/.*parameters hash \([0-9a-f]*\).*/\1/p')
    # the shards were used: every wave pushed, pulls from the third on
    [ "$(grep -c '^push,0,' "$TMP/t.0")" -eq 50 ]
    [ "$(grep -c '^pull,0,' "$TMP/t.0")" -eq 48 ]
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --train-limit 3200 \
        --test-limit 200 --log-every 0 --step-log "$TMP/train.csv"
    [ "$status" -eq 0 ]
    diff "$TMP/wsp.csv" "$TMP/train.csv"
    [ "$wsp_hash" = "$(echo "$output" | sed -n 's/.*parameter hash \([0-9a-f]*\).*/\1/p')" ]
    for d in 0 5; do
        traced "$TMP/two.ini" "$d" 3 --emulate off --train-limit 1920 --step-log "$TMP/d$d.csv"
        echo "$output" | sed -n 's/.*parameters hash \([0-9a-f]*\).*/\1/p' > "$TMP/h$d"
    done
    diff "$TMP/d0.csv" "$TMP/d5.csv"
    diff "$TMP/h0" "$TMP/h5"
}

# bytes CLUSTER PLACEMENT: run ed with --stats; print "measured predicted" bytes per wave,
# measured summed over the worker ranks (their pushes and pulls to shards on other nodes)
bytes() {
    tag=$(basename "$1" .ini)-$2
    "$HETPIPE" run --local --cluster "$1" --policy ed --placement "$2" --nm 2 --emulate off \
        --epochs 1 --train-limit 2560 --test-limit 100 --log-every 0 --stats "$TMP/s$tag" \
        --run-dir "$TMP/run$tag" --keep > "$TMP/out$tag" 2>&1 || { cat "$TMP/out$tag" >&2; return 1; }
    m=$(cat "$TMP/s$tag".* | awk '/^remote_bytes_per_wave = / { s += $3 } END { print s + 0 }')
    p=$(sed -n "s/^wave_bytes_$2 = //p" "$TMP/run$tag/plan.ini")
    echo "$m $p"
}

within10() {
    awk -v m="$1" -v p="$2" 'BEGIN { exit !(p == 0 ? m == 0 : (m / p > 0.9 && m / p < 1.1)) }'
}

@test "placement: local moves fewer bytes across nodes than default, each within 10% of the plan" {
    read -r md pd < <(bytes tests/clusters/place2x2.ini default)
    read -r ml pl < <(bytes tests/clusters/place2x2.ini local)
    echo "place2x2 bytes per wave: default measured $md predicted $pd; local measured $ml predicted $pl"
    [ -n "$md" ] && [ -n "$pd" ] && [ -n "$ml" ] && [ -n "$pl" ]
    awk -v d="$md" -v l="$ml" 'BEGIN { exit !(d > 0 && l < d) }'
    within10 "$md" "$pd"
    within10 "$ml" "$pl"
    # a cluster where local placement still crosses nodes (VWs split differently)
    read -r ml pl < <(bytes tests/clusters/wsp2x2.ini local)
    echo "wsp2x2 local: measured $ml predicted $pl"
    awk -v p="$pl" 'BEGIN { exit !(p > 0) }'
    within10 "$ml" "$pl"
}

@test "evaluation stops the world: a faster VW does not train on while VW 0 evaluates" {
    # VW 0 (p4000) is 2.7x slower than VW 1 (titanv); with D 4, VW 1 runs up to 6 waves
    # ahead, so without the wait it would train past every evaluation point during it
    printf '[cluster]\nname = slowfirst\n[node1]\ngpus = p4000:1\n[node2]\ngpus = titanv:1\n' \
        > "$TMP/slowfirst.ini"
    traced "$TMP/slowfirst.ini" 4 1 --policy np --emulate 100 --train-limit 3840 \
        --eval-every 1280 --test-limit 1000
    # VW 1's minibatch at each evaluation point P (every 10 of its own) begins only after
    # VW 0 has pulled the global weights for that evaluation (its k-th evalpull)
    run python3 - "$TMP/t.0" "$TMP/t.1" <<'PY'
import csv, sys
rows0 = list(csv.DictReader(open(sys.argv[1])))
rows1 = list(csv.DictReader(open(sys.argv[2])))
evals = [float(r["t1"]) for r in rows0 if r["event"] == "evalpull"]
starts = {int(r["minibatch"]): float(r["t0"]) for r in rows1 if r["event"] == "mb"}
ahead = max(int(r["minibatch"]) for r in rows1 if r["event"] == "mb" and float(r["t0"]) < evals[0])
print("evaluations at", evals, "; VW 1's last minibatch begun before the first:", ahead)
for k, t in enumerate(evals[:-1]):  # the last one is the final evaluation
    p = 10 * (k + 1)
    assert starts[p] >= t, "VW 1 began minibatch %d at %.3f, before VW 0's evaluation %d at %.3f" % (p, starts[p], k, t)
assert ahead == 9, ahead
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "evaluation pauses every VW, the slower too, and the job's time is the slowest VW's" {
    # VW 0 (titanv) is 2.7x faster than VW 1 (p4000): VW 0 reaches each evaluation point
    # first and waits for VW 1 there before it evaluates
    printf '[cluster]\nname = fastfirst\n[node1]\ngpus = titanv:1\n[node2]\ngpus = p4000:1\n' \
        > "$TMP/fastfirst.ini"
    traced "$TMP/fastfirst.ini" 4 1 --policy np --emulate 100 --train-limit 3840 \
        --eval-every 1280 --test-limit 256 --stats "$TMP/s"
    job=$(sed -n 's/^hetpipe: the job trained \([0-9]*\) images in \([0-9.]*\) s: \([0-9]*\) img\/s.*/\1 \2 \3/p' <<< "$output")
    # every worker pushed its wave before each evaluation point before VW 0 pulled for it
    run python3 - "$TMP/t.0" "$TMP/t.1" <<'PY'
import csv, sys
rows0 = list(csv.DictReader(open(sys.argv[1])))
rows1 = list(csv.DictReader(open(sys.argv[2])))
evals = [float(r["t0"]) for r in rows0 if r["event"] == "evalpull"]
pushed = {int(r["wave"]): float(r["t1"]) for r in rows1 if r["event"] == "push"}
for k, t in enumerate(evals[:-1]):
    w = 10 * (k + 1) - 1
    print("evaluation %d at %.3f, VW 1 pushed wave %d at %.3f" % (k, t, w, pushed[w]))
    assert pushed[w] <= t, "VW 1 still trained during VW 0's evaluation %d" % k
PY
    echo "$output"
    [ "$status" -eq 0 ]
    # the job's time is the slowest rank's training time (within 5%), and its rate the
    # images of every VW over it
    run awk -v job="$job" -F' = ' '
        $1 == "train_s" && $2 > slow { slow = $2 }
        $1 == "job_s" { js = $2 }
        END {
            split(job, j, " ")
            printf "printed: %d images in %s s (%s img/s); stats job_s %.3f; slowest rank %.3f s\n",
                j[1], j[2], j[3], js, slow
            if (j[1] != 3840 || slow <= 0) exit 1
            if (js < 0.95 * slow || js > 1.05 * slow) exit 1
            if (j[2] < 0.95 * slow || j[2] > 1.05 * slow) exit 1
            if (j[3] < 0.9 * 3840 / slow || j[3] > 1.1 * 3840 / slow) exit 1
        }' "$TMP"/s.0 "$TMP"/s.1
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "--stop-at: every rank stops at the first evaluation at or above it (WSP, one VW, dp)" {
    for case in "etc/clusters/local4.ini ed" "etc/clusters/demo.ini ed" "etc/clusters/demo.ini dp"; do
        set -- $case
        rm -f "$TMP"/s.* "$TMP/m.csv"
        run "$HETPIPE" run --local --cluster "$1" --policy "$2" --emulate off --epochs 2 \
            --eval-every 1280 --test-limit 500 --stop-at 70 --log-every 0 --stats "$TMP/s" \
            --metrics "$TMP/m.csv"
        echo "$output" | grep -v '^ ' | tail -4
        [ "$status" -eq 0 ]
        [[ "$output" == *"stopped: test accuracy "*" >= 70% (--stop-at)"* ]]
        # the evaluations before the last are below 70%, the last is at or above it
        awk -F, '$1 == "test" { n++; a[n] = $6 } END {
            for (i = 1; i < n; i++) if (a[i] >= 0.70) exit 1
            exit !(n >= 1 && a[n] >= 0.70) }' "$TMP/m.csv"
        # every worker trained the same minibatches, fewer than its share of one epoch (234)
        sed -n 's/^minibatches = //p' "$TMP"/s.* | sort -u > "$TMP/mb"
        cat "$TMP/mb"
        [ "$(wc -l < "$TMP/mb")" -eq 1 ]
        [ "$(cat "$TMP/mb")" -lt 234 ]
    done
}
