#!/usr/bin/env python3
"""make_tokens.py - an llm.c token file from text, bytes as tokens (for tests; deterministic).

    python3 tests/data/make_tokens.py OUT.bin [FILE...]
        the bytes of the FILEs (stdin when none), one after the other, one token each
    python3 tests/data/make_tokens.py --split train|val OUT.bin PATH
        the tokens of one split of the plain-text corpus PATH (a file, or a directory's text
        files) as runtime/text.c makes them: a second implementation of its split, written
        from runtime/text.h's words (entries at `%` lines or at empty lines, "\\r\\n" read as
        "\\n", entry E in validation when mix(FNV-1a(E)) % 20 == 0)

The file is llm.c's (dev/data/data_common.py, version 1): a header of 256 little-endian int32
(magic 20240520, version 1, the token count, zeros), then the tokens as little-endian uint16.
"""
import argparse
import os
import struct
import sys

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256
VAL_EVERY = 20
M64 = (1 << 64) - 1


def mix(z):
    """common/rng.h's hp_rng_mix (splitmix64's finaliser)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & M64
    return h


def entries(text):
    """(entry, separator) of one file's bytes, as runtime/text.c cuts them."""
    text = text.replace(b"\r\n", b"\n")
    if text and not text.endswith(b"\n"):
        text += b"\n"
    lines = text.split(b"\n")[:-1] if text else []
    fortune = b"%" in lines
    sep_line, sep = (b"%", b"%\n") if fortune else (b"", b"\n")
    cur = []
    for line in lines + [None]:
        if line is None or line == sep_line:
            entry = b"".join(x + b"\n" for x in cur)
            if entry.strip(b" \t\n\r\f\v"):
                yield entry, sep
            cur = []
        else:
            cur.append(line)


def corpus_files(path):
    if not os.path.isdir(path):
        return [path]
    out = []
    for name in sorted(os.listdir(path), key=os.fsencode):
        full = os.path.join(path, name)
        if name.startswith(".") or name.endswith((".dat", ".u8")) or os.path.isdir(full):
            continue
        out.append(full)
    return out


def split_tokens(path, split):
    want = 1 if split == "val" else 0
    out = bytearray()
    for f in corpus_files(path):
        with open(f, "rb") as fh:
            for entry, sep in entries(fh.read()):
                if (mix(fnv1a(entry)) % VAL_EVERY == 0) == bool(want):
                    out += entry + sep
    return bytes(out)


def write_tokens(out, data):
    if not data:
        sys.exit("make_tokens.py: no tokens to write")
    if len(data) >= 1 << 31:
        sys.exit("make_tokens.py: more tokens than llm.c's int32 count holds")
    header = [0] * HEADER_INTS
    header[0], header[1], header[2] = MAGIC, VERSION, len(data)
    tmp = out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(struct.pack("<256i", *header))
        fh.write(struct.pack("<%dH" % len(data), *data))
    os.replace(tmp, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("train", "val"))
    ap.add_argument("out")
    ap.add_argument("inputs", nargs="*")
    a = ap.parse_args()
    if a.split:
        if len(a.inputs) != 1:
            sys.exit("make_tokens.py: --split takes one corpus PATH")
        data = split_tokens(a.inputs[0], a.split)
    elif a.inputs:
        data = b"".join(open(f, "rb").read() for f in a.inputs)
    else:
        data = sys.stdin.buffer.read()
    write_tokens(a.out, data)


if __name__ == "__main__":
    main()
