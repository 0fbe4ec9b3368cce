"""Writes the image-folder fixtures of tests/features/test_backbone.cpp (run from this folder with
/usr/bin/python3; needs PIL). The pixel formulas are repeated in the test, which checks them."""
import os
from PIL import Image


def pattern(w, h):
    return [((x * 17 + y * 5) % 256, (x * 3 + y * 29 + 40) % 256, (x * y * 7 + 11) % 256)
            for y in range(h) for x in range(w)]


def smooth(w, h):
    return [(x * 10, y * 12, 128) for y in range(h) for x in range(w)]


root = "images"
os.makedirs(f"{root}/cat", exist_ok=True)
os.makedirs(f"{root}/dog", exist_ok=True)

img = Image.new("RGB", (20, 14)); img.putdata(pattern(20, 14)); img.save(f"{root}/cat/a_rgb.png")
img = Image.new("RGBA", (6, 5)); img.putdata([p + (x * 40 % 256,) for x, p in enumerate(pattern(6, 5))])
img.save(f"{root}/cat/b_rgba.png")
img = Image.new("RGB", (16, 12)); img.putdata(smooth(16, 12)); img.save(f"{root}/cat/c_smooth.jpg", quality=95)
img = Image.new("L", (9, 11)); img.putdata([p[0] for p in pattern(9, 11)]); img.save(f"{root}/dog/a_gray.png")
img = Image.new("L", (16, 12)); img.putdata([p[0] for p in smooth(16, 12)]); img.save(f"{root}/dog/b_gray.JPEG", quality=95)
with open(f"{root}/dog/readme.txt", "w") as f:
    f.write("not an image: skipped by the folder scan\n")
