"""Reference for bench_vit: FedMITR's ViT (methods/fedmitr/vit.h) as a PyTorch user writes it.

Patch embedding (a Linear on flattened 7x7 patches, channel-major then row then column, as
torch.nn.functional.unfold lays them out), a CLS token and position embeddings, pre-norm blocks
(LayerNorm, multi-head self-attention written out so that the CLS attention can be read, LayerNorm,
GELU MLP), a final LayerNorm and a Linear head on CLS. Training: torch.optim.SGD (momentum 0.9,
weight decay 1e-4), softmax cross-entropy, batches of --batch-size from a fresh permutation every
epoch.

Loads --dir/{X,y}.npy (images as rows of pixels) once, prints "ready", then answers each line on
stdin: "train" with "seconds S" for --epochs epochs of training from a fresh model (the loop
alone), "forward" with "seconds S" for a no-grad forward pass over every image in batches of 256
(logits and the last layer's CLS attention), "invert" with "seconds S" for FedMITR's sparse
inversion (methods/fedmitr/vit.h, vit_invert) of --invert-images images against an ensemble of
--ensemble fresh models with a student: Adam on the pixels, cross-entropy of the ensemble's mean
logits minus the student's Jensen-Shannon divergence plus total variation, the lowest-attention
30 % of each image's remaining patches stopped at a quarter, half and three quarters of
--iterations (their pixels written back after each step, dropped as keys through the attention).
"""
import argparse
import os
import sys
import time
from typing import Optional, Tuple

# OpenBLAS on one thread, as fednode runs it beside LibTorch's OpenMP team (methods/fedmitr/vit.cpp):
# left at its default of one thread per core, PyTorch's own speed halves on 2 cores, which would
# flatter the ratio. Set before numpy and torch load OpenBLAS.
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    """Annotated for torch.jit.script: scripts/export_vit.py builds its TorchScript ViT from it."""

    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim, eps=1e-6)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = torch.nn.Linear(dim, mlp)
        self.fc2 = torch.nn.Linear(mlp, dim)

    def forward(self, h: torch.Tensor, bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        B, N, D = h.shape
        dh = D // self.heads
        qkv = self.qkv(self.ln1(h)).reshape(B, N, 3, self.heads, dh).permute(2, 0, 3, 1, 4)
        scores = qkv[0] @ qkv[1].transpose(-2, -1) / dh ** 0.5
        if bias is not None:
            scores = scores + bias
        a = torch.softmax(scores, -1)
        h = h + self.proj((a @ qkv[2]).transpose(1, 2).reshape(B, N, D))
        h = h + self.fc2(F.gelu(self.fc1(self.ln2(h))))
        return h, a


class Vit(torch.nn.Module):
    def __init__(self, size=28, channels=1, patch=7, dim=64, depth=4, heads=4, mlp=128, classes=10):
        super().__init__()
        self.size, self.channels, self.patch = size, channels, patch
        tokens = (size // patch) ** 2
        self.embed = torch.nn.Linear(channels * patch * patch, dim)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = torch.nn.Parameter(torch.zeros(1, tokens + 1, dim))
        torch.nn.init.trunc_normal_(self.cls, std=0.02)
        torch.nn.init.trunc_normal_(self.pos, std=0.02)
        self.blocks = torch.nn.ModuleList([Block(dim, heads, mlp) for _ in range(depth)])
        self.ln = torch.nn.LayerNorm(dim, eps=1e-6)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, x, keep=None):
        B = x.shape[0]
        img = x.view(B, self.channels, self.size, self.size)
        patches = F.unfold(img, kernel_size=self.patch, stride=self.patch).transpose(1, 2)
        h = torch.cat([self.cls.expand(B, -1, -1), self.embed(patches)], 1) + self.pos
        bias = None
        if keep is not None:  # a dropped patch is no key
            keys = torch.cat([torch.ones(B, 1, dtype=torch.bool), keep], 1)
            bias = torch.zeros(B, 1, 1, keys.shape[1]).masked_fill(~keys.view(B, 1, 1, -1), float("-inf"))
        for block in self.blocks:
            h, a = block(h, bias)
        h = self.ln(h)
        return self.head(h[:, 0]), a[:, :, 0, 1:].mean(1)


def js_divergence(a_logits, b_logits):
    p, q = torch.softmax(a_logits, -1), torch.softmax(b_logits, -1)
    m_log = (0.5 * (p + q)).clamp_min(1e-12).log()
    kl_pm = (p * (p.clamp_min(1e-12).log() - m_log)).sum(-1)
    kl_qm = (q * (q.clamp_min(1e-12).log() - m_log)).sum(-1)
    return (0.5 * (kl_pm + kl_qm)).mean()


def total_variation(x, size):
    img = x.view(x.shape[0], 1, size, size)
    return (img[:, :, :, 1:] - img[:, :, :, :-1]).pow(2).mean() + (img[:, :, 1:, :] - img[:, :, :-1, :]).pow(2).mean()


def invert(models, student, n, iterations, lr=0.1, tv=1e-4, js=1.0, ratio=0.3):
    size, patch = 28, 7
    g = size // patch
    x = torch.rand(n, size * size).requires_grad_(True)
    y = torch.arange(n) % 10
    adam = torch.optim.Adam([x], lr=lr)
    keep = torch.ones(n, g * g, dtype=torch.bool)
    frozen, attention = None, None
    mask_at = {iterations // 4, iterations // 2, 3 * iterations // 4}
    for it in range(iterations):
        if it in mask_at and attention is not None:
            with torch.no_grad():
                order = attention.masked_fill(~keep, float("inf")).argsort(1)
                kept = keep.sum(1)
                for b in range(n):
                    k = int(kept[b])
                    keep[b, order[b, :min(int(ratio * k), k - 1)]] = False
                frozen = x.detach().clone()
        logits, att = 0, 0
        for m in models:
            out, a = m(x, keep)
            logits, att = logits + out, att + a.detach()
        logits, attention = logits / len(models), att / len(models)
        loss = F.cross_entropy(logits, y) + tv * total_variation(x, size) - js * js_divergence(student(x, keep)[0], logits)
        adam.zero_grad()
        loss.backward()
        adam.step()
        if frozen is not None:
            with torch.no_grad():
                pixels = keep.view(n, 1, g, 1, g, 1).expand(n, 1, g, patch, g, patch).reshape(n, -1)
                x.copy_(torch.where(pixels, x, frozen))
    return x.detach()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ensemble", type=int, default=5)
    p.add_argument("--invert-images", type=int, default=256)
    p.add_argument("--iterations", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    X = torch.from_numpy(np.load(a.dir + "/X.npy").astype(np.float32))
    y = torch.from_numpy(np.load(a.dir + "/y.npy").astype(np.int64))
    n = X.shape[0]
    print("ready", flush=True)
    run = 0
    for line in sys.stdin:
        torch.manual_seed(a.seed + run)
        run += 1
        model = Vit()
        if line.strip() == "train":
            sgd = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
            t0 = time.perf_counter()
            for _ in range(a.epochs):
                order = torch.randperm(n)
                for first in range(0, n, a.batch_size):
                    idx = order[first:first + a.batch_size]
                    loss = F.cross_entropy(model(X[idx])[0], y[idx])
                    sgd.zero_grad()
                    loss.backward()
                    sgd.step()
            print("seconds %f" % (time.perf_counter() - t0), flush=True)
        elif line.strip() == "forward":
            t0 = time.perf_counter()
            with torch.no_grad():
                for first in range(0, n, 256):
                    model(X[first:first + 256])
            print("seconds %f" % (time.perf_counter() - t0), flush=True)
        elif line.strip() == "invert":
            for prm in model.parameters():
                prm.requires_grad_(False)
            ensemble = [Vit() for _ in range(a.ensemble)]
            for m in ensemble:
                for prm in m.parameters():
                    prm.requires_grad_(False)
            t0 = time.perf_counter()
            invert(ensemble, model, a.invert_images, a.iterations)
            print("seconds %f" % (time.perf_counter() - t0), flush=True)
        else:
            print("error: unknown request", flush=True)


if __name__ == "__main__":
    main()
