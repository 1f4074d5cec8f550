#!/usr/bin/env python3
"""data_wait.py RUN_DIR - the pipeline's wait for data, from a run's timeline parts
(RUN_DIR/timeline.R, the format of common/tlpart.h; hetpipe run --timeline FILE --keep
--run-dir RUN_DIR): for each first-stage worker rank (role worker or replica, stage 0: the
rank that takes prepared minibatches from its input queue), the seconds of its "data" events
(waiting for the next minibatch) against its training time: from its first event to its last
forward, backward or update, less its evaluation and checkpoint events; also without the
waits for each epoch's first minibatch (the job's start, and after each evaluation, when the
queue starts filling anew): the steady state. Prints a line per such rank and one with the
largest shares:
  data wait: rank R (VW V): W s of T s of training (share S%; S2% without the waits for the
      E epochs' first minibatches), N waits, M minibatches      (one line)
  data wait share: S% (largest over N input ranks); steady state S2%
Exit status 0; 1 with a line saying so when no part has a "data" event (the timeline has no
data track), 2 on bad input."""
import glob
import os
import sys


def read_part(path):
    meta, events = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            if line.startswith("kind,"):
                break
            if " = " in line:
                k, v = line.split(" = ", 1)
                meta[k] = v
        for line in f:
            p = line.rstrip("\n").split(",")
            if len(p) >= 3:
                events.append((p[0], float(p[1]), float(p[2])))
    return meta, events


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    parts = [p for p in glob.glob(os.path.join(argv[1], "timeline.*"))
             if p.rsplit(".", 1)[1].isdigit()]
    if not parts:
        print("data wait: no timeline parts in %s (run with --timeline and --keep)" % argv[1])
        return 2
    shares, steadies, any_data = [], [], False
    for path in sorted(parts):
        meta, ev = read_part(path)
        if meta.get("role") == "shard" or meta.get("stage") != "0":
            continue
        data = [e for e in ev if e[0] == "data"]
        any_data = any_data or bool(data)
        work = [e for e in ev if e[0] in ("fwd", "bwd", "update")]
        if not work:
            continue
        t0 = min(e[1] for e in ev)
        t1 = max(e[2] for e in work)
        pause = sum(e[2] - e[1] for e in ev if e[0] in ("eval", "ckpt") and e[2] <= t1)
        train = t1 - t0 - pause
        wait = sum(min(e[2], t1) - e[1] for e in data if e[1] < t1)
        nmb = sum(1 for e in ev if e[0] == "fwd")
        share = 100.0 * wait / train if train > 0 else 0.0
        shares.append(share)
        # the waits for an epoch's first minibatch: the job's start, and after each evaluation
        starts = [min(data, key=lambda e: e[1])] if data else []
        for p in (e for e in ev if e[0] == "eval"):
            after = [e for e in data if e[1] >= p[2]]
            if after:
                starts.append(min(after, key=lambda e: e[1]))
        first = sum(min(e[2], t1) - e[1] for e in set(starts) if e[1] < t1)
        steady = 100.0 * (wait - first) / train if train > 0 else 0.0
        steadies.append(steady)
        print("data wait: rank %s (VW %s): %.3f s of %.3f s of training (share %.2f%%; %.2f%% "
              "without the waits for the %d epochs' first minibatches), %d waits, %d minibatches"
              % (meta.get("rank"), meta.get("vw"), wait, train, share, steady, len(set(starts)),
                 len(data), nmb))
    if not any_data:
        print("data wait: the timeline has no \"data\" track (no data events in %d parts): "
              "not measured" % len(parts))
        return 1
    print("data wait share: %.2f%% (largest over %d input ranks); steady state %.2f%%"
          % (max(shares), len(shares), max(steadies)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
