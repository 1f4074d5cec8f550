#!/usr/bin/env python3
"""wsp_check.py - check the WSP traces of one job (hetpipe run --trace PREFIX) against the
rules of WSP and the staleness bound written at hp_wsp_gate (runtime/wsp.c), and the PS
protocol (runtime/ps.h).

    wsp_check.py --staleness D --nm NM [--stopped] PREFIX.0 PREFIX.1 ...

Every VW must have the same Nm. N_v: the minibatches of VW v (its stage 0's records); F_v:
its waves, ceil(N_v / Nm) (floor with --stopped: a job stopped by --stop-at does not push
its partial wave). Checks:

worker stage (v, s), in its file's order:
  minibatches  as many as stage 0 of its VW; minibatch q is in wave q // Nm; its weights hold
               own updates `own` with q - Nm + 1 <= own <= q, and from the other VWs exactly
               what the last pull for its wave got (nothing before wave 2);
  pushes       waves 0, 1, ..., F_v - 1, each once, in order: complete;
  the gate     one pull for every wave C in 2 .. (waves with minibatches), in order, after the
               last minibatch of wave C - 1 and this stage's push of wave C - 2 and before
               (also in time) the first minibatch of wave C; its threshold is the rule's,
               max over x of min(max(0, C - 1 - D), F_x); what it got (per VW x the smallest
               and largest wave count over its units) holds >= min(max(0, C - 1 - D), F_x) of
               every x and is what the shards answered (their `serve` rows combined);
  evaluation   (VW 0, several VWs) every `evalpull` got what the shards answered (the k-th
               evalpull against each shard's k-th serve of it); the last is the final one
               (threshold max F_x) and holds every wave of every VW (not with --stopped);

PS shard (its file's order replays what it received):
  pushes       from each worker stage the waves 0, 1, ... in order, each once, all that the
               stage pushed; after a push of wave w from (v, s) the shard's view of VW v on
               those units is w + 1 exactly; its clock column is w + 1, and the pushing VW's
               clock minus the global clock of those units is at most D + 2;
  serves       a reply to (v, s) for wave C comes after the shard has (v, s)'s push of wave
               C - 2; per VW x its view lo:hi has lo <= hi <= the waves of x the shard has
               received so far, never below the view of an earlier row of (v, s) (clocks only
               grow), lo >= the rule's threshold for x; its global column is min over x of lo,
               its clock column lo of VW v.

Staleness of minibatch q against VW x: x's minibatches before q that its weights miss,
min(q, N_x) - Nm * waves(x); the bound is (D + 1) Nm + Nm - 1.
Prints a summary; exits 1 naming the first violated rule.
"""
import argparse
import collections
import csv
import sys


def fail(msg):
    print("wsp_check: FAILED: " + msg)
    sys.exit(1)


def incl_of(text, where, nvws=None):
    if text in ("", "-"):
        return None
    out = []
    try:
        for part in text.split(";"):
            lo, hi = part.split(":")
            out.append((int(lo), int(hi)))
    except ValueError:
        fail("%s: malformed incl '%s'" % (where, text))
    if nvws is not None and len(out) != nvws:
        fail("%s: incl '%s' names %d VWs, the job has %d" % (where, text, len(out), nvws))
    return out


def load(paths):
    """Rows by role: worker events per (v, s), shard rows per shard file, in file order."""
    workers = collections.defaultdict(list)
    shards = {}
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        # a shard's file has `serve` rows or pushes with a global clock; a worker's has neither
        is_shard = any(r["event"] == "serve" or (r["event"] == "push" and r["global"] != "-1")
                       for r in rows)
        for i, r in enumerate(rows):
            r["_where"] = "%s:%d" % (path, i + 2)
            try:
                for k in ("rank", "vw", "stage", "wave", "minibatch", "threshold", "clock",
                          "global", "own"):
                    r[k] = int(r[k])
                r["t0"], r["t1"] = float(r["t0"]), float(r["t1"])
            except (KeyError, TypeError, ValueError):
                fail("%s: malformed row %s" % (r["_where"], r))
            ev = r["event"]
            if is_shard:
                if ev not in ("push", "serve"):
                    fail("%s: event '%s' in a PS shard's trace" % (r["_where"], ev))
            elif ev not in ("mb", "push", "pull", "evalpull"):
                fail("%s: unknown event '%s'" % (r["_where"], ev))
        if is_shard:
            shards[path] = rows
        else:
            for r in rows:
                workers[(r["vw"], r["stage"])].append(r)
    return workers, shards


class Job:
    def __init__(self, D, NM, stopped, workers, shards):
        self.D, self.NM, self.stopped = D, NM, stopped
        self.workers, self.shards = workers, shards
        if not workers:
            fail("no worker events in the traces")
        self.nvws = 1 + max(v for v, _ in workers)
        for v in range(self.nvws):
            if (v, 0) not in workers:
                fail("no trace of vw %d stage 0" % v)
        self.N = [sum(1 for e in workers[(x, 0)] if e["event"] == "mb")
                  for x in range(self.nvws)]
        waves = (lambda n: n // NM) if stopped else (lambda n: (n + NM - 1) // NM)
        self.F = [waves(n) for n in self.N]
        self.pushed = {k: sum(1 for e in evs if e["event"] == "push")
                       for k, evs in workers.items()}
        # (v, s, wave) -> the shards' serve views, wave -1: the evaluation pulls in order
        self.serves = collections.defaultdict(list)
        self.eval_serves = collections.defaultdict(list)  # (path, v, s) -> views
        self.max_stale = self.max_ahead = 0
        self.n = collections.Counter()

    def want(self, C, x):
        return min(max(0, C - 1 - self.D), self.F[x])

    def check_shards(self):
        for path, rows in sorted(self.shards.items()):
            recv = collections.defaultdict(int)  # (x, s) -> waves received
            most = collections.defaultdict(int)  # x -> the most waves of VW x on any units
            view = {}  # (v, s) -> the last view of its units
            for r in rows:
                v, s, where = r["vw"], r["stage"], r["_where"]
                if (v, s) not in self.workers:
                    fail("%s: %s of vw %d stage %d, which has no trace" % (where, r["event"], v, s))
                got = incl_of(r["incl"], where, self.nvws)
                if got is None:
                    fail("%s: a PS shard row without the view of the VWs" % where)
                if r["event"] == "push":
                    w = r["wave"]
                    if w != recv[(v, s)]:
                        fail("%s: PS shard got wave %d of vw %d stage %d after %d waves"
                             % (where, w, v, s, recv[(v, s)]))
                    recv[(v, s)] += 1
                    most[v] = max(most[v], recv[(v, s)])
                    if r["clock"] != w + 1 or got[v] != (w + 1, w + 1):
                        fail("%s: after wave %d of vw %d stage %d the shard's clock %d, view %s "
                             "of vw %d: both must be %d" % (where, w, v, s, r["clock"], got[v],
                                                            v, w + 1))
                    ahead = r["clock"] - r["global"]
                    self.max_ahead = max(self.max_ahead, ahead)
                    if ahead > self.D + 2:
                        fail("%s: PS shard rank %d: vw %d at clock %d, global clock %d: more "
                             "than D + 2 = %d ahead" % (where, r["rank"], v, r["clock"],
                                                        r["global"], self.D + 2))
                    self.n["shard push"] += 1
                else:
                    C = r["wave"]
                    if C >= 0 and recv[(v, s)] < C - 1:
                        fail("%s: PS shard answered the pull of vw %d stage %d for wave %d "
                             "before its push of wave %d" % (where, v, s, C, C - 2))
                    for x, (lo, hi) in enumerate(got):
                        if C >= 0 and lo < self.want(C, x):
                            fail("%s: PS shard answered vw %d stage %d for wave %d with %d waves "
                                 "of vw %d, fewer than %d" % (where, v, s, C, lo, x,
                                                              self.want(C, x)))
                    if r["global"] != min(lo for lo, _ in got) or r["clock"] != got[v][0]:
                        fail("%s: PS shard's global %d and clock %d disagree with its view %s"
                             % (where, r["global"], r["clock"], got))
                    if C >= 0:
                        self.serves[(v, s, C)].append(got)
                    else:
                        self.eval_serves[(path, v, s)].append(got)
                    self.n["serve"] += 1
                for x, (lo, hi) in enumerate(got):
                    if not lo <= hi <= most[x]:
                        fail("%s: PS shard's view of vw %d is %d:%d, it has received %d waves "
                             "of it" % (where, x, lo, hi, most[x]))
                    if (v, s) in view:
                        plo, phi = view[(v, s)][x]
                        if lo < plo or hi < phi:
                            fail("%s: PS shard's view of vw %d on the units of vw %d stage %d "
                                 "went back from %d:%d to %d:%d" % (where, x, v, s, plo, phi,
                                                                   lo, hi))
                view[(v, s)] = got
            for (v, s), n in sorted(recv.items()):
                if n != self.pushed[(v, s)]:
                    fail("%s: PS shard received %d waves of vw %d stage %d, which pushed %d"
                         % (path, n, v, s, self.pushed[(v, s)]))
            for v, s in sorted(view):
                if recv[(v, s)] == 0 and self.pushed[(v, s)] > 0:
                    fail("%s: PS shard serves vw %d stage %d but received none of its %d waves"
                         % (path, v, s, self.pushed[(v, s)]))

    def combined(self, parts):
        return [(min(p[x][0] for p in parts), max(p[x][1] for p in parts))
                for x in range(self.nvws)]

    def check_worker(self, v, s, evs):
        NM, nvws = self.NM, self.nvws
        bound = (self.D + 1) * NM + NM - 1
        pushed = 0
        pull_for = {}  # wave -> what it got
        last_mb_wave = -1
        first_mb = {}
        in_wave = collections.Counter()
        evals = []
        for e in evs:
            ev, where = e["event"], "%s: vw %d stage %d %s" % (e["_where"], v, s, e["event"])
            if ev == "push":
                if e["wave"] != pushed:
                    fail("%s: wave %d pushed after %d waves" % (where, e["wave"], pushed))
                pushed += 1
                self.n["push"] += 1
            elif ev == "pull":
                C, thr = e["wave"], e["threshold"]
                want = max(self.want(C, x) for x in range(nvws))
                if C < 2 or thr != want:
                    fail("%s for wave %d: threshold %d, the rule says %d" % (where, C, thr, want))
                if C in pull_for:
                    fail("%s for wave %d: a second pull for it" % (where, C))
                if pull_for and C < max(pull_for):
                    fail("%s for wave %d after the pull for wave %d" % (where, C, max(pull_for)))
                if pushed < C - 1:
                    fail("%s for wave %d before its push of wave %d" % (where, C, C - 2))
                if last_mb_wave != C - 1 or in_wave[C - 1] != NM:
                    fail("%s for wave %d: the gate is after the last minibatch of wave %d, it "
                         "came after %d of its %d (the last of wave %d)"
                         % (where, C, C - 1, in_wave[C - 1], NM, last_mb_wave))
                got = incl_of(e["incl"], where, nvws)
                if got is not None:
                    for x, (lo, _) in enumerate(got):
                        if lo < self.want(C, x):
                            fail("%s for wave %d: vw %d has %d waves in it, fewer than %d"
                                 % (where, C, x, lo, self.want(C, x)))
                    parts = self.serves.get((v, s, C))
                    if not parts:
                        fail("%s for wave %d: no shard answered it" % (where, C))
                    if self.combined(parts) != got:
                        fail("%s for wave %d: got %s, the shards answered %s"
                             % (where, C, got, self.combined(parts)))
                pull_for[C] = (got, e["t1"])
                self.n["pull"] += 1
            elif ev == "evalpull":
                evals.append(e)
            else:
                q, C, own = e["minibatch"], e["wave"], e["own"]
                if C != q // NM:
                    fail("%s %d: in wave %d, not %d" % (where, q, C, q // NM))
                if not (q - NM + 1 <= own <= q):
                    fail("%s %d: holds %d own updates, the rule says %d..%d"
                         % (where, q, own, max(0, q - NM + 1), q))
                if C < last_mb_wave:
                    fail("%s %d: wave %d after wave %d" % (where, q, C, last_mb_wave))
                last_mb_wave = C
                in_wave[C] += 1
                first_mb.setdefault(C, e)
                got = incl_of(e["incl"], where, nvws)
                if C < 2:
                    want = None if got is None else [(0, 0)] * nvws
                else:
                    if C not in pull_for:
                        fail("%s %d: wave %d ran without a pull" % (where, q, C))
                    want, t_pull = pull_for[C]
                    if first_mb[C] is e and e["t0"] < t_pull:
                        fail("%s %d: began at %.6f, before the pull for its wave ended at %.6f"
                             % (where, q, e["t0"], t_pull))
                if got != want:
                    fail("%s %d: holds %s, expected %s" % (where, q, got, want))
                if got is not None:
                    for x, (lo, _) in enumerate(got):
                        if x != v:
                            st = max(0, min(q, self.N[x]) - NM * lo)
                            self.max_stale = max(self.max_stale, st)
                            if st > bound:
                                fail("%s %d: misses %d minibatches of vw %d, bound %d"
                                     % (where, q, st, x, bound))
                self.n["mb"] += 1
        n_mb = sum(1 for e in evs if e["event"] == "mb")
        where = "vw %d stage %d" % (v, s)
        if n_mb != self.N[v]:
            fail("%s: %d minibatch records, its stage 0 has %d" % (where, n_mb, self.N[v]))
        if pushed != self.F[v]:
            fail("%s: pushed %d waves of its %d minibatches, the rule says %d (Nm %d)"
                 % (where, pushed, n_mb, self.F[v], NM))
        missing = [C for C in first_mb if C >= 2 and C not in pull_for]
        if missing:
            fail("%s: no pull for wave %d" % (where, missing[0]))
        self.check_evals(v, s, evals)

    def check_evals(self, v, s, evals):
        for k, e in enumerate(evals):
            where = "%s: vw %d stage %d evalpull %d" % (e["_where"], v, s, k)
            got = incl_of(e["incl"], where, self.nvws)
            parts = []
            for path in self.shards:
                es = self.eval_serves.get((path, v, s), [])
                if k < len(es):
                    parts.append(es[k])
            if got is not None:
                if not parts:
                    fail("%s: no shard answered it" % where)
                if self.combined(parts) != got:
                    fail("%s: got %s, the shards answered %s" % (where, got,
                                                                 self.combined(parts)))
            final = e["threshold"] > 0
            if final and k != len(evals) - 1:
                fail("%s: the final evaluation's pull (threshold %d) is not the last"
                     % (where, e["threshold"]))
            if final and (e["threshold"] != max(self.F) or
                          (got is not None and any(lo < self.F[x] for x, (lo, _) in
                                                   enumerate(got)))):
                fail("%s: the final evaluation must hold every VW's waves %s, it asked for %d "
                     "and got %s" % (where, self.F, e["threshold"], got))
            self.n["evalpull"] += 1
        if self.nvws > 1 and not self.stopped and v == 0 and evals \
                and evals[-1]["threshold"] <= 0:
            fail("vw 0 stage %d: the last evaluation did not wait for every VW's last wave "
                 "(threshold %d)" % (s, evals[-1]["threshold"]))
        for path in self.shards:
            extra = len(self.eval_serves.get((path, v, s), [])) - len(evals)
            if extra > 0:
                fail("%s: %d answers to evaluation pulls of vw %d stage %d that it never made"
                     % (path, extra, v, s))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--staleness", type=int, required=True)
    ap.add_argument("--nm", type=int, required=True)
    ap.add_argument("--stopped", action="store_true",
                    help="the job stopped at --stop-at: its partial waves were not pushed")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    workers, shards = load(a.files)
    job = Job(a.staleness, a.nm, a.stopped, workers, shards)
    job.check_shards()
    for (v, s), evs in sorted(workers.items()):
        job.check_worker(v, s, evs)
    # every (v, s, wave) the shards answered was asked for
    for (v, s, C) in sorted(job.serves):
        if not any(e["event"] == "pull" and e["wave"] == C for e in workers[(v, s)]):
            fail("a PS shard answered a pull of vw %d stage %d for wave %d that it never made"
                 % (v, s, C))
    if job.n["pull"] == 0 and any(e["wave"] >= 2 for evs in workers.values() for e in evs
                                  if e["event"] == "mb"):
        fail("no pulls in the traces")
    bound = (a.staleness + 1) * a.nm + a.nm - 1
    print("wsp_check: ok: %d VWs, D %d, Nm %d: %d minibatch records, %d pushes, %d pulls, "
          "%d evaluation pulls, %d shard pushes, %d shard answers; max staleness %d minibatches "
          "(bound %d), max clock - global %d (bound %d)"
          % (job.nvws, a.staleness, a.nm, job.n["mb"], job.n["push"], job.n["pull"],
             job.n["evalpull"], job.n["shard push"], job.n["serve"], job.max_stale, bound,
             job.max_ahead, a.staleness + 2))


if __name__ == "__main__":
    main()
