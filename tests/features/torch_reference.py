"""The reference fednode's feature extraction is checked and timed against: PyTorch in Python.

Everything here is written independently of the C++ code, from the sidecar format's documentation
(docs/backbones.md): IDX files are read with gzip + NumPy, images with PIL, resizing is
torch.nn.functional.interpolate, the model runs through torch.jit.load.

  torch_reference.py --model M.pt (--fashion-mnist DIR [--split train|test] | --images DIR)
                     [--limit N] [--input-size S] [--threads T] [--batch-size B]
                     [--out X.npy] [--time] [--serve] [--freeze | --optimize]

--out writes the features as float32 .npy; --time prints one line "images_per_second <value>"
measured over the extraction loop alone (preprocessing + forward, not loading). --serve loads
once, prints "ready", then for every line "run" on stdin extracts again and prints
"seconds <wall> cpu <process CPU time>": a benchmark can then interleave PyTorch and fednode run
by run.
Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy, python3-pil).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_sidecar(path):
    conf = {"channels": "3", "channel_order": "rgb", "grayscale": "repeat", "resize": "bilinear",
            "fit": "stretch", "value_range": "0-1", "mean": "none", "std": "none"}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                key, value = (s.strip() for s in line.split("=", 1))
                conf[key.lower()] = value
    return conf


def numbers(text):
    return None if text.lower() == "none" else [float(v) for v in text.split(",")]


def open_maybe_gz(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def idx_path(folder, stem):
    for candidate in (os.path.join(folder, stem + ".gz"), os.path.join(folder, stem)):
        if os.path.exists(candidate):
            return candidate
    raise FileNotFoundError(stem)


def load_fashion_mnist(folder, split, limit):
    prefix = "train" if split == "train" else "t10k"
    with open_maybe_gz(idx_path(folder, prefix + "-images-idx3-ubyte")) as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051
        n = n if limit < 0 else min(n, limit)
        images = np.frombuffer(f.read(n * rows * cols), dtype=np.uint8).reshape(n, rows, cols, 1)
    with open_maybe_gz(idx_path(folder, prefix + "-labels-idx1-ubyte")) as f:
        magic, m = struct.unpack(">II", f.read(8))
        assert magic == 2049
        labels = np.frombuffer(f.read(n), dtype=np.uint8).astype(np.int64)
    return list(images), labels


def class_files(root, c):
    """torchvision's ImageFolder order: os.walk following links, folders sorted by path, files by
    name within each; hidden entries skipped, as fednode does."""
    found = []
    for folder, dirs, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
        if any(part.startswith(".") for part in os.path.relpath(folder, root).split(os.sep)):
            continue
        for n in sorted(names):
            if not n.startswith(".") and n.lower().endswith((".png", ".jpg", ".jpeg")):
                found.append(os.path.relpath(os.path.join(folder, n), root))
    return found


def decode(path):
    """What torchvision's loader gives (PIL's convert), 1-channel files staying 1-channel (the
    sidecar decides what grayscale becomes). 16-bit grayscale is the one departure, as documented
    in features/images.h: PIL clips it at 255, fednode keeps the high byte."""
    from PIL import Image
    img = Image.open(path)
    if img.mode in ("I", "I;16", "I;16B"):
        arr = (np.asarray(img, dtype=np.int64) >> 8).clip(0, 255).astype(np.uint8)
    elif img.mode in ("L", "LA", "1"):
        arr = np.asarray(img.convert("L"), dtype=np.uint8)
    else:
        arr = np.asarray(img.convert("RGB"), dtype=np.uint8)
    return arr[:, :, None] if arr.ndim == 2 else arr


def load_image_folder(root, limit, skip_bad=False, skipped=None):
    classes = sorted(d for d in os.listdir(root)
                     if not d.startswith(".") and os.path.isdir(os.path.join(root, d)))
    per_class = [class_files(root, c) for c in classes]
    keep = [len(names) for names in per_class]
    if limit >= 0:
        keep = [0] * len(per_class)
        taken = 0
        while taken < limit and any(k < len(n) for k, n in zip(keep, per_class)):
            for i, names in enumerate(per_class):
                if taken < limit and keep[i] < len(names):
                    keep[i] += 1
                    taken += 1
    images, labels = [], []
    for label, names in enumerate(per_class):
        for name in names[:keep[label]]:
            try:
                images.append(decode(os.path.join(root, name)))
            except Exception:
                if not skip_bad:
                    raise
                if skipped is not None:
                    skipped.append(name)
                continue
            labels.append(label)
    return images, np.array(labels, dtype=np.int64)


def preprocess(images, conf, size):
    """B same-shaped HxWxC uint8 images -> [B, C', S, S] float tensor, following the sidecar."""
    x = torch.from_numpy(np.ascontiguousarray(np.stack(images))).permute(0, 3, 1, 2).float()
    channels = int(conf["channels"])
    if channels == 1 and x.shape[1] == 3:
        from PIL import Image
        gray = np.stack([np.asarray(Image.fromarray(img).convert("L"), dtype=np.uint8) for img in images])
        x = torch.from_numpy(gray)[:, None].float()
    if conf["value_range"] == "0-1":
        x = x / 255
    h, w = x.shape[2], x.shape[3]
    out_h, out_w, top, left = size, size, 0, 0
    if conf["fit"] == "center_crop":
        if h <= w:
            out_w = int(size * w / h)
        else:
            out_h = int(size * h / w)
        top, left = int(round((out_h - size) / 2.0)), int(round((out_w - size) / 2.0))
    mode = conf["resize"]
    kwargs = {"align_corners": False} if mode == "bilinear" else {}
    x = F.interpolate(x, size=(out_h, out_w), mode=mode, **kwargs)
    x = x[:, :, top:top + size, left:left + size]
    if channels == 3 and x.shape[1] == 1:
        if conf["grayscale"] != "repeat":
            raise ValueError("grayscale image rejected by the sidecar")
        x = x.repeat(1, 3, 1, 1)
    if channels == 3 and conf["channel_order"] == "bgr":
        x = x.flip(1)
    mean, std = numbers(conf["mean"]), numbers(conf["std"])
    if mean is not None:
        x = (x - torch.tensor(mean)[None, :, None, None]) / torch.tensor(std)[None, :, None, None]
    return x


def preprocess_batch(images, conf, size):
    if all(img.shape == images[0].shape for img in images):
        return preprocess(images, conf, size)
    return torch.cat([preprocess([img], conf, size) for img in images])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--sidecar")
    p.add_argument("--fashion-mnist")
    p.add_argument("--split", default="train")
    p.add_argument("--images")
    p.add_argument("--limit", type=int, default=-1)
    p.add_argument("--skip-bad", action="store_true", help="image folders: leave out files PIL cannot decode")
    p.add_argument("--input-size", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out")
    p.add_argument("--time", action="store_true")
    p.add_argument("--serve", action="store_true")
    p.add_argument("--freeze", action="store_true", help="torch.jit.freeze before running")
    p.add_argument("--optimize", action="store_true",
                   help="torch.jit.freeze + optimize_for_inference before running")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    conf = read_sidecar(a.sidecar or a.model + ".preprocessing")
    size = a.input_size or int(conf["input_size"])
    if a.images:
        skipped = []
        images, labels = load_image_folder(a.images, a.limit, a.skip_bad, skipped)
        for name in skipped:
            print("skipped " + name)
    else:
        images, labels = load_fashion_mnist(a.fashion_mnist, a.split, a.limit)

    model = torch.jit.load(a.model, map_location="cpu").eval()
    if a.optimize:
        model = torch.jit.optimize_for_inference(torch.jit.freeze(model))
    elif a.freeze:
        model = torch.jit.freeze(model)

    def extract():
        outputs = []
        for b in range(0, len(images), a.batch_size):
            batch = preprocess_batch(images[b:b + a.batch_size], conf, size)
            y = model(batch)
            outputs.append(y.flatten(1) if y.dim() == 4 else y)
        return outputs

    with torch.inference_mode():
        if a.time or a.serve:
            # The TorchScript executor specialises on its first calls of each input shape: time
            # later passes, as a long-running job would see them (fednode's benchmark does the same).
            extract()
        if a.serve:
            print("ready", flush=True)
            for line in sys.stdin:
                if line.strip() != "run":
                    break
                start, cpu = time.perf_counter(), time.process_time()
                extract()
                print(f"seconds {time.perf_counter() - start:.6f} cpu {time.process_time() - cpu:.6f}",
                      flush=True)
            return 0
        start = time.perf_counter()
        outputs = extract()
        seconds = time.perf_counter() - start
    X = torch.cat(outputs).numpy().astype(np.float32)
    if a.out:
        np.save(a.out, X)
        np.save(a.out[:-len(".npy")] + "_labels.npy" if a.out.endswith(".npy") else a.out + "_labels.npy",
                labels.astype(np.int32))
    if a.time:
        print(f"images_per_second {len(images) / seconds:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
