#!/usr/bin/env bats
# tier: fast
# make install / make uninstall into a DESTDIR: every file with its mode, an edited config
# kept, man pages that render, an installed hetpipe that finds its models and its CUDA backend
# module, and an uninstall that removes what install put. Runs make in the repository on the build tree of $HETPIPE;
# skipped when that build is not up to date (install must not rebuild under other tests).

setup_file() {
    ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
    export ROOT
}

setup() {
    HETPIPE=${HETPIPE:-build/hetpipe}
    case $HETPIPE in
    /*) ;;
    *) HETPIPE="$ROOT/$HETPIPE" ;;
    esac
    B=$(dirname "$HETPIPE")
    targets="$B/hetpipe $B/hetpipe-rank"
    if [ -f "$B/spank_hetpipe.so" ]; then
        targets="$targets $B/spank_hetpipe.so"
    fi
    MODULE=0
    if [ -f "$B/hetpipe-cuda.so" ]; then
        targets="$targets $B/hetpipe-cuda.so"
        MODULE=1
    fi
    # shellcheck disable=SC2086
    if ! make -q -C "$ROOT" BUILD="$B" $targets > /dev/null 2>&1; then
        skip "the build in $B is not up to date (run make first)"
    fi
    D=$(mktemp -d)
    # Slurm's plugin directory as the Makefile finds it: where auth_munge.so is
    PLUGINDIR=/usr/local/lib/slurm
    for f in /usr/lib/*/slurm-wlm/auth_munge.so /usr/lib64/slurm/auth_munge.so /usr/lib/slurm/auth_munge.so; do
        if [ -f "$f" ]; then
            PLUGINDIR=$(dirname "$f")
            break
        fi
    done
    unset HETPIPE_CONF HETPIPE_MODELS HETPIPE_RANK_BIN HETPIPE_CUDA_MODULE
}

teardown() {
    rm -rf "$D"
}

mk() {
    make -s -C "$ROOT" BUILD="$B" PREFIX=/usr/local DESTDIR="$D" "$@"
}

# mode FILE: its permission bits, e.g. 755
mode() {
    stat -c %a "$1"
}

@test "make install puts every file in place with its mode and prints the plugstack.conf line" {
    run mk install
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(mode "$D/usr/local/bin/hetpipe")" = 755 ]
    [ "$(mode "$D/usr/local/bin/hetpipe-rank")" = 755 ]
    cmp "$B/hetpipe" "$D/usr/local/bin/hetpipe"
    for f in "$ROOT"/etc/models/*.ini; do
        [ "$(mode "$D/usr/local/share/hetpipe/models/${f##*/}")" = 644 ]
    done
    for f in "$ROOT"/etc/clusters/*.ini; do
        [ "$(mode "$D/usr/local/share/hetpipe/clusters/${f##*/}")" = 644 ]
    done
    [ -f "$D/usr/local/share/hetpipe/clusters/demo.ini" ]
    [ -f "$D/usr/local/share/hetpipe/models/resnet152.ini" ]
    [ "$(mode "$D/etc/hetpipe/hetpipe.conf")" = 644 ]
    cmp "$ROOT/etc/hetpipe.conf" "$D/etc/hetpipe/hetpipe.conf"
    [ "$(mode "$D/usr/local/share/man/man1/hetpipe.1")" = 644 ]
    [ "$(mode "$D/usr/local/share/man/man8/spank_hetpipe.8")" = 644 ]
    if [ "$MODULE" -eq 1 ]; then
        [ "$(mode "$D/usr/local/lib/hetpipe/hetpipe-cuda.so")" = 755 ]
        cmp "$B/hetpipe-cuda.so" "$D/usr/local/lib/hetpipe/hetpipe-cuda.so"
    fi
    if [ -f "$B/spank_hetpipe.so" ]; then
        [ "$(mode "$D$PLUGINDIR/spank_hetpipe.so")" = 644 ]
        cmp "$B/spank_hetpipe.so" "$D$PLUGINDIR/spank_hetpipe.so"
        [[ "$output" == *"    required $PLUGINDIR/spank_hetpipe.so config=/etc/hetpipe/hetpipe.conf"* ]]
    else
        [[ "$output" == *"spank_hetpipe.so not built"* ]]
    fi
    # nothing else
    [ "$(find "$D" -type f | wc -l)" -eq $((2 + $(ls "$ROOT"/etc/models/*.ini "$ROOT"/etc/clusters/*.ini | wc -l) + 1 + 2 + $([ -f "$B/spank_hetpipe.so" ] && echo 1 || echo 0) + MODULE)) ]
}

@test "SLURM_PLUGINDIR= puts the plugin elsewhere" {
    [ -f "$B/spank_hetpipe.so" ] || skip "spank_hetpipe.so not built"
    run mk install SLURM_PLUGINDIR=/opt/slurm/lib/slurm
    [ "$status" -eq 0 ]
    [ -f "$D/opt/slurm/lib/slurm/spank_hetpipe.so" ]
    [ ! -e "$D$PLUGINDIR/spank_hetpipe.so" ]
    [[ "$output" == *"required /opt/slurm/lib/slurm/spank_hetpipe.so config="* ]]
    run mk uninstall SLURM_PLUGINDIR=/opt/slurm/lib/slurm
    [ ! -e "$D/opt/slurm/lib/slurm/spank_hetpipe.so" ]
}

@test "a second install keeps an edited config and writes hetpipe.conf.new beside it" {
    mk install > /dev/null
    echo "; edited by the admin" >> "$D/etc/hetpipe/hetpipe.conf"
    cp "$D/etc/hetpipe/hetpipe.conf" "$D/edited"
    run mk install
    [ "$status" -eq 0 ]
    [[ "$output" == *"keeping edited $D/etc/hetpipe/hetpipe.conf; new version at $D/etc/hetpipe/hetpipe.conf.new"* ]]
    cmp "$D/edited" "$D/etc/hetpipe/hetpipe.conf"
    cmp "$ROOT/etc/hetpipe.conf" "$D/etc/hetpipe/hetpipe.conf.new"
    [ "$(mode "$D/etc/hetpipe/hetpipe.conf.new")" = 644 ]
}

@test "the installed man pages render" {
    command -v man > /dev/null 2>&1 || skip "man not installed"
    mk install > /dev/null
    run env MANWIDTH=100 man -l "$D/usr/local/share/man/man1/hetpipe.1"
    [ "$status" -eq 0 ]
    [[ "$output" == *"HETPIPE(1)"* ]]
    for c in train model time plan profile "run --local" launch doctor report timeline version; do
        [[ "$output" == *"hetpipe $c"* ]]
    done
    [[ "$output" == *"HETPIPE_STALENESS"* ]]
    run env MANWIDTH=100 man -l "$D/usr/local/share/man/man8/spank_hetpipe.8"
    [ "$status" -eq 0 ]
    [[ "$output" == *"SPANK_HETPIPE(8)"* ]]
    if command -v groff > /dev/null 2>&1; then
        for p in man1/hetpipe.1 man8/spank_hetpipe.8; do
            run groff -man -Tutf8 -ww -z "$D/usr/local/share/man/$p"
            [ "$status" -eq 0 ]
            [ -z "$output" ]
        done
    fi
}

@test "the installed hetpipe finds its models and rank program in the installed tree" {
    mk install > /dev/null
    cd "$D" # away from the checkout's etc/
    run "$D/usr/local/bin/hetpipe" plan --cluster "$D/usr/local/share/hetpipe/clusters/demo.ini" \
        --model cnn --config "$D/etc/hetpipe/hetpipe.conf" --quiet
    echo "$output"
    [ "$status" -eq 0 ]
    run "$D/usr/local/bin/hetpipe" plan --cluster "$D/usr/local/share/hetpipe/clusters/demo.ini" \
        --model "$D/usr/local/share/hetpipe/models/cnn.ini" --config "$D/etc/hetpipe/hetpipe.conf" \
        --quiet
    [ "$status" -eq 0 ]
    run "$D/usr/local/bin/hetpipe" doctor --no-slurm --config "$D/etc/hetpipe/hetpipe.conf"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok   config: $D/etc/hetpipe/hetpipe.conf: "* ]]
    [[ "$output" == *"ok   models: cnn, vgg19, resnet152 load (from $D/usr/local/share/hetpipe/models)"* ]]
    [[ "$output" == *"ok   rank program: $D/usr/local/bin/hetpipe-rank runs"* ]]
}

@test "the installed hetpipe names the installed CUDA backend module, and its rank loads it" {
    mk install > /dev/null
    run "$D/usr/local/bin/hetpipe" --version
    echo "$output"
    [ "$status" -eq 0 ]
    if [ "$MODULE" -eq 0 ]; then
        [[ "$output" == *"(cuda backend: none; hetpipe-cuda.so not found in $D/usr/local/bin, $D/usr/local/lib/hetpipe, "* ]]
        skip "the CUDA backend module is not built"
    fi
    [[ "$output" == *"(cuda backend: $D/usr/local/lib/hetpipe/hetpipe-cuda.so)" ]]
    run "$D/usr/local/bin/hetpipe-rank" --self-check
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx "cuda.module = $D/usr/local/lib/hetpipe/hetpipe-cuda.so"
    echo "$output" | grep -qx "cuda.load = ok"
}

@test "make uninstall removes what install put, but an edited config" {
    mk install > /dev/null
    run mk uninstall
    [ "$status" -eq 0 ]
    [ "$(find "$D" -type f | wc -l)" -eq 0 ]
    [ ! -e "$D/etc/hetpipe" ]
    [ ! -e "$D/usr/local/share/hetpipe" ]
    [ ! -e "$D/usr/local/lib/hetpipe" ]
    # edited: kept, and its .new removed
    mk install > /dev/null
    echo "; edited" >> "$D/etc/hetpipe/hetpipe.conf"
    mk install > /dev/null
    [ -f "$D/etc/hetpipe/hetpipe.conf.new" ]
    run mk uninstall
    [ "$status" -eq 0 ]
    [[ "$output" == *"keeping edited $D/etc/hetpipe/hetpipe.conf"* ]]
    [ "$(find "$D" -type f)" = "$D/etc/hetpipe/hetpipe.conf" ]
    tail -1 "$D/etc/hetpipe/hetpipe.conf" | grep -qx '; edited'
}
