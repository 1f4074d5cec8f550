#!/usr/bin/env bats
# tier: long
# VGG-19 learns from an image folder at its real input shape (3x224x224): two Fashion-MNIST
# classes (trouser, bag) written out by make_images.py as RGB JPEGs at 256 x 256, 256 training
# samples (32 steps of 8) and 40 validation samples, tests/models/vgg19-2.ini (VGG-19 with 2
# outputs). About 6 minutes on one core.
# Measured (seed 1), on two builds of image.c: mean step loss 2.92 over the first 8 steps (1.3
# at the start, a spike at step 1), 0.63 and 0.68 over the last 8; test loss 0.374 and 0.449,
# accuracy 95% and 100% (chance: 50%, loss ln 2 = 0.693).

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

@test "VGG-19 learns on a small image folder at its real shape: the loss falls, validation well above chance" {
    python3 tests/data/make_images.py "$TMP/d" --classes 1,8 --size 256 --rgb --train 256 \
        --val 40 > /dev/null
    run "$HETPIPE" train --model tests/models/vgg19-2.ini --device cpu --data "$TMP/d" \
        --data-augment none --batch 8 --epochs 1 --lr 0.0003 --schedule constant --log-every 0 \
        --step-log "$TMP/steps.csv"
    echo "$output" | tail -3
    [ "$status" -eq 0 ]
    [ "$(tail -n +2 "$TMP/steps.csv" | wc -l)" -eq 32 ]
    # the mean step loss of the last 8 steps is below that of the first 8 and well below the
    # first step's (1.3)
    read -r first last <<< "$(awk -F, 'NR > 1 && NR <= 9 { a += $2 } NR > 25 { b += $2 }
        END { printf "%.4f %.4f\n", a / 8, b / 8 }' "$TMP/steps.csv")"
    echo "# mean step loss: first 8 steps $first, last 8 steps $last" >&3
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a && b < 0.8) }'
    # validation: loss below chance's ln 2 and accuracy well above 50%
    line=$(echo "$output" | grep '^epoch 1/1 test loss')
    echo "# $line" >&3
    loss=$(echo "$line" | sed -n 's/.*test loss \([0-9.]*\) .*/\1/p')
    acc=$(echo "$line" | sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p')
    awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l < 0.6 && a >= 75) }'
}
