#!/usr/bin/env bats
# tier: slurm
# hetpipe doctor under a real Slurm (a four-node cluster of its own, tests/slurm/cluster.sh) with
# and without the SPANK plugin loaded, and with its controller unreachable; without Slurm:
# tests/cli/doctor.bats. Skipped unless root with Slurm and munge installed and the plugin built.

load helpers
load ../helpers

setup_file() {
    slurm_prepare plugin || return 0
    unset HP_SLURM_PLUGSTACK
    slurm_start "${HP_SLURM_DOCTOR_PORT:-29817}" || return 1
    cp "$HP_SLURM_DIR/plugstack.conf" "$BATS_FILE_TMPDIR/plugstack.good"
}

teardown_file() {
    slurm_stop
}

setup() {
    HETPIPE=${HETPIPE:-build/hetpipe}
    case $HETPIPE in
    /*) ;;
    *) HETPIPE="$ROOT/$HETPIPE" ;;
    esac
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
    # every test leaves the cluster's plugstack.conf as it found it
    if [ -f "$BATS_FILE_TMPDIR/plugstack.good" ]; then
        cp "$BATS_FILE_TMPDIR/plugstack.good" "$HP_SLURM_DIR/plugstack.conf"
    fi
}

slurm_setup() {
    [ -z "$SKIP_REASON" ] || skip "$SKIP_REASON"
    export SLURM_CONF="$HP_SLURM_DIR/slurm.conf"
}

@test "under Slurm with the plugin loaded: discovery, controller, plugin and srun's PMIx are ok" {
    slurm_setup
    run timeout 60 "$HETPIPE" doctor
    echo "$output"
    [ "$status" -eq 0 ]
    line_of ok 'Slurm discovery'
    line_of ok 'Slurm controller' | grep -q 'is UP$'
    line_of ok 'Slurm plugin' | grep -q 'spank_hetpipe.so loaded'
    line_of ok 'PMIx in srun' | grep -q 'lists pmix'
}

@test "under Slurm without the plugin (empty plugstack.conf): FAIL with the line to add and where" {
    slurm_setup
    : > "$HP_SLURM_DIR/plugstack.conf"
    run timeout 60 "$HETPIPE" doctor
    echo "$output"
    [ "$status" -eq 1 ]
    l=$(line_of FAIL 'Slurm plugin')
    [[ "$l" == *"no --hetpipe-policy: spank_hetpipe.so is not loaded; fix: add the line 'required /"*"spank_hetpipe.so config=/"*"hetpipe.conf' to $HP_SLURM_DIR/plugstack.conf"* ]]
    [ "$(echo "$output" | grep -c '^FAIL ')" -eq 1 ]
    line_of ok 'Slurm controller'
    # restored (teardown does it for every test): the plugin is back
    cp "$BATS_FILE_TMPDIR/plugstack.good" "$HP_SLURM_DIR/plugstack.conf"
    run timeout 60 "$HETPIPE" doctor
    [ "$status" -eq 0 ]
    line_of ok 'Slurm plugin'
}

@test "under Slurm with the controller unreachable: FAIL for the controller, naming SLURM_CONF" {
    slurm_setup
    # the cluster's config, but a port nothing listens on
    sed "s/^SlurmctldPort=.*/SlurmctldPort=$((HP_SLURM_PORT + 9))/" "$SLURM_CONF" > "$TMP/slurm.conf"
    SLURM_CONF="$TMP/slurm.conf" run timeout 60 "$HETPIPE" doctor
    echo "$output"
    [ "$status" -eq 1 ]
    line_of FAIL 'Slurm controller' | grep -q "is DOWN; fix: start slurmctld.*(now $TMP/slurm.conf)"
}
