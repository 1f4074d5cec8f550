# helpers.bash - shared by the bats files that run jobs (load ../helpers).

# every test: the hetpipe under test, a fresh scratch directory, one BLAS thread
common_setup() {
    HETPIPE=${HETPIPE:-build/hetpipe}
    TMP=$(mktemp -d)
    export OPENBLAS_NUM_THREADS=1
}

common_teardown() {
    rm -rf "$TMP"
}

# kill_a_rank LAST N RUN-ARGS...: start `hetpipe run RUN-ARGS` in $TMP/run, wait until rank
# LAST has published its address and 1.5 s more, kill -9 the N-th rank process; the run must
# fail within 10 s, say which rank was killed, and leave no rank behind
kill_a_rank() {
    last=$1 n=$2
    shift 2
    "$HETPIPE" run "$@" --run-dir "$TMP/run" > "$TMP/out" 2>&1 &
    runpid=$!
    for _ in $(seq 100); do
        [ -s "$TMP/run/boot/addr.$last" ] && break
        sleep 0.1
    done
    sleep 1.5
    victim=$(pgrep -f "hetpipe-rank.*$TMP/run" | sed -n "${n}p")
    [ -n "$victim" ]
    kill -9 "$victim"
    start=$(date +%s)
    wait "$runpid" && st=0 || st=$?
    end=$(date +%s)
    cat "$TMP/out"
    [ "$st" -ne 0 ]
    [ $((end - start)) -le 10 ]
    grep -q "was killed by SIGKILL (signal 9)" "$TMP/out"
    [ "$st" -eq 137 ] # 128 + SIGKILL: the cause, not the SIGTERM the others got
    [ -z "$(pgrep -f "hetpipe-rank.*$TMP/run")" ]
}

# short_run NAME [ARGS...]: the short convergence run NAME of tests/short_runs.list (its
# hetpipe arguments, then ARGS); it must reach the list's test accuracy. Sets $output and
# $acc; prints the accuracy and the threshold on fd 3.
short_run() {
    local name=$1 line thr args
    shift
    line=$(awk -v r="$name" '!/^#/ && $1 == r' tests/short_runs.list)
    [ -n "$line" ]
    thr=$(echo "$line" | awk '{ print $2 }')
    args=$(echo "$line" | cut -d' ' -f2- | sed 's/^ *[^ ]* *//')
    # shellcheck disable=SC2086
    run "$HETPIPE" $args "$@"
    echo "$output" | grep -v '^ ' | tail -5
    if [ "$status" -ne 0 ]; then # the failed run's own account: every rank's errors
        local kept
        kept=$(echo "$output" | sed -n 's/.* kept in \(.*\)$/\1/p' | tail -1)
        [ -n "$kept" ] && grep -H -E 'error|warning|WARN' "$kept"/rank-*.log | head -40
        false
    fi
    acc=$(echo "$output" | sed -n 's/^epoch [0-9]*\/[0-9]* test loss .* accuracy \([0-9.]*\)%.*/\1/p' | tail -1)
    echo "# short run $name: test accuracy $acc% (threshold $thr%)" >&3
    [ -n "$acc" ]
    awk -v a="$acc" -v t="$thr" 'BEGIN { exit !(t ~ /^[0-9.]+$/ && a >= t) }'
}

# line_of TAG CHECK: hetpipe doctor's one line of $output for CHECK with TAG (ok, FAIL, skip);
# fails if there is not exactly one.
line_of() {
    l=$(echo "$output" | grep -E "^$1 +$2: ")
    [ "$(echo "$l" | grep -c .)" -eq 1 ] || return 1
    echo "$l"
}
