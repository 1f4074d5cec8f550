#!/usr/bin/env bats
# tier: fast
# hetpipe doctor without Slurm: one line per check ("ok", "FAIL ...; fix: ...", "skip"), exit 1
# on a FAIL. UCX, PMIx and CUDA are checked through hetpipe-rank --self-check (hetpipe links
# none of them). On this machine with --no-slurm, and with broken input. Under a real Slurm:
# tests/slurm/doctor.bats.

load ../helpers

setup() {
    common_setup
    ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
    case $HETPIPE in
    /*) ;;
    *) HETPIPE="$ROOT/$HETPIPE" ;;
    esac
}

teardown() {
    common_teardown
}

@test "doctor --no-slurm passes on this machine: config, models, data set, rank program, UCX, PMIx" {
    run timeout 60 "$HETPIPE" doctor --no-slurm
    echo "$output"
    [ "$status" -eq 0 ]
    line_of ok config | grep -q 'hetpipe.conf: [0-9][0-9]* GPU types$'
    line_of ok models | grep -q 'cnn, vgg19, resnet152 load'
    line_of ok 'data set' | grep -q 'fashion-mnist: Fashion-MNIST, 4 files readable, 10000 test images'
    line_of ok 'rank program' | grep -q 'hetpipe-rank runs$'
    line_of ok UCX | grep -q 'UCX 1\.[0-9]*\.[0-9]*: context and worker created; transports '
    line_of ok PMIx | grep -q 'PMIx [0-9]'
    for c in 'Slurm discovery' 'Slurm controller' 'Slurm plugin' 'PMIx in srun'; do
        line_of skip "$c" | grep -q ': --no-slurm$'
    done
    # every line is one of the three forms
    [ "$(echo "$output" | grep -cvE '^(ok   |FAIL |skip )[A-Za-z][A-Za-z ]*: ')" -eq 0 ]
    [[ "$output" != *FAIL* ]]
}

@test "without a GPU the CUDA line is skip; --require-gpu makes it a FAIL with a fix" {
    if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
        skip "a GPU is present"
    fi
    run timeout 60 "$HETPIPE" doctor --no-slurm
    [ "$status" -eq 0 ]
    line_of skip CUDA
    run timeout 60 "$HETPIPE" doctor --no-slurm --require-gpu
    echo "$output"
    [ "$status" -eq 1 ]
    line_of FAIL CUDA | grep -q '; fix: '
    [ "$(echo "$output" | grep -c '^FAIL ')" -eq 1 ]
    [[ "$output" == *"hetpipe doctor: 1 check(s) failed"* ]]
}

@test "a broken --config is a FAIL that names the file and the key; the other checks still run" {
    printf '[gpu.x]\nmemory_gib = abc\n' > "$TMP/bad.conf"
    run timeout 60 "$HETPIPE" doctor --no-slurm --config "$TMP/bad.conf"
    echo "$output"
    [ "$status" -eq 1 ]
    l=$(line_of FAIL config)
    [[ "$l" == *"$TMP/bad.conf"*"memory_gib"*"; fix: "*"--config FILE"* ]]
    line_of ok models
    line_of ok UCX
    # a missing one
    run timeout 60 "$HETPIPE" doctor --no-slurm --config "$TMP/none.conf"
    [ "$status" -eq 1 ]
    line_of FAIL config | grep -q "'$TMP/none.conf': No such file or directory; fix: "
}

@test "--data /nonexistent is a FAIL of the data set with the apt-get fix" {
    run timeout 60 "$HETPIPE" doctor --no-slurm --data /nonexistent
    echo "$output"
    [ "$status" -eq 1 ]
    line_of FAIL 'data set' | grep -q "'/nonexistent': No such file or directory; fix: apt-get install dataset-fashion-mnist, or give --data DIR"
}

@test "a data directory that lacks a file or holds a corrupt one names it" {
    cp /usr/share/datasets/fashion-mnist/*.gz "$TMP/"
    rm "$TMP/t10k-labels-idx1-ubyte.gz"
    run timeout 60 "$HETPIPE" doctor --no-slurm --data "$TMP"
    [ "$status" -eq 1 ]
    line_of FAIL 'data set' | grep -q 'missing or unreadable: t10k-labels-idx1-ubyte.gz; fix: '
    cp /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz "$TMP/"
    head -c 1000 /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz > "$TMP/t10k-images-idx3-ubyte.gz"
    run timeout 60 "$HETPIPE" doctor --no-slurm --data "$TMP"
    echo "$output"
    [ "$status" -eq 1 ]
    line_of FAIL 'data set' | grep -q "t10k-images-idx3-ubyte.gz.*corrupt.*; fix: "
}

@test "a rank program that does not run is a FAIL" {
    HETPIPE_RANK_BIN=/bin/false run timeout 60 "$HETPIPE" doctor --no-slurm
    [ "$status" -eq 1 ]
    line_of FAIL 'rank program' | grep -q "'/bin/false --help' failed (exit 1); fix: "
    HETPIPE_RANK_BIN="$TMP/none" run timeout 60 "$HETPIPE" doctor --no-slurm
    [ "$status" -eq 1 ]
    line_of FAIL 'rank program' | grep -q "$TMP/none.*; fix: .*HETPIPE_RANK_BIN"
}

@test "a rank program that cannot start names the library; UCX, PMIx and CUDA are not checked" {
    # a broken libucp.so.0 first on the library path: hetpipe (which needs no UCX) still runs,
    # hetpipe-rank cannot start
    mkdir "$TMP/lib"
    : > "$TMP/lib/libucp.so.0"
    LD_LIBRARY_PATH="$TMP/lib" run timeout 60 "$HETPIPE" doctor --no-slurm
    echo "$output"
    [ "$status" -eq 1 ]
    line_of FAIL 'rank program' | grep -q "hetpipe-rank --help' cannot be run (exit 127): .*libucp.so.0.*; fix: install the shared library it names"
    for c in UCX PMIx CUDA; do
        line_of skip "$c" | grep -q 'not checked: the rank program does not run'
    done
    [ "$(echo "$output" | grep -c '^FAIL ')" -eq 1 ]
    line_of ok config
}

@test "a rank program without a self-check: UCX fails with a fix, PMIx and CUDA are not checked" {
    printf '#!/bin/sh\n[ "$1" = --help ] && exit 0\necho "hetpipe-rank: error: unknown option $1" >&2\nexit 2\n' > "$TMP/rank"
    chmod +x "$TMP/rank"
    HETPIPE_RANK_BIN="$TMP/rank" run timeout 60 "$HETPIPE" doctor --no-slurm
    echo "$output"
    [ "$status" -eq 1 ]
    line_of ok 'rank program'
    line_of FAIL UCX | grep -q "no 'ucx.version' from the rank program's self-check: '$TMP/rank --self-check' failed (exit 2): hetpipe-rank: error: unknown option --self-check; fix: rebuild hetpipe-rank"
    line_of skip PMIx | grep -q 'not checked'
    line_of skip CUDA | grep -q 'not checked'
    [ "$(echo "$output" | grep -c '^FAIL ')" -eq 1 ]
}

@test "UCX that cannot make a context (UCX_TLS names no transport) is a FAIL with the UCX_TLS fix" {
    UCX_TLS=bogus run timeout 60 "$HETPIPE" doctor --no-slurm
    echo "$output"
    [ "$status" -eq 1 ]
    line_of FAIL UCX | grep -q '^FAIL UCX: UCX 1\.[0-9.]*: cannot create the transport: ucp_init: .*; fix: check UCX_TLS'
    line_of ok PMIx
}

@test "no srun on PATH: the Slurm checks are skipped, not failed" {
    mkdir "$TMP/bin"
    to=$(command -v timeout)
    PATH="$TMP/bin" run "$to" 60 "$HETPIPE" doctor
    echo "$output"
    [ "$status" -eq 0 ]
    for c in 'Slurm discovery' 'Slurm controller' 'Slurm plugin' 'PMIx in srun'; do
        line_of skip "$c" | grep -q 'no srun on PATH'
    done
}

@test "doctor --help lists its options; a bad option or argument is refused" {
    run "$HETPIPE" doctor --help
    [ "$status" -eq 0 ]
    for o in --config --data --require-gpu --no-slurm; do
        [[ "$output" == *"$o"* ]]
    done
    run "$HETPIPE" doctor --bogus
    [ "$status" -eq 2 ]
    run "$HETPIPE" doctor extra
    [ "$status" -eq 2 ]
    [[ "$output" == *"unexpected argument 'extra'"* ]]
    run "$HETPIPE" --help
    [[ "$output" == *"doctor"* ]]
}
