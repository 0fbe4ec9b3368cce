#!/usr/bin/env python3
"""FGL's external-generator contract (methods/fgl/command_generator.h), fulfilled by fednode's
built-in TorchScript generator: the script a user copies to put any generator behind
`fednode ... --method fgl --generator-command "python3 scripts/fgl_generator_command.py MODEL.pt"`.

fednode runs the command with two more arguments, PROMPTS.jsonl and IMAGES/: for each JSON line
{"index", "label", "name", "prompt", "negative_prompt", ["caption"], "count", "seed"} it must
write exactly `count` PNG or JPEG files into IMAGES/<index>/. This one draws from
torch.manual_seed(seed): a label generator (kind = label) by mapping `name` to its label through
the sidecar's vocabulary, a text generator (kind = text) from encode(caption or prompt,
negative_prompt). A Stable Diffusion wrapper would pass the same texts to diffusers' pipeline
instead (docs/methods/fgl.md, "An external generator").

Writes 8-bit PNGs with zlib alone, so it needs nothing beyond PyTorch.
"""
import json
import os
import struct
import sys
import zlib

import torch


def read_sidecar(path):
    info = {"class": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if key == "class":
                info["class"].append(value)
            else:
                info[key] = value
    return info


def write_png(path, pixels):
    """pixels: uint8 tensor [channels, size, size], channels 1 (gray) or 3 (RGB)."""
    channels, height, width = pixels.shape
    color = {1: 0, 3: 2}[channels]
    rows = pixels.permute(1, 2, 0).contiguous().numpy().tobytes()
    stride = width * channels
    raw = b"".join(b"\x00" + rows[y * stride:(y + 1) * stride] for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: fgl_generator_command.py MODEL.pt PROMPTS.jsonl IMAGES/")
    model, prompts, images = sys.argv[1:]
    info = read_sidecar(model + ".generator")
    vocabulary = {name: i for i, name in enumerate(info["class"])}
    text = info["kind"] == "text"
    latent = int(info["latent"])
    generator = torch.jit.load(model).eval()
    torch.set_num_threads(1)
    with open(prompts, encoding="utf-8") as f:
        for line in f:
            request = json.loads(line)
            if not text and request["name"] not in vocabulary:
                sys.exit(f"fgl_generator_command: the generator knows no class '{request['name']}'")
            folder = os.path.join(images, str(request["index"]))
            os.makedirs(folder, exist_ok=True)
            torch.manual_seed(request["seed"] % (1 << 63))
            count = request["count"]
            if text:
                with torch.no_grad():
                    embedding = generator.encode([request.get("caption") or request["prompt"]],
                                                 [request["negative_prompt"]])
            for at in range(0, count, 256):
                n = min(256, count - at)
                z = torch.randn(n, latent)
                with torch.no_grad():
                    if text:
                        x = generator(z, embedding.expand(n, -1)).clamp(0, 1)
                    else:
                        x = generator(z, torch.full((n,), vocabulary[request["name"]], dtype=torch.int64)).clamp(0, 1)
                pixels = (x * 255).round().to(torch.uint8)
                for i in range(n):
                    write_png(os.path.join(folder, f"{at + i:06d}.png"), pixels[i])


if __name__ == "__main__":
    main()
