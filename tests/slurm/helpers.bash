# tests/slurm/helpers.bash - what the bats files that use a real Slurm cluster share
# (load helpers). Each file runs a cluster of its own (tests/slurm/cluster.sh) in
# $BATS_FILE_TMPDIR/slurm on a port of its own, beside any a developer keeps running.

# slurm_unavailable [plugin]: why this file's Slurm tests must be skipped, or nothing (bats 1.8
# cannot skip from setup_file: each test's setup skips on it). "plugin": the SPANK plugin
# must be built too.
slurm_unavailable() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "a Slurm test cluster needs root"
        return
    fi
    for b in slurmctld slurmd srun sbatch salloc scancel scontrol munged; do
        if ! command -v "$b" > /dev/null 2>&1; then
            echo "'$b' not installed (sh tests/deps.sh)"
            return
        fi
    done
    if [ "${1:-}" = plugin ] && [ ! -f "$ROOT/build/spank_hetpipe.so" ]; then
        echo "build/spank_hetpipe.so not built (make; needs libslurm-dev)"
    fi
}

# slurm_prepare [plugin]: in setup_file: export ROOT (the checkout) and SKIP_REASON
# (slurm_unavailable's answer); fails when the Slurm tests must be skipped, so that setup_file
# can `slurm_prepare || return 0`.
slurm_prepare() {
    ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
    export ROOT
    SKIP_REASON=$(slurm_unavailable "$@")
    export SKIP_REASON
    [ -z "$SKIP_REASON" ]
}

# slurm_start PORT: start this file's cluster (with cluster.sh's plugstack line: this
# checkout's plugin when built, unless HP_SLURM_PLUGSTACK says otherwise); exports
# HP_SLURM_DIR, HP_SLURM_PORT and SLURM_CONF and reports the time to four idle nodes.
slurm_start() {
    export HP_SLURM_DIR="$BATS_FILE_TMPDIR/slurm"
    export HP_SLURM_PORT="$1"
    export SLURM_CONF="$HP_SLURM_DIR/slurm.conf"
    run sh "$ROOT/tests/slurm/cluster.sh" start
    echo "$output"
    [ "$status" -eq 0 ] || return 1
    echo "# slurm: $(echo "$output" | grep 'idle nodes in')" >&3
}

# slurm_stop: stop this file's cluster, if it started one
slurm_stop() {
    if [ -n "${HP_SLURM_DIR:-}" ] && [ -f "$HP_SLURM_DIR/slurm.conf" ]; then
        SLURM_CONF="$HP_SLURM_DIR/slurm.conf" sh "$ROOT/tests/slurm/cluster.sh" stop
    fi
    return 0
}
