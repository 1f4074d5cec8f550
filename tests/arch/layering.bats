#!/usr/bin/env bats
# tier: fast
# The architecture's rules (tests/arch/layering.py, ARCHITECTURE.md): layers point one way, the rank
# program links no planner or libslurm, hetpipe no UCX, PMIx or CUDA library (neither program
# a CUDA library), the CUDA backend module exports its entry point only, the plugin links only
# the C library, no shell from C, no function over 120 lines, every HETPIPE_* variable a row of
# the options table, every path the words name exists. Each rule must pass on this tree and
# fail on a tree or program that breaks it.

setup() {
    ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
    BUILD=$(dirname "${HETPIPE:-$ROOT/build/hetpipe}")
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
}

# a copy of the sources to break
copy_tree() {
    mkdir -p "$TMP/src"
    cp -r "$ROOT/common" "$ROOT/runtime" "$ROOT/launcher" "$ROOT/spank" "$TMP/src/"
}

check_src() {
    run python3 "$ROOT/tests/arch/layering.py" --root "$TMP/src" --build "$TMP/none"
    echo "$output"
}

@test "this tree and its programs keep the rules" {
    [ -x "$BUILD/hetpipe-rank" ] || skip "not built"
    run python3 "$ROOT/tests/arch/layering.py" --root "$ROOT" --build "$BUILD"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok   hetpipe-rank links no planner, no libslurm, no CUDA library"* ]]
    [[ "$output" == *"ok   hetpipe links no UCX, PMIx or CUDA library"* ]]
    [[ "$output" != *"skip the plugin"* || ! -e "/usr/include/slurm/spank.h" ]]
    [[ "$output" != *"skip the CUDA backend module"* || ! -x "$(command -v nvcc)" ]]
}

@test "a runtime file that includes a launcher header is refused" {
    copy_tree
    check_src
    [ "$status" -eq 0 ]
    sed -i '0,/#include "worker.h"/s//#include "worker.h"\n#include "planner.h"/' "$TMP/src/runtime/worker.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *'runtime/worker.c: includes the launcher header "planner.h"'* ]]
}

@test "the shared layer includes nothing beyond libc and iniparser; the plugin's modules not even that" {
    copy_tree
    sed -i '0,/#include <stdio.h>/s//#include <stdio.h>\n#include <ucp\/api\/ucp.h>/' "$TMP/src/common/plan.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"common/plan.c: includes <ucp/api/ucp.h>"* ]]
    copy_tree
    sed -i '0,/#include "parse.h"/s//#include "parse.h"\n#include "ini.h"/' "$TMP/src/common/binding.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *'common/binding.c: a libc-only module includes "ini.h"'* ]]
    copy_tree
    sed -i '0,/#include "error.h"/s//#include "error.h"\n#include "net.h"/' "$TMP/src/common/plan.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *'common/plan.c: includes "net.h", not a common/ header'* ]]
}

@test "a shell call and a long function are refused" {
    copy_tree
    printf 'static int f(void)\n{\n    return system("true");\n}\n' >> "$TMP/src/launcher/proc.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"launcher/proc.c:"*'system("true")'* ]]
    copy_tree
    { printf 'static int long_one(void)\n{\n    int x = 0;\n'
      for i in $(seq 1 120); do printf '    x += %d;\n' "$i"; done
      printf '    return x;\n}\n'; } >> "$TMP/src/runtime/emulate.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"runtime/emulate.c:"*": long_one has 125 lines"* ]]
}

@test "a HETPIPE_* variable that is no row of the options table is refused" {
    copy_tree
    check_src
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok   every HETPIPE_* variable is a row of the options table"* ]]
    printf 'static const char *f(void)\n{\n    return getenv("HETPIPE_SECRET_KNOB");\n}\n' \
        >> "$TMP/src/runtime/emulate.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"runtime/emulate.c:"*": HETPIPE_SECRET_KNOB is no row's variable"* ]]
    # a row for it makes it one
    printf 'HP_OPTION(SECRET_KNOB, secret_knob, TEXT, .env = "HETPIPE_SECRET_KNOB")\n' \
        >> "$TMP/src/common/options.def"
    check_src
    [ "$status" -eq 0 ]
}

@test "a rank program with the planner or libslurm, a plugin with more than libc, are refused" {
    [ -x "$BUILD/hetpipe" ] || skip "not built"
    ldd "$BUILD/hetpipe" | grep -q libslurm || skip "built without libslurm"
    run python3 "$ROOT/tests/arch/layering.py" --root "$ROOT" --rank-bin "$BUILD/hetpipe" \
        --plugin "$BUILD/hetpipe"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"needs libslurm"* ]]
    [[ "$output" == *"holds the launcher's hp_plan_compute"* ]]
    [[ "$output" == *"hetpipe needs libiniparser.so.1 (only the C library may be linked)"* ]]
}

@test "words kept true: every path a comment, a README or a man page names exists" {
    run python3 "$ROOT/tests/arch/words.py" --root "$ROOT"
    echo "$output" | tail -20
    [ "$status" -eq 0 ]
    [[ "$output" == *"names of paths in comments, READMEs and man pages exist"* ]]
    # a stale name is found, in a comment and in a README
    mkdir -p "$TMP/src"
    tar -C "$ROOT" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$TMP/src" -xf -
    run python3 "$TMP/src/tests/arch/words.py" --root "$TMP/src"
    [ "$status" -eq 0 ]
    sed -i '1s|$| (see runtime/pipeline.c and stage.h)|' "$TMP/src/runtime/worker.c"
    printf 'See `launcher/timeline.h` and DESIGN.md.\n' >> "$TMP/src/ARCHITECTURE.md"
    run python3 "$TMP/src/tests/arch/words.py" --root "$TMP/src"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"runtime/worker.c:1: runtime/pipeline.c: no such file or directory"* ]]
    [[ "$output" == *"runtime/worker.c:1: stage.h: no such file in the repository"* ]]
    [[ "$output" == *"launcher/timeline.h: no such file or directory"* ]]
}

@test "the launcher including UCX's or PMIx's header is refused" {
    copy_tree
    sed -i '0,/#include <stdio.h>/s//#include <stdio.h>\n#include <ucp\/api\/ucp.h>/' "$TMP/src/launcher/cmd_doctor.c"
    sed -i '0,/#include <stdio.h>/s//#include <stdio.h>\n#include <pmix.h>/' "$TMP/src/launcher/main.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"launcher/cmd_doctor.c: includes <ucp/api/ucp.h>"* ]]
    [[ "$output" == *"launcher/main.c: includes <pmix.h>"* ]]
}

@test "a hetpipe with UCX, PMIx or a CUDA library, a module that exports more, are refused" {
    [ -x "$BUILD/hetpipe-rank" ] || skip "not built"
    # hetpipe-rank needs UCX and PMIx: as the launcher, it breaks the rule
    run python3 "$ROOT/tests/arch/layering.py" --root "$ROOT" --build "$TMP/none" \
        --hetpipe-bin "$BUILD/hetpipe-rank"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"FAIL hetpipe links no UCX, PMIx or CUDA library"* ]]
    [[ "$output" == *"hetpipe-rank needs libucp.so"* ]]
    [[ "$output" == *"hetpipe-rank needs libpmix.so"* ]]
    [ -f "$BUILD/hetpipe-cuda.so" ] || skip "the CUDA backend module is not built"
    # the module needs the CUDA libraries: as either program, it breaks the rules
    run python3 "$ROOT/tests/arch/layering.py" --root "$ROOT" --build "$TMP/none" \
        --hetpipe-bin "$BUILD/hetpipe-cuda.so" --rank-bin "$BUILD/hetpipe-cuda.so" \
        --module "$BUILD/hetpipe"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"FAIL hetpipe-rank links no planner, no libslurm, no CUDA library"* ]]
    [[ "$output" == *"hetpipe-cuda.so needs libcudart.so"* ]]
    [[ "$output" == *"hetpipe-cuda.so needs libcudnn.so"* ]]
    # hetpipe as the module: it exports more than the entry point
    [[ "$output" == *"FAIL the CUDA backend module exports its entry point only"* ]]
    [[ "$output" == *"hetpipe exports "*", not just hp_backend_module_cuda_v1"* ]]
}

@test "a file opened for reading anywhere but common/infile.c is refused (a FIFO would block)" {
    copy_tree
    printf 'static FILE *g(const char *p)\n{\n    return fopen(p, "r");\n}\n' >> "$TMP/src/launcher/jobdata.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"launcher/jobdata.c:"*'fopen(p, "r")'* ]]
    copy_tree
    printf 'static int g(const char *p)\n{\n    return open(p, O_RDONLY | O_CLOEXEC);\n}\n' >> "$TMP/src/runtime/ckpt.c"
    check_src
    [ "$status" -eq 1 ]
    [[ "$output" == *"runtime/ckpt.c:"*'open(p, O_RDONLY'* ]]
    copy_tree
    check_src
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok   files are read through common/infile.c"* ]]
}
