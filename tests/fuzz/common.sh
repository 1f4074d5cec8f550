# common.sh - sourced by run.sh and campaign.sh: per-harness settings and the parsing of
# libFuzzer's output.

# The largest input worth trying for harness $1 (bytes).
fuzz_maxlen() {
    case "$1" in
    plan) echo 65536 ;;
    tar) echo 32768 ;; # a few 512-byte headers and their members
    plugstack) echo 16384 ;; # the plugin keeps 8192 bytes of arguments: more must be refused
    msgheader) echo 128 ;;
    gres | options) echo 2048 ;;
    *) echo 8192 ;;
    esac
}

# The options every run of harness $1 gets (besides time and corpus).
fuzz_opts() {
    echo "-dict=tests/fuzz/$1.dict -max_len=$(fuzz_maxlen "$1") -timeout=20 -rss_limit_mb=2560" \
        "-print_final_stats=1"
}

# From libFuzzer's log $1: "EXECS COV FT CORPUS" (the final stats and the last status line).
fuzz_stats() {
    awk '
        /^stat::number_of_executed_units:/ { execs = $2 }
        /cov: [0-9]+/ { for (i = 1; i < NF; i++) { if ($i == "cov:") cov = $(i + 1); if ($i == "ft:") ft = $(i + 1); if ($i == "corp:") corp = $(i + 1) } }
        END { printf "%s %s %s %s\n", execs ? execs : 0, cov ? cov : 0, ft ? ft : 0, corp ? corp : "0/0b" }
    ' "$1"
}
