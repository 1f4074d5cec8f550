#!/usr/bin/env bats
# tier: fast
# The CUDA backend as a module loaded on demand (runtime/backend_module.h): neither program
# links a CUDA library, hetpipe links no UCX or PMIx; hetpipe-cuda.so exports its entry point
# only; --version names the module without loading it; without the module, or with the CUDA
# libraries hidden (a private mount namespace: root only), everything but --device cuda works
# and --device cuda names what is missing; with an NVIDIA driver visible (faked in a private
# /dev) auto loads the module, and says once that it cannot.

setup() {
    HETPIPE=${HETPIPE:-build/hetpipe}
    case $HETPIPE in
    /*) ;;
    *) HETPIPE="$PWD/$HETPIPE" ;;
    esac
    B=$(dirname "$HETPIPE")
    RANK="$B/hetpipe-rank"
    MODULE="$B/hetpipe-cuda.so"
    TMP=$(mktemp -d)
    export OPENBLAS_NUM_THREADS=1
    unset HETPIPE_CUDA_MODULE HETPIPE_RANK_BIN
}

teardown() {
    rm -rf "$TMP"
}

needed() {
    readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'
}

need_module() {
    [ -f "$MODULE" ] || skip "the CUDA backend module is not built (HP_CUDA=0 or no nvcc)"
}

# need_namespace: root, and unshare may make a private mount namespace
need_namespace() {
    [ "$(id -u)" -eq 0 ] || skip "not root: cannot hide the CUDA libraries"
    command -v unshare > /dev/null 2>&1 || skip "unshare not installed"
    unshare --mount --propagation private true 2> /dev/null ||
        skip "unshare --mount is not permitted here"
}

# The directories the CUDA libraries come from: the module's RUNPATH and where ld.so.cache
# has them. Each is covered by an empty directory in the namespace.
cuda_dirs() {
    {
        readelf -d "$MODULE" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p; s/.*(RPATH).*\[\(.*\)\]$/\1/p' |
            tr ':' '\n'
        ldconfig -p | sed -n 's/^\s*lib\(cudart\|cublas\|cublasLt\|cudnn\)\.so.* => \(.*\)\/[^/]*$/\2/p'
    } | while read -r d; do [ -d "$d" ] && readlink -f "$d"; done | sort -u
}

# hidden SCRIPT: run the sh SCRIPT (it sees $HETPIPE, $RANK, $TMP, $MODULE) with the CUDA
# libraries hidden, and with an NVIDIA driver visible when FAKE_DRIVER=1 (a private /dev: a
# tmpfs of links to the real entries, and an empty nvidiactl). Sets $status and $output.
hidden() {
    mkdir -p "$TMP/empty" "$TMP/realdev"
    HIDE=$(cuda_dirs) HETPIPE="$HETPIPE" RANK="$RANK" TMP="$TMP" MODULE="$MODULE" \
        run unshare --mount --propagation private sh -c '
        for d in $HIDE; do mount --bind "$TMP/empty" "$d" || exit 99; done
        if [ "${FAKE_DRIVER:-0}" = 1 ]; then
            mount --rbind /dev "$TMP/realdev" && mount -t tmpfs tmpfs /dev || exit 99
            for e in "$TMP"/realdev/*; do ln -s "$e" "/dev/${e##*/}"; done
            : > /dev/nvidiactl
        fi
        ldd "$MODULE" | grep -q "not found" || { echo "the CUDA libraries are still there"; exit 98; }
        '"$1"
    echo "$output"
    [ "$status" -ne 99 ] || skip "cannot mount in the private namespace"
    [ "$status" -ne 98 ] || skip "the CUDA libraries are found elsewhere: cannot hide them"
}

@test "neither program links a CUDA library; hetpipe links no UCX and no PMIx" {
    needed "$HETPIPE" > "$TMP/hetpipe.needed"
    needed "$RANK" > "$TMP/rank.needed"
    cat "$TMP/hetpipe.needed" "$TMP/rank.needed"
    [ -s "$TMP/hetpipe.needed" ]
    [ "$(grep -cE '^lib(cudart|cublas|cublasLt|cudnn)\b' "$TMP/hetpipe.needed")" -eq 0 ]
    [ "$(grep -cE '^lib(cudart|cublas|cublasLt|cudnn)\b' "$TMP/rank.needed")" -eq 0 ]
    [ "$(grep -cE '^lib(ucp|ucs|uct|ucm|pmix)\b' "$TMP/hetpipe.needed")" -eq 0 ]
    # the rank is what talks UCX and PMIx
    grep -q '^libucp' "$TMP/rank.needed"
    grep -q '^libpmix' "$TMP/rank.needed"
    # nor indirectly
    [ "$(ldd "$HETPIPE" | grep -cE '/lib(cuda|cudart|cudnn|cublas|ucp|ucs|uct|ucm|pmix)\b')" -eq 0 ]
}

@test "hetpipe --version maps no CUDA, UCX or PMIx library and names the module unloaded; auto" {
    LD_DEBUG=libs "$HETPIPE" --version > "$TMP/out" 2> "$TMP/libs"
    cat "$TMP/out"
    grep -q 'calling init: .*libc\.so' "$TMP/libs" # LD_DEBUG does list what is loaded
    [ "$(grep -cE 'calling init: .*/(libcud|libcublas|libuc[pstm]|libpmix|hetpipe-cuda)' "$TMP/libs")" -eq 0 ]
    if [ ! -e /dev/nvidiactl ] && [ ! -e /proc/driver/nvidia/version ]; then
        # no driver: --device auto opens no module either
        LD_DEBUG=libs "$HETPIPE" train --device auto --epochs 1 --train-limit 64 --test-limit 64 \
            > /dev/null 2> "$TMP/libs"
        grep -q 'calling init: .*libopenblas' "$TMP/libs"
        [ "$(grep -cE 'calling init: .*/(libcud|libcublas|hetpipe-cuda)' "$TMP/libs")" -eq 0 ]
    fi
    if [ -f "$MODULE" ]; then
        grep -qx "hetpipe [0-9.]* (cuda backend: $MODULE)" "$TMP/out"
        # and what does load it shows up: --device cuda opens the module
        ldd "$MODULE" | grep -q 'not found' && return 0
        LD_DEBUG=libs "$HETPIPE" train --device cuda --epochs 1 --train-limit 64 \
            > /dev/null 2> "$TMP/libs" || true
        grep -q "calling init: $MODULE" "$TMP/libs"
    else
        grep -q "(cuda backend: none; hetpipe-cuda.so not found in $B, " "$TMP/out"
    fi
}

@test "the module exports its entry point only and needs nothing from the program" {
    need_module
    [ "$(nm -D --defined-only "$MODULE" | awk '{ print $NF }')" = hp_backend_module_cuda_v1 ]
    [ "$(nm -D --undefined-only "$MODULE" | grep -c ' hp_')" -eq 0 ]
    needed "$MODULE" | grep -q '^libcudart'
    needed "$MODULE" | grep -q '^libcublas'
    needed "$MODULE" | grep -q '^libcudnn'
}

@test "without the module: --version says where it looked, --device cuda says so, auto is the CPU" {
    mkdir "$TMP/bin"
    cp "$HETPIPE" "$TMP/bin/hetpipe"
    run "$TMP/bin/hetpipe" --version
    echo "$output"
    [ "$status" -eq 0 ]
    if [ ! -e /usr/local/lib/hetpipe/hetpipe-cuda.so ]; then
        [[ "$output" == *"(cuda backend: none; hetpipe-cuda.so not found in $TMP/bin, $TMP/lib/hetpipe, "*"/hetpipe)" ]]
    fi
    export HETPIPE_CUDA_MODULE="$TMP/none.so"
    run "$HETPIPE" --version
    [[ "$output" == *"(cuda backend: none; hetpipe-cuda.so not found in '$TMP/none.so' (HETPIPE_CUDA_MODULE))" ]]
    run "$HETPIPE" train --device cuda --epochs 1 --train-limit 64 --test-limit 64
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"error: device 'cuda': this hetpipe has no CUDA backend (hetpipe-cuda.so not found in '$TMP/none.so' (HETPIPE_CUDA_MODULE); rebuild with nvcc, HP_CUDA=1"* ]]
    run "$HETPIPE" train --device auto --epochs 1 --train-limit 64 --test-limit 64
    [ "$status" -eq 0 ]
    [[ "$output" != *warning* ]]
    [[ "$output" == *"hetpipe train: done"* ]]
}

@test "hetpipe-rank --self-check needs no plan: UCX, PMIx and the CUDA module as key = value" {
    run "$RANK" --self-check
    echo "$output"
    [ "$status" -eq 0 ]
    for k in ucx.version ucx.transports ucx.context pmix.version cuda.module cuda.driver; do
        [ "$(echo "$output" | grep -c "^$k = ")" -eq 1 ]
    done
    echo "$output" | grep -qx 'ucx.context = ok'
    if [ -f "$MODULE" ]; then
        echo "$output" | grep -qx "cuda.module = $MODULE"
        echo "$output" | grep -qx 'cuda.load = ok'
        echo "$output" | grep -q '^cuda.devices = [0-9]'
    else
        echo "$output" | grep -qx 'cuda.module = none'
        echo "$output" | grep -q "^cuda.searched = $B, "
    fi
    # no context: exit 1, and the lines still come
    UCX_TLS=bogus run "$RANK" --self-check
    [ "$status" -eq 1 ]
    echo "$output" | grep -q '^ucx.context = failed: .*ucp_init'
    echo "$output" | grep -q '^pmix.version = '
}

@test "CUDA libraries hidden: version, plan, run --local, report work; --device cuda names the library" {
    need_module
    need_namespace
    hidden '
        "$HETPIPE" --version || exit 1
        "$HETPIPE" plan --cluster demo --model cnn --quiet || exit 2
        "$HETPIPE" run --local --cluster demo --policy ed --emulate off --epochs 1 \
            --train-limit 640 --test-limit 200 --log-every 0 --run-dir "$TMP/job" > "$TMP/run.out" 2>&1 ||
            { cat "$TMP/run.out"; exit 3; }
        "$HETPIPE" report "$TMP/job" || exit 4
        "$RANK" --self-check > "$TMP/self.out" 2>&1 || exit 5
        "$HETPIPE" doctor --no-slurm > "$TMP/doctor.out" 2>&1 || { cat "$TMP/doctor.out"; exit 6; }
        "$HETPIPE" train --device cuda --epochs 1 --train-limit 64 > "$TMP/cuda.out" 2>&1
        echo "cuda status $?"
        cat "$TMP/cuda.out"'
    [ "$status" -eq 0 ]
    [[ "$output" == *"cuda backend: $MODULE)"* ]]
    grep -q 'test loss .* accuracy' "$TMP/run.out"
    # no driver: auto did not even try the module
    [ -e /dev/nvidiactl ] || [ "$(grep -c 'CUDA backend' "$TMP/run.out")" -eq 0 ]
    [ -s "$TMP/job/report.html" ]
    grep -q '^cuda.load = failed: .*hetpipe-cuda.so.*lib\(cudnn\|cublas\|cublasLt\|cudart\)[^ ]*: cannot open shared object file' "$TMP/self.out"
    grep -q '^skip CUDA: .*lib\(cudnn\|cublas\|cudart\).*(no NVIDIA driver here: CPU only)$' "$TMP/doctor.out"
    [[ "$output" == *"cuda status 1"* ]]
    grep -q "error: device 'cuda': cannot load the CUDA backend '$MODULE': lib\(cudnn\|cublas\|cublasLt\|cudart\)[^ ]*: cannot open shared object file: No such file or directory (install the CUDA libraries" "$TMP/cuda.out"
}

@test "a driver visible, the libraries hidden: auto warns once, naming the library, and uses the CPU" {
    need_module
    need_namespace
    FAKE_DRIVER=1 hidden '
        [ -e /dev/nvidiactl ] && [ -c /dev/null ] || exit 97
        "$HETPIPE" train --device auto --epochs 1 --train-limit 64 --test-limit 64 2>&1'
    [ "$status" -ne 97 ] || skip "cannot fake /dev/nvidiactl in the private namespace"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | grep -c 'warning:')" -eq 1 ]
    [[ "$output" == *"warning: an NVIDIA driver is here, but cannot load the CUDA backend '$MODULE': lib"*": cannot open shared object file"*": using the CPU"* ]]
    [[ "$output" == *"hetpipe train: done"* ]]
}

@test "a driver visible, the libraries there: auto loads the module, finds no device, uses the CPU" {
    need_module
    need_namespace
    if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
        skip "a GPU is present"
    fi
    mkdir -p "$TMP/realdev"
    HETPIPE="$HETPIPE" TMP="$TMP" run unshare --mount --propagation private sh -c '
        mount --rbind /dev "$TMP/realdev" && mount -t tmpfs tmpfs /dev || exit 99
        for e in "$TMP"/realdev/*; do ln -s "$e" "/dev/${e##*/}"; done
        : > /dev/nvidiactl
        HETPIPE_LOG=debug "$HETPIPE" train --device auto --epochs 1 --train-limit 64 --test-limit 64 2>&1'
    echo "$output"
    [ "$status" -ne 99 ] || skip "cannot mount in the private namespace"
    [ "$status" -eq 0 ]
    [[ "$output" == *"debug: cuda: backend module $MODULE loaded"* ]]
    [[ "$output" == *"debug: cuda: no usable device"* ]]
    [[ "$output" != *warning:* ]]
    [[ "$output" == *"hetpipe train: done"* ]]
}

@test "gpu_check_ops goes through the loader and skips cleanly without a device" {
    [ -x "$B/tests/gpu_check_ops" ] || skip "gpu_check_ops not built"
    if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
        skip "a GPU is present (make gpu-check)"
    fi
    run "$B/tests/gpu_check_ops"
    echo "$output"
    [ "$status" -eq 77 ]
    if [ -f "$MODULE" ]; then
        [[ "$output" == *"SKIP: no usable CUDA device or driver"* ]]
    else
        [[ "$output" == *"SKIP: no CUDA backend module"* ]]
    fi
    HETPIPE_CUDA_MODULE="$TMP/none.so" run "$B/tests/gpu_check_ops"
    [ "$status" -eq 77 ]
    [[ "$output" == *"SKIP: no CUDA backend module"* ]]
}

@test "a module of another ABI, or without the entry point, is refused and not called" {
    command -v cc > /dev/null 2>&1 || skip "no C compiler"
    printf '#include <stddef.h>\nstruct m { int abi; size_t ops_size; };\nstatic const struct m mod = {999, 0};\nconst struct m *hp_backend_module_cuda_v1(const void *host) { return &mod; }\n' > "$TMP/other.c"
    cc -shared -fPIC -o "$TMP/other.so" "$TMP/other.c"
    HETPIPE_CUDA_MODULE="$TMP/other.so" run "$HETPIPE" train --device cuda --epochs 1 --train-limit 64
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"error: device 'cuda': cannot use the CUDA backend '$TMP/other.so': its backend ABI is another, this hetpipe's is "*" (rebuild it with this hetpipe (make) or reinstall both (make install))"* ]]
    printf 'int hp_unrelated(void) { return 0; }\n' > "$TMP/none.c"
    cc -shared -fPIC -o "$TMP/none.so" "$TMP/none.c"
    HETPIPE_CUDA_MODULE="$TMP/none.so" run "$HETPIPE" train --device cuda --epochs 1 --train-limit 64
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot use the CUDA backend '$TMP/none.so': it has no entry point hp_backend_module_cuda_v1"* ]]
    # auto with no driver never opens it
    [ ! -e /dev/nvidiactl ] && [ ! -e /proc/driver/nvidia/version ] || return 0
    HETPIPE_CUDA_MODULE="$TMP/other.so" run "$HETPIPE" train --device auto --epochs 1 --train-limit 64 --test-limit 64
    [ "$status" -eq 0 ]
    [[ "$output" != *"cannot use"* ]]
}
