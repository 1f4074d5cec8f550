#!/usr/bin/env bats
# Hostile input and careless hands: hand-edited files, odd paths, reused directories. Every
# case gets a clear error naming what is wrong, never a crash, and nothing of the user's is
# replaced.

load helpers

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
