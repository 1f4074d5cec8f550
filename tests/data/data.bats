#!/usr/bin/env bats
# tier: fast
# Training from image files (issue 32): Fashion-MNIST written out by make_images.py as a JPEG
# folder and as PNG shards trains the CNN into the accuracy band of the IDX files; ResNet-152
# and VGG-19 run a few minibatches at their real input shape from a folder and from shards; a
# resumed job reads the same images and crops as an uninterrupted one; bad data stops the job
# naming the file, or is skipped and counted. (VGG-19 learning: learn.bats, long tier.)

load ../ckpt/helpers

# The band of the short CNN runs below (2 epochs of 6000 samples, 1000 validation samples),
# measured with hetpipe train, seeds 1-4, on the IDX files (--train-limit 6000 --test-limit
# 1000), the JPEG folder and the PNG shards of the same first images (--data-augment none):
#   idx 81.4 81.3 78.1 82.1   jpeg 81.2 82.4 79.4 84.1   shards 80.4 81.9 76.2 80.8
# An image run must reach FLOOR and be at most BELOW points under the IDX run beside it
# (largest shortfall seen 1.9; JPEG's loss and another order of the same samples allowed for).
FLOOR=74
BELOW=4

setup_file() {
    local d=$BATS_FILE_TMPDIR mk=tests/data/make_images.py
    python3 "$mk" "$d/jpg" --train 6000 --val 1000 > /dev/null
    python3 "$mk" "$d/shards" --format shards --train 6000 --val 1000 > /dev/null
    python3 "$mk" "$d/rgb" --size 256 --rgb --train 400 --val 20 > /dev/null
    python3 "$mk" "$d/rgbshards" --format shards --shard-samples 50 --size 256 --rgb \
        --train 400 --val 20 > /dev/null
}

setup() {
    common_setup
    D=$BATS_FILE_TMPDIR
    IDX=(--data /usr/share/datasets/fashion-mnist --train-limit 6000 --test-limit 1000)
}

teardown() {
    pkill -9 -f "hetpipe.*$TMP" 2> /dev/null || true
    common_teardown
}

# acc: the last evaluation's test accuracy in $output
acc() {
    echo "$output" | sed -n 's/^epoch [0-9]*\/[0-9]* test loss .* accuracy \([0-9.]*\)%.*/\1/p' |
        tail -1
}

# in_band NAME IMAGE_ACC IDX_ACC: the image run reached the band of the IDX run
in_band() {
    echo "# $1: test accuracy $2% (IDX $3%; floor $FLOOR%, at most $BELOW below IDX)" >&3
    [ -n "$2" ] && [ -n "$3" ]
    awk -v a="$2" -v i="$3" -v f="$FLOOR" -v b="$BELOW" 'BEGIN { exit !(a >= f && a >= i - b) }'
}

@test "hetpipe train: the CNN from a JPEG folder reaches the accuracy band of the IDX files" {
    run "$HETPIPE" train --model cnn --device cpu --epochs 2 --log-every 0 "${IDX[@]}"
    [ "$status" -eq 0 ]
    idx=$(acc)
    run "$HETPIPE" train --model cnn --device cpu --epochs 2 --log-every 0 --data "$D/jpg" \
        --data-augment none
    echo "$output" | tail -3
    [ "$status" -eq 0 ]
    [[ "$output" == *"186 steps"* ]] # 2 epochs of 6000 images at 64: all of the folder
    in_band "train, JPEG folder" "$(acc)" "$idx"
}

@test "hetpipe run --local: the CNN pipelined from a JPEG folder reaches the accuracy band of the IDX files" {
    run "$HETPIPE" run --local --model cnn --emulate off --epochs 2 --log-every 0 "${IDX[@]}"
    [ "$status" -eq 0 ]
    idx=$(acc)
    run "$HETPIPE" run --local --model cnn --emulate off --epochs 2 --log-every 0 \
        --data "$D/jpg" --data-augment none
    echo "$output" | grep -v '^ ' | tail -4
    [ "$status" -eq 0 ]
    [[ "$output" == *"trained 186 minibatches"* ]]
    in_band "run --local, JPEG folder" "$(acc)" "$idx"
}

@test "hetpipe run --local: the CNN pipelined from PNG shards reaches the accuracy band of the IDX files" {
    run "$HETPIPE" run --local --model cnn --emulate off --epochs 2 --log-every 0 "${IDX[@]}"
    [ "$status" -eq 0 ]
    idx=$(acc)
    run "$HETPIPE" run --local --model cnn --emulate off --epochs 2 --log-every 0 \
        --data "$D/shards" --data-augment none
    echo "$output" | grep -v '^ ' | tail -4
    [ "$status" -eq 0 ]
    [[ "$output" == *"trained 186 minibatches"* ]]
    in_band "run --local, PNG shards" "$(acc)" "$idx"
}

@test "hetpipe train: the CNN from PNG shards reaches the accuracy band of the IDX files" {
    run "$HETPIPE" train --model cnn --device cpu --epochs 2 --log-every 0 "${IDX[@]}"
    [ "$status" -eq 0 ]
    idx=$(acc)
    run "$HETPIPE" train --model cnn --device cpu --epochs 2 --log-every 0 --data "$D/shards" \
        --data-augment none
    [ "$status" -eq 0 ]
    in_band "train, PNG shards" "$(acc)" "$idx"
}

# big MODEL DATA CLUSTER [ARGS...]: `hetpipe run --local` of tests/models/MODEL.ini (10 classes)
# for a few minibatches of 2 at 3x224x224 from DATA (RGB images at 256 x 256); it trains every
# minibatch with finite losses and evaluates
big() {
    local model=$1 data=$2 cluster=$3
    shift 3
    run "$HETPIPE" run --local --model "tests/models/$model.ini" --cluster "$cluster" \
        --data "$data" --batch 2 --epochs 1 --test-limit 4 --lr 0.001 --emulate off \
        --log-every 0 --step-log "$TMP/steps.csv" --stats "$TMP/stats" "$@"
    echo "$output" | grep -v '^ ' | tail -5
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "^hetpipe: model $model, "
    echo "$output" | grep -q '^epoch 1/1 test loss .* accuracy'
    # every step's loss is a number (no nan or inf) and there are as many as minibatches
    steps=$(tail -n +2 "$TMP/steps.csv" | awk -F, '$2 + 0 == $2 && $2 < 1e30' | wc -l)
    n=$(awk -F' = ' '$1 == "minibatches" { print $2 }' "$TMP/stats.0")
    echo "steps logged $steps, minibatches $n"
    [ "$n" -ge 2 ] && [ "$steps" -eq "$n" ]
    # the input rank decoded what it trained and evaluated on, at the model's input size
    dec=$(awk -F' = ' '$1 == "data_decoded" { print $2 }' "$TMP/stats.0")
    [ "$dec" -ge $((n * 2)) ]
}

@test "ResNet-152 (10 classes) runs hetpipe run --local a few minibatches from an RGB image folder at 256 x 256" {
    big resnet152-10 "$D/rgb" tests/clusters/one.ini --train-limit 6
    [[ "$output" == *"image folder"* || "$output" == *"trained 3 minibatches"* ]]
}

@test "ResNet-152 (10 classes) runs hetpipe run --local a few minibatches from PNG shards" {
    big resnet152-10 "$D/rgbshards" tests/clusters/one.ini --train-limit 6
    [[ "$output" == *"trained 3 minibatches"* ]]
}

@test "VGG-19 (10 classes) runs hetpipe run --local a few minibatches from an RGB image folder, two pipelined VWs" {
    big vgg19-10 "$D/rgb" tests/clusters/mix2.ini --policy np --train-limit 8
    [[ "$output" == *"trained 2 minibatches"* ]]
}

@test "VGG-19 (10 classes) runs hetpipe run --local a few minibatches from PNG shards, two pipelined VWs" {
    big vgg19-10 "$D/rgbshards" tests/clusters/mix2.ini --policy np --train-limit 8
    [[ "$output" == *"trained 2 minibatches"* ]]
}

@test "ResNet-152 at 1000 classes on a 10-class image folder is refused, naming both" {
    run "$HETPIPE" run --local --model resnet152 --cluster tests/clusters/one.ini \
        --data "$D/rgb" --batch 2 --epochs 1 --emulate off
    echo "$output" | tail -3
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "resnet152"
    echo "$output" | grep -q "1000 classes"
    echo "$output" | grep -qF "$D/rgb"
    echo "$output" | grep -qw "10"
}

# resumed DATA ARGS...: one VW (four pipelined stages) of small224-10 with the standard random
# crops and flips from DATA, killed after its first checkpoint and resumed, ends bit for bit
# where the uninterrupted job does (the same images and crops in the same order); 4 epochs of
# 50 minibatches (about 3 s), so that the kill, at most 1 s after checkpoint 1, finds it running
resumed() {
    local data=$1
    shift
    killed_and_resumed "$(basename "$data")" --model tests/models/small224-10.ini --cluster demo \
        --data "$data" --batch 8 --epochs 4 --test-limit 20 --emulate off \
        --checkpoint-every 64 --log-every 0 "$@"
    a=$(hash_of "$full") b=$(hash_of "$resumed")
    echo "uninterrupted $a, resumed $b"
    [ -n "$a" ]
    [ "$a" = "$b" ]
}

@test "an image folder: a job killed after a checkpoint and resumed reads the same images and crops, bit for bit" {
    resumed "$D/rgb"
}

@test "tar shards: a job killed after a checkpoint and resumed reads the same images and crops, bit for bit" {
    resumed "$D/rgbshards"
}

# bad DIR ARGS...: Fashion-MNIST's first 640 training and 100 test images as a JPEG folder with
# ARGS (make_images.py's); sets $bad to the corrupt files' names
bad() {
    local dir=$1
    shift
    bad=$(python3 tests/data/make_images.py "$dir" --train 640 --val 100 "$@" |
        sed -n 's/^corrupt: //p')
}

# train_on DIR ARGS...: one epoch of the CNN pipelined (demo) from DIR
train_on() {
    local dir=$1
    shift
    run "$HETPIPE" run --local --model cnn --emulate off --epochs 1 --log-every 0 --data "$dir" \
        --data-augment none --stats "$TMP/stats" --run-dir "$(mktemp -u "$TMP/run.XXXXXX")" "$@"
    echo "$output" | grep -v '^ ' | tail -6
}

@test "a truncated JPEG in the folder stops the job, naming the file" {
    bad "$TMP/d" --corrupt 1
    [ -n "$bad" ]
    train_on "$TMP/d"
    [ "$status" -ne 0 ]
    echo "$output" | grep -F "$bad" | grep -q error
    echo "$output" | grep -q -- "--data-on-error skip"
}

@test "a truncated PNG in a shard stops the job, naming the shard and the member" {
    bad "$TMP/d" --corrupt 1 --format shards
    [ -n "$bad" ]
    train_on "$TMP/d"
    [ "$status" -ne 0 ]
    echo "$output" | grep -F "${bad%%:*}" | grep -F "${bad##*:}" | grep -q error
}

@test "--data-on-error skip: the job finishes, names the file and counts the skipped sample" {
    bad "$TMP/d" --corrupt 1
    train_on "$TMP/d" --data-on-error skip
    [ "$status" -eq 0 ]
    echo "$output" | grep -F "$bad" | grep -q skip
    # counted in the input rank's stats (one epoch: the file once)
    n=$(cat "$TMP"/stats.* | awk -F' = ' '$1 == "data_skipped" { s += $2 } END { print s + 0 }')
    echo "skipped: $n"
    [ "$n" -eq 1 ]
}

@test "--data-on-error skip: more skipped than --data-error-limit fails the job" {
    bad "$TMP/d" --corrupt 8 # 8 of 640 = 1.25%
    train_on "$TMP/d" --data-on-error skip --data-error-limit 0.01
    [ "$status" -ne 0 ]
    echo "$output" | grep -q -- "--data-error-limit 0.01"
    # at 0.02 the same data trains to the end
    train_on "$TMP/d" --data-on-error skip --data-error-limit 0.02
    [ "$status" -eq 0 ]
}

@test "hetpipe train: a truncated JPEG stops it, naming the file; skip finishes" {
    bad "$TMP/d" --corrupt 1
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --log-every 0 --data "$TMP/d" \
        --data-augment none
    [ "$status" -ne 0 ]
    echo "$output" | grep -qF "$bad"
    run "$HETPIPE" train --model cnn --device cpu --epochs 1 --log-every 0 --data "$TMP/d" \
        --data-augment none --data-on-error skip
    [ "$status" -eq 0 ]
    echo "$output" | grep -F "$bad" | grep -q skip
}

@test "an image folder without its val split is refused, naming the path" {
    bad "$TMP/d"
    rm -r "$TMP/d/val"
    train_on "$TMP/d"
    [ "$status" -ne 0 ]
    echo "$output" | grep -qF "$TMP/d/val"
}

@test "an image folder whose classes are not the model's is refused, naming both" {
    bad "$TMP/d"
    rm -r "$TMP/d/train/9_ankle_boot" "$TMP/d/val/9_ankle_boot"
    train_on "$TMP/d"
    [ "$status" -ne 0 ]
    line=$(echo "$output" | grep -F "$TMP/d" | grep "classes")
    echo "$line"
    echo "$line" | grep -q "'cnn' has 10 classes"
    echo "$line" | grep -qw 9
}

@test "make_images.py: the same arguments give the same bytes; an existing non-empty OUT is refused" {
    python3 tests/data/make_images.py "$TMP/a" --train 50 --val 10 --corrupt 2 > /dev/null
    python3 tests/data/make_images.py "$TMP/b" --train 50 --val 10 --corrupt 2 > /dev/null
    diff -r "$TMP/a" "$TMP/b"
    python3 tests/data/make_images.py "$TMP/s1" --format shards --shard-samples 20 --train 50 \
        --val 10 > /dev/null
    python3 tests/data/make_images.py "$TMP/s2" --format shards --shard-samples 20 --train 50 \
        --val 10 > /dev/null
    diff -r "$TMP/s1" "$TMP/s2"
    [ "$(ls "$TMP/s1")" = "$(printf 'classes.txt\ntrain-000000.tar\ntrain-000001.tar\ntrain-000002.tar\nval-000000.tar')" ]
    sum=$(cat "$TMP"/a/train/*/* | cksum)
    run python3 tests/data/make_images.py "$TMP/a" --train 5 --val 0
    [ "$status" -eq 2 ]
    [[ "$output" == *"not empty: refused"* ]]
    [ "$(cat "$TMP"/a/train/*/* | cksum)" = "$sum" ]
}

@test "the crops and flips do not depend on the decoding threads: 1 and 3 threads train the same weights" {
    for t in 1 3; do
        run "$HETPIPE" run --local --model tests/models/small224-10.ini --cluster demo \
            --data "$D/rgb" --batch 8 --epochs 1 --train-limit 160 --test-limit 20 \
            --emulate off --log-every 0 --data-threads "$t"
        [ "$status" -eq 0 ]
        echo "$output" | grep 'parameters hash'
        eval "h$t=\$(echo \"\$output\" | sed -n 's/^hetpipe: parameters hash //p')"
    done
    [ -n "$h1" ]
    [ "$h1" = "$h3" ]
}

@test "the timeline has a data track on each first stage, which tests/bench/data/data_wait.py reads" {
    run "$HETPIPE" run --local --model tests/models/small224-10.ini --cluster tests/clusters/mix2.ini \
        --policy np --data "$D/rgb" --batch 8 --epochs 1 --train-limit 160 --test-limit 20 \
        --emulate off --log-every 0 --timeline "$TMP/t.json" --keep --run-dir "$TMP/run"
    [ "$status" -eq 0 ]
    run python3 tests/bench/data/data_wait.py "$TMP/run"
    echo "$output"
    [ "$status" -eq 0 ]
    # one line per VW's first stage (two VWs), and the share
    [ "$(echo "$output" | grep -c '^data wait: rank .* minibatches$')" -eq 2 ]
    echo "$output" | grep -q '^data wait share: [0-9.]*% (largest over 2 input ranks); steady state [0-9.]*%$'
    grep -q '"cat":"data"' "$TMP/t.json"
}

@test "an IDX set of 6000 + 1000 images (make_images.py --format idx): data check counts them, or refuses naming the file; train agrees" {
    python3 tests/data/make_images.py "$TMP/i" --format idx --train 6000 --val 1000 > /dev/null
    run "$HETPIPE" data check "$TMP/i"
    echo "$output"
    if [ "$status" -eq 0 ]; then
        echo "$output" | grep -q '^train: 6000 samples'
        echo "$output" | grep -q '^val: 1000 samples'
        run "$HETPIPE" train --model cnn --device cpu --epochs 1 --log-every 0 --data "$TMP/i"
        echo "$output" | tail -3
        [ "$status" -eq 0 ]
        echo "$output" | grep -q '1 epochs of 93 steps'
    else
        echo "$output" | grep -q 'train-images-idx3-ubyte.gz'
    fi
}

@test "hetpipe report: an input rank that holds its VW back is warned of, with the threads that would keep up; one that keeps up is noted" {
    # linear224: almost no compute; 512 x 512 PNGs (no reduced decoding as for JPEG): one
    # decoding thread cannot keep up
    python3 tests/data/make_images.py "$TMP/png" --png --size 512 --rgb --train 320 --val 16 \
        > /dev/null
    run "$HETPIPE" run --local --model tests/models/linear224.ini --cluster tests/clusters/one.ini \
        --data "$TMP/png" --data-threads 1 --batch 16 --epochs 1 --train-limit 320 --test-limit 16 \
        --emulate off --log-every 0 --stats "$TMP/slow/stats" --run-dir "$TMP/slow"
    [ "$status" -eq 0 ]
    grep -q '^data_threads = 1$' "$TMP/slow/stats.0"
    run "$HETPIPE" report "$TMP/slow" --out "$TMP/slow.html"
    [ "$status" -eq 0 ]
    grep -o 'VW 0 (rank 0) waited [^<]*' "$TMP/slow.html" | tee /dev/stderr |
        grep -q 'for data, .*% of its training time (the first minibatch of each epoch left out): 1 decoding thread prepares .* images/s each.*about [2-9][0-9]* threads would keep up (--data-threads'
    # the IDX CNN: samples in memory, no warning
    run "$HETPIPE" run --local --cluster tests/clusters/one.ini "${IDX[@]}" --train-limit 640 \
        --test-limit 64 --epochs 1 --emulate off --log-every 0 --stats "$TMP/fast/stats" \
        --run-dir "$TMP/fast"
    [ "$status" -eq 0 ]
    run "$HETPIPE" report "$TMP/fast" --out "$TMP/fast.html"
    [ "$status" -eq 0 ]
    grep -q 'VW 0 (rank 0) data input: samples held in memory' "$TMP/fast.html"
    ! grep -q 'waited [^<]* for data' "$TMP/fast.html"
}

@test "a 3-stage VW with Nm 1 from a JPEG folder, random crops and flips: hetpipe train's losses and weights bit for bit" {
    # three one-GPU nodes of different types: --policy ed makes one VW of them
    printf '[cluster]\nname = three\n\n[node1]\ngpus = titanv:1\n\n[node2]\ngpus = titanrtx:1\n\n[node3]\ngpus = rtx2060:1\n' > "$TMP/c3.ini"
    run "$HETPIPE" run --local --cluster "$TMP/c3.ini" --policy ed --nm 1 --emulate off \
        --data "$D/jpg" --epochs 1 --train-limit 1600 --test-limit 200 --log-every 0 \
        --step-log "$TMP/pipe.csv"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"this one of 3 stages, Nm 1"* ]]
    pipe_hash=$(echo "$output" | sed -n 's/.*parameters hash \([0-9a-f]*\).*/\1/p')
    run "$HETPIPE" train --model cnn --device cpu --data "$D/jpg" --epochs 1 --train-limit 1600 \
        --test-limit 200 --log-every 0 --step-log "$TMP/train.csv"
    [ "$status" -eq 0 ]
    train_hash=$(echo "$output" | sed -n 's/.*parameter hash \([0-9a-f]*\).*/\1/p')
    [ "$(wc -l < "$TMP/pipe.csv")" -eq 26 ]
    diff "$TMP/pipe.csv" "$TMP/train.csv"
    [ -n "$pipe_hash" ]
    [ "$pipe_hash" = "$train_hash" ]
}
