"""Writes an image folder as users have them into DIR (argv[1]), for tests/features/test_backbone.cpp:
every PNG and JPEG form fednode decodes, a CMYK JPEG, images in nested sub-folders, a truncated
JPEG, an empty file and a text file. Run with /usr/bin/python3 (needs PIL and numpy)."""
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

root = sys.argv[1]
for d in ("apple/nested/deeper", "apple/nested2", "pear/sub"):
    os.makedirs(os.path.join(root, d), exist_ok=True)
rng = np.random.default_rng(7)


def smooth(w, h, channels):
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 5 % 256)]
    arr = np.stack(planes[:channels], axis=-1) + rng.integers(0, 20, (h, w, channels))
    return np.clip(arr, 0, 255).astype(np.uint8)


def path(name):
    return os.path.join(root, name)


def png16(name, arr):
    """16-bit PNG written by hand (PIL cannot write 16-bit RGB): gray [h, w] or RGB [h, w, 3]."""
    h, w = arr.shape[:2]
    color = 2 if arr.ndim == 3 else 0
    rows = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    with open(path(name), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


Image.fromarray(smooth(40, 30, 3)).save(path("apple/rgb.png"))
Image.fromarray(smooth(37, 41, 3)).convert("CMYK").save(path("apple/cmyk.jpg"), quality=92)
Image.fromarray(smooth(48, 32, 3)).save(path("apple/progressive.jpg"), quality=90, progressive=True)
Image.fromarray(smooth(30, 30, 3)).save(path("apple/UPPER.JPG"), quality=90)
Image.fromarray(smooth(33, 29, 3)).convert("P", palette=Image.ADAPTIVE, colors=16).save(path("apple/nested/palette.png"))
png16("apple/nested/deeper/gray16.png", (smooth(25, 27, 1)[:, :, 0].astype(np.uint16) * 257 + 99))
png16("apple/nested2/rgb16.png", smooth(31, 26, 3).astype(np.uint16) * 250)
rgba = np.concatenate([smooth(28, 36, 3), rng.integers(0, 256, (36, 28, 1), dtype=np.uint8)], axis=-1)
Image.fromarray(rgba, "RGBA").save(path("pear/rgba.png"))
Image.fromarray(smooth(35, 25, 1)[:, :, 0], "L").save(path("pear/gray.png"))
Image.fromarray(smooth(35, 25, 1)[:, :, 0], "L").save(path("pear/sub/gray.jpeg"), quality=90)
Image.fromarray(smooth(64, 48, 3)).save(path("pear/truncated.jpg"), quality=90)
with open(path("pear/truncated.jpg"), "rb") as f:
    data = f.read()
with open(path("pear/truncated.jpg"), "wb") as f:
    f.write(data[: len(data) * 2 // 3])
open(path("pear/empty.png"), "wb").close()
with open(path("pear/notes.txt"), "w") as f:
    f.write("not an image: listed as ignored\n")
