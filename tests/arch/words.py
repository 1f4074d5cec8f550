#!/usr/bin/env python3
"""words.py - every path the project's words name exists.

    python3 tests/arch/words.py [--root DIR]

Reads the comments of the sources (C, CUDA, shell, Python, bats, the Makefile, the INI files
under etc/), the READMEs and the other Markdown files, and the man pages, and checks that
- a path from the top of the repository (common/..., runtime/..., launcher/..., spank/...,
  tests/..., etc/..., jobs/..., man/...; a glob such as runtime/backend_cuda*.cu is allowed)
  exists;
- a file named bare in them (schedule.h, worker.c, wsp_check.py, cli.bats) is one of the
  repository's, or a library's header the build uses (EXTERNAL below);
- DESIGN.md, which is not in the repository, is named only where ARCHITECTURE.md says what it
  was cited for;
- every module of common/, runtime/, launcher/ and spank/ (a .c or .cu file, or a header
  without one) is in tests/README.md's map of modules to their tests.
Names with a placeholder (NAME, N, <x>, $VAR, %d) are patterns, not paths, and are skipped.
Prints one line per name that fails ("FILE:LINE: NAME: why") and a last line "ok ..." or
"FAIL ..."; exit 1 on any failure.
"""
import argparse
import glob
import os
import re
import sys

TOP = ("common", "runtime", "launcher", "spank", "tests", "etc", "jobs", "man")
EXTS = ("c", "h", "cu", "cuh", "py", "bats", "sh", "ini", "conf", "md", "map", "list", "json")
# headers and files of the libraries and tools hetpipe builds on, named bare in comments
EXTERNAL = {
    "stddef.h", "stdint.h", "stdbool.h", "stdarg.h", "errno.h", "unistd.h", "fcntl.h",
    "signal.h", "time.h", "math.h", "limits.h", "inttypes.h", "pthread.h", "dirent.h", "spawn.h",
    "assert.h", "stdio.h", "stdlib.h", "string.h", "zlib.h", "pmix.h", "ucp.h", "cublas_v2.h", "cudnn.h",
    "cuda_runtime.h", "cblas.h", "check.h", "iniparser.h", "spank.h", "slurm.h", "plugstack.conf",
    "slurm.conf", "gres.conf", "hetpipe.conf", "auth_munge.so", "mpi_pmix.so", "munge.key",
    "spank_hetpipe.so", "hetpipe-cuda.so", "select_cons_tres.so", "gres_gpu.so", "ucx.h",
    "sys/wait.h", "dlfcn.h", "pmix_common.h", "nvml.h", "libfuzzer.h", "fenv.h",
    "mpi.conf", "pmixp_agent.c",
    "llm.c",  # karpathy/llm.c, a project: its token files are runtime/text.c's second format
}
# files the programs make (a run directory's, a checkpoint's) and a user's example script
MADE = {"plan.ini", "cluster.ini", "profile.ini", "timeline.json", "job.sh", "metrics.csv",
        "report.html", "run.ini"}
PLACEHOLDER = re.compile(r"[A-Z]{2,}|<|\$|%|\{|\bN\b|\bX\b|\.\.\.")
TOP_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w.*/+-]*[\w*])" % "|".join(TOP))
BARE = re.compile(r"(?<![\w./$%%-])([a-z][\w-]*\.(?:%s))(?![\w-])" % "|".join(EXTS))


def comments(path, text):
    """(line, text) of what a reader reads in the file: comments of code, all of docs."""
    ext = os.path.splitext(path)[1]
    name = os.path.basename(path)
    lines = text.split("\n")
    if ext in (".1", ".8"):  # roff: \- is a hyphen
        return [(n, line.replace("\\-", "-")) for n, line in enumerate(lines, 1)]
    if ext == ".md":
        return list(enumerate(lines, 1))
    if ext in (".c", ".h", ".cu", ".cuh"):
        out, inside = [], False
        for n, line in enumerate(lines, 1):
            rest, seen = line, []
            while rest:
                if inside:
                    end = rest.find("*/")
                    seen.append(rest if end < 0 else rest[:end])
                    if end < 0:
                        break
                    rest, inside = rest[end + 2:], False
                else:
                    start, sl = rest.find("/*"), rest.find("//")
                    if sl >= 0 and (start < 0 or sl < start):
                        seen.append(rest[sl + 2:])
                        break
                    if start < 0:
                        break
                    rest, inside = rest[start + 2:], True
            if seen:
                out.append((n, " ".join(seen)))
        return out
    if ext in (".py", ".bats", ".sh", ".ini", ".conf", ".list") or name == "Makefile" or \
            (not ext and text.startswith("#!")):
        return [(n, line[line.index("#") + 1:]) for n, line in enumerate(lines, 1)
                if "#" in line and not line.lstrip().startswith("#!")]
    return []


def files(root):
    skip = {".git", "build", "build-address", "build-undefined", "build-fuzz", "corpus"}
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in skip and not x.startswith("build")]
        for n in names:
            yield os.path.join(d, n)


def check(root):
    known = set()
    for p in files(root):
        known.add(os.path.basename(p))
    bad, names = [], 0
    for p in sorted(files(root)):
        rel = os.path.relpath(p, root)
        try:
            with open(p, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in comments(p, text):
            if "DESIGN.md" in line and rel != "ARCHITECTURE.md":
                bad.append(f"{rel}:{n}: DESIGN.md: not in the repository (ARCHITECTURE.md says "
                           f"where what it was cited for lives now)")
            for m in TOP_PATH.finditer(line):
                name = m.group(1).rstrip(".")
                if PLACEHOLDER.search(name) or name.startswith("tests/fuzz/corpus/"):
                    continue
                names += 1
                if not glob.glob(os.path.join(root, name)):
                    bad.append(f"{rel}:{n}: {name}: no such file or directory")
            for m in BARE.finditer(line):
                name = m.group(1)
                if PLACEHOLDER.search(name) or name in EXTERNAL or name in MADE:
                    continue
                names += 1
                if name not in known:
                    bad.append(f"{rel}:{n}: {name}: no such file in the repository")
    return bad, names


def check_test_map(root):
    """Modules that tests/README.md does not name (in backticks: `net`, `backend_cuda*`)."""
    path = os.path.join(root, "tests", "README.md")
    if not os.path.exists(path):
        return ["tests/README.md: missing (the map of modules to their tests)"]
    with open(path, encoding="utf-8") as f:
        names = set(re.findall(r"`([\w.*]+)`", f.read()))
    globs = [n[:-1] for n in names if n.endswith("*")]
    bad = []
    for folder in ("common", "runtime", "launcher", "spank"):
        mods = set()
        for p in glob.glob(os.path.join(root, folder, "*")):
            base, ext = os.path.splitext(os.path.basename(p))
            if ext in (".c", ".cu") or (ext == ".h" and not glob.glob(
                    os.path.join(root, folder, base + ".c*"))):
                mods.add(base)
        for m in sorted(mods):
            if m in names or m + ".h" in names or any(m.startswith(g) for g in globs):
                continue
            bad.append(f"tests/README.md: {folder}/{m} is not in the map of modules to tests")
    return bad


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    a = ap.parse_args()
    bad, names = check(a.root)
    bad += check_test_map(a.root)
    for b in bad:
        print(b)
    if bad:
        print(f"FAIL {len(bad)} of {names} names of paths in comments, READMEs and man pages")
        return 1
    print(f"ok   {names} names of paths in comments, READMEs and man pages exist; every module "
          f"is in tests/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
