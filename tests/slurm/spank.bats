#!/usr/bin/env bats
# tier: slurm
# The SPANK plugin build/spank_hetpipe.so under a real Slurm (a four-node cluster of its own,
# tests/slurm/cluster.sh): the --hetpipe-* options in sbatch, salloc and srun, refused at
# submit time when bad, carried to the tasks as HETPIPE_*; the site's plugstack.conf
# arguments; and the binding of each task to its GPU from a binding file. Skipped unless root
# with Slurm and munge installed and the plugin built.

load helpers

setup_file() {
    slurm_prepare plugin || return 0
    SO="$ROOT/build/spank_hetpipe.so"
    export SO
    unset HP_SLURM_PLUGSTACK
    export PLUGSTACK_GOOD="required $SO models=$ROOT/etc/models config=$ROOT/etc/hetpipe.conf"
    slurm_start "${HP_SLURM_SPANK_PORT:-27817}" || return 1
    # a task prints what the plugin gave it, one line
    cat > "$BATS_FILE_TMPDIR/show.sh" << 'EOF'
#!/bin/sh
echo "task $SLURM_PROCID on $SLURMD_NODENAME: CVD=[$CUDA_VISIBLE_DEVICES] GPU=[$HETPIPE_GPU] BOUND=[$HETPIPE_BOUND] ERR=[$HETPIPE_BIND_ERROR]"
EOF
    chmod 0755 "$BATS_FILE_TMPDIR/show.sh"
}

teardown_file() {
    slurm_stop
}

setup() {
    [ -z "$SKIP_REASON" ] || skip "$SKIP_REASON"
    # every test starts with the good plugstack line (srun, sbatch and slurmstepd re-read it)
    echo "$PLUGSTACK_GOOD" > "$HP_SLURM_DIR/plugstack.conf"
    SHOW="$BATS_FILE_TMPDIR/show.sh"
    cd "$BATS_TEST_TMPDIR" || return 1
    i=0
    while [ -n "$(squeue -h)" ] && [ $i -lt 150 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}

# all_idle: the four nodes are idle within 10 s (a job just ended may still be completing), not
# down or drained
all_idle() {
    local i=0
    while [ "$(sinfo -h -N -o '%N %t' | grep -c ' idle$')" -ne 4 ]; do
        if [ $i -ge 100 ]; then
            sinfo -N -o '%N %t %E'
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
}

plugstack() {
    echo "required $SO $*" > "$HP_SLURM_DIR/plugstack.conf"
}

# refused CMD ARGS...: the command fails, says why naming the --hetpipe option it was given,
# and no job is left in the queue
refused() {
    local opt
    opt=$(printf '%s\n' "$@" | grep -o -- '--hetpipe-[a-z-]*' | head -1)
    run timeout 30 "$@"
    echo "\$ $*"
    echo "$output"
    [ "$status" -ne 0 ]
    [ "$status" -ne 124 ]
    [[ "$output" == *"$opt"* ]]
    [ -z "$(squeue -h)" ]
}

@test "cluster.sh loads this checkout's plugin with its models and config" {
    run cat "$HP_SLURM_DIR/plugstack.conf"
    echo "$output"
    [ "$output" = "$PLUGSTACK_GOOD" ]
}

@test "the options are listed by sbatch --help, srun --help and salloc --help" {
    for cmd in sbatch srun salloc; do
        run "$cmd" --help
        [ "$status" -eq 0 ]
        output=$(echo "$output" | tr -s ' \n' '  ') # unwrap the usage texts
        for o in policy=auto\|np\|ed\|hd\|dp placement=default\|local staleness=D nm=auto\|N \
            model=NAME\|PATH batch=N epochs=N dry-run emulate=auto\|off\|S; do
            echo "$cmd: --hetpipe-$o"
            [[ "$output" == *"--hetpipe-$o"* ]]
        done
        # allowed values and defaults in the help
        [[ "$output" == *"an integer from 0 to 64 (default: 0)"* ]]
        [[ "$output" == *"$ROOT/etc/models"* ]]
    done
}

@test "sbatch refuses bad values before the job is queued" {
    for bad in policy=fast policy= placement=near staleness=-1 staleness=1000000000 \
        staleness=abc staleness=65 staleness=1x staleness=+1 staleness=99999999999999999999 \
        nm=0 nm=-3 nm=x nm=65 model= model=/nonexistent/m.ini model=nosuchmodel 'model=a b' \
        batch=0 batch=65537 epochs=0 epochs=10001 dry-run=yes emulate=fast emulate=-1; do
        refused sbatch "--hetpipe-$bad" --wrap=true
    done
    # the messages say what is allowed
    refused sbatch --hetpipe-policy=fast --wrap=true
    [[ "$output" == *"--hetpipe-policy=fast: unknown policy; allowed: auto, np, ed, hd, dp"* ]]
    refused sbatch --hetpipe-staleness=-1 --wrap=true
    [[ "$output" == *"--hetpipe-staleness=-1: must be an integer from 0 to 64"* ]]
    refused sbatch --hetpipe-model=nosuchmodel --wrap=true
    [[ "$output" == *"no nosuchmodel.ini in $ROOT/etc/models (models there: cnn, gpt-tiny, gpt2-medium, gpt2-xl, gpt2, mlp,"* ]]
}

@test "sbatch refuses a bad --hetpipe-checkpoint-every or --hetpipe-resume before the job is queued" {
    for bad in banana 0 -5 1e3 0min 10parsecs ''; do
        refused sbatch "--hetpipe-checkpoint-every=$bad" --wrap=true
        [[ "$output" == *"--hetpipe-checkpoint-every=$bad: "*"must be N training samples (an integer from 1 to 1125899906842624), or a training time: Nmin (minutes), Nh (hours) or Ns (seconds)"* ]]
    done
    refused sbatch --hetpipe-resume= --wrap=true
    [[ "$output" == *"--hetpipe-resume=: empty; must be auto, or a path (not empty, no control characters)"* ]]
    refused sbatch "--hetpipe-resume=$(printf 'ck\tpt')" --wrap=true
    [[ "$output" == *'--hetpipe-resume=ck\x09pt: a control character in the path'* ]]
    refused srun -N1 --hetpipe-checkpoint-every=banana true
    refused salloc -N1 --hetpipe-checkpoint-every=1x true
    # good values are carried as given
    run timeout 30 srun -N1 --hetpipe-checkpoint-every=30min --hetpipe-resume=auto env
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx HETPIPE_CHECKPOINT_EVERY=30min
    echo "$output" | grep -qx HETPIPE_RESUME=auto
}

@test "sbatch refuses a bad value on an #SBATCH line" {
    printf '#!/bin/sh\n#SBATCH --hetpipe-nm=0\ntrue\n' > job.sh
    refused sbatch job.sh
    printf '#!/bin/sh\n#SBATCH --hetpipe-checkpoint-every=banana\ntrue\n' > job.sh
    refused sbatch job.sh
    [[ "$output" == *"--hetpipe-checkpoint-every=banana: must be N training samples"* ]]
}

@test "srun and salloc refuse bad values too" {
    refused srun -N1 --hetpipe-batch=0 true
    refused srun -N1 --hetpipe-policy=fast true
    refused salloc -N1 --hetpipe-nm=0 true
    refused salloc -N1 --hetpipe-staleness=x true
    refused srun -N1 --hetpipe-recompute=maybe true
    [[ "$output" == *"--hetpipe-recompute=maybe"*"allowed: auto, never, always"* ]]
}

@test "srun: the options reach the tasks' environment" {
    run timeout 30 srun -N1 --hetpipe-policy=ed --hetpipe-staleness=3 --hetpipe-nm=auto \
        --hetpipe-placement=local --hetpipe-model=cnn --hetpipe-batch=64 --hetpipe-epochs=2 \
        --hetpipe-dry-run --hetpipe-recompute=always --hetpipe-emulate=auto env
    echo "$output"
    [ "$status" -eq 0 ]
    for kv in POLICY=ed STALENESS=3 NM=auto PLACEMENT=local MODEL=cnn BATCH=64 EPOCHS=2 \
        DRY_RUN=1 RECOMPUTE=always EMULATE=auto "CONF=$ROOT/etc/hetpipe.conf"; do
        echo "$output" | grep -qx "HETPIPE_$kv"
    done
    # a model path is carried as given
    run timeout 30 srun -N1 --hetpipe-model="$ROOT/etc/models/mlp.ini" env
    echo "$output" | grep -qx "HETPIPE_MODEL=$ROOT/etc/models/mlp.ini"
}

@test "sbatch: the options reach the batch script and its srun steps; a step's own option wins" {
    cat > job.sh << EOF
#!/bin/sh
#SBATCH --hetpipe-policy=hd
#SBATCH --hetpipe-model=mlp
echo "batch: \$(env | grep ^HETPIPE_ | sort | tr '\n' ' ')"
echo "step: \$(srun -n1 env | grep ^HETPIPE_ | sort | tr '\n' ' ')"
echo "own: \$(srun -n1 --hetpipe-policy=np env | grep ^HETPIPE_POLICY)"
EOF
    run timeout 60 sbatch --wait -N1 --hetpipe-staleness=2 -o out.txt job.sh
    echo "$output"
    cat out.txt
    [ "$status" -eq 0 ]
    for where in batch step; do
        line=$(grep "^$where: " out.txt)
        [[ "$line" == *"HETPIPE_POLICY=hd "* ]]
        [[ "$line" == *"HETPIPE_MODEL=mlp "* ]]
        [[ "$line" == *"HETPIPE_STALENESS=2 "* ]]
    done
    grep -qx "own: HETPIPE_POLICY=np" out.txt
}

@test "a job without --hetpipe options is left alone" {
    plugstack ""
    run timeout 30 srun -N1 -n1 --gres=gpu:2 env
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | grep -c '^HETPIPE_')" -eq 0 ]
    echo "$output" | grep -qx 'CUDA_VISIBLE_DEVICES=0,1'
    # with config=, the site config is all it gets
    echo "$PLUGSTACK_GOOD" > "$HP_SLURM_DIR/plugstack.conf"
    run timeout 30 srun -N1 env
    [ "$(echo "$output" | grep -c '^HETPIPE_')" -eq 1 ]
    echo "$output" | grep -qx "HETPIPE_CONF=$ROOT/etc/hetpipe.conf"
}

@test "the site's defaults reach the environment; the user's options win over them" {
    plugstack "models=$ROOT/etc/models" default_policy=hd default_staleness=5 default_model=cnn
    run timeout 30 srun -N1 env
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx HETPIPE_POLICY=hd
    echo "$output" | grep -qx HETPIPE_STALENESS=5
    echo "$output" | grep -qx HETPIPE_MODEL=cnn
    [ "$(echo "$output" | grep -c '^HETPIPE_CONF=')" -eq 0 ]
    run timeout 30 srun -N1 --hetpipe-policy=np env
    echo "$output" | grep -qx HETPIPE_POLICY=np
    echo "$output" | grep -qx HETPIPE_STALENESS=5
    # a value the job brings in its environment wins over the site's default too
    run timeout 30 env HETPIPE_STALENESS=1 srun -N1 env
    echo "$output" | grep -qx HETPIPE_STALENESS=1
    run srun --help
    [[ "$(echo "$output" | tr -s ' \n' '  ')" == *"(default: hd, the site's)"* ]]
}

@test "the site's limits: policies= and max_*= narrow what users may give" {
    plugstack policies=ed,hd max_staleness=2 max_nm=4 max_batch=128 max_epochs=3
    refused sbatch --hetpipe-policy=np --wrap=true
    [[ "$output" == *"--hetpipe-policy=np: policy not allowed on this cluster; allowed: ed, hd"* ]]
    refused sbatch --hetpipe-staleness=3 --wrap=true
    [[ "$output" == *"must be an integer from 0 to 2"* ]]
    refused sbatch --hetpipe-nm=5 --wrap=true
    refused sbatch --hetpipe-batch=129 --wrap=true
    refused sbatch --hetpipe-epochs=4 --wrap=true
    run timeout 30 srun -N1 --hetpipe-policy=hd --hetpipe-staleness=2 --hetpipe-nm=4 env
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx HETPIPE_POLICY=hd
}

@test "bad plugstack.conf arguments are reported and ignored; jobs still run" {
    plugstack bogus=1 max_staleness=x default_policy=fast policies=ed,zz default_batch=7
    run timeout 30 srun -N1 env
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"spank_hetpipe: plugstack.conf argument 'bogus=1': unknown argument; known: config, models,"* ]]
    [[ "$output" == *"spank_hetpipe: plugstack.conf argument 'max_staleness=x': max_staleness must be an integer from 0 to 1000000; ignored"* ]]
    [[ "$output" == *"default_policy=fast: unknown policy"* ]]
    [[ "$output" == *"'policies=ed,zz': 'zz' is not a policy"* ]]
    # the good argument still counts
    echo "$output" | grep -qx HETPIPE_BATCH=7
    run timeout 30 srun -N1 true
    [ "$status" -eq 0 ]
    # slurmstepd said it too, and is not harmed: every node still idle
    grep -q "spank_hetpipe: plugstack.conf argument 'bogus=1'" "$HP_SLURM_DIR"/log/slurmd-node*.log
    all_idle
    run timeout 60 sbatch --wait -o out.txt --wrap='echo batch ran'
    [ "$status" -eq 0 ]
    grep -qx 'batch ran' out.txt
}

@test "binding: each task gets the GPU its binding file gives it, a PS task none" {
    printf '# hetpipe binding: TASK NODE DEVICE ROLE\n0 node1 1 vw0.stage0\n1 node1 - ps0\n' \
        > bind
    run timeout 30 env HETPIPE_BINDING="$PWD/bind" srun -N1 -n2 -w node1 --gres=gpu:2 "$SHOW"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx 'task 0 on node1: CVD=\[1\] GPU=\[1\] BOUND=\[1\] ERR=\[\]'
    echo "$output" | grep -qx 'task 1 on node1: CVD=\[\] GPU=\[\] BOUND=\[1\] ERR=\[\]'
    # GPU 3 of node2 alone in the step: CUDA numbers it 0
    printf '0 node2 3 vw0.stage0\n' > bind
    run timeout 30 env HETPIPE_BINDING="$PWD/bind" srun -N1 -n1 -w node2 --gres=gpu:4 "$SHOW"
    echo "$output"
    echo "$output" | grep -qx 'task 0 on node2: CVD=\[3\] GPU=\[3\] BOUND=\[1\] ERR=\[\]'
}

@test "binding in a heterogeneous step: TASK is SLURM_PROCID across the components" {
    printf '0 node1 0 vw0.stage0\n1 node2 1 vw0.stage1\n2 node2 - ps0\n' > bind
    run timeout 60 env HETPIPE_BINDING="$PWD/bind" srun -N1 -n1 -w node1 --gres=gpu:1 "$SHOW" : \
        -N1 -n2 -w node2 --gres=gpu:2 "$SHOW"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx 'task 0 on node1: CVD=\[0\] GPU=\[0\] BOUND=\[1\] ERR=\[\]'
    echo "$output" | grep -qx 'task 1 on node2: CVD=\[1\] GPU=\[1\] BOUND=\[1\] ERR=\[\]'
    echo "$output" | grep -qx 'task 2 on node2: CVD=\[\] GPU=\[\] BOUND=\[1\] ERR=\[\]'
}

# bind_error FILE PATTERN: a one-task step on node1 with 2 GPUs and HETPIPE_BINDING=FILE starts
# (the task is told why in HETPIPE_BIND_ERROR, which names the file), matching PATTERN;
# nothing bound, every node still idle
bind_error() {
    run timeout 30 env HETPIPE_BINDING="$1" srun -N1 -n1 -w node1 --gres=gpu:2 "$SHOW"
    echo "$output"
    [ "$status" -eq 0 ]
    line=$(echo "$output" | grep '^task 0 on node1: ')
    [[ "$line" == *"CVD=[0,1] GPU=[] BOUND=[] ERR=[spank_hetpipe: binding file $1"* ]]
    [[ "$line" == *"$2"* ]]
    [[ "$output" == *"slurmstepd-node1: error: spank_hetpipe: binding file $1"* ]]
    all_idle
}

@test "binding: a task planned on another node, or on a GPU the step lacks, is told why" {
    printf '0 node2 1 vw0.stage0\n' > bind
    bind_error "$PWD/bind" "task 0 is planned on node node2 (GPU 1), but the step runs it on node1 (with GPU(s) 0,1 there)"
    printf '0 node1 3 vw0.stage0\n' > bind
    bind_error "$PWD/bind" "task 0 is planned on GPU 3 of node1, but the step has GPU(s) 0,1 there"
    printf '1 node1 0 vw0.stage0\n' > bind
    bind_error "$PWD/bind" "line 1: task 1 is out of range (the file lists 1 task: tasks 0 to 0, each once)"
    # without GPUs in the step
    printf '0 node1 0 vw0.stage0\n' > bind
    run timeout 30 env HETPIPE_BINDING="$PWD/bind" srun -N1 -n1 -w node1 "$SHOW"
    echo "$output"
    [[ "$output" == *"but the step has no GPUs (SLURM_STEP_GPUS is unset) there"* ]]
}

@test "binding: an unreadable or garbage binding file is an error, not a crash" {
    bind_error "$PWD/nonexistent" "cannot open it: No such file or directory"
    mkdir dir
    bind_error "$PWD/dir" "cannot open it: it is a directory, not a regular file"
    mkfifo fifo
    bind_error "$PWD/fifo" "cannot open it: it is a FIFO, not a regular file"
    head -c 4096 /dev/urandom > garbage
    bind_error "$PWD/garbage" "line "
    printf '0 node1 0 vw0.stage0 extra\n' > bind
    bind_error "$PWD/bind" "line 1: expected 'TASK NODE DEVICE ROLE'"
    printf '0 node1 gpu0 vw0.stage0\n' > bind
    bind_error "$PWD/bind" "line 1: device 'gpu0' is neither '-' nor an index 0..4095"
    printf '0 node1 0 vw0.stage0\n0 node1 1 vw0.stage1\n' > bind
    bind_error "$PWD/bind" "line 2: task 0 is given a second time"
    { printf '0 node1 0 '; head -c 2000 /dev/zero | tr '\0' x; echo; } > bind
    bind_error "$PWD/bind" "line 1 is longer than 511 bytes"
    printf '0 node1 0 vw0\0stage0\n' > bind
    bind_error "$PWD/bind" "line 1 contains a NUL byte"
    # a good file afterwards binds as usual
    printf '0 node1 1 vw0.stage0\n' > bind
    run timeout 30 env HETPIPE_BINDING="$PWD/bind" srun -N1 -n1 -w node1 --gres=gpu:2 "$SHOW"
    echo "$output" | grep -qx 'task 0 on node1: CVD=\[1\] GPU=\[1\] BOUND=\[1\] ERR=\[\]'
}
