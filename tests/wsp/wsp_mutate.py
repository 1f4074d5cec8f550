#!/usr/bin/env python3
"""wsp_mutate.py - break a real WSP trace in one way, for tests of tests/wsp/wsp_check.py.

    wsp_mutate.py MUTATION OUTDIR PREFIX.0 PREFIX.1 ...

Copies the trace files into OUTDIR (same base names) with one violation of the rules made
by MUTATION; prints what it changed. Exits 2 when the trace has no place for it.
Mutations:
  worker-last-push     delete the last push of a worker stage (and the shards' copies of it,
                       so that only the worker's completeness shows it)
  worker-mb            delete the last minibatch record of a stage after the first
  shard-push           delete a push a PS shard received (not its last)
  shard-last-push      delete the last push a PS shard received from one stage
  shard-swap           swap two pushes of one stage at a PS shard
  shard-phantom        a PS shard answers with one wave more of another VW than it received,
                       and the worker's pull says it got it (a consistent lie)
  gate-early           a pull moved before the last minibatch of the wave before it
  gate-late            a pull moved after the first minibatch of its wave
  threshold            a pull asks for one wave less than the rule
  final-threshold      the final evaluation's pull does not wait for every VW's last wave
  final-short          the final evaluation holds one wave less of a VW (worker and shards)
"""
import csv
import os
import sys


def read(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        head = next(r)
        return head, [row for row in r]


def col(head):
    return {name: i for i, name in enumerate(head)}


def is_shard(rows, c):
    return any(r[c["event"]] == "serve" for r in rows)


def main():
    mut, outdir = sys.argv[1], sys.argv[2]
    files = sys.argv[3:]
    data = {p: read(p) for p in files}
    c = col(next(iter(data.values()))[0])
    E, V, S, W = c["event"], c["vw"], c["stage"], c["wave"]
    workers = [p for p in files if not is_shard(data[p][1], c)]
    shards = [p for p in files if is_shard(data[p][1], c)]
    done = None

    def rows_of(p):
        return data[p][1]

    if mut == "worker-last-push":
        for p in workers:
            rows = rows_of(p)
            idx = [i for i, r in enumerate(rows) if r[E] == "push"]
            if idx:
                r = rows.pop(idx[-1])
                key = (r[V], r[S], r[W])
                for q in shards:
                    data[q] = (data[q][0], [x for x in rows_of(q) if not (
                        x[E] == "push" and (x[V], x[S], x[W]) == key)])
                done = "deleted push %s of %s (and its copies at the shards)" % (key, p)
                break
    elif mut == "worker-mb":
        for p in workers:
            rows = rows_of(p)
            idx = [i for i, r in enumerate(rows) if r[E] == "mb" and r[S] != "0"]
            if idx:
                rows.pop(idx[-1])
                done = "deleted the last minibatch record of %s" % p
                break
    elif mut in ("shard-push", "shard-last-push", "shard-swap"):
        for p in shards:
            rows = rows_of(p)
            by = {}
            for i, r in enumerate(rows):
                if r[E] == "push":
                    by.setdefault((r[V], r[S]), []).append(i)
            for key, idx in sorted(by.items()):
                if len(idx) < 3:
                    continue
                if mut == "shard-push":
                    rows.pop(idx[1])
                elif mut == "shard-last-push":
                    rows.pop(idx[-1])
                else:
                    rows[idx[1]], rows[idx[2]] = rows[idx[2]], rows[idx[1]]
                done = "%s at %s of vw %s stage %s" % (mut, p, key[0], key[1])
                break
            if done:
                break
    elif mut == "shard-phantom":
        # the first answer for wave C >= 2 whose view of another VW x is below what x will
        # push: one wave more of x than the shard has (it has exactly hi when the view is
        # the latest push of x's stage on those units, so take the count it received)
        for p in shards:
            rows = rows_of(p)
            recv = {}
            for r in rows:
                if r[E] == "push":
                    recv[(r[V], r[S])] = int(r[W]) + 1
                    continue
                if int(r[W]) < 2:
                    continue
                view = [tuple(map(int, part.split(":"))) for part in r[c["incl"]].split(";")]
                for x in range(len(view)):
                    if str(x) == r[V]:
                        continue
                    has = max([n for (y, _), n in recv.items() if y == str(x)] + [0])
                    lo, hi = view[x]
                    view[x] = (has + 1, has + 1)
                    new = ";".join("%d:%d" % t for t in view)
                    key = (r[V], r[S], r[W])
                    old = r[c["incl"]]
                    r[c["incl"]] = new
                    r[c["global"]] = str(min(t[0] for t in view))
                    for q in workers:  # the worker's pull says it got that
                        for x2 in rows_of(q):
                            if x2[E] == "pull" and (x2[V], x2[S], x2[W]) == key:
                                x2[c["incl"]] = new
                            if x2[E] == "mb" and (x2[V], x2[S]) == key[:2] and \
                                    x2[W] == key[2] and x2[c["incl"]] == old:
                                x2[c["incl"]] = new
                    done = "%s answers vw %s stage %s wave %s with %s (it has %d of vw %d)" % (
                        p, key[0], key[1], key[2], new, has, x)
                    break
                if done:
                    break
            if done:
                break
    elif mut in ("gate-early", "gate-late", "threshold"):
        for p in workers:
            rows = rows_of(p)
            idx = [i for i, r in enumerate(rows) if r[E] == "pull" and int(r[W]) >= 3]
            if not idx:
                continue
            i = idx[0]
            C = int(rows[i][W])
            if mut == "threshold":
                rows[i][c["threshold"]] = str(int(rows[i][c["threshold"]]) - 1)
                done = "pull of wave %d in %s asks for one wave less" % (C, p)
                break
            pull = rows.pop(i)
            mbs = [j for j, r in enumerate(rows) if r[E] == "mb"]
            if mut == "gate-early":
                j = max(j for j in mbs if int(rows[j][W]) == C - 1)
                rows.insert(j, pull)
            else:
                j = min(j for j in mbs if int(rows[j][W]) == C)
                rows.insert(j + 1, pull)
            done = "%s: pull of wave %d in %s moved" % (mut, C, p)
            break
    elif mut in ("final-threshold", "final-short"):
        for p in workers:
            rows = rows_of(p)
            idx = [i for i, r in enumerate(rows) if r[E] == "evalpull"]
            if not idx or int(rows[idx[-1]][c["threshold"]]) <= 0:
                continue
            r = rows[idx[-1]]
            if mut == "final-threshold":
                r[c["threshold"]] = "0"
                done = "final evaluation pull of %s with threshold 0" % p
                break
            view = [tuple(map(int, part.split(":"))) for part in r[c["incl"]].split(";")]
            x = len(view) - 1
            view[x] = (view[x][0] - 1, view[x][1] - 1)
            new = ";".join("%d:%d" % t for t in view)
            r[c["incl"]] = new
            r[c["global"]] = str(min(t[0] for t in view))
            for q in shards:  # the shards' last answers to it say the same
                qs = [x2 for x2 in rows_of(q) if x2[E] == "serve" and x2[W] == "-1" and
                      (x2[V], x2[S]) == (r[V], r[S])]
                if qs:
                    qs[-1][c["incl"]] = new
                    qs[-1][c["global"]] = r[c["global"]]
            done = "final evaluation of %s holds %s" % (p, new)
            break
    else:
        sys.exit("wsp_mutate: unknown mutation '%s'" % mut)
    if not done:
        print("wsp_mutate: no place for %s in these traces" % mut)
        sys.exit(2)
    os.makedirs(outdir, exist_ok=True)
    for p, (head, rows) in data.items():
        with open(os.path.join(outdir, os.path.basename(p)), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(head)
            w.writerows(rows)
    print("wsp_mutate: " + done)


if __name__ == "__main__":
    main()
