"""Reference for bench_head: a head as a PyTorch user trains it, with fednode's recipe.

--head linear: nn.Linear(d, C) on standardised features (per-column mean and population standard
deviation of the training set, computed once up front, in the reference's favour), Adam.
--head adapter: FedTC's adapter, FC(d, 1024) - ReLU - normalize, FC(1024, 512) - ReLU - normalize,
FC(512, C), on the features divided by their RMS value (one number, as fednode's scale_inputs; also
computed once up front), SGD with momentum 0.9.
Both: softmax cross-entropy, the given lr, batches of --batch-size rows drawn from a fresh
permutation every epoch, the batch loss read back every step (fednode reports the epoch's mean
loss as well).

Loads --dir/{train,test}_{X,y}.npy once, prints "ready", then answers each "run" line on stdin
with "seconds S cpu C accuracy A": wall and process CPU seconds of the training loop alone and
the test accuracy of the trained head. Each run starts from torch.manual_seed(--seed + run).
"""
import argparse
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


class Adapter(torch.nn.Module):
    def __init__(self, d, C):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, 1024)
        self.fc2 = torch.nn.Linear(1024, 512)
        self.fc3 = torch.nn.Linear(512, C)

    def forward(self, x):
        h = F.normalize(F.relu(self.fc1(x)), p=2, dim=1, eps=1e-12)
        h = F.normalize(F.relu(self.fc2(h)), p=2, dim=1, eps=1e-12)
        return self.fc3(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--head", choices=["linear", "adapter"], default="linear")
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    X = torch.from_numpy(np.load(f"{a.dir}/train_X.npy"))
    y = torch.from_numpy(np.load(f"{a.dir}/train_y.npy").astype(np.int64))
    Xt = torch.from_numpy(np.load(f"{a.dir}/test_X.npy"))
    yt = torch.from_numpy(np.load(f"{a.dir}/test_y.npy").astype(np.int64))
    n, d = X.shape
    C = int(max(y.max(), yt.max())) + 1
    mean = X.double().mean(0)
    std = X.double().std(0, unbiased=False)
    std[std <= 1e-12 * torch.clamp(mean.abs(), min=std.max().item())] = 1.0
    if a.head == "linear":
        Xs = ((X.double() - mean) / std).float()
        Xts = ((Xt.double() - mean) / std).float()
    else:
        rms = X.double().pow(2).mean().sqrt().item()
        rms = rms if rms > 0 else 1.0
        Xs, Xts = (X.double() / rms).float(), (Xt.double() / rms).float()
    print("ready", flush=True)

    runs = 0
    for line in sys.stdin:
        if line.strip() != "run":
            print(f"unknown request {line.strip()!r}", flush=True)
            continue
        torch.manual_seed(a.seed + runs)
        runs += 1
        if a.head == "linear":
            head = torch.nn.Linear(d, C)
            opt = torch.optim.Adam(head.parameters(), lr=a.lr)
        else:
            head = Adapter(d, C)
            opt = torch.optim.SGD(head.parameters(), lr=a.lr, momentum=0.9)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.epochs):
            perm = torch.randperm(n)
            total = 0.0
            for start in range(0, n, a.batch_size):
                idx = perm[start:start + a.batch_size]
                loss = torch.nn.functional.cross_entropy(head(Xs[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        with torch.no_grad():
            accuracy = (head(Xts).argmax(1) == yt).double().mean().item()
        print(f"seconds {seconds:.6f} cpu {cpu:.6f} accuracy {accuracy:.6f}", flush=True)


if __name__ == "__main__":
    main()
