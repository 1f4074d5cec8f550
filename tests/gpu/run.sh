#!/bin/sh
# tests/gpu/run.sh - the GPU checks, for a machine with an NVIDIA GPU.
#
#   sh tests/gpu/run.sh        (or: make gpu-check)
#
# Builds with the CUDA backend required (make HP_CUDA=1: the module build/hetpipe-cuda.so), runs
# build/tests/gpu_check_ops (every backend op, CUDA against the CPU reference, the CUDA backend
# through the module loader as the programs get it; the GPT sequence ops included), then times
# training steps with `hetpipe time`: the CNN and VGG-19 on CUDA, the CNN on the CPU for
# comparison, and the GPT models (text: a label per position, hp_net_loss_tokens) gpt-tiny on
# CUDA and the CPU, gpt2 (124 M parameters, context 1024) on CUDA (batch 4).
# Everything printed also goes to a log file when $OUT is set: $OUT itself, or
# $OUT/tests-gpu.log when $OUT is a directory.
#
# Exit status: 0 all steps passed; 1 a step failed; 77 (SKIP) no NVIDIA GPU here.

# Re-run under tee once, so that the whole output lands in the log; the status survives the
# pipe through a file (POSIX sh has no pipefail).
if [ -n "${OUT:-}" ] && [ -z "${HP_GPU_RUN_LOGGED:-}" ]; then
    if [ -d "$OUT" ]; then
        log=$OUT/tests-gpu.log
    else
        log=$OUT
    fi
    status_file=$(mktemp "${TMPDIR:-/tmp}/hp-gpu-run.XXXXXX") || exit 1
    HP_GPU_RUN_LOGGED=1
    export HP_GPU_RUN_LOGGED
    { sh "$0" "$@"; echo "$?" >"$status_file"; } 2>&1 | tee "$log"
    status=$(cat "$status_file")
    rm -f "$status_file"
    exit "${status:-1}"
fi

cd "$(dirname "$0")/../.." || exit 1

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "tests/gpu: SKIP: no NVIDIA GPU (nvidia-smi not found)"
    exit 77
fi
if ! gpus=$(nvidia-smi -L 2>&1); then
    echo "tests/gpu: SKIP: no NVIDIA GPU (nvidia-smi -L failed: $gpus)"
    exit 77
fi
if ! printf '%s\n' "$gpus" | grep -q '^GPU [0-9]'; then
    echo "tests/gpu: SKIP: no NVIDIA GPU (nvidia-smi -L lists none)"
    exit 77
fi

failed=0
steps=0

# step NAME COMMAND...: runs the command, reports and counts its outcome.
step() {
    name=$1
    shift
    steps=$((steps + 1))
    echo "tests/gpu: == $name: $*"
    "$@"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "tests/gpu: ok $name"
    else
        echo "tests/gpu: FAIL $name (exit status $rc)"
        failed=$((failed + 1))
    fi
    return "$rc"
}

jobs=$(nproc 2>/dev/null || echo 4)
if ! step build make HP_CUDA=1 -j"$jobs"; then
    echo "tests/gpu: the build failed; nothing else to run"
    exit 1
fi

echo "tests/gpu: nvidia-smi -L:"
printf '%s\n' "$gpus"

# gpu_check_ops exits 77 without a usable device; with a GPU listed above, that is a failure.
# At debug level the CUDA backend also logs the cuDNN algorithms it picks for each shape.
step check_ops env HETPIPE_LOG=debug build/tests/gpu_check_ops
step time_cnn_cuda build/hetpipe time --model cnn --batch 32 --device cuda --steps 50
step time_vgg19_cuda build/hetpipe time --model vgg19 --batch 32 --device cuda --steps 10
step time_cnn_cpu build/hetpipe time --model cnn --batch 32 --device cpu --steps 50
step time_gpt_tiny_cuda build/hetpipe time --model gpt-tiny --batch 32 --device cuda --steps 50 --profile
step time_gpt_tiny_cpu build/hetpipe time --model gpt-tiny --batch 32 --device cpu --steps 5
step time_gpt2_cuda build/hetpipe time --model gpt2 --batch 4 --device cuda --steps 5 --profile

echo "tests/gpu: $((steps - failed)) of $steps steps passed, $failed failed"
[ "$failed" -eq 0 ]
