#!/usr/bin/env bats
# tier: long
# A pipelined virtual worker learns: the CNN over 4 stages with the planner's Nm reaches the
# test accuracy of tests/short_runs.list (its thresholds and their spread over seeds:
# sh tests/bench/short_runs; the multi-epoch runs: sh tests/bench/convergence).

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

@test "short convergence: a 4-stage virtual worker with the planner's Nm" {
    # Nm 4 is fastest, Nm 3 within the default nm_tolerance (1% slower) and one update less
    # stale: the planner takes 3 (2 epochs reached 89.98% with it, 88.43-88.51% with Nm 4;
    # sh tests/bench/convergence)
    short_run pipe4
    [[ "$output" == *"this one of 4 stages, Nm 3"* ]]
}
