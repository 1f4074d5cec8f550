#!/usr/bin/env python3
"""tests/data/photos.py - an ImageNet-like image folder from real photographs that Debian ships
(the package mate-backgrounds: /usr/share/backgrounds/mate/{nature,abstract,desktop}), for the
decoding benchmark (tests/bench/data/run) at ImageNet's image sizes.

Two classes, in torchvision's ImageFolder layout:
  OUT/train/0_nature/*.jpg, OUT/val/0_nature/*.jpg    nature/*.jpg and abstract/Elephants*.jpg
  OUT/train/1_desktop/*.jpg, OUT/val/1_desktop/*.jpg  desktop/* and the other abstract/* images
For each source image, --variants random crops (a fraction 0.25-1 of its area, the aspect ratio
of a size drawn from ImageNet's typical sizes: 500x375, 375x500, 500x333, 333x500, 500x500,
500x400, 400x500, 640x480, 480x640) resized to that size (bicubic) and JPEG-encoded at
--quality (default 90, about ImageNet's), named STEM-NN.jpg; every fifth variant (NN % 5 == 4)
goes to val. --originals also puts each source image itself into train (JPEGs copied byte for
byte, PNGs re-encoded as JPEG): large photographs up to 5640 x 3172, where decoding at a reduced
DCT scale matters.

Default: 10 variants of 30 source images = 240 train + 60 val files. Deterministic: the same
arguments give the same bytes (the crops come from a generator seeded by --seed and the source
file's name). OUT must not exist or be empty: nothing is overwritten.
Needs PIL (python3-pil) and mate-backgrounds (apt-get install mate-backgrounds).
"""
import argparse
import io
import os
import random
import sys

SIZES = [(500, 375), (375, 500), (500, 333), (333, 500), (500, 500), (500, 400), (400, 500),
         (640, 480), (480, 640)]


def fail(msg):
    print("photos.py: " + msg, file=sys.stderr)
    sys.exit(2)


def sources(src):
    """[(class, path)] in a fixed order."""
    out = []
    for sub in ("nature", "abstract", "desktop"):
        d = os.path.join(src, sub)
        if not os.path.isdir(d):
            fail("%s: not found (apt-get install mate-backgrounds)" % d)
        for name in sorted(os.listdir(d)):
            if not name.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            nature = sub == "nature" or name.startswith("Elephants")
            out.append(("0_nature" if nature else "1_desktop", os.path.join(d, name)))
    if not out:
        fail("%s: no images" % src)
    return out


def crop_of(rng, w, h):
    """A crop box of the image (w x h) and the size to resize it to."""
    tw, th = SIZES[rng.randrange(len(SIZES))]
    area = w * h * rng.uniform(0.25, 1.0)
    cw = min(w, max(16, int(round((area * tw / th) ** 0.5))))
    ch = min(h, max(16, int(round(cw * th / tw))))
    cw = min(cw, max(16, int(round(ch * tw / th))))
    x = rng.randrange(w - cw + 1)
    y = rng.randrange(h - ch + 1)
    return (x, y, x + cw, y + ch), (tw, th)


def jpeg(img, quality):
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality, optimize=False)
    return buf.getvalue()


def write_new(path, data):
    with open(path, "xb") as f:  # never replaces a file
        f.write(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT", help="the output directory (new, or empty)")
    p.add_argument("--src", default="/usr/share/backgrounds/mate",
                   help="mate-backgrounds' directory (default %(default)s)")
    p.add_argument("--variants", type=int, default=10, metavar="N",
                   help="random crops of each source image (default 10)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    p.add_argument("--seed", type=int, default=1, help="the crops' seed (default 1)")
    p.add_argument("--originals", action="store_true",
                   help="also the source images themselves, in train")
    a = p.parse_args()
    if a.variants < 0 or not 1 <= a.quality <= 100:
        p.error("--variants must be 0 or more, --quality 1-100")
    try:
        from PIL import Image
    except ImportError:
        deb = "/usr/bin/python3"  # Debian's python3-pil is for Debian's python3
        if os.path.realpath(sys.executable) != os.path.realpath(deb) and os.access(deb, os.X_OK):
            os.execv(deb, [deb] + sys.argv)
        fail("needs PIL (Debian: apt-get install python3-pil)")
    Image.MAX_IMAGE_PIXELS = 64 << 20
    src = sources(a.src)
    if os.path.lexists(a.out):
        if not os.path.isdir(a.out) or os.path.islink(a.out):
            fail("%s exists and is not a directory: refused" % a.out)
        if os.listdir(a.out):
            fail("%s exists and is not empty: refused (nothing is overwritten)" % a.out)
    for split in ("train", "val"):
        for c in ("0_nature", "1_desktop"):
            os.makedirs(os.path.join(a.out, split, c))
    counts = {"train": 0, "val": 0}
    for cls, path in src:
        stem = os.path.splitext(os.path.basename(path))[0]
        with Image.open(path) as im:
            img = im.convert("RGB")
        if a.originals:
            if path.lower().endswith((".jpg", ".jpeg")):
                with open(path, "rb") as f:
                    data = f.read()
            else:
                data = jpeg(img, a.quality)
            write_new(os.path.join(a.out, "train", cls, stem + ".jpg"), data)
            counts["train"] += 1
        rng = random.Random("%d:%s" % (a.seed, os.path.basename(path)))
        for i in range(a.variants):
            box, size = crop_of(rng, img.width, img.height)
            v = img.crop(box).resize(size, Image.BICUBIC)
            split = "val" if i % 5 == 4 else "train"
            write_new(os.path.join(a.out, split, cls, "%s-%02d.jpg" % (stem, i)),
                      jpeg(v, a.quality))
            counts[split] += 1
    print("train: %d images, val: %d images (%d source images)" %
          (counts["train"], counts["val"], len(src)))


if __name__ == "__main__":
    main()
