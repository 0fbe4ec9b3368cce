#!/usr/bin/env python3
"""Export a ViT that FedMITR's nodes train, send and invert instead of the built-in one
(`--vit-script FILE`, docs/methods/fedmitr.md "Your own ViT").

    export_vit.py --out VIT.pt [--image-size 28] [--channels 1] [--patch 7] [--dim 64] [--depth 4]
                  [--heads 4] [--mlp 128] [--classes 10] [--seed 0]

The interface fednode calls (torch.jit.script, so that the keep-mask's branches survive):
    forward(images: Tensor[B, C, S, S] float, keep: Tensor[B, T] bool)
        -> (logits [B, classes], token_logits [B, T, classes], cls_attention [B, T])
  T = (S / patch)^2 patch tokens on a row-major grid; a patch with keep False must not influence
  any output (no key for any query) and get CLS attention 0; cls_attention is the last layer's
  attention from the class token to each patch token (heads averaged); token_logits are the
  classifier applied to each patch token's final representation.
Attributes: image_size, channels, patch, classes (ints). Parameters: every float32 parameter, in
named_parameters() order, is what a client trains and sends; the file's values are the
federation's shared start (a pretrained model's weights, for the paper's fine-tuning).

This file's own model is the built-in ViT of methods/fedmitr/vit.h with its parameters in the
same order, so fednode's tests can check a scripted model against the built-in one; a user
wrapping a DeiT writes the same forward around it.
"""
import argparse
import os
import sys
from typing import Tuple

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from ref_vit import Block  # noqa: E402  (the benchmark's block, the same architecture)


class Tokens(torch.nn.Module):
    """The class token and the position embeddings, in a module of their own so that they come
    after the patch embedding in named_parameters(), as in fednode's flat layout."""

    def __init__(self, dim: int, tokens: int):
        super().__init__()
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = torch.nn.Parameter(torch.zeros(1, tokens + 1, dim))
        torch.nn.init.trunc_normal_(self.cls, std=0.02)
        torch.nn.init.trunc_normal_(self.pos, std=0.02)


class ScriptedVit(torch.nn.Module):
    def __init__(self, image_size: int, channels: int, patch: int, dim: int, depth: int, heads: int, mlp: int,
                 classes: int):
        super().__init__()
        self.image_size, self.channels, self.patch, self.classes = image_size, channels, patch, classes
        self.embed = torch.nn.Linear(channels * patch * patch, dim)
        self.tokens = Tokens(dim, (image_size // patch) ** 2)
        self.blocks = torch.nn.ModuleList([Block(dim, heads, mlp) for _ in range(depth)])
        self.ln = torch.nn.LayerNorm(dim, eps=1e-6)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, images: torch.Tensor, keep: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B = images.shape[0]
        patches = F.unfold(images, kernel_size=self.patch, stride=self.patch).transpose(1, 2)
        h = torch.cat([self.tokens.cls.expand(B, -1, -1), self.embed(patches)], 1) + self.tokens.pos
        keys = torch.cat([torch.ones(B, 1, dtype=torch.bool), keep], 1)
        bias = torch.zeros(B, 1, 1, keys.shape[1]).masked_fill(~keys.view(B, 1, 1, -1), float("-inf"))
        a = torch.zeros(0)
        for block in self.blocks:
            h, a = block(h, bias)
        scores = self.head(self.ln(h))
        return scores[:, 0], scores[:, 1:], a[:, :, 0, 1:].mean(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    for name, default in [("image-size", 28), ("channels", 1), ("patch", 7), ("dim", 64), ("depth", 4), ("heads", 4),
                          ("mlp", 128), ("classes", 10), ("seed", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    if a.image_size % a.patch or a.dim % a.heads:
        p.error("the patch must divide the image size and the heads the dimension")
    torch.manual_seed(a.seed)
    model = ScriptedVit(a.image_size, a.channels, a.patch, a.dim, a.depth, a.heads, a.mlp, a.classes).eval()
    torch.jit.script(model).save(a.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"export_vit: {a.out}: {n} parameters, {(a.image_size // a.patch) ** 2} patch tokens, {a.classes} classes")


if __name__ == "__main__":
    main()
