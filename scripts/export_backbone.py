#!/usr/bin/env python3
"""Export an image encoder to a TorchScript file fednode loads, with its preprocessing sidecar.

  export_backbone.py --torchvision NAME [--weights DEFAULT|none] --out MODEL.pt [--input-size S]
  export_backbone.py --clip NAME --pretrained TAG --out MODEL.pt          (needs open_clip)

Writes MODEL.pt (traced TorchScript: [N, 3, S, S] float -> [N, D] features) and
MODEL.pt.preprocessing (the sidecar, format in docs/backbones.md). The classifier of a torchvision
model (its fc / classifier / heads / head) is replaced by the identity, so the output is the
penultimate representation the FedPFT / FedCGS / FedTC papers build on.

--weights none gives random weights (no download): enough to test that fednode loads and runs what
this PyTorch version writes. With Debian's python3-torch 1.13 the result is guaranteed to load in
Debian's LibTorch 1.13; see docs/backbones.md for other versions.
"""
import argparse
import os
import sys

import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Encoder(torch.nn.Module):
    """Calls a model's image-encoding method and flattens what it returns to [N, D]."""

    def __init__(self, model, method="forward"):
        super().__init__()
        self.model = model
        self.method = method

    def forward(self, x):
        y = getattr(self.model, self.method)(x)
        return torch.flatten(y, 1)


def torchvision_encoder(name, weights):
    try:
        import torchvision
    except ImportError:
        sys.exit("export_backbone: torchvision is not installed (Debian: apt-get install python3-torchvision)")
    if weights.lower() == "none":
        weights = None
    model = torchvision.models.get_model(name, weights=weights)
    for attr in ("fc", "classifier", "heads", "head"):
        if hasattr(model, attr) and isinstance(getattr(model, attr), torch.nn.Module):
            setattr(model, attr, torch.nn.Identity())
            break
    else:
        sys.exit(f"export_backbone: {name} has no fc / classifier / heads / head to remove")
    return Encoder(model), IMAGENET_MEAN, IMAGENET_STD


def clip_encoder(name, pretrained):
    try:
        import open_clip
    except ImportError:
        sys.exit("export_backbone: --clip needs the open_clip package (pip install open_clip_torch)")
    model, _, _ = open_clip.create_model_and_transforms(name, pretrained=pretrained)
    mean = getattr(model.visual, "image_mean", None) or open_clip.OPENAI_DATASET_MEAN
    std = getattr(model.visual, "image_std", None) or open_clip.OPENAI_DATASET_STD
    return Encoder(model, "encode_image"), tuple(mean), tuple(std)


def sidecar_text(size, mean, std, dim, fit, source):
    numbers = lambda v: ", ".join(f"{x:.9g}" for x in v)
    return (
        "# fednode backbone preprocessing (key = value); see docs/backbones.md\n"
        f"# exported by scripts/export_backbone.py from {source} with PyTorch {torch.__version__}\n"
        f"input_size = {size}\n"
        "channels = 3\n"
        "channel_order = rgb\n"
        "grayscale = repeat\n"
        "resize = bilinear\n"
        f"fit = {fit}\n"
        "value_range = 0-1\n"
        f"mean = {numbers(mean)}\n"
        f"std = {numbers(std)}\n"
        f"output_dim = {dim}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--torchvision", metavar="NAME", help="a torchvision.models name, e.g. resnet18")
    src.add_argument("--clip", metavar="NAME", help="an open_clip model name, e.g. ViT-B-32")
    p.add_argument("--weights", default="DEFAULT",
                   help="torchvision weights enum name, DEFAULT, or none for random weights")
    p.add_argument("--pretrained", default="openai", help="open_clip pretrained tag")
    p.add_argument("--out", required=True, help="MODEL.pt; the sidecar goes to MODEL.pt.preprocessing")
    p.add_argument("--input-size", type=int, default=224)
    p.add_argument("--fit", choices=("stretch", "center_crop"), default="center_crop")
    p.add_argument("--seed", type=int, default=0, help="seeds random weights, for reproducible tests")
    a = p.parse_args()

    torch.manual_seed(a.seed)
    if a.torchvision:
        encoder, mean, std = torchvision_encoder(a.torchvision, a.weights)
        source = f"torchvision {a.torchvision} (weights {a.weights})"
    else:
        encoder, mean, std = clip_encoder(a.clip, a.pretrained)
        source = f"open_clip {a.clip} ({a.pretrained})"
    encoder.eval()

    example = torch.rand(2, 3, a.input_size, a.input_size)
    with torch.no_grad():
        traced = torch.jit.trace(encoder, example)
        expected = encoder(example)
        got = traced(example)
    if got.dim() != 2 or got.shape[0] != 2:
        sys.exit(f"export_backbone: the encoder returns shape {tuple(got.shape)}, fednode needs [N, D]")
    if not torch.allclose(expected, got, atol=1e-5, rtol=1e-5):
        sys.exit("export_backbone: the traced module disagrees with the eager model (data-dependent control flow?)")
    torch.jit.save(traced, a.out)
    with open(a.out + ".preprocessing", "w") as f:
        f.write(sidecar_text(a.input_size, mean, std, got.shape[1], a.fit, source))
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes, output dimension {got.shape[1]}) "
          f"and {a.out}.preprocessing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
