#!/usr/bin/env python3
"""tests/data/make_images.py - Fashion-MNIST written out as image files, for the data tests
(tests/data/data.bats) and the data benchmark (tests/bench/data/run).

Reads the gzip IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) from --src and writes the first --train
training and first --val test images as

  --format folder (default): an image folder in torchvision's ImageFolder layout,
      OUT/train/CLASS/NNNNN.jpg and OUT/val/CLASS/NNNNN.jpg (NNNNN: the image's index in its
      split), JPEG (--quality, default 95) or PNG (--png);
  --format shards: PNG tar shards in the WebDataset convention, OUT/train-000000.tar, ...,
      OUT/val-000000.tar, ... (--shard-samples per shard, default 1000), members KEY.png and
      KEY.cls (the decimal label), KEY the image's index in its split (6 digits), plus
      OUT/classes.txt (the class names, one a line, in label order).

  --format idx: the same first images as gzip IDX files again (Fashion-MNIST's four file names),
      so that an IDX run and an image run train on the very same samples.

CLASS is one of 0_tshirt 1_trouser 2_pullover 3_dress 4_coat 5_sandal 6_shirt 7_sneaker 8_bag
9_ankle_boot, so that sorted order is label order; a class without an image in a split has no
folder there (the first 100 training images have all ten classes). --classes 1,8 keeps only those
classes (the first --train / --val images of them): a data set of two classes, 1_trouser and
8_bag, labels 0 and 1. Images are grey (1 channel) at 28 x 28 unless
--size S (resized to S x S, bilinear) or --rgb (3 channels, the grey repeated).

Bad data for tests: --corrupt K truncates K training images to half their bytes (every
(train / K)-th image, the first at index 0), still named .jpg/.png; each one's path (folder) or
shard:member (shards) is printed on a line "corrupt: NAME".

Deterministic: the same arguments give the same bytes (tar members' mtime, owner and mode are
fixed; files are written in a fixed order). OUT must not exist or be an empty directory: an
existing non-empty OUT is refused (nothing is ever overwritten; files are created exclusively).
"""
import argparse
import gzip
import io
import os
import struct
import sys
import tarfile

CLASSES = ["0_tshirt", "1_trouser", "2_pullover", "3_dress", "4_coat", "5_sandal", "6_shirt",
           "7_sneaker", "8_bag", "9_ankle_boot"]
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "val": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def fail(msg):
    print("make_images.py: " + msg, file=sys.stderr)
    sys.exit(2)


def read_gz(path, limit):
    """The bytes of gzip file `path` (at most `limit` uncompressed bytes)."""
    try:
        with gzip.open(path, "rb") as f:
            return f.read(limit)
    except OSError as e:
        fail("%s: %s" % (path, e))


def read_idx(src, split, count, classes=None):
    """The first `count` images (bytes of rows*cols each) of `classes` (a set of labels; None:
    all), their labels, rows, cols."""
    ipath = os.path.join(src, FILES[split][0])
    lpath = os.path.join(src, FILES[split][1])
    head = read_gz(ipath, 16)
    if len(head) < 16:
        fail("%s: shorter than an IDX header" % ipath)
    magic, n, rows, cols = struct.unpack(">IIII", head)
    if magic != 2051 or rows < 1 or cols < 1 or rows > 4096 or cols > 4096:
        fail("%s: not an IDX3 image file (magic %d, %d x %d)" % (ipath, magic, rows, cols))
    if classes is not None:  # all of them, then the first `count` of those classes
        imgs, labels, rows, cols = read_idx(src, split, n)
        keep = [i for i, l in enumerate(labels) if l in classes]
        count = len(keep) if count is None else count
        if count > len(keep):
            fail("--%s %d: %s holds only %d images of --classes" % (split, count, ipath, len(keep)))
        return [imgs[i] for i in keep[:count]], bytes(labels[i] for i in keep[:count]), rows, cols
    count = n if count is None else count
    if count > n:
        fail("--%s %d: %s holds only %d images" % (split, count, ipath, n))
    data = read_gz(ipath, 16 + count * rows * cols)[16:]
    lab = read_gz(lpath, 8 + count)
    if len(lab) < 8 or struct.unpack(">II", lab[:8])[0] != 2049:
        fail("%s: not an IDX1 label file" % lpath)
    labels = lab[8:]
    if len(data) != count * rows * cols or len(labels) != count:
        fail("%s or %s: fewer than %d samples" % (ipath, lpath, count))
    for i, l in enumerate(labels):
        if l >= len(CLASSES):
            fail("%s: label %d of sample %d is not 0-9" % (lpath, l, i))
    imgs = [data[i * rows * cols:(i + 1) * rows * cols] for i in range(count)]
    return imgs, labels, rows, cols


def encode(Image, pixels, rows, cols, args, fmt):
    img = Image.frombytes("L", (cols, rows), pixels)
    if args.size:
        img = img.resize((args.size, args.size), Image.BILINEAR)
    if args.rgb:
        img = img.convert("RGB")
    buf = io.BytesIO()
    if fmt == "png":
        img.save(buf, format="PNG", optimize=False, compress_level=6)
    else:
        img.save(buf, format="JPEG", quality=args.quality, optimize=False)
    return buf.getvalue()


def corrupt_ids(n, k):
    if k <= 0:
        return set()
    return set((i * n) // k for i in range(k))


def write_new(path, data):
    with open(path, "xb") as f:  # never replaces a file
        f.write(data)


def write_folder(Image, out, split, imgs, labels, rows, cols, args, bad):
    ext = "png" if args.png else "jpg"
    base = os.path.join(out, split)
    os.mkdir(base)
    for i, (px, lab) in enumerate(zip(imgs, labels)):
        data = encode(Image, px, rows, cols, args, ext)
        cdir = os.path.join(base, CLASSES[lab])
        if not os.path.isdir(cdir):  # only the classes that have images
            os.mkdir(cdir)
        path = os.path.join(cdir, "%05d.%s" % (i, ext))
        if i in bad:
            data = data[:len(data) // 2]
            print("corrupt: " + path)
        write_new(path, data)


def tar_add(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tf.addfile(info, io.BytesIO(data))


def write_shards(Image, out, split, imgs, labels, rows, cols, args, bad):
    per = args.shard_samples
    for s in range((len(imgs) + per - 1) // per):
        path = os.path.join(out, "%s-%06d.tar" % (split, s))
        with open(path, "xb") as f:
            with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tf:
                for i in range(s * per, min(len(imgs), (s + 1) * per)):
                    data = encode(Image, imgs[i], rows, cols, args, "png")
                    key = "%06d" % i
                    if i in bad:
                        data = data[:len(data) // 2]
                        print("corrupt: %s:%s.png" % (path, key))
                    tar_add(tf, key + ".png", data)
                    tar_add(tf, key + ".cls", b"%d" % labels[i])


def gz_new(path, data):
    """A new gzip file holding data, its header's time 0 and no name (deterministic)."""
    with open(path, "xb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(data)


def write_idx(out, split, imgs, labels, rows, cols, bad):
    if bad:
        fail("--corrupt is for images, not --format idx")
    gz_new(os.path.join(out, FILES[split][0]),
           struct.pack(">IIII", 2051, len(imgs), rows, cols) + b"".join(imgs))
    gz_new(os.path.join(out, FILES[split][1]), struct.pack(">II", 2049, len(imgs)) + labels)


def parse_args():
    p = argparse.ArgumentParser(
        description="Write Fashion-MNIST (gzip IDX) out as a JPEG/PNG image folder "
        "(OUT/train/CLASS/NNNNN.jpg, OUT/val/...) or as PNG tar shards in the WebDataset "
        "convention (OUT/train-000000.tar: KEY.png + KEY.cls). Deterministic; an existing "
        "non-empty OUT is refused.",
        epilog="Bad data for tests: --corrupt K truncates K training images (every "
        "(train/K)-th, from index 0) to half their bytes and prints 'corrupt: NAME' for each.")
    p.add_argument("out", metavar="OUT", help="the output directory (new, or empty)")
    p.add_argument("--src", default="/usr/share/datasets/fashion-mnist",
                   help="the directory of the gzip IDX files (default %(default)s)")
    p.add_argument("--format", choices=["folder", "shards", "idx"], default="folder",
                   help="an image folder (default), PNG tar shards, or gzip IDX files (the same "
                   "first images as Fashion-MNIST's files)")
    p.add_argument("--png", action="store_true", help="folder: PNG files instead of JPEG")
    p.add_argument("--quality", type=int, default=95, help="JPEG quality 1-100 (default 95)")
    p.add_argument("--train", type=int, default=None, metavar="N",
                   help="the first N training images (default all 60000)")
    p.add_argument("--val", type=int, default=None, metavar="N",
                   help="the first N test images as the val split (default all 10000; 0: none)")
    p.add_argument("--size", type=int, default=0, metavar="S",
                   help="resize to S x S pixels, bilinear (default: 28 x 28 as stored)")
    p.add_argument("--rgb", action="store_true", help="3 channels (the grey repeated)")
    p.add_argument("--shard-samples", type=int, default=1000, metavar="N",
                   help="shards: samples per shard (default 1000)")
    p.add_argument("--classes", default=None, metavar="LIST",
                   help="only these classes (labels 0-9, comma-separated, e.g. 1,8): their first "
                   "--train / --val images, in class folders of their names (a data set of "
                   "that many classes, labels in sorted order)")
    p.add_argument("--corrupt", type=int, default=0, metavar="K",
                   help="truncate K training images to half their bytes (bad data for tests)")
    a = p.parse_args()
    if not 1 <= a.quality <= 100:
        p.error("--quality %d: must be 1-100" % a.quality)
    if a.size and not 1 <= a.size <= 4096:
        p.error("--size %d: must be 1-4096" % a.size)
    if a.shard_samples < 1:
        p.error("--shard-samples %d: must be at least 1" % a.shard_samples)
    for name in ("train", "val"):
        v = getattr(a, name)
        if v is not None and v < 0:
            p.error("--%s %d: must be 0 or more" % (name, v))
    if a.format == "idx" and (a.size or a.rgb or a.corrupt):
        p.error("--format idx writes the images as stored: no --size, --rgb or --corrupt")
    if a.png and a.format != "folder":
        p.error("--png is for --format folder (shards are always PNG)")
    if a.classes is not None:
        try:
            a.classes = set(int(c) for c in a.classes.split(","))
        except ValueError:
            p.error("--classes %s: labels 0-9, comma-separated" % a.classes)
        if not a.classes or not a.classes <= set(range(len(CLASSES))):
            p.error("--classes: labels 0-9, comma-separated")
        if a.format != "folder":
            p.error("--classes is for --format folder")
    if a.corrupt < 0:
        p.error("--corrupt %d: must be 0 or more" % a.corrupt)
    return a


def main():
    args = parse_args()
    try:
        from PIL import Image
    except ImportError:
        # Debian's python3-pil is for Debian's python3: another python3 first on PATH
        # (pyenv, a venv) hands over to it
        deb = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(deb) and os.access(deb, os.X_OK):
            os.execv(deb, [deb] + sys.argv)
        fail("needs PIL (Debian: apt-get install python3-pil)")
    out = args.out
    if os.path.lexists(out):
        if not os.path.isdir(out) or os.path.islink(out):
            fail("%s exists and is not a directory: refused" % out)
        if os.listdir(out):
            fail("%s exists and is not empty: refused (nothing is overwritten)" % out)
    else:
        os.makedirs(out)
    write = {"folder": write_folder, "shards": write_shards}.get(args.format)
    for split in ("train", "val"):
        count = getattr(args, split)
        if count == 0:
            continue
        imgs, labels, rows, cols = read_idx(args.src, split, count, args.classes)
        if split == "train" and args.corrupt > len(imgs):
            fail("--corrupt %d: more than the %d training images" % (args.corrupt, len(imgs)))
        bad = corrupt_ids(len(imgs), args.corrupt) if split == "train" else set()
        if write:
            write(Image, out, split, imgs, labels, rows, cols, args, bad)
        else:
            write_idx(out, split, imgs, labels, rows, cols, bad)
        print("%s: %d images" % (split, len(imgs)))
    if args.format == "shards":
        write_new(os.path.join(out, "classes.txt"), ("\n".join(CLASSES) + "\n").encode())


if __name__ == "__main__":
    main()
