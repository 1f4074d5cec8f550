#!/usr/bin/env python3
"""wsp_check.py - check the WSP traces of one job (hetpipe run --trace PREFIX) against the
rules of DESIGN.md section 6 and the staleness bound written at wave_gate (runtime/pipeline.c).

    wsp_check.py --staleness D --nm NM PREFIX.0 PREFIX.1 ...

Every VW must have the same Nm. Checks, for every worker stage (v, s):
  pushes      waves 0, 1, 2, ... in order, one each;
  pulls       the pull for wave C (C >= 2) asks every VW x for min(max(0, C - 1 - D), F_x)
              waves (F_x: the waves x pushes in all), comes
              after this stage's push of wave C - 2, and what it got (per VW x the smallest
              and largest wave count over the units) is what the shards recorded when they
              answered it (their `serve` events combined), and holds >= the threshold;
  minibatches minibatch q is in wave q // Nm; its weights hold own updates `own` with
              q - Nm + 1 <= own <= q (own updates up to q - Nm, DESIGN.md), and from the
              other VWs exactly what the last pull for its wave got (nothing before wave 2);
and for every PS shard push: the pushing VW's clock minus the global clock of those units is
at most D + 2. Staleness of minibatch q against VW x: x's minibatches before q that its
weights miss, min(q, N_x) - Nm * waves(x) (N_x: x's minibatches in all); the bound is
(D + 1) Nm + Nm - 1.
Prints a summary; exits 1 naming the first violated rule.
"""
import argparse
import collections
import csv
import sys


def incl_of(text, nvws_hint=None):
    if text in ("", "-"):
        return None
    out = []
    for part in text.split(";"):
        lo, hi = part.split(":")
        out.append((int(lo), int(hi)))
    return out


def fail(msg):
    print("wsp_check: FAILED: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staleness", type=int, required=True)
    ap.add_argument("--nm", type=int, required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    D, NM = a.staleness, a.nm

    workers = collections.defaultdict(list)  # (v, s) -> events in file order
    serves = collections.defaultdict(list)  # (v, s, wave) -> incl lists
    shard_pushes = []
    for path in a.files:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                ev = row["event"]
                v, s = int(row["vw"]), int(row["stage"])
                if ev in ("mb", "push", "pull", "evalpull") and row["rank"] is not None:
                    # shard files also have `push`; they carry a global clock
                    if ev == "push" and row["global"] != "-1":
                        shard_pushes.append(row)
                        continue
                    workers[(v, s)].append(row)
                elif ev == "serve":
                    serves[(v, s, int(row["wave"]))].append(incl_of(row["incl"]))
                else:
                    fail("%s: unknown event '%s'" % (path, ev))
    if not workers:
        fail("no worker events in the traces")
    nvws = 1 + max(v for v, _ in workers)

    n_mb = n_pull = n_push = 0
    max_stale = 0
    bound = (D + 1) * NM + NM - 1
    # F[x]: the waves VW x pushed in all (its stage 0), N[x]: its minibatches. Near the end a
    # threshold is capped at F[x] (a VW with fewer minibatches has pushed all it will), and x
    # cannot miss minibatches it never runs.
    F = [sum(1 for e in workers[(x, 0)] if e["event"] == "push") for x in range(nvws)]
    N = [sum(1 for e in workers[(x, 0)] if e["event"] == "mb") for x in range(nvws)]
    for (v, s), evs in sorted(workers.items()):
        pushed = 0
        pull_for = {}  # wave -> incl
        for e in evs:
            ev = e["event"]
            where = "vw %d stage %d %s" % (v, s, ev)
            if ev == "push":
                w = int(e["wave"])
                if w != pushed:
                    fail("%s: wave %d pushed after %d waves" % (where, w, pushed))
                pushed += 1
                n_push += 1
            elif ev == "pull":
                C, thr = int(e["wave"]), int(e["threshold"])
                want_x = [min(max(0, C - 1 - D), F[x]) for x in range(nvws)]
                want = max(want_x)
                if C < 2 or thr != want:
                    fail("%s for wave %d: threshold %d, the rule says %d" % (where, C, thr, want))
                if pushed < C - 1:
                    fail("%s for wave %d before its push of wave %d" % (where, C, C - 2))
                got = incl_of(e["incl"])
                if got is not None:
                    for x, (lo, _) in enumerate(got):
                        if lo < want_x[x]:
                            fail("%s for wave %d: vw %d has %d waves in it, fewer than %d"
                                 % (where, C, x, lo, want_x[x]))
                    parts = serves.get((v, s, C))
                    if not parts:
                        fail("%s for wave %d: no shard answered it" % (where, C))
                    comb = [(min(p[x][0] for p in parts), max(p[x][1] for p in parts))
                            for x in range(nvws)]
                    if comb != got:
                        fail("%s for wave %d: got %s, the shards answered %s"
                             % (where, C, got, comb))
                pull_for[C] = got
                n_pull += 1
            elif ev == "mb":
                q, C, own = int(e["minibatch"]), int(e["wave"]), int(e["own"])
                if C != q // NM:
                    fail("%s %d: in wave %d, not %d" % (where, q, C, q // NM))
                if not (q - NM + 1 <= own <= q):
                    fail("%s %d: holds %d own updates, the rule says %d..%d"
                         % (where, q, own, max(0, q - NM + 1), q))
                got = incl_of(e["incl"])
                if C < 2:
                    want = None if got is None else [(0, 0)] * nvws
                else:
                    if C not in pull_for:
                        fail("%s %d: wave %d ran without a pull" % (where, q, C))
                    want = pull_for[C]
                if got != want:
                    fail("%s %d: holds %s, expected %s" % (where, q, got, want))
                if got is not None:
                    for x, (lo, _) in enumerate(got):
                        if x != v:
                            st = max(0, min(q, N[x]) - NM * lo)
                            max_stale = max(max_stale, st)
                            if st > bound:
                                fail("%s %d: misses %d minibatches of vw %d, bound %d"
                                     % (where, q, st, x, bound))
                n_mb += 1
    max_ahead = 0
    for r in shard_pushes:
        ahead = int(r["clock"]) - int(r["global"])
        max_ahead = max(max_ahead, ahead)
        if ahead > D + 2:
            fail("PS shard rank %s: vw %s at clock %s, global clock %s: more than D + 2 = %d ahead"
                 % (r["rank"], r["vw"], r["clock"], r["global"], D + 2))
    if n_pull == 0 and any(int(e["wave"]) >= 2 for evs in workers.values() for e in evs
                           if e["event"] == "mb"):
        fail("no pulls in the traces")
    print("wsp_check: ok: %d VWs, D %d, Nm %d: %d minibatch records, %d pushes, %d pulls, "
          "%d shard pushes; max staleness %d minibatches (bound %d), max clock - global %d "
          "(bound %d)" % (nvws, D, NM, n_mb, n_push, n_pull, len(shard_pushes), max_stale, bound,
                          max_ahead, D + 2))


if __name__ == "__main__":
    main()
