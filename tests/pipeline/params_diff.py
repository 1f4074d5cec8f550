#!/usr/bin/env python3
"""params_diff.py - compare two raw float32 parameter files (hetpipe --save-params).

usage: params_diff.py A B [--max-abs X] [--max-rel X]

Prints the count, the largest absolute difference, the largest |w| of A, and their ratio
(the relative difference). Exits 1 if the sizes differ, a value is not finite, or a bound
given is exceeded; 0 otherwise.
"""
import array
import math
import sys


def load(path):
    a = array.array("f")
    with open(path, "rb") as f:
        data = f.read()
    if len(data) % 4:
        sys.exit(f"{path}: {len(data)} bytes is not a whole number of float32s")
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def main(argv):
    args, bounds = [], {}
    i = 0
    while i < len(argv):
        if argv[i] in ("--max-abs", "--max-rel"):
            if i + 1 >= len(argv):
                sys.exit(f"{argv[i]} needs a value")
            bounds[argv[i]] = float(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        sys.exit(__doc__.strip())
    a, b = load(args[0]), load(args[1])
    if len(a) != len(b):
        print(f"sizes differ: {args[0]} has {len(a)} floats, {args[1]} {len(b)}")
        return 1
    worst, scale = 0.0, 0.0
    for x, y in zip(a, b):
        if not (math.isfinite(x) and math.isfinite(y)):
            print(f"a value is not finite: {x} vs {y}")
            return 1
        d = abs(x - y)
        if d > worst:
            worst = d
        if abs(x) > scale:
            scale = abs(x)
    rel = worst / scale if scale > 0 else worst
    print(f"{len(a)} floats: max abs diff {worst:.3e}, max |w| {scale:.3e}, relative {rel:.3e}")
    if worst > bounds.get("--max-abs", math.inf):
        print(f"max abs diff {worst:.3e} exceeds {bounds['--max-abs']:.3e}")
        return 1
    if rel > bounds.get("--max-rel", math.inf):
        print(f"relative diff {rel:.3e} exceeds {bounds['--max-rel']:.3e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
