#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# The hetpipe command as a user meets it: help, models, training, and bad input.

setup() {
    HETPIPE=${HETPIPE:-build/hetpipe}
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
}

# torch_py REF: py, a python3 that imports torch ($TORCH_PY, Debian's python3-torch, or a
# venv's), and the build's reference program REF (tests/bench/REF.c, built by make, not by the
# sanitizer builds); the test is skipped without them (PyTorch is never a CI dependency)
torch_py() {
    [ -x "$(dirname "$HETPIPE")/tests/$1" ] || skip "$1 is not built in $(dirname "$HETPIPE")"
    py=""
    for p in ${TORCH_PY:-} /usr/bin/python3 python3 /work/V/bin/python3; do
        if command -v "$p" > /dev/null 2>&1 && "$p" -c 'import torch' > /dev/null 2>&1; then
            py=$p
            return 0
        fi
    done
    skip "PyTorch not importable (apt-get install python3-torch, or TORCH_PY=PYTHON)"
}

@test "hetpipe --help lists the commands" {
    run "$HETPIPE" --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"train"* ]]
    [[ "$output" == *"model"* ]]
}

@test "an unknown command is refused with the allowed ones" {
    run "$HETPIPE" frobnicate
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown command 'frobnicate'"* ]]
    [[ "$output" == *"allowed: train"* ]]
}

@test "hetpipe model prints VGG-19's and ResNet-152's published sizes" {
    run "$HETPIPE" model --model vgg19
    [ "$status" -eq 0 ]
    [[ "$output" == *"parameters: 143667240 (143.67 M)"* ]]
    [[ "$output" == *"(19.63 G)"* ]]
    run "$HETPIPE" model resnet152
    [ "$status" -eq 0 ]
    [[ "$output" == *"(60.19 M)"* ]]
    [[ "$output" == *"(11.51 G)"* ]]
}

@test "hetpipe model --units lists every unit" {
    run "$HETPIPE" model --model cnn --units
    [ "$status" -eq 0 ]
    [[ "$output" == *"conv1"*"conv"*"32x28x28"* ]]
    [[ "$output" == *"fc2"*"linear"*"10x1x1"* ]]
}

@test "bad option values name the option and the allowed values" {
    run "$HETPIPE" train --batch 0
    [ "$status" -eq 2 ]
    [[ "$output" == *"--batch=0: must be an integer from 1 to 65536"* ]]
    run "$HETPIPE" train --epochs 3x
    [ "$status" -eq 2 ]
    [[ "$output" == *"--epochs=3x: must be an integer from 1 to 10000"* ]]
    run "$HETPIPE" train --device tpu
    [ "$status" -eq 2 ]
    [[ "$output" == *"--device=tpu: unknown device; allowed: cpu, cuda, auto"* ]]
    run "$HETPIPE" train --lr abc
    [ "$status" -eq 2 ]
    [[ "$output" == *"--lr=abc: must be a number from 1e-08 to 10"* ]]
    run "$HETPIPE" train --schedule step
    [ "$status" -eq 2 ]
    [[ "$output" == *"--schedule=step: unknown schedule; allowed: cosine, constant"* ]]
}

@test "an unknown model is refused" {
    run "$HETPIPE" train --model nosuch
    [ "$status" -eq 1 ]
    [[ "$output" == *"unknown model 'nosuch'"* ]]
}

@test "an ImageNet model cannot be trained on Fashion-MNIST" {
    run "$HETPIPE" train --model vgg19 --device cpu
    [ "$status" -eq 1 ]
    [[ "$output" == *"dataset = imagenet needs --data DIR: an image folder"* ]]
    run "$HETPIPE" train --model vgg19 --device cpu --data /usr/share/datasets/fashion-mnist
    [ "$status" -eq 1 ]
    [[ "$output" == *"model 'vgg19' has 1000 classes, but the data set at /usr/share/datasets/fashion-mnist has 10"* ]]
}

@test "a missing data set names the file and how to install it" {
    run "$HETPIPE" train --model mlp --device cpu --data "$TMP/none"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'$TMP/none/train-images-idx3-ubyte.gz'"* ]]
    [[ "$output" == *"apt-get install dataset-fashion-mnist"* ]]
    mkdir "$TMP/empty"
    run "$HETPIPE" train --model mlp --device cpu --data "$TMP/empty"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'$TMP/empty' holds none of: IDX files (train-images-idx3-ubyte.gz)"* ]]
}

@test "a corrupt data file is reported, not crashed on" {
    cp /usr/share/datasets/fashion-mnist/*.gz "$TMP/"
    head -c 100000 /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz > "$TMP/train-images-idx3-ubyte.gz"
    run "$HETPIPE" train --model mlp --device cpu --data "$TMP"
    [ "$status" -eq 1 ]
    [[ "$output" == *"train-images-idx3-ubyte.gz"* ]]
    [[ "$output" == *"corrupt"* ]]
}

@test "a bad model file names file, unit and key" {
    printf '[model]\ninput = 1x28x28\nclasses = 10\n[fc]\ntype = linear\nouputs = 10\n' > "$TMP/m.ini"
    run "$HETPIPE" train --model "$TMP/m.ini" --device cpu
    [ "$status" -eq 1 ]
    [[ "$output" == *"m.ini: [fc]: unknown key 'ouputs'"* ]]
}

@test "hetpipe train trains, prints progress, and writes a metrics CSV" {
    run "$HETPIPE" train --model mlp --device cpu --epochs 2 --train-limit 3200 \
        --test-limit 1000 --log-every 25 --metrics "$TMP/m.csv" --seed 3
    [ "$status" -eq 0 ]
    [[ "$output" == *"epoch 1/2 step 25/50 loss"*"img/s"* ]]
    [[ "$output" == *"epoch 2/2 test loss"*"accuracy"* ]]
    head -1 "$TMP/m.csv" | grep -q '^split,epoch,step,seconds,loss,accuracy,images_per_s$'
    [ "$(grep -c '^test,' "$TMP/m.csv")" -eq 2 ]
    [ "$(grep -c '^train,' "$TMP/m.csv")" -eq 4 ]
}

@test "the same seed gives the same parameters" {
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --train-limit 640 --test-limit 200 --seed 9
    [ "$status" -eq 0 ]
    a=$(echo "$output" | grep -o 'parameter hash [0-9a-f]*')
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --train-limit 640 --test-limit 200 --seed 9
    b=$(echo "$output" | grep -o 'parameter hash [0-9a-f]*')
    [ -n "$a" ]
    [ "$a" = "$b" ]
}

@test "gpt-tiny trained with --recompute always ends with the parameters of --recompute never" {
    # blocks are recomputed whole (attention probabilities, layer norm saves) from the kept
    # segment outputs: the same floats, so AdamW's steps and the clipping norm are the same
    local h=()
    for r in never always; do
        run "$HETPIPE" train --threads 1 --model gpt-tiny --epochs 1 --train-limit 64 \
            --test-limit 32 --batch 16 --optimizer adamw --lr 0.002 --weight-decay 0.1 \
            --clip 0.5 --log-every 0 --recompute "$r"
        [ "$status" -eq 0 ]
        h+=("$(echo "$output" | grep -o 'parameter hash [0-9a-f]*')")
    done
    [ -n "${h[0]}" ]
    [ "${h[0]}" = "${h[1]}" ]
}

@test "--device cuda without a GPU fails clearly, auto falls back to the CPU" {
    if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
        skip "a GPU is present"
    fi
    run "$HETPIPE" time --model mlp --device cuda --steps 1
    [ "$status" -eq 1 ]
    [[ "$output" == *"device 'cuda'"* ]]
    run "$HETPIPE" time --model mlp --device auto --steps 1 --warmup 0
    [ "$status" -eq 0 ]
    [[ "$output" == *"device cpu"* ]]
}

@test "the GPU op checks skip cleanly without a GPU" {
    if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
        skip "a GPU is present"
    fi
    run "$(dirname "$HETPIPE")/tests/gpu_check_ops"
    [ "$status" -eq 77 ]
    [[ "$output" == *"SKIP"* ]]
}

@test "a 5-step training run matches PyTorch's (second implementation, skipped without torch)" {
    torch_py torch_ref
    run "$(dirname "$HETPIPE")/tests/torch_ref" "$TMP" 5
    [ "$status" -eq 0 ]
    run "$py" "$BATS_TEST_DIRNAME/torch_equiv.py" "$TMP"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"torch_equiv: ok"* ]]
}

@test "5 AdamW steps with clipping match PyTorch's AdamW (skipped without torch)" {
    torch_py torch_ref
    run "$(dirname "$HETPIPE")/tests/torch_ref" "$TMP" 5 adamw
    [ "$status" -eq 0 ]
    run "$py" "$BATS_TEST_DIRNAME/torch_equiv.py" "$TMP" --adamw
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"torch_equiv: ok"* ]]
}

@test "hetpipe train --optimizer adamw with warm-up and clipping learns; bad values are refused" {
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --train-limit 1280 --test-limit 500 \
        --optimizer adamw --lr 0.002 --weight-decay 0.1 --warmup 5 --clip 1 --seed 2
    [ "$status" -eq 0 ]
    [[ "$output" == *"seed 2, adamw"* ]]
    acc=$(echo "$output" | grep -o 'test loss [0-9.]* accuracy [0-9.]*' | awk '{print $5}')
    awk -v a="$acc" 'BEGIN { exit !(a >= 50) }'
    run "$HETPIPE" train --model cnn --device cpu --optimizer adam
    [ "$status" -eq 2 ]
    [[ "$output" == *"--optimizer=adam"*"allowed: sgd, adamw"* ]]
    run "$HETPIPE" train --model cnn --device cpu --clip -1
    [ "$status" -eq 2 ]
    [[ "$output" == *"--clip"* ]]
}

@test "a GPT training step and 10 AdamW steps (decay, warm-up, clipping, tied head) match PyTorch's (skipped without torch)" {
    torch_py gpt_ref
    run "$(dirname "$HETPIPE")/tests/gpt_ref" "$TMP" gpt-tiny
    [ "$status" -eq 0 ]
    run "$py" "$BATS_TEST_DIRNAME/gpt_equiv.py" "$TMP"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"gpt_equiv: ok"* ]]
}

@test "a training step of ResNet-152 and VGG-19 at ImageNet shape runs on the CPU" {
    run "$HETPIPE" time --model resnet152 --batch 1 --device cpu --steps 1 --warmup 0
    [ "$status" -eq 0 ]
    [[ "$output" == *"model resnet152, batch 1, device cpu"*"ms/step"* ]]
    run "$HETPIPE" time --model vgg19 --batch 1 --device cpu --steps 1 --warmup 0
    [ "$status" -eq 0 ]
    [[ "$output" == *"model vgg19, batch 1"* ]]
}

@test "hetpipe plan of a text model gives its rates in samples and tokens (1024 per sample)" {
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --model gpt2-xl --batch 8 \
        --out "$TMP/gpt.ini"
    [ "$status" -eq 0 ]
    line=$(echo "$output" | grep '^predicted:')
    [[ "$line" == *" samples/s ("*" tokens/s) for the job"* ]]
    samples=$(echo "$line" | sed 's/^predicted: \([0-9.]*\) samples.*/\1/')
    tokens=$(echo "$line" | sed 's/.*(\([0-9]*\) tokens.*/\1/')
    # tokens = samples x 1024, up to the one decimal printed
    awk -v s="$samples" -v t="$tokens" 'BEGIN { d = t - s * 1024; exit !(d < 52 && d > -52) }'
}

@test "hetpipe plan prints the table and writes a plan file (mode 0600)" {
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --model vgg19 --policy ed \
        --placement local --staleness 2 --batch 32 --out "$TMP/plan.ini"
    [ "$status" -eq 0 ]
    [[ "$output" == *"VW 3: 4 GPUs, Nm"* ]]
    [[ "$output" == *"titanrtx"*"rtx2060"* ]]
    [[ "$output" == *"0.0 MB under local"* ]]
    [[ "$output" == *"predicted:"*"images/s for the job (4 virtual workers, 20 ranks)"* ]]
    [ "$(stat -c %a "$TMP/plan.ini")" = 600 ]
    grep -q '^staleness = 2$' "$TMP/plan.ini"
    grep -q '^\[vw.3.stage.3\]$' "$TMP/plan.ini"
}

# A chain of many small units (relu200) and a mixed one of 248 (linear, relu, dropout).
plan_models() {
    printf '[model]\nname = relu200\ndataset = none\ninput = 1x1x64\nclasses = 64\n\n' >"$TMP/relu200.ini"
    printf '[fc0]\ntype = flatten\n\n[r]\ntype = relu\nrepeat = 199\n' >>"$TMP/relu200.ini"
    {
        printf '[model]\nname = mix300\ndataset = none\ninput = 3x32x32\nclasses = 10\n\n'
        printf '[flat]\ntype = flatten\n\n'
        for i in $(seq 1 74); do
            w=$(((i * 37 % 9 + 1) * 128))
            printf '[l%d]\ntype = linear\noutputs = %d\n\n[r%d]\ntype = relu\n\n' $i $w $i
            if [ $((i % 3)) = 0 ]; then printf '[d%d]\ntype = dropout\np = 0.1\n\n' $i; fi
            printf '[m%d]\ntype = linear\noutputs = %d\nrelu = true\n\n' $i $w
        done
        printf '[out]\ntype = linear\noutputs = 10\n'
    } >"$TMP/mix300.ini"
}

@test "hetpipe plan gives the plans it gave before the planner was made fast" {
    # the plan file (but its token, its model path and its optimizer line, which came later)
    # of each, as the planner of commit de4cf50 wrote it (the search over unit ranges and
    # orders, and every table over unit ranges)
    plan_models
    while read -r want model cluster policy recompute placement; do
        case $model in relu200 | mix300) model=$TMP/$model.ini ;; esac
        run "$HETPIPE" plan --cluster "$cluster" --model "$model" --policy "$policy" \
            --recompute "$recompute" --placement "$placement" --quiet --out "$TMP/p.ini"
        [ "$status" -eq 0 ]
        got=$(sed '/^token = /d; /^model = /d; /^optimizer = /d' "$TMP/p.ini" | sha256sum |
            cut -c1-16)
        echo "$model $cluster $policy $recompute $placement: $got (want $want)"
        [ "$got" = "$want" ]
    done <<'EOF'
e73e1a7fae2dffbf resnet152 etc/clusters/paper.ini auto auto default
d810caedde668b9d resnet152 tests/clusters/big8x2048.ini auto auto default
c6a37038ce663217 vgg19 tests/clusters/big8x2048.ini auto never local
771d689c8dfcce12 vgg19 etc/clusters/six-types.ini auto auto default
4dc3b829a3e8d24b cnn etc/clusters/demo.ini ed always default
5896b579d7567c27 mlp etc/clusters/uneven.ini hd auto default
0a5e16a33ba8c458 resnet152 etc/clusters/mixed.ini np never default
0be224c6e1f7d7ea tests/models/resnet-mini.ini tests/clusters/wsp2x2.ini auto auto local
4d8820f1232f6423 relu200 etc/clusters/six-types.ini auto auto default
300973757ab1d4f5 mix300 etc/clusters/demo.ini auto auto default
a1f444d3df9c6047 mix300 etc/clusters/six-types.ini auto always default
a67ff92beb2fa1c4 resnet152 etc/clusters/six-types.ini dp auto default
f6336d19a69ead0d vgg19 etc/clusters/paper.ini auto always default
EOF
}

@test "hetpipe plan recomputes only where a GPU could not hold its stage otherwise" {
    # ResNet-152 at 40 as dp: without recomputation the 6 GB RTX 2060s cannot hold it (at 32
    # they can, where the paper's Horovod left them out); auto lets them join, recomputing,
    # and nowhere else
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --model resnet152 --policy dp \
        --batch 40 --recompute never
    [ "$status" -eq 0 ]
    [[ "$output" == *"recompute never"*"(12 virtual workers, 12 ranks)"* ]]
    [ "$(echo "$output" | grep -cE '^  [0-9] .*rtx2060' || true)" -eq 0 ]
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --model resnet152 --policy dp \
        --batch 40 --out "$TMP/auto.ini"
    [ "$status" -eq 0 ]
    [[ "$output" == *"recompute auto"*"(16 virtual workers, 16 ranks)"* ]]
    [ "$(echo "$output" | grep -cE '^  [0-9] .*rtx2060 .* yes$')" -eq 4 ]
    [ "$(echo "$output" | grep -cE '^  [0-9] .* yes$')" -eq 4 ]
    [ "$(grep -c '^recompute = 1$' "$TMP/auto.ini")" -eq 4 ]
    grep -q '^recompute = auto$' "$TMP/auto.ini"
    # always: every stage
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --model resnet152 --policy dp \
        --batch 40 --recompute always
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | grep -cE '^  [0-9] .* yes$')" -eq 16 ]
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --recompute sometimes
    [ "$status" -eq 2 ]
    [[ "$output" == *"--recompute=sometimes"*"allowed: auto, never, always"* ]]
}

@test "hetpipe plan refuses bad options and files clearly" {
    run "$HETPIPE" plan --model vgg19
    [ "$status" -eq 2 ]
    [[ "$output" == *"'--cluster FILE' is required"* ]]
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --policy fast
    [ "$status" -eq 2 ]
    [[ "$output" == *"--policy=fast: unknown policy; allowed: auto, np, ed, hd, dp"* ]]
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --staleness -1
    [ "$status" -eq 2 ]
    [[ "$output" == *"--staleness=-1: must be an integer from 0 to 1000000"* ]]
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --nm 0
    [ "$status" -eq 2 ]
    [[ "$output" == *"--nm=0: must be auto or an integer from 1 to 1024"* ]]
    printf '[cluster]\nname = x\n[n1]\ngpus = k80:2\n' > "$TMP/c.ini"
    run "$HETPIPE" plan --cluster "$TMP/c.ini"
    [ "$status" -eq 1 ]
    [[ "$output" == *"unknown GPU type 'k80'"*"[gpu.k80]"* ]]
    run "$HETPIPE" plan --cluster etc/clusters/paper.ini --config "$TMP/none.conf"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$TMP/none.conf"* ]]
    printf '[cluster]\nname = tiny\n[n1]\ngpus = rtx2060:1\n' > "$TMP/t.ini"
    run "$HETPIPE" plan --cluster "$TMP/t.ini" --model vgg19 --policy np --batch 128
    [ "$status" -eq 1 ]
    [[ "$output" == *"does not fit"*"rtx2060"*"GiB"* ]]
}

@test "hetpipe profile measures every unit and hetpipe plan uses it" {
    run "$HETPIPE" profile --model cnn --device cpu --batch 16 --type p4000 --steps 1 \
        --out "$TMP/prof.ini"
    [ "$status" -eq 0 ]
    [ "$(grep -c '^\[unit\.' "$TMP/prof.ini")" -eq 6 ]
    grep -q '^type = p4000$' "$TMP/prof.ini"
    run "$HETPIPE" plan --cluster etc/clusters/local4.ini --model cnn --profile "$TMP/prof.ini"
    [ "$status" -eq 0 ]
    [[ "$output" == *"measured times for 6 of 6 units"* ]]
    sed -i 's/^type = p4000$/type = tpu9/' "$TMP/prof.ini"
    run "$HETPIPE" plan --cluster etc/clusters/local4.ini --model cnn --profile "$TMP/prof.ini"
    [ "$status" -eq 1 ]
    [[ "$output" == *"unknown GPU type 'tpu9'"* ]]
}

@test "hetpipe-rank refuses a plan file of another version, or for a model with other units" {
    run "$HETPIPE" plan --cluster local4 --model cnn --policy ed --out "$TMP/p.ini" --quiet
    [ "$status" -eq 0 ]
    rank=$(dirname "$HETPIPE")/hetpipe-rank
    mkdir -m 0700 "$TMP/boot"
    sed 's/^version = 2$/version = 1/' "$TMP/p.ini" > "$TMP/v1.ini"
    run "$rank" --plan "$TMP/v1.ini" --rank 0 --boot-dir "$TMP/boot"
    [ "$status" -eq 1 ]
    [[ "$output" == *"plan file version 1 is not supported (this hetpipe reads version 2; re-run hetpipe plan)"* ]]
    sed 's/^model = cnn$/model = mlp/' "$TMP/p.ini" > "$TMP/mlp.ini"
    run "$rank" --plan "$TMP/mlp.ini" --rank 0 --boot-dir "$TMP/boot"
    [ "$status" -eq 1 ]
    [[ "$output" == *"the plan has 6 units, but model 'mlp' has 5"* ]]
    run "$rank" --plan "$TMP/p.ini" --rank 0 --boot-dir "$TMP/boot" --emulate auto
    [ "$status" -eq 2 ]
    [[ "$output" == *"--emulate"*"auto is for hetpipe run"* ]]
}
