#!/usr/bin/env python3
"""timeline_check.py - check a merged timeline (hetpipe run --timeline FILE) against the run.

usage: timeline_check.py TIMELINE.json RUN_DIR [--pipeline] [--wsp-waits]

Always: the JSON's structure (traceEvents of M, X, s and f events with the fields Perfetto
needs; a named process per VW and a named track per rank holding its GPU type and node, as
in RUN_DIR/timeline.R), every flow's start and finish on their send and receive (ids paired,
start before finish), and per worker rank as many forward and backward passes as its stats
file (RUN_DIR/stats.R) says it trained minibatches.
--pipeline: the pipeline fills (stage s's first forward starts after stage s-1's first
forward ends) and each stage runs one-forward-one-backward: after its first `in_flight`
forwards, forwards and backwards alternate until the pipeline drains.
--wsp-waits: the VWs wait for the slowest: the VW with the fewest predicted images/s waits
least at the WSP gate, and some other VW waits longer than it.
Exit status 0 when all holds; 1 with one line per failure.
"""
import collections
import glob
import json
import os
import sys

fails = []


def fail(msg):
    fails.append(msg)


def keys_of(path):
    """The "key = value" lines of a stats file or of a timeline part's header."""
    kv = {}
    with open(path) as f:
        for line in f:
            if line.startswith("kind,"):
                break
            if " = " in line:
                k, v = line.rstrip("\n").split(" = ", 1)
                kv[k] = v
    return kv


def by_rank(run_dir, prefix):
    out = {}
    for path in glob.glob(os.path.join(run_dir, prefix + ".*")):
        if not path.rsplit(".", 1)[1].isdigit():
            continue  # PREFIX.RANK only (timeline.json is the merged one)
        kv = keys_of(path)
        out[int(kv["rank"])] = kv
    return out


def check_structure(doc, parts):
    evs = doc.get("traceEvents")
    if not isinstance(evs, list) or not evs:
        fail("no traceEvents list")
        return []
    need = {"M": ("name", "pid", "args"), "X": ("name", "cat", "pid", "tid", "ts", "dur"),
            "s": ("id", "pid", "tid", "ts"), "f": ("id", "pid", "tid", "ts", "bp")}
    for e in evs:
        ph = e.get("ph")
        if ph not in need:
            fail("an event of phase %r" % ph)
            continue
        for k in need[ph]:
            if k not in e:
                fail("a %s event without %s: %s" % (ph, k, e))
        if ph == "X" and (e["dur"] < 0 or e["ts"] < 0):
            fail("an event with a negative time: %s" % e)
    procs = {e["pid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    for r, kv in parts.items():
        if r not in threads:
            fail("rank %d has no named track" % r)
            continue
        if kv["role"] == "shard":
            continue
        if kv["gpu"] not in threads[r] or kv["node"] not in threads[r]:
            fail("rank %d's track %r names neither %s nor %s" % (r, threads[r], kv["gpu"], kv["node"]))
        if int(kv["vw"]) not in procs:
            fail("VW %s has no named process" % kv["vw"])
    return evs


def check_flows(evs):
    slices = collections.defaultdict(list)
    for e in evs:
        if e["ph"] == "X":
            slices[e["tid"]].append(e)
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    if set(starts) != set(ends):
        fail("flow ids without a pair: %d starts, %d finishes" % (len(starts), len(ends)))
    for i, s in starts.items():
        f = ends.get(i)
        if not f:
            continue
        if f["ts"] < s["ts"]:
            fail("flow %d finishes before it starts" % i)
        if not any(x["cat"].startswith("send") and x["ts"] <= s["ts"] <= x["ts"] + x["dur"] for x in slices[s["tid"]]):
            fail("flow %d does not start on a send" % i)
        if not any(x["cat"].startswith("recv") and x["ts"] <= f["ts"] <= x["ts"] + x["dur"] for x in slices[f["tid"]]):
            fail("flow %d does not finish on a receive" % i)
    return len(starts)


def check_counts(evs, stats):
    count = collections.Counter((e["tid"], e["cat"]) for e in evs if e["ph"] == "X")
    for r, kv in stats.items():
        mb = int(kv["minibatches"])
        for cat in ("fwd", "bwd"):
            if count[(r, cat)] != mb:
                fail("rank %d: %d %s events, its stats say %d minibatches" % (r, count[(r, cat)], cat, mb))
    return count


def check_pipeline(evs, stats):
    by_rank = collections.defaultdict(list)
    for e in evs:
        if e["ph"] == "X" and e["cat"] in ("fwd", "bwd"):
            by_rank[e["tid"]].append(e)
    stage_rank = {int(kv["stage"]): r for r, kv in stats.items() if kv["vw"] == "0"}
    first_fwd = {}
    for s, r in sorted(stage_rank.items()):
        seq = sorted(by_rank[r], key=lambda e: e["ts"])
        first_fwd[s] = next(e for e in seq if e["cat"] == "fwd")
        if s > 0 and first_fwd[s]["ts"] < first_fwd[s - 1]["ts"] + first_fwd[s - 1]["dur"]:
            fail("stage %d's first forward starts before stage %d's ends: no filling" % (s, s - 1))
        w = int(stats[r]["in_flight"])
        kinds = "".join("F" if e["cat"] == "fwd" else "B" for e in seq)
        if not kinds.startswith("F" * w + "B"):
            fail("stage %d (in flight %d) starts %s, not %d forwards then a backward" % (s, w, kinds[:12], w))
        # steady state: no two forwards in a row once filled, until the drain (a run of B)
        body = kinds[w:]
        drain = body.find("BB")
        steady = body[: drain if drain >= 0 else len(body)]
        if w > 1 and "FF" in steady:
            fail("stage %d: two forwards in a row in its steady state: %s" % (s, steady[:40]))
        if len(steady) < 4:
            fail("stage %d: no steady state to speak of (%s)" % (s, kinds[:40]))


def check_wsp_waits(evs, stats):
    wait = collections.Counter()
    for e in evs:
        if e["ph"] == "X" and e["cat"] == "wsp_wait":
            wait[e["pid"]] += e["dur"]
    pred = {int(kv["vw"]): float(kv["predicted_images_per_s"]) for kv in stats.values()}
    slowest = min(pred, key=pred.get)
    others = [v for v in pred if v != slowest]
    msg = ", ".join("VW %d %.0f img/s waits %.2f s" % (v, pred[v], wait[v] / 1e6) for v in sorted(pred))
    print("wsp waits: " + msg)
    if not others or max(wait[v] for v in others) <= wait[slowest]:
        fail("the slowest VW (%d) waits as long as any other: %s" % (slowest, msg))
    if any(wait[v] < wait[slowest] for v in others):
        fail("a VW waits less than the slowest VW %d: %s" % (slowest, msg))


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    stats, parts = by_rank(argv[2], "stats"), by_rank(argv[2], "timeline")
    evs = check_structure(doc, parts)
    flows = check_flows(evs)
    count = check_counts(evs, stats)
    if "--pipeline" in argv:
        check_pipeline(evs, stats)
    if "--wsp-waits" in argv:
        check_wsp_waits(evs, stats)
    print("timeline: %d events, %d flows, %d ranks; forward passes per rank %s"
          % (len(evs), flows, len(parts), {r: count[(r, "fwd")] for r in sorted(stats)}))
    for m in fails:
        print("FAIL: " + m)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
