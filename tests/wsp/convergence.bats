#!/usr/bin/env bats
# tier: long
# Virtual workers in step under WSP learn: four VWs train the CNN at CPU speed for one epoch of
# 30,000 samples and must reach the test accuracy of tests/short_runs.list (the thresholds and
# their distribution over seeds: sh tests/bench/short_runs; the multi-epoch runs to >= 88%:
# sh tests/bench/convergence).

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

@test "short convergence: 4 VWs under ed (local4: four types on one node)" {
    short_run ed4
    [[ "$output" == *"4 virtual workers"*"WSP"* ]]
}

@test "short convergence: 4 VWs under np (demo: one type per node, 4 shards)" {
    short_run np4
    [[ "$output" == *"4 virtual workers"*"WSP"* ]]
}
