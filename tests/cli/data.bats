#!/usr/bin/env bats
# tier: fast
# sanitizers: yes
# hetpipe data check and pack on small image folders made here (real PNG files written by
# python3's zlib): formats, classes, counts, undecodable files by name, a model's classes;
# pack into WebDataset shards then check them; an existing OUT, a FIFO, hostile names.

load ../helpers

setup() {
    common_setup
}

teardown() {
    common_teardown
}

# pngs DIR SPLIT CLASS N [W]: N real PNG images DIR/SPLIT/CLASS/img_K.png (W+K wide, 6+K tall)
pngs() {
    python3 - "$@" << 'EOF_PY'
import os, struct, sys, zlib
root, split, cls, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
w0 = int(sys.argv[5]) if len(sys.argv) > 5 else 8
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
os.makedirs(os.path.join(root, split, cls), exist_ok=True)
for k in range(n):
    w, h = w0 + k, 6 + k
    raw = b''.join(b'\x00' + bytes((x * 7 + y * 3 + k) % 256 for x in range(w * 3)) for y in range(h))
    png = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) +
           chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
    with open(os.path.join(root, split, cls, 'img_%d.png' % k), 'wb') as f:
        f.write(png)
EOF_PY
}

small_folder() {
    pngs "$1" train cat 4
    pngs "$1" train dog 3 20
    pngs "$1" train eel 2
    pngs "$1" val cat 1
    pngs "$1" val eel 2
}

@test "data check: an image folder's format, classes, counts, image sizes" {
    small_folder "$TMP/f"
    echo notes > "$TMP/f/train/cat/README.txt"
    run "$HETPIPE" data check "$TMP/f"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx "format: image folder"
    echo "$output" | grep -qx "classes: 3 (cat, dog, eel)"
    echo "$output" | grep -qx "train: 9 samples, 1 other entry passed over (not .jpg/.jpeg/.png files)"
    echo "$output" | grep -qx "val: 3 samples"
    echo "$output" | grep -qx "images: 12 readable (0 JPEG, 12 PNG), 0 unreadable or undecodable"
    # widths 8..11 (cat 8-11, eel 8-9, val), 20..22 (dog); heights 6..9
    echo "$output" | grep -qx "image width: min 8, median 9, max 22; height: min 6, median 7, max 9"
    echo "$output" | grep -qx "check: OK"
}

@test "data check: undecodable files by name and count, a model of other classes: exit 1" {
    small_folder "$TMP/f"
    printf 'not an image' > "$TMP/f/train/dog/broken.jpg"
    head -c 20 "$TMP/f/train/cat/img_0.png" > "$TMP/f/val/cat/cut.png" # the header cut
    run "$HETPIPE" data check "$TMP/f" --model cnn
    echo "$output"
    [ "$status" -eq 1 ]
    echo "$output" | grep -q "undecodable: $TMP/f/train/dog/broken.jpg: "
    echo "$output" | grep -q "undecodable: $TMP/f/val/cat/cut.png: "
    echo "$output" | grep -q "12 readable (0 JPEG, 12 PNG), 2 unreadable or undecodable"
    echo "$output" | grep -qF "model 'cnn' has 10 classes, the data set at $TMP/f has 3"
    echo "$output" | grep -qF "data check: 3 problems in $TMP/f"
}

@test "data pack: shards that check the same, the same bytes each time, OUT never reused" {
    small_folder "$TMP/f"
    run "$HETPIPE" data pack "$TMP/f" "$TMP/s" --shard-size 6000
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -q "read back: the same samples and classes"
    [ "$(cat "$TMP/s/classes.txt")" = "$(printf 'cat\ndog\neel')" ]
    [ -f "$TMP/s/train-000001.tar" ] # 6000 bytes: more than one shard
    [ -f "$TMP/s/val-000000.tar" ]
    for t in "$TMP"/s/*.tar; do # members KEY.png + KEY.cls, a shard's size kept
        [ "$(stat -c %s "$t")" -le 6000 ]
        tar -tf "$t" | grep -qE '^[0-9]{8}\.png$'
        tar -tf "$t" | grep -qE '^[0-9]{8}\.cls$'
    done
    run "$HETPIPE" data check "$TMP/s"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx "format: tar shards"
    echo "$output" | grep -qx "classes: 3 (cat, dog, eel)"
    echo "$output" | grep -qE "^train: 9 samples in [2-9] shards$"
    echo "$output" | grep -qE "^val: 3 samples in [1-3] shards$"
    echo "$output" | grep -qx "image width: min 8, median 9, max 22; height: min 6, median 7, max 9"
    # a label in a shard is the folder's: sample 00000004 is dog's first image (ids by class)
    t=$(grep -l 00000004.cls "$TMP"/s/train-*.tar)
    [ "$(tar -xOf "$t" 00000004.cls)" = 1 ]
    cmp <(tar -xOf "$t" 00000004.png) "$TMP/f/train/dog/img_0.png"
    # a second pack: the same bytes (a fixed order, no dates); then OUT exists and is refused
    mkdir "$TMP/s2"
    "$HETPIPE" data pack "$TMP/f" "$TMP/s2" --shard-size 6000
    diff -r "$TMP/s" "$TMP/s2"
    run "$HETPIPE" data pack "$TMP/f" "$TMP/s"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "'$TMP/s' exists and is not empty"
    diff -r "$TMP/s" "$TMP/s2" # untouched
    echo mine > "$TMP/file"
    run "$HETPIPE" data pack "$TMP/f" "$TMP/file"
    [ "$status" -eq 1 ]
    [ "$(cat "$TMP/file")" = mine ]
    run "$HETPIPE" data pack "$TMP/f" "$TMP/t" --split train
    [ "$status" -eq 0 ]
    [ ! -e "$TMP/t/val-000000.tar" ]
}

@test "data: a FIFO as an image is named, never waited on" {
    small_folder "$TMP/f"
    mkfifo "$TMP/f/train/cat/pipe.jpg"
    run timeout 20 "$HETPIPE" data check "$TMP/f"
    echo "$output"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "'$TMP/f/train/cat/pipe.jpg' is a FIFO, not a regular file"
    run timeout 20 "$HETPIPE" data pack "$TMP/f" "$TMP/s"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "pipe.jpg' is a FIFO"
    [ ! -e "$TMP/s" ]
    # a link to a FIFO passes the listing; reading it is refused, by name
    rm "$TMP/f/train/cat/pipe.jpg"
    mkfifo "$TMP/fifo"
    ln -s "$TMP/fifo" "$TMP/f/train/cat/link.png"
    run timeout 20 "$HETPIPE" data check "$TMP/f"
    echo "$output"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "unreadable: cannot open '$TMP/f/train/cat/link.png': "
    run timeout 20 "$HETPIPE" data pack "$TMP/f" "$TMP/s"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "link.png"
    [ ! -e "$TMP/s" ] # what pack made is taken back
}

@test "data: hostile file names (spaces, quotes, a newline) pack and check; a newline in a class is refused" {
    pngs "$TMP/f" train "a class" 2
    pngs "$TMP/f" train "it's \"b\"" 2
    cp "$TMP/f/train/a class/img_0.png" "$TMP/f/train/a class/two words 'q' \"d\".PNG"
    cp "$TMP/f/train/a class/img_1.png" "$TMP/f/train/a class/new"$'\n'"line.png"
    run "$HETPIPE" data check "$TMP/f"
    echo "$output"
    [ "$status" -eq 0 ]
    echo "$output" | grep -qx "classes: 2 (a class, it's \"b\")"
    echo "$output" | grep -qx "train: 6 samples"
    run "$HETPIPE" data pack "$TMP/f" "$TMP/s"
    echo "$output"
    [ "$status" -eq 0 ]
    run "$HETPIPE" data check "$TMP/s"
    echo "$output" | grep -qx "train: 6 samples in 1 shards"
    echo "$output" | grep -qx "classes: 2 (a class, it's \"b\")"
    # the newline in a name shows escaped in a message
    printf 'x' > "$TMP/f/train/a class/bad"$'\n'"name.jpg"
    run "$HETPIPE" data check "$TMP/f"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF 'bad\x0aname.jpg: '
    rm "$TMP/f/train/a class/bad"$'\n'"name.jpg"
    pngs "$TMP/f" train "new"$'\n'"class" 1
    run "$HETPIPE" data pack "$TMP/f" "$TMP/s2"
    echo "$output"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "class folder 'new\x0aclass' has a line break in its name"
    [ ! -e "$TMP/s2" ]
}

@test "data: bad command lines exit 2" {
    run "$HETPIPE" data
    [ "$status" -eq 2 ]
    echo "$output" | grep -q "give a subcommand: check, pack or bench"
    run "$HETPIPE" data frobnicate
    [ "$status" -eq 2 ]
    echo "$output" | grep -q "unknown subcommand 'frobnicate' (allowed: check, pack, bench)"
    run "$HETPIPE" data pack "$TMP"
    [ "$status" -eq 2 ]
    run "$HETPIPE" data check a b
    [ "$status" -eq 2 ]
    run "$HETPIPE" data pack a b --split both3
    [ "$status" -eq 2 ]
    run "$HETPIPE" data check "$TMP/none"
    [ "$status" -eq 1 ]
    echo "$output" | grep -qF "data set '$TMP/none' is not a directory"
}
