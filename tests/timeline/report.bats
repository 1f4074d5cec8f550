#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# hetpipe report: the HTML page of a finished job (README "hetpipe report"). One small job (two
# VWs of two stages under WSP, emulated GPU types, with --timeline) runs once for the file; its
# page is checked for its parts and nothing fetched, rendered in headless Chromium (those tests
# are skipped without it: tests/deps.sh installs it), and bad input is refused.

load ../helpers

setup_file() {
    export OPENBLAS_NUM_THREADS=1
    HETPIPE=${HETPIPE:-build/hetpipe}
    JOB="$BATS_FILE_TMPDIR/job"
    "$HETPIPE" run --local --cluster tests/clusters/wsp2x2.ini --policy ed --epochs 1 \
        --train-limit 3000 --test-limit 500 --log-every 10 --run-dir "$JOB" --stats "$JOB/stats" \
        --metrics "$JOB/metrics.csv" --timeline "$BATS_FILE_TMPDIR/trace.json" \
        > "$BATS_FILE_TMPDIR/run.out" 2>&1 || {
        cat "$BATS_FILE_TMPDIR/run.out"
        return 1
    }
}

setup() {
    common_setup
    JOB="$BATS_FILE_TMPDIR/job"
}

teardown() {
    common_teardown
}

# page_check FILE: what the page's script set as <body data-check> once Chromium loaded it
page_check() {
    timeout 60 chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$TMP/chromium" \
        --dump-dom "file://$1" 2> /dev/null | sed -n 's/.*<body[^>]* data-check="\([^"]*\)".*/\1/p'
}

need_chromium() {
    command -v chromium > /dev/null 2>&1 || skip "chromium not installed (sh tests/deps.sh)"
}

@test "report: the job's page holds its facts, three pictures and nothing to fetch" {
    run "$HETPIPE" report "$JOB"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "report: wrote $JOB/report.html" ]
    page="$JOB/report.html"
    [ "$(grep -o '<svg' "$page" | wc -l)" -eq 3 ]
    [ "$(grep -o '<figure' "$page" | wc -l)" -eq 3 ]
    acc=$(awk -F, '$1 == "test" { a = $6 } END { printf "%.2f", 100 * a }' "$JOB/metrics.csv")
    for t in titanv titanrtx rtx2060 p4000 wsp2x2 "$acc% test accuracy" "Throughput"; do
        grep -qF "$t" "$page"
    done
    # the pipeline drawn from the timeline: a row per GPU, forward passes labelled
    grep -q 'rank 3: VW 1 stage 1' "$page"
    grep -q '>F[0-9]*</text>' "$page"
    [ "$(grep -c 'no timeline' "$page")" -eq 0 ]
    # self-contained: no address but the SVG namespace; the job token stays in plan.ini
    [ "$(grep -oE 'https?://[^"<> ]*' "$page" | sort -u)" = "http://www.w3.org/2000/svg" ]
    tok=$(sed -n 's/^token = //p' "$JOB/plan.ini")
    [ -n "$tok" ]
    [ "$(grep -c "$tok" "$page")" -eq 0 ]
}

@test "report: Chromium renders every picture of the page without a script error" {
    need_chromium
    "$HETPIPE" report "$JOB" --out "$TMP/page.html"
    [ "$(page_check "$TMP/page.html")" = ok ]
    timeout 60 chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$TMP/chromium" \
        --screenshot="$TMP/page.png" --window-size=1280,2000 "file://$TMP/page.html" 2> /dev/null
    [ "$(stat -c %s "$TMP/page.png")" -gt 20000 ]
}

@test "report: the check fails on a page with a missing or empty picture or a script error" {
    need_chromium
    "$HETPIPE" report "$JOB" --out "$TMP/page.html"
    # the curves' svg removed, the pipeline's emptied: both named
    python3 - "$TMP/page.html" "$TMP/broken.html" << 'EOF'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'(<figure id="fig-curves">.*?)<svg.*?</svg>', r'\1', s, count=1, flags=re.S)
s = re.sub(r'(<figure id="fig-pipeline">.*?)<svg.*?</svg>', r'\1<svg></svg>', s, count=1,
           flags=re.S)
open(sys.argv[2], "w").write(s)
EOF
    [ "$(grep -o '<svg' "$TMP/broken.html" | wc -l)" -eq 2 ]
    [ "$(page_check "$TMP/broken.html")" = "missing: fig-pipeline fig-curves" ]
    # a script that throws, anywhere in the page
    sed 's|<section id="warnings">|<script>throw new Error("boom")</script>&|' "$TMP/page.html" \
        > "$TMP/throws.html"
    grep -q 'Error("boom")' "$TMP/throws.html"
    [[ "$(page_check "$TMP/throws.html")" == "error: "*boom* ]]
}

@test "report: other run directories are drawn as extra curves, labelled by name and policy" {
    "$HETPIPE" run --local --cluster local4 --policy dp --epochs 1 --train-limit 1000 \
        --test-limit 200 --log-every 5 --run-dir "$TMP/dp" --metrics "$TMP/dp/metrics.csv" \
        > "$TMP/dp.out" 2>&1 || { cat "$TMP/dp.out"; false; }
    run "$HETPIPE" report "$JOB" "$TMP/dp/" --out "$TMP/cmp.html"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "report: wrote $TMP/cmp.html" ]
    grep -q '>job (ed)</text>' "$TMP/cmp.html"
    grep -q '>dp (dp)</text>' "$TMP/cmp.html"
    grep -q "compared with $TMP/dp: plan.ini, metrics.csv" "$TMP/cmp.html"
    [ ! -e "$JOB/cmp.html" ] && [ ! -e "$TMP/dp/report.html" ]
}

@test "report: a run directory with only its plan gives a page that says what is missing" {
    mkdir "$TMP/bare"
    cp "$JOB/plan.ini" "$TMP/bare/"
    run "$HETPIPE" report "$TMP/bare"
    [ "$status" -eq 0 ]
    page="$TMP/bare/report.html"
    grep -q 'no stats files (stats.R).*--stats DIR/stats' "$page"
    grep -q 'no metrics.csv: no loss or accuracy curves.*--metrics DIR/metrics.csv' "$page"
    grep -q 'no timeline: run the job with --timeline FILE' "$page"
    grep -q 'not measured (no stats)' "$page"
    [ "$(grep -o '<svg' "$page" | wc -l)" -eq 3 ]
    if command -v chromium > /dev/null 2>&1; then
        [ "$(page_check "$page")" = ok ]
    fi
}

@test "report: damaged stats, metrics and timeline files are left out, each named" {
    mkdir "$TMP/bad"
    cp "$JOB/plan.ini" "$JOB/stats.1" "$TMP/bad/"
    sed 's/^compute_s = .*/compute_s = fast/' "$JOB/stats.0" > "$TMP/bad/stats.0"
    { head -3 "$JOB/metrics.csv" && echo "train,1,x,1.0,2.0,0.5,3"; } > "$TMP/bad/metrics.csv"
    head -20 "$JOB/timeline.2" > "$TMP/bad/timeline.2"
    run "$HETPIPE" report "$TMP/bad"
    echo "$output"
    [ "$status" -eq 0 ]
    page="$TMP/bad/report.html"
    grep -q "stats.0 line [0-9]*: compute_s &#39;fast&#39; is not a number; the file is left out" \
        "$page"
    grep -q 'metrics.csv line 4: not .*the lines from there on are left out' "$page"
    grep -q 'timeline.2: .*announced.*left out' "$page"
    grep -q '1 stats file (stats.R)' "$page"
}

@test "report: names are escaped for HTML" {
    d="$TMP/"'a<b>&"c'\'
    mkdir "$d"
    cp "$JOB/plan.ini" "$JOB/metrics.csv" "$d/"
    run "$HETPIPE" report "$d"
    [ "$status" -eq 0 ]
    grep -qF '<title>hetpipe report: a&lt;b&gt;&amp;&quot;c&#39;</title>' "$d/report.html"
    [ "$(grep -cF 'a<b>' "$d/report.html")" -eq 0 ]
}

@test "report: bad input is refused, naming the directory or file and what is allowed" {
    mkdir "$TMP/empty"
    run "$HETPIPE" report "$TMP/empty"
    [ "$status" -eq 1 ]
    [[ "$output" == *"the directory '$TMP/empty' holds no plan.ini"*"hetpipe run --run-dir"* ]]
    touch "$TMP/file"
    run "$HETPIPE" report "$TMP/file"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'$TMP/file': not a directory; give the run directory of a job"* ]]
    run "$HETPIPE" report "$TMP/none"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'$TMP/none': No such file or directory"* ]]
    run "$HETPIPE" report "$JOB" "$TMP/empty"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'$TMP/empty' holds no plan.ini"* ]]
    run "$HETPIPE" report "$JOB" --out "$TMP"
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot write the report to '$TMP': it is a directory"* ]]
    run "$HETPIPE" report
    [ "$status" -eq 2 ]
    [[ "$output" == *"give the run directory of a job"* ]]
    run "$HETPIPE" report "$JOB" --frobnicate
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--frobnicate'"* ]]
}

@test "report and timeline: a FIFO in place of a part, stats, metrics, log or plan is named and left out, never waited on" {
    mkdir "$TMP/fifo"
    cp "$JOB"/plan.ini "$JOB"/stats.* "$JOB"/timeline.* "$JOB"/metrics.csv "$TMP/fifo/"
    for f in timeline.1 stats.0 metrics.csv rank-1.log; do
        rm -f "$TMP/fifo/$f"
        mkfifo "$TMP/fifo/$f"
    done
    run timeout 20 "$HETPIPE" timeline "$TMP/fifo" --out "$TMP/m.json"
    echo "$output"
    [ "$status" -ne 124 ]
    echo "$output" | grep -q "timeline.1': it is a FIFO, not a regular file"
    [ -s "$TMP/m.json" ]
    run timeout 20 "$HETPIPE" report "$TMP/fifo"
    echo "$output"
    [ "$status" -eq 0 ]
    page="$TMP/fifo/report.html"
    grep -q 'stats.0: cannot be read (it is a FIFO, not a regular file); left out' "$page"
    grep -q 'no metrics.csv: it is a FIFO, not a regular file' "$page"
    grep -q 'timeline.1.*it is a FIFO, not a regular file' "$page"
    # the plan itself: refused, named
    rm "$TMP/fifo/plan.ini"
    mkfifo "$TMP/fifo/plan.ini"
    run timeout 20 "$HETPIPE" report "$TMP/fifo"
    echo "$output"
    [ "$status" -ne 124 ]
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "plan.ini': it is a FIFO, not a regular file"
}

# run_stopped N C [options]: a local job run N into $TMP/job, stopped with SIGUSR1 once its
# checkpoint C is on disk (it checkpoints again and exits 75)
run_stopped() {
    "$HETPIPE" run --local --cluster demo --emulate 50 --epochs 1 --train-limit 6400 \
        --test-limit 500 --checkpoint-dir "$TMP/ck" --checkpoint-every 1000 --log-every 5 \
        --run-dir "$TMP/job" "${@:3}" > "$TMP/out.$1" 2>&1 &
    local pid=$! st=0
    for _ in $(seq 600); do
        grep -q "^checkpoint $2:" "$TMP/out.$1" && break
        sleep 0.1
    done
    kill -USR1 "$pid"
    wait "$pid" || st=$?
    [ "$st" -eq 75 ] || { cat "$TMP/out.$1"; false; }
}

@test "report: a job stopped twice and resumed into its directory keeps one directory, and its page covers the three runs: each restart marked, the time lost, the plans when the GPUs changed" {
    run_stopped 0 1
    # resuming needs --resume: a plain run into the job's directory is refused as before
    run "$HETPIPE" run --local --cluster demo --epochs 1 --train-limit 640 --run-dir "$TMP/job"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q "exists and is not empty"
    run_stopped 1 3 --resume auto
    grep -q "^run: restart 1 of the job in $TMP/job: this run in $TMP/job/run-1$" "$TMP/out.1"
    # the last run on other GPUs: re-planned, loaded by unit
    "$HETPIPE" run --local --cluster tests/clusters/other3.ini --emulate 50 --epochs 1 --train-limit 6400 \
        --test-limit 500 --checkpoint-dir "$TMP/ck" --checkpoint-every 1000 --log-every 5 \
        --run-dir "$TMP/job" --resume auto > "$TMP/out.2" 2>&1 || { cat "$TMP/out.2"; false; }
    [ "$(ls -d "$TMP"/job* "$TMP"/job/run-* | tr '\n' ' ')" = \
        "$TMP/job $TMP/job/run-1 $TMP/job/run-2 " ]
    grep -q '^status = 75$' "$TMP/job/run.ini"
    grep -q '^status = 75$' "$TMP/job/run-1/run.ini"
    grep -q '^status = 0$' "$TMP/job/run-2/run.ini"
    seq2=$(sed -n 's/^resumed from checkpoint \([0-9]*\) .*/\1/p' "$TMP/out.2")
    grep -q "^resumed_seq = $seq2$" "$TMP/job/run-2/run.ini"
    run "$HETPIPE" report "$TMP/job"
    [ "$status" -eq 0 ]
    page="$TMP/job/report.html"
    # one row per run (then the total); each interruption's training redone and gap
    [ "$(sed -n '/id="runs"/,/<\/section>/p' "$page" | grep -o '<tr><td>' | wc -l)" -eq 3 ]
    grep -q '<tr><td>run-2</td><td>2</td>' "$page"
    grep -q "<td>checkpoint $seq2 ([0-9]* samples)</td>" "$page"
    [ "$(grep -o '<td>[0-9]* samples, [0-9.]* s</td><td>[0-9.]* s</td><td>[0-9.]* s</td>' "$page" |
        wc -l)" -eq 2 ]
    grep -q 'time lost to 2 interruptions</td><td>[0-9.]* s</td>' "$page"
    # the curves: both restarts marked in each of the four panels
    [ "$(grep -o 'class="restart"' "$page" | wc -l)" -eq 8 ]
    [ "$(grep -o '>restart [12]</text>' "$page" | sort -u | wc -l)" -eq 2 ]
    # the GPUs changed: the earlier runs' plans beside the last one's; the last run's accuracy
    grep -q '(changed)</td>' "$page"
    [ "$(grep -o '<figure id="fig-plan-run-[01]"' "$page" | wc -l)" -eq 2 ]
    acc=$(awk -F, '$1 == "test" { a = $6 } END { printf "%.2f", 100 * a }' \
        "$TMP/job/run-2/metrics.csv")
    grep -q "$acc% test accuracy" "$page"
    if command -v chromium > /dev/null 2>&1; then
        [ "$(page_check "$page")" = ok ]
    fi
    # a run whose plan does not load is left out, named; the page covers the others
    echo garbage > "$TMP/job/run-1/plan.ini"
    run "$HETPIPE" report "$TMP/job" --out "$TMP/left.html"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "report: $TMP/job/run-1 is left out of the job's runs"
    [ "$(sed -n '/id="runs"/,/<\/section>/p' "$TMP/left.html" | grep -o '<tr><td>' | wc -l)" -eq 2 ]
}
