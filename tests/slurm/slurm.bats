#!/usr/bin/env bats
# tier: slurm
# Bootstrap under a real Slurm: a four-node cluster with typed GPUs on this machine
# (tests/slurm/cluster.sh), and srun --mpi=pmix jobs whose ranks find each other through PMIx
# and talk over UCX (tests/slurm/boot_check.c). Skipped unless root with Slurm and munge installed.

load helpers

setup_file() {
    slurm_prepare || return 0
    slurm_start "${HP_SLURM_TEST_PORT:-26817}" || return 1
}

teardown_file() {
    slurm_stop
}

setup() {
    [ -z "$SKIP_REASON" ] || skip "$SKIP_REASON"
    BOOT_CHECK=${BOOT_CHECK:-build/tests/boot_check}
    case $BOOT_CHECK in
    /*) ;;
    *) BOOT_CHECK="$ROOT/$BOOT_CHECK" ;;
    esac
    [ -x "$BOOT_CHECK" ] || skip "$BOOT_CHECK not built (make)"
}

# expect_ring N: $output has "rank R of N: ok (pmix)" once for every R in 0..N-1, and no other
# line but those
expect_ring() {
    [ "$(echo "$output" | wc -l)" -eq "$1" ]
    r=0
    while [ "$r" -lt "$1" ]; do
        [ "$(echo "$output" | grep -cx "rank $r of $1: ok (pmix)")" -eq 1 ]
        r=$((r + 1))
    done
}

@test "four idle nodes with four GPUs of one type each" {
    run scontrol -o show node
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | grep -c 'State=IDLE ')" -eq 4 ]
    for pair in node1:titanv node2:titanrtx node3:rtx2060 node4:p4000; do
        echo "$output" | grep "^NodeName=${pair%%:*} " | grep -q "Gres=gpu:${pair#*:}:4 "
    done
}

@test "srun --mpi=pmix -N2 -n4: four ranks bootstrap through PMIx and pass a ring" {
    run timeout 60 srun --mpi=pmix -N2 -n4 "$BOOT_CHECK"
    echo "$output"
    [ "$status" -eq 0 ]
    expect_ring 4
}

@test "the same over UCX's TCP on loopback" {
    export UCX_TLS=tcp,self UCX_NET_DEVICES=lo
    run timeout 60 srun --mpi=pmix -N2 -n4 "$BOOT_CHECK"
    echo "$output"
    [ "$status" -eq 0 ]
    expect_ring 4
}

@test "without --mpi=pmix a rank says how to start it" {
    run timeout 60 srun -N1 -n1 "$BOOT_CHECK"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"srun --mpi=pmix"* ]]
}

@test "hetpipe-rank under srun --mpi=pmix -N4 -n8 pipelines the CNN as hetpipe run --local does" {
    hetpipe=${HETPIPE:-build/hetpipe}
    case $hetpipe in /*) ;; *) hetpipe="$ROOT/$hetpipe" ;; esac
    tmp=$(mktemp -d)
    "$hetpipe" plan --cluster "$ROOT/etc/clusters/demo.ini" --model cnn --policy ed --batch 64 \
        --nm 1 --out "$tmp/plan.ini" > /dev/null
    run timeout 120 srun --mpi=pmix -N4 -n8 --gres=gpu:1 -K env OPENBLAS_NUM_THREADS=1 \
        "$(dirname "$hetpipe")/hetpipe-rank" --plan "$tmp/plan.ini" \
        --config "$ROOT/etc/hetpipe.conf" --epochs 1 --train-limit 3200 --test-limit 500 \
        --log-every 0
    echo "$output"
    [ "$status" -eq 0 ]
    pipe_hash=$(echo "$output" | sed -n 's/.*parameters hash \([0-9a-f]*\).*/\1/p')
    # Nm 1: the same parameters as hetpipe train with the same seed, on this machine
    run env OPENBLAS_NUM_THREADS=1 "$hetpipe" train --model cnn --device cpu --epochs 1 \
        --train-limit 3200 --test-limit 500 --log-every 0
    rm -rf "$tmp"
    [ "$status" -eq 0 ]
    train_hash=$(echo "$output" | sed -n 's/.*parameter hash \([0-9a-f]*\).*/\1/p')
    [ -n "$pipe_hash" ]
    [ "$pipe_hash" = "$train_hash" ]
}
