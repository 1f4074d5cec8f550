#!/usr/bin/env bats
# tier: slurm
# hetpipe launch and the jobs/ scripts under a real Slurm: a four-node cluster of its own
# (tests/slurm/cluster.sh: node1..node4 with four GPUs each of titanv, titanrtx, rtx2060,
# p4000) with the SPANK plugin loaded; real sbatch, salloc, srun --mpi=pmix and scancel.
# Training jobs run CPU ranks (no GPU here); the GPU binding is still Slurm's real GRES
# bookkeeping. Skipped unless root with Slurm and munge installed and the plugin built.

load helpers

setup_file() {
    slurm_prepare plugin || return 0
    HETPIPE=${HETPIPE:-$ROOT/build/hetpipe}
    case $HETPIPE in /*) ;; *) HETPIPE="$ROOT/$HETPIPE" ;; esac
    export HETPIPE
    unset HP_SLURM_PLUGSTACK # cluster.sh's default: this checkout's plugin
    slurm_start "${HP_SLURM_LAUNCH_PORT:-28817}" || return 1
    # the site config the jobs use, whatever directory they run in
    export HETPIPE_CONF="$ROOT/etc/hetpipe.conf"
    export OPENBLAS_NUM_THREADS=1
}

teardown_file() {
    slurm_stop
}

setup() {
    [ -z "$SKIP_REASON" ] || skip "$SKIP_REASON"
    cd "$BATS_TEST_TMPDIR" || return 1
    # the previous test's jobs are gone (MinJobAge keeps finished ones listed a while); one
    # that a failed test left running is cancelled, so that its GPUs do not change what the
    # next test is given
    local i=0
    while [ -n "$(squeue -h -t PD,R,CG)" ] && [ $i -lt 150 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if [ -n "$(squeue -h -t PD,R)" ]; then
        squeue
        scancel $(squeue -h -t PD,R -o %A)
        sleep 2
    fi
}

# submit ARGS...: sbatch --wait from this test's directory; sets $job and $out (the job's
# output file); $status and $output are sbatch's
submit() {
    run timeout 300 sbatch --wait -D "$BATS_TEST_TMPDIR" -o "$BATS_TEST_TMPDIR/job-%j.out" "$@"
    echo "$output"
    job=$(echo "$output" | sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p')
    out="$BATS_TEST_TMPDIR/job-$job.out"
    if [ "$status" -eq 124 ]; then
        # a job that did not end: what is still running, for the report
        echo "sbatch --wait timed out; still running:"
        squeue -s
        pgrep -af "hetpipe-$job/" || true
    fi
    [ -n "$job" ] && [ -f "$out" ] && cat "$out"
}

# start_training [SBATCH-OPTIONS...]: submit cnn-ed-local.sbatch for 50 epochs (it runs until
# stopped), wait until the ranks train (progress lines, at most 60 s); sets $job and $out
start_training() {
    run sbatch -D "$BATS_TEST_TMPDIR" -o "$BATS_TEST_TMPDIR/job-%j.out" --hetpipe-epochs=50 \
        "$@" "$ROOT/jobs/cnn-ed-local.sbatch" --log-every 5
    echo "$output"
    [ "$status" -eq 0 ]
    job=$(echo "$output" | sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p')
    out="job-$job.out"
    local i=0
    until grep -q "^epoch 1/50 step" "$out" 2> /dev/null; do
        [ $i -lt 600 ] || { cat "$out"; false; }
        sleep 0.1
        i=$((i + 1))
    done
}

# wait_gone [PID]: wait at most 10 s until no process of job $job is left (and PID has
# ended); sets $ms, the milliseconds since $t0
wait_gone() {
    local i=0
    while pgrep -f "hetpipe-$job/" > /dev/null || { [ -n "${1:-}" ] && kill -0 "$1" 2> /dev/null; }; do
        if [ $i -ge 100 ]; then
            pgrep -af "hetpipe-$job/"
            cat "$out"
            false
        fi
        sleep 0.1
        i=$((i + 1))
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
}

# fault_job WHAT [SBATCH-OPTIONS...]: a training job (start_training with them), then WHAT to
# node3: KILL (kill -9) or STOP (SIGSTOP) its worker rank (its GPU's stage), or LOST (its
# slurmd, its step daemon and its tasks killed, as a node that is lost with them; its slurmd is
# started again after the job); waits until no process of the job is left and the job is no
# longer running (at most 60 s); sets $ms (since the fault), $code (the job's ExitCode from
# scontrol) and $stage (the victim's stage)
fault_job() {
    local what=$1 p task victims="" stepd=""
    shift
    start_training "$@"
    task=$(awk '$2 == "node3" && $4 ~ /^vw0\.stage/ { print $1 }' "hetpipe-$job/binding")
    stage=$(awk '$2 == "node3" && $4 ~ /^vw0\.stage/ { sub(/vw0\.stage/, "", $4); print $4 }' "hetpipe-$job/binding")
    [ -n "$task" ]
    for p in $(pgrep -f "hetpipe-rank --plan $BATS_TEST_TMPDIR/hetpipe-$job/"); do
        env=$(tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null) || continue
        echo "$env" | grep -qx "SLURMD_NODENAME=node3" || continue
        if [ "$what" = LOST ]; then
            victims="$victims $p"
            stepd="$stepd $(ps -o ppid= -p "$p")"
        elif echo "$env" | grep -qx "SLURM_PROCID=$task"; then
            victims=$p
        fi
    done
    [ -n "$victims" ]
    t0=$(date +%s%N)
    case $what in
        KILL) kill -9 $victims ;;
        STOP) kill -STOP $victims ;;
        LOST) kill -9 "$(cat "$HP_SLURM_DIR/run/slurmd-node3.pid")" $stepd $victims ;;
    esac
    # the ranks and srun gone, and hetpipe launch (the batch script) ended
    local i=0
    while { pgrep -f "hetpipe-$job/" > /dev/null || [ -n "$(squeue -h -j "$job" -t R 2> /dev/null)" ]; } &&
        [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    if [ "$what" = LOST ]; then # node3 back, for the next tests
        slurmd -N node3 -f "$SLURM_CONF"
        i=0
        until [ "$(sinfo -h -n node3 -o %t)" = idle ] || [ $i -ge 300 ]; do
            sleep 0.1
            i=$((i + 1))
        done
    fi
    cat "$out"
    code=$(scontrol show job "$job" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    echo "# $what node3's rank: no process of job $job left after $ms ms; ExitCode $code" >&3
    [ $i -lt 600 ]
}

# plan_rows FILE: the stage rows of the plan table, "node type" per line
plan_rows() {
    awk '/^VW [0-9]+:/ { in_vw = 1; next } in_vw && $1 ~ /^[0-9]+$/ && NF >= 8 { print $2, $4 }
         /^$/ { in_vw = 0 }' "$1"
}

# type_of NODE: the GPU type cluster.sh gives it
type_of() {
    sh "$ROOT/tests/slurm/cluster.sh" gpu-type "$1"
}

@test "the job scripts are shellcheck-clean" {
    command -v shellcheck > /dev/null 2>&1 || skip "shellcheck not installed (sh tests/deps.sh)"
    [ "$(ls "$ROOT"/jobs/*.sbatch | wc -l)" -ge 3 ]
    run shellcheck "$ROOT"/jobs/*.sbatch
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "sbatch -N4 --gpus-per-node=1 --hetpipe-policy=ed --hetpipe-placement=local trains the CNN (short run)" {
    submit -N4 --gpus-per-node=1 --hetpipe-policy=ed --hetpipe-placement=local \
        --hetpipe-timeline="$BATS_TEST_TMPDIR/t.json" \
        "$ROOT/jobs/cnn-ed-local.sbatch" --train-limit 30000 --test-limit 2000
    [ "$status" -eq 0 ]
    # the ranks' timelines in the job directory, merged by launch at the end (a 4-stage
    # pipeline), and the job's report
    grep -q "launch: the ranks' timelines go to .*/hetpipe-$job/timeline.RANK" "$out"
    grep -q "^timeline: .* of 8 ranks in $BATS_TEST_TMPDIR/t.json" "$out"
    grep -q "^launch: the job's report: .*/hetpipe-$job/report.html" "$out"
    grep -q "<svg" "hetpipe-$job/report.html"
    run "$HETPIPE" timeline "hetpipe-$job" --out "$BATS_TEST_TMPDIR/t.json"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "of 8 ranks in $BATS_TEST_TMPDIR/t.json"
    run python3 "$ROOT/tests/timeline/timeline_check.py" "$BATS_TEST_TMPDIR/t.json" "hetpipe-$job" --pipeline
    echo "$output"
    [ "$status" -eq 0 ]
    grep -q "policy ed," "$out"
    grep -q "placement local," "$out"
    # one VW over the four nodes, each stage on its node's GPU type
    rows=$(plan_rows "$out")
    echo "plan rows: $rows"
    [ "$(echo "$rows" | wc -l)" -eq 4 ]
    [ "$(echo "$rows" | cut -d' ' -f1 | sort -u | wc -l)" -eq 4 ]
    echo "$rows" | while read -r node type; do
        [ "$type" = "$(type_of "$node")" ]
    done
    # the step: 4 GPU ranks and 4 PS shards, as the binding file says
    grep -q "launch: 8 tasks on 4 nodes" "$out"
    [ "$(grep -vc '^#' "hetpipe-$job/binding")" -eq 8 ]
    acc=$(sed -n 's/^epoch [0-9]*\/[0-9]* test loss [0-9.]* accuracy \([0-9.]*\)%.*/\1/p' "$out" | tail -1)
    # the threshold of the same run under hetpipe run --local (tests/short_runs.list)
    thr=$(awk '$1 == "edlocal4" { print $2 }' "$ROOT/tests/short_runs.list")
    echo "# cnn ed+local, 30,000 samples on 4 nodes: test accuracy $acc% (threshold $thr%)" >&3
    [ -n "$acc" ]
    awk -v a="$acc" -v t="$thr" 'BEGIN { exit !(t ~ /^[0-9.]+$/ && a >= t) }'
}

@test "jobs/gpt-tiny.sbatch: a text model with AdamW (--hetpipe-optimizer) and clipping over 4 stages on 4 nodes learns" {
    submit "$ROOT/jobs/gpt-tiny.sbatch" --train-limit 640 --test-limit 128 --log-every 10
    [ "$status" -eq 0 ]
    grep -q "launch: 8 tasks on 4 nodes" "$out"
    grep -q "this one of 4 stages" "$out"
    grep -qx "optimizer = adamw" "hetpipe-$job/plan.ini"
    grep -q "^epoch 1/1 step 10/40 loss [0-9.]* ppl [0-9.]* bpb [0-9.]* [0-9]* tok/s" "$out"
    loss=$(sed -n 's/^epoch 1\/1 validation loss \([0-9.]*\) ppl.*/\1/p' "$out" | tail -1)
    echo "# gpt-tiny, 640 sequences on 4 nodes: validation loss $loss per token" >&3
    # below the uniform guess over 256 bytes (ln 256 = 5.545)
    awk -v l="$loss" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l < 4.5) }'
}

@test "a VGG-19 dry run plans on titanv, titanrtx, rtx2060 and p4000 and starts no rank" {
    # a rank program that leaves a mark if anything starts it
    printf '#!/bin/sh\ntouch "%s/rank-started"\n' "$BATS_TEST_TMPDIR" > fake-rank
    chmod 0755 fake-rank
    submit --export=ALL,HETPIPE_RANK_BIN="$BATS_TEST_TMPDIR/fake-rank" \
        "$ROOT/jobs/vgg19-dry-run.sbatch"
    [ "$status" -eq 0 ]
    grep -q "plan: model vgg19 (26 units)" "$out"
    grep -q "16 GPUs" "$out"
    rows=$(plan_rows "$out")
    for t in titanv titanrtx rtx2060 p4000; do
        echo "$rows" | grep -q " $t$"
    done
    echo "$rows" | while read -r node type; do
        [ "$type" = "$(type_of "$node")" ]
    done
    grep -Eq "^predicted: [0-9.]+ images/s" "$out"
    grep -q "no rank started" "$out"
    ! grep -q "launch: srun" "$out"
    [ ! -e rank-started ]
    [ ! -e "hetpipe-$job/binding" ]
    [ -f "hetpipe-$job/plan.ini" ]
}

@test "a hetjob with two GPU types plans over both components and runs" {
    submit "$ROOT/jobs/hetjob-two-types.sbatch" --train-limit 3200 --test-limit 1000
    [ "$status" -eq 0 ]
    grep -q "(hetjob): node1 titanv:0,titanv:1, node4 p4000:0,p4000:1" "$out"
    rows=$(plan_rows "$out")
    [ "$(echo "$rows" | grep -c '^node1 titanv$')" -eq 2 ]
    [ "$(echo "$rows" | grep -c '^node4 p4000$')" -eq 2 ]
    # one srun step component per job component
    grep "^launch: srun" "$out" | grep -q -- "--nodelist=node1 .* : .*--nodelist=node4 "
    grep -Eq "^epoch 1/1 test loss [0-9.]+ accuracy [0-9.]+%" "$out"
    grep -q "2 virtual workers" "$out"
}

@test "an srun that does not end after every rank has is stopped after --timeout; the job has the ranks' status" {
    # what Slurm 22.05's mpi/pmix plugin sometimes does at a hetjob's end: srun's tasks are
    # done, srun stays (its abort agent's thread never joins); here a wrapper that outlives srun
    # and, as srun does, says "forcing job termination" if it gets SIGTERM
    cat > "$BATS_TEST_TMPDIR/srun-stays" << 'EOF'
#!/bin/sh
srun "$@"
exec perl -e '$SIG{TERM} = sub { print STDERR "srun: forcing job termination\n"; exit 143 }; sleep 600'
EOF
    chmod +x "$BATS_TEST_TMPDIR/srun-stays"
    start=$(date +%s)
    submit "$ROOT/jobs/hetjob-two-types.sbatch" --train-limit 3200 --test-limit 1000 \
        --timeout 5 --srun "$BATS_TEST_TMPDIR/srun-stays"
    took=$(($(date +%s) - start))
    [ "$status" -eq 0 ]
    # one line says that srun was stopped, with the job's own result; nothing more from srun
    grep -q "launch: srun had not ended [0-9]* s after every rank had: stopped it (.*); the job's result is the ranks': status 0$" "$out"
    [ "$(grep -c "srun had not ended" "$out")" -eq 1 ]
    ! grep -q "^srun: " "$out"
    grep -Eq "^epoch 1/1 test loss [0-9.]+ accuracy [0-9.]+%" "$out"
    grep -q "launch: the job's report" "$out"
    [ "$(ls "$BATS_TEST_TMPDIR/hetpipe-$job"/rank-*.exit | wc -l)" -eq 6 ]
    echo "srun stayed; the job ended after ${took} s" >&3
    [ "$took" -lt 120 ]
    [ -z "$(pgrep -f "sleep 600")" ]
}

@test "an srun killed by a signal after every rank has ended: the job has the ranks' status, said in one line" {
    # seen once in tests/bench/hetjob_loop: srun aborted by glibc at the end of a hetjob step.
    # The wrapper aborts once every rank has written its exit file (beside the plan) or srun
    # has ended: the real srun may also stay at the step's end (the test above), and launch
    # would then stop it after 60 s instead of seeing the abort
    cat > "$BATS_TEST_TMPDIR/srun-aborts" << 'EOF'
#!/bin/sh
dir=""
prev=""
for a in "$@"; do
    [ "$prev" = --plan ] && dir=$(dirname "$a")
    prev=$a
done
srun "$@" &
pid=$!
i=0
while kill -0 "$pid" 2> /dev/null && [ "$(ls "$dir"/rank-*.exit 2> /dev/null | wc -l)" -lt 6 ] &&
    [ $i -lt 1200 ]; do
    sleep 0.1
    i=$((i + 1))
done
kill -ABRT $$
EOF
    chmod +x "$BATS_TEST_TMPDIR/srun-aborts"
    submit "$ROOT/jobs/hetjob-two-types.sbatch" --train-limit 3200 --test-limit 1000 \
        --srun "$BATS_TEST_TMPDIR/srun-aborts"
    [ "$status" -eq 0 ]
    grep -q "launch: srun died of signal 6 (Aborted) after every rank had ended; the job's result is the ranks': status 0$" "$out"
    grep -q "^launch: the job's report" "$out"
    grep -q '^status = 0$' "hetpipe-$job/run.ini"
}

@test "a resumable job (--signal=B:USR1@N --requeue) signalled by scancel --signal=USR1 --batch checkpoints, requeues itself, resumes and reaches the uninterrupted accuracy" {
    run sbatch -D "$BATS_TEST_TMPDIR" -o "$BATS_TEST_TMPDIR/job-%j.out" --signal=B:USR1@30 \
        --hetpipe-epochs=1 --hetpipe-checkpoint-every=6000 --hetpipe-placement=local \
        "$ROOT/jobs/cnn-resumable.sbatch" --train-limit 30000 --test-limit 2000 --log-every 20
    echo "$output"
    [ "$status" -eq 0 ]
    job=$(echo "$output" | sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p')
    out="job-$job.out"
    i=0
    until grep -q "^checkpoint 1:" "$out" 2> /dev/null; do
        [ $i -lt 900 ] || { cat "$out"; false; }
        sleep 0.1
        i=$((i + 1))
    done
    t0=$(date +%s%N)
    scancel --signal=USR1 --batch "$job"
    # the ranks checkpoint at a pause and stop: the script requeues the job
    i=0
    until grep -q "checkpointed and stopped; requeueing it" "$out"; do
        [ $i -lt 600 ] || { cat "$out"; false; }
        sleep 0.1
        i=$((i + 1))
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "# USR1 to the batch shell: checkpointed and stopped after $ms ms" >&3
    # a planned stop is no error: the ranks end with 0 for srun, launch exits 75 itself
    grep -q "^launch: every rank checkpointed and stopped on request: exit status 75" "$out"
    ! grep -E "^(srun|slurmstepd)[^:]*:.*error" "$out"
    ! grep -q "CANCELLED" "$out"
    # the requeued run resumes and finishes (slurmctld holds a requeued job back two minutes:
    # once every node is idle again, and its old job is gone from them, the test lets it start)
    i=0
    until grep -q "^epoch 1/1 test loss" "$out"; do
        if [ $((i % 20)) -eq 10 ] && [ "$(squeue -h -j "$job" -o %t 2> /dev/null)" = PD ] &&
            [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" -eq 4 ] &&
            ! pgrep -f "slurmstepd: \[$job\." > /dev/null; then
            squeue -j "$job" -o "%i %t %r %S"
            sleep 2
            scontrol update JobId="$job" StartTime=now 2> /dev/null || true
        fi
        [ $i -lt 1800 ] || { cat "$out"; squeue; false; }
        sleep 0.1
        i=$((i + 1))
    done
    sleep 1
    cat "$out"
    grep -q "launch: job $job was requeued (restart 1): resuming from its newest checkpoint" "$out"
    grep -q "resumed from checkpoint" "$out"
    acc=$(sed -n 's/^epoch 1\/1 test loss [0-9.]* accuracy \([0-9.]*\)%.*/\1/p' "$out" | tail -1)
    thr=$(awk '$1 == "edlocal4" { print $2 }' "$ROOT/tests/short_runs.list")
    echo "# resumable cnn ed+local, 30,000 samples, requeued once: $acc% (uninterrupted threshold $thr%)" >&3
    awk -v a="$acc" -v t="$thr" 'BEGIN { exit !(t ~ /^[0-9.]+$/ && a >= t) }'
}

# wait_lines N PATTERN TENTHS: until $out has N lines matching PATTERN (at most TENTHS x 0.1 s);
# a requeued job that slurmctld holds back is let start once its old run has left the nodes
wait_lines() {
    local i=0
    until [ "$(grep -c "$2" "$out" 2> /dev/null)" -ge "$1" ]; do
        if [ $((i % 20)) -eq 10 ] && [ "$(squeue -h -j "$job" -o %t 2> /dev/null)" = PD ] &&
            [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" -eq 4 ] &&
            ! pgrep -f "slurmstepd: \[$job\." > /dev/null; then
            sleep 2
            scontrol update JobId="$job" StartTime=now 2> /dev/null || true
        fi
        [ $i -lt "$3" ] || { cat "$out"; squeue; false; }
        sleep 0.1
        i=$((i + 1))
    done
}

@test "a job requeued twice keeps one job directory (its runs in run-1, run-2) and one report over the three runs" {
    run sbatch -D "$BATS_TEST_TMPDIR" -o "$BATS_TEST_TMPDIR/job-%j.out" --signal=B:USR1@30 \
        --hetpipe-epochs=1 --hetpipe-checkpoint-every=3000 --hetpipe-placement=local \
        "$ROOT/jobs/cnn-resumable.sbatch" --train-limit 24000 --test-limit 1000 --log-every 20
    echo "$output"
    [ "$status" -eq 0 ]
    job=$(echo "$output" | sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p')
    out="job-$job.out"
    for k in 1 2; do
        # a checkpoint of this run, then USR1: it checkpoints again, stops, and is requeued
        n=$(grep -c '^checkpoint [0-9]*:' "$out" 2> /dev/null || true)
        wait_lines $((n + 1)) '^checkpoint [0-9]*:' 1800
        scancel --signal=USR1 --batch "$job"
        wait_lines "$k" "checkpointed and stopped; requeueing it" 600
        wait_lines 1 "^launch: restart $k of job $job: this run in $BATS_TEST_TMPDIR/hetpipe-$job/run-$k$" 1800
    done
    wait_lines 3 "^launch: the job's report: $BATS_TEST_TMPDIR/hetpipe-$job/report.html$" 1800
    cat "$out"
    # one directory for the job (and its checkpoints beside it), a record of each run
    [ "$(ls -d hetpipe-"$job"* | tr '\n' ' ')" = "hetpipe-$job hetpipe-$job.ckpt " ]
    for d in hetpipe-"$job" hetpipe-"$job"/run-1 hetpipe-"$job"/run-2; do
        [ -f "$d/plan.ini" ] && [ -f "$d/metrics.csv" ] && [ -f "$d/run.ini" ]
    done
    grep -q '^restart = 2$' "hetpipe-$job/run-2/run.ini"
    grep -q '^status = 0$' "hetpipe-$job/run-2/run.ini"
    grep -Eq '^resumed_seq = [1-9][0-9]*$' "hetpipe-$job/run-2/run.ini"
    # the report: three runs, both restarts marked in the curves, the time lost to each
    page="hetpipe-$job/report.html"
    [ "$(sed -n '/id="runs"/,/<\/section>/p' "$page" | grep -o '<tr><td>' | wc -l)" -eq 3 ]
    [ "$(grep -o 'class="restart"' "$page" | wc -l)" -eq 8 ]
    grep -q 'time lost to 2 interruptions</td><td>[0-9.]* s</td>' "$page"
    grep -q '<tr><td>run-2</td><td>2</td>' "$page"
    grep -q "^epoch 1/1 test loss" "$out"
}

@test "a node's tasks killed: the job ends within 10 s and leaves no hetpipe process" {
    start_training
    # node3's ranks (its GPU's stage and its PS shard), as a lost node would lose them
    victims=""
    for p in $(pgrep -f "hetpipe-rank --plan $BATS_TEST_TMPDIR/hetpipe-$job/"); do
        tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "SLURMD_NODENAME=node3" &&
            victims="$victims $p"
    done
    [ -n "$victims" ]
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    kill -9 $victims
    wait_gone
    cat "$out"
    echo "# node3's tasks killed: no process of job $job left after $ms ms" >&3
    grep -q "node3: task.*Killed" "$out"
}

@test "kill -9 of a rank: the job's exit status and message name it and SIGKILL, not the others' SIGTERM" {
    fault_job KILL
    grep -q "launch: the job failed: rank [0-9] (vw 0 stage $stage, rtx2060 on node3) was killed by SIGKILL (signal 9" "$out"
    grep -q "exit status 137$" "$out"
    [ "$code" = "137:0" ]
    [ "$ms" -lt 10000 ]
}

@test "SIGSTOP of a rank: the job ends within 10 s (not after --timeout, 60 s) and its exit status and message name the stopped rank" {
    fault_job STOP
    grep -q "launch: the job failed: rank [0-9] (vw 0 stage $stage, rtx2060 on node3) was stopped (SIGSTOP) for more than 2 s" "$out"
    grep -q "exit status 147$" "$out"
    [ "$code" = "147:0" ]
    [ "$ms" -lt 10000 ]
}

@test "a stopped rank that no peer can see (HETPIPE_LIVENESS=exit: as on another host) is found silent by its heartbeat within 15 s, not after --timeout (60 s); the job exits 124 naming it" {
    fault_job STOP --export=ALL,HETPIPE_LIVENESS=exit
    grep -q "launch: rank [0-9] (vw 0 stage $stage, rtx2060 on node3) is silent: no heartbeat for 1[0-9] s" "$out"
    grep -q "launch: the job failed: rank [0-9] (vw 0 stage $stage, rtx2060 on node3) was silent: no heartbeat for 1[0-9] s; exit status 124" "$out"
    [ "$code" = "124:0" ]
    [ "$ms" -lt 15000 ]
    ! grep -q "stopped (SIGSTOP)" "$out"
}

@test "a lost node (its slurmd, step daemon and tasks killed): the job ends within 60 s, naming a rank of that node and SIGKILL" {
    fault_job LOST
    grep -q "launch: the job failed: rank [0-9] ([^)]* on node3) was killed by SIGKILL (signal 9" "$out"
    [ "$code" = "137:0" ]
    [ "$ms" -lt 60000 ]
}

@test "scancel of a running training job leaves no hetpipe process within 10 s" {
    start_training
    # every process of this job names its run directory (srun and the ranks)
    pgrep -f "hetpipe-$job/" > /dev/null
    t0=$(date +%s%N)
    scancel "$job"
    wait_gone
    echo "# scancel: no process of job $job left after $ms ms" >&3
    ! pgrep -f "hetpipe-rank --plan $BATS_TEST_TMPDIR" > /dev/null
}

@test "--hetpipe-emulate=S: CPU ranks on a test cluster pad to S x the planned GPUs' times, so the report's ratios are near 1 with no 'slower than planned' warning" {
    submit --hetpipe-emulate=600 "$ROOT/jobs/cnn-ed-local.sbatch" --train-limit 3200 \
        --test-limit 500 --log-every 0
    [ "$status" -eq 0 ]
    grep -q "^launch: srun .* --emulate 600 " "$out"
    grep -q "emulated GPU types" "$out"
    ratio=$(sed -n 's/.*predicted [0-9]* for the emulated GPUs at scale 600: ratio \([0-9.]*\)).*/\1/p' "$out")
    echo "# --hetpipe-emulate=600: VW 0 at $ratio of its predicted images/s" >&3
    awk -v r="$ratio" 'BEGIN { exit !(r >= 0.8 && r <= 1.25) }'
    # the job's report: every ratio near 1, no stage or VW slower than planned
    grep -q "x 600 (emulation scale)" "hetpipe-$job/report.html"
    ! grep -q "slower than planned" "hetpipe-$job/report.html"
    grep -o "ratio [0-9.]*" "hetpipe-$job/report.html" | awk '{ if ($2 < 0.8 || $2 > 1.25) bad++ } END { exit bad > 0 || NR == 0 }'
    # a bad value is refused at submit, naming the option and what is allowed
    run sbatch --hetpipe-emulate=fast "$ROOT/jobs/cnn-ed-local.sbatch"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"--hetpipe-emulate=fast"*"auto, off or a number"* ]]
}

@test "a plan whose GPUs disagree with the allocation is refused by hetpipe launch" {
    # planned for GPU 3 of node1; the job gets GPU 0 there
    printf '[cluster]\nname = wrong\n\n[node1]\ngpus = titanv:1\ndevices = 3\n\n' > wrong.ini
    printf '[node2]\ngpus = titanrtx:1\n\n[node3]\ngpus = rtx2060:1\n\n[node4]\ngpus = p4000:1\n' >> wrong.ini
    "$HETPIPE" plan --cluster wrong.ini --model cnn --policy ed --out wrong-plan.ini --quiet
    submit -N4 --gpus-per-node=1 "$ROOT/jobs/cnn-ed-local.sbatch" --plan "$PWD/wrong-plan.ini"
    [ "$status" -ne 0 ]
    grep -q "puts vw 0 stage [0-9] (rank [0-9]) on GPU 3 (titanv) of node1, but job $job has on node1 GPU 0 (titanv): the plan does not match the allocation" "$out"
    ! grep -q "launch: srun" "$out"
    # a node the job does not have
    run timeout 60 salloc -N1 -w node3 --gres=gpu:rtx2060:1 "$HETPIPE" launch --plan "$PWD/wrong-plan.ini"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"which is not a GPU node of job"*"(it has node3)"* ]]
}

@test "a task whose binding disagrees with its step is refused by the plugin and the rank" {
    printf '[cluster]\nname = one\n\n[node1]\ngpus = titanv:1\ndevices = 2\n' > one.ini
    "$HETPIPE" plan --cluster one.ini --model cnn --policy ed --out one-plan.ini --quiet
    # the binding puts the stage on GPU 2 of node1; the step holds GPU 0 only
    printf '0 node1 2 vw0.stage0\n1 node1 - ps0\n' > binding
    run timeout 120 env HETPIPE_BINDING="$PWD/binding" salloc -N1 -w node1 --gres=gpu:titanv:1 \
        srun --mpi=pmix -n2 -O "$(dirname "$HETPIPE")/hetpipe-rank" --plan "$PWD/one-plan.ini" \
        --config "$HETPIPE_CONF" --epochs 1 --train-limit 640 --test-limit 100 --timeout 10
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"GPU 2"*"node1"* ]]
    [[ "$output" == *"SLURM_STEP_GPUS"* || "$output" == *"step has"* || "$output" == *"not in"* ]]
    [[ "$output" != *"test loss"* ]]
}

@test "hetpipe launch checks its options and its environment" {
    run env -u SLURM_JOB_ID "$HETPIPE" launch --dry-run
    [ "$status" -eq 2 ]
    [[ "$output" == *"SLURM_JOB_ID is not set"*"hetpipe run --local"* ]]
    run timeout 60 env HETPIPE_STALENESS=-1 salloc -N1 --gres=gpu:1 "$HETPIPE" launch --dry-run
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"HETPIPE_STALENESS=-1"* ]]
    # a typed variable: checked by the table as the plugin checks --hetpipe-checkpoint-every
    run timeout 60 env HETPIPE_CHECKPOINT_EVERY=banana salloc -N1 --gres=gpu:1 "$HETPIPE" \
        launch --dry-run
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"launch: HETPIPE_CHECKPOINT_EVERY=banana: must be N training samples"* ]]
    run timeout 60 salloc -N1 --gres=gpu:1 "$HETPIPE" launch --dry-run --policy fast
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"--policy=fast"* ]]
    # the command line wins over the environment
    run timeout 60 env HETPIPE_POLICY=np salloc -N1 --gres=gpu:titanv:2 "$HETPIPE" launch \
        --dry-run --policy ed --model vgg19 --batch 8
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"policy ed,"* ]]
    # untyped GPUs cannot be planned: salloc without GPUs says what to ask for
    run timeout 60 salloc -N1 "$HETPIPE" launch --dry-run
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"has no GPUs"*"--gpus-per-node"* ]]
}

@test "uneven GPU counts per node (-N2 --gpus=5) are discovered, planned and run" {
    run timeout 180 salloc -N2 --gpus=5 "$HETPIPE" launch --policy np --train-limit 640 \
        --test-limit 100 --log-every 0
    echo "$output"
    [ "$status" -eq 0 ]
    line=$(echo "$output" | grep '^launch: job [0-9]*: ')
    # five GPUs over two nodes, as Slurm split them
    [ "$(echo "$line" | grep -o ':[0-9]' | wc -l)" -eq 5 ]
    [ "$(echo "$line" | grep -o 'node[1-4] ' | wc -l)" -eq 2 ]
    [[ "$output" == *"5 GPU"* || "$output" == *"(2 nodes, 5 GPUs)"* ]]
    [[ "$output" =~ epoch\ 1/1\ test\ loss\ [0-9.]+\ accuracy ]]
}

@test "a signal sent to hetpipe launch itself is passed on to srun: the job ends within 10 s, with its report" {
    start_training
    # hetpipe launch is srun's parent
    srun_pid=$(pgrep -f "srun .*hetpipe-$job/" | head -1)
    [ -n "$srun_pid" ]
    launch_pid=$(ps -o ppid= -p "$srun_pid" | tr -d ' ')
    grep -q launch "/proc/$launch_pid/cmdline"
    t0=$(date +%s%N)
    kill -TERM "$launch_pid"
    wait_gone "$launch_pid"
    echo "# SIGTERM to hetpipe launch: no process of job $job left after $ms ms" >&3
    cat "$out"
    grep -q "^launch: signal 15 (Terminated) from process [0-9]*: passed on to srun" "$out"
    grep -q "^launch: the job's report: .*/hetpipe-$job/report.html" "$out"
}
