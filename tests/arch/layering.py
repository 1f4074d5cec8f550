#!/usr/bin/env python3
"""The architecture's rules, checked on the sources and the built programs (ARCHITECTURE.md).

    python3 tests/arch/layering.py [--root DIR] [--build DIR] [--rank-bin FILE] [--plugin FILE]
                              [--hetpipe-bin FILE] [--module FILE]

Sources (under --root, default the checkout):
  - common/ includes only its own headers, the C library and POSIX, iniparser and zlib (the
    checkpoint files' CRC-32); its libc-only modules (what the SPANK plugin links) not even
    those or a common header that is not libc-only;
  - runtime/ includes no launcher/ header; no layer includes spank/;
  - launcher/ includes no UCX, PMIx or CUDA header (it reaches them through hetpipe-rank
    --self-check and the CUDA backend module);
  - no C source calls system() or popen() (paths may hold any character);
  - no C source opens a file for reading but common/infile.c (a FIFO never blocks, only regular
    files are read);
  - no function outside tests/ is longer than MAX_FUNC lines;
  - every HETPIPE_* variable a C source names is a row's variable (.env in common/options.def),
    read through the options table.
Programs (under --build, default build/; skipped when not built):
  - hetpipe-rank links neither libslurm nor the planner (no hp_plan_compute, hp_cost_*,
    hp_partition_*, hp_slurm_*, hp_job_* symbols), nor a CUDA library;
  - hetpipe needs no CUDA library (libcudart, libcublas, libcublasLt, libcudnn) and neither
    UCX (libucp, libucs, libuct, libucm) nor PMIx (libpmix);
  - hetpipe-cuda.so exports exactly one symbol, its entry point, and leaves no hp_* symbol
    undefined (it needs nothing from the program that loads it);
  - spank_hetpipe.so needs only the C library and leaves undefined only C-library symbols
    and what Slurm's processes provide (spank_*, slurm_*).
Prints one line per rule ("ok ..." or "FAIL ..." with what breaks it); exit 1 on any FAIL.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

MAX_FUNC = 120
# the modules of common/ that the SPANK plugin links (Makefile: COMMON_LIBC_SRCS)
LIBC_ONLY = {"error", "parse", "options", "binding", "infile"}
SYSTEM_OK = re.compile(
    r"^(assert|ctype|dirent|errno|fcntl|float|ftw|getopt|inttypes|limits|math|poll|signal|"
    r"spawn|stdarg|stdbool|stddef|stdint|stdio|stdlib|string|strings|time|unistd|"
    r"sys/(prctl|random|stat|time|types|wait))\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
# what the launcher may not include: UCX, PMIx, CUDA (hetpipe links none of them)
LAUNCHER_NO = re.compile(r"^(ucp|ucs|uct|ucm)/|^pmix|^(cuda|cublas|cudnn|cuda_runtime)\w*\.h$")
CUDA_LIB = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn)\b")
RANK_ONLY_LIB = re.compile(r"^lib(ucp|ucs|uct|ucm|pmix)\b")
MODULE_ENTRY = "hp_backend_module_cuda_v1"


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [(m.group(1), m.group(2)) for m in INCLUDE.finditer(f.read())]


def sources(root, folder, exts=("c", "h", "cu", "cuh")):
    out = []
    for e in exts:
        out += glob.glob(os.path.join(root, folder, "*." + e))
    return sorted(out)


def headers(root, folder):
    """What may be included: headers, and X-macro lists (.def) such as common/options.def."""
    return {os.path.basename(p) for p in sources(root, folder, ("h", "cuh", "def"))}


def check_includes(root):
    bad = []
    common = headers(root, "common")
    launcher = headers(root, "launcher")
    libc_headers = {m + ".h" for m in LIBC_ONLY} | {"options.def"}
    for path in sources(root, "common"):
        mod = os.path.splitext(os.path.basename(path))[0]
        for kind, name in includes(path):
            rel = os.path.relpath(path, root)
            if kind == '"':
                if name not in common:
                    bad.append(f"{rel}: includes \"{name}\", not a common/ header")
                elif mod in LIBC_ONLY and name not in libc_headers:
                    bad.append(f"{rel}: a libc-only module includes \"{name}\"")
            elif name in ("iniparser/iniparser.h", "zlib.h"):
                if mod in LIBC_ONLY:
                    bad.append(f"{rel}: a libc-only module includes <{name}>")
            elif not SYSTEM_OK.match(name):
                bad.append(f"{rel}: includes <{name}>, beyond libc, POSIX, iniparser and zlib")
    for path in sources(root, "runtime"):
        for kind, name in includes(path):
            if kind == '"' and name in launcher:
                bad.append(f"{os.path.relpath(path, root)}: includes the launcher header \"{name}\"")
    for path in sources(root, "launcher"):
        for kind, name in includes(path):
            if kind == "<" and LAUNCHER_NO.search(name):
                bad.append(f"{os.path.relpath(path, root)}: includes <{name}> (UCX, PMIx and CUDA "
                           "are the ranks' and the module's)")
    spank = headers(root, "spank")
    for folder in ("common", "runtime", "launcher"):
        for path in sources(root, folder):
            for kind, name in includes(path):
                if kind == '"' and name in spank:
                    bad.append(f"{os.path.relpath(path, root)}: includes the plugin's \"{name}\"")
    return bad


def check_no_shell(root):
    bad = []
    call = re.compile(r"\b(system|popen)\s*\(")
    for folder in ("common", "runtime", "launcher", "spank"):
        for path in sources(root, folder):
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    code = line.split("//")[0]
                    if call.search(code) and not code.lstrip().startswith(("*", "/*")):
                        bad.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
    return bad


def check_reads(root):
    """Every file is opened for reading through common/infile.c (no blocking open of a FIFO, only
    regular files): no fopen(.., "r..."), gzopen, iniparser_load(path) or open/openat with
    O_RDONLY elsewhere (common/ini.c hands iniparser the descriptor infile checked)."""
    bad = []
    call = re.compile(r"\b(fopen\s*\([^;]*\"r|gzopen\s*\(|(open|openat)\s*\([^;]*O_RDONLY(?![^;]*O_DIRECTORY))")
    allowed = {os.path.join("common", "infile.c")}
    for folder in ("common", "runtime", "launcher", "spank"):
        for path in sources(root, folder):
            rel = os.path.relpath(path, root)
            if rel in allowed:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    code = line.split("//")[0]
                    if call.search(code) and not code.lstrip().startswith(("*", "/*")):
                        bad.append(f"{rel}:{n}: {line.strip()}")
    return bad


def functions(path):
    """(lines, first line, name) of every function definition: clang-formatted code opens a
    body with '{' in column 0 and closes it with '}' in column 0."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i] == "{":
            j = i - 1
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith(
                    (";", "}", "*/", "{")) and not lines[j - 1].startswith("#"):
                j -= 1
            sig = " ".join(l.strip() for l in lines[j:i])
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"(\w+)\s*\(", sig)
            if m and not sig.startswith(("struct", "enum", "union", "static const", "const")):
                out.append((k - j + 1, j + 1, m.group(1)))
            i = k
        i += 1
    return out


def check_functions(root):
    bad = []
    for folder in ("common", "runtime", "launcher", "spank"):
        for path in sources(root, folder, ("c", "cu")):
            for n, line, name in functions(path):
                if n > MAX_FUNC:
                    bad.append(f"{os.path.relpath(path, root)}:{line}: {name} has {n} lines")
    return bad


ENV_ROW = re.compile(r'\.env\s*=\s*"(HETPIPE_[A-Z_]+)"')
ENV_NAME = re.compile(r"HETPIPE_[A-Z_]+")


def check_variables(root):
    table = os.path.join(root, "common", "options.def")
    if not os.path.exists(table):
        return [f"{os.path.relpath(table, root)}: missing"]
    with open(table, encoding="utf-8", errors="replace") as f:
        rows = set(ENV_ROW.findall(f.read()))
    bad = []
    for folder in ("common", "runtime", "launcher", "spank"):
        for path in sources(root, folder):
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    for name in ENV_NAME.findall(line):
                        if name not in rows:
                            bad.append(f"{os.path.relpath(path, root)}:{n}: {name} is no row's "
                                       "variable (add it to common/options.def)")
    return bad


def tool(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def needed(binary):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", tool("readelf", "-d", binary))


def check_rank(binary):
    bad = [f"{binary} needs {lib}" for lib in needed(binary)
           if "slurm" in lib or CUDA_LIB.match(lib)]
    planner = re.compile(r"\b(hp_plan_compute|hp_cost_\w+|hp_partition_\w+|hp_slurm_\w+|"
                         r"hp_alloc_\w+|hp_job_\w+|hp_profile_\w+)\b")
    for line in tool("nm", binary).splitlines():
        m = planner.search(line)
        if m:
            bad.append(f"{binary} holds the launcher's {m.group(1)}")
    return bad


def check_hetpipe(binary):
    return [f"{binary} needs {lib}" for lib in needed(binary)
            if CUDA_LIB.match(lib) or RANK_ONLY_LIB.match(lib)]


def check_module(so):
    exported = [l.split()[-1] for l in tool("nm", "-D", "--defined-only", so).splitlines()
                if l.strip()]
    bad = [] if exported == [MODULE_ENTRY] else [
        f"{so} exports {', '.join(exported) or 'nothing'}, not just {MODULE_ENTRY}"]
    for line in tool("nm", "-D", "--undefined-only", so).splitlines():
        sym = line.split()[-1] if line.split() else ""
        if sym.startswith("hp_"):
            bad.append(f"{so} needs '{sym}' from the program that loads it")
    return bad


def check_plugin(so):
    bad = [f"{so} needs {lib} (only the C library may be linked)"
           for lib in needed(so) if not re.match(r"^(libc\.so|ld-linux)", lib)]
    for line in tool("nm", "-D", "--undefined-only", so).splitlines():
        parts = line.split()
        sym = parts[-1] if parts else ""
        if not sym or "@GLIBC_" in sym or sym.startswith(("spank_", "slurm_", "_ITM_",
                                                            "__gmon_start__", "__cxa_finalize")):
            continue
        bad.append(f"{so} needs '{sym}', neither the C library's nor Slurm's")
    return bad


def report(name, bad):
    if bad:
        print(f"FAIL {name}:")
        for b in bad:
            print(f"  {b}")
    else:
        print(f"ok   {name}")
    return not bad


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    ap.add_argument("--build", default=None)
    ap.add_argument("--rank-bin", default=None)
    ap.add_argument("--plugin", default=None)
    ap.add_argument("--hetpipe-bin", default=None)
    ap.add_argument("--module", default=None)
    a = ap.parse_args()
    build = a.build or os.path.join(a.root, "build")
    rank = a.rank_bin or os.path.join(build, "hetpipe-rank")
    plugin = a.plugin or os.path.join(build, "spank_hetpipe.so")
    hetpipe = a.hetpipe_bin or os.path.join(build, "hetpipe")
    module = a.module or os.path.join(build, "hetpipe-cuda.so")
    ok = report("includes point one way (common <- runtime, launcher)", check_includes(a.root))
    ok &= report("no shell from C", check_no_shell(a.root))
    ok &= report("files are read through common/infile.c (regular files, no blocking open)",
                 check_reads(a.root))
    ok &= report(f"no function over {MAX_FUNC} lines", check_functions(a.root))
    ok &= report("every HETPIPE_* variable is a row of the options table",
                 check_variables(a.root))
    for name, path, check in (
            ("hetpipe-rank links no planner, no libslurm, no CUDA library", rank, check_rank),
            ("hetpipe links no UCX, PMIx or CUDA library", hetpipe, check_hetpipe),
            ("the CUDA backend module exports its entry point only", module, check_module),
            ("the plugin links only the C library", plugin, check_plugin)):
        if os.path.exists(path):
            ok &= report(name, check(path))
        else:
            print(f"skip {name}: {path} is not built")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
