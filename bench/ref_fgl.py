"""Reference for bench_fgl: FGL's two networks (methods/fgl/) as a PyTorch user writes them.

The generator of `fednode train-generator --conditioning label` (torch_generator_torch.cpp): the
label's learnt embedding (32) beside z, a Linear to 2W planes of size/4, batch norm and ReLU, two
stride-2 ConvTranspose2d (kernel 4, padding 1) with batch norm and ReLU between them, a sigmoid;
its DCGAN discriminator (the label as one plane per class beside the image, two stride-2 Conv2d
with LeakyReLU 0.2 and batch norm, a Linear), both trained with Adam (lr 2e-4, betas 0.5 and
0.999) and the non-saturating loss, whole batches of --batch-size from a fresh permutation every
epoch. The receiver's CNN (cnn.h): two 3x3 convolutions (W and 2W planes, padding 1) each with
ReLU and 2x2 max-pooling, a hidden Linear with ReLU, a Linear to the classes; SGD with momentum
0.9, weight decay 5e-4, lr 0.01, batches of --batch-size.

Loads --dir/{X,y}.npy (images as rows of pixels in [0, 1]) once, prints "ready", then answers
each line on stdin: "generator" with "seconds S" for --epochs epochs of the GAN from fresh
networks, "cnn" with "seconds S" for --epochs epochs of the CNN from a fresh one (the loops
alone, data already in tensors).
"""
import argparse
import os
import sys
import time

# OpenBLAS on one thread, as fednode runs it beside LibTorch's OpenMP team (bench/ref_vit.py says why).
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np
import torch
import torch.nn.functional as F

EMBEDDING = 32


class Generator(torch.nn.Module):
    def __init__(self, classes, latent, width, size):
        super().__init__()
        self.q, self.width = size // 4, width
        self.embed = torch.nn.Embedding(classes, EMBEDDING)
        self.fc = torch.nn.Linear(latent + EMBEDDING, 2 * width * self.q * self.q)
        self.bn0 = torch.nn.BatchNorm2d(2 * width)
        self.up1 = torch.nn.ConvTranspose2d(2 * width, width, 4, stride=2, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.up2 = torch.nn.ConvTranspose2d(width, 1, 4, stride=2, padding=1)

    def forward(self, z, labels):
        h = self.fc(torch.cat([z, self.embed(labels)], 1)).view(-1, 2 * self.width, self.q, self.q)
        h = F.relu(self.bn0(h))
        h = F.relu(self.bn1(self.up1(h)))
        return torch.sigmoid(self.up2(h))


class Discriminator(torch.nn.Module):
    def __init__(self, classes, width, size):
        super().__init__()
        q = size // 4
        self.c1 = torch.nn.Conv2d(1 + classes, width, 4, stride=2, padding=1)
        self.c2 = torch.nn.Conv2d(width, 2 * width, 4, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(2 * width)
        self.out = torch.nn.Linear(2 * width * q * q, 1)

    def forward(self, x, onehot):
        planes = onehot.view(onehot.shape[0], onehot.shape[1], 1, 1).expand(-1, -1, x.shape[2], x.shape[3])
        h = F.leaky_relu(self.c1(torch.cat([x, planes], 1)), 0.2)
        h = F.leaky_relu(self.bn(self.c2(h)), 0.2)
        return self.out(h.flatten(1)).squeeze(1)


class Cnn(torch.nn.Module):
    def __init__(self, classes, width, hidden, size):
        super().__init__()
        q = size // 4
        self.c1 = torch.nn.Conv2d(1, width, 3, padding=1)
        self.c2 = torch.nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc = torch.nn.Linear(2 * width * q * q, hidden)
        self.out = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.c1(x)), 2)
        h = F.max_pool2d(F.relu(self.c2(h)), 2)
        return self.out(F.relu(self.fc(h.flatten(1))))


def train_gan(X, y, classes, epochs, batch, latent, width):
    size = X.shape[2]
    g, d = Generator(classes, latent, width, size), Discriminator(classes, width, size)
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    eye = torch.eye(classes)
    n = X.shape[0]
    for _ in range(epochs):
        order = torch.randperm(n)
        for at in range(0, n - batch + 1, batch):
            index = order[at:at + batch]
            real, labels = X[index], y[index]
            onehot = eye[labels]
            fake = g(torch.randn(batch, latent), labels)
            opt_d.zero_grad()
            real_logits, fake_logits = d(real, onehot), d(fake.detach(), onehot)
            loss_d = F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits)) + \
                F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            logits = d(fake, onehot)
            loss_g = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
            loss_g.backward()
            opt_g.step()
            loss_d.item(), loss_g.item()  # as fednode reads both losses every batch


def train_cnn(X, y, classes, epochs, batch, width, hidden):
    model = Cnn(classes, width, hidden, X.shape[2])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    n = X.shape[0]
    for _ in range(epochs):
        order = torch.randperm(n)
        for at in range(0, n, batch):
            index = order[at:at + batch]
            loss = F.cross_entropy(model(X[index]), y[index])
            opt.zero_grad()
            loss.backward()
            opt.step()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--latent", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--cnn-width", type=int, default=32)
    p.add_argument("--cnn-hidden", type=int, default=128)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    X = np.load(os.path.join(a.dir, "X.npy")).astype(np.float32)
    y = np.load(os.path.join(a.dir, "y.npy")).astype(np.int64)
    size = int(round(X.shape[1] ** 0.5))
    X = torch.from_numpy(X).view(-1, 1, size, size)
    y = torch.from_numpy(y)
    classes = int(y.max()) + 1
    print("ready", flush=True)
    for line in sys.stdin:
        request = line.strip()
        t0 = time.perf_counter()
        if request == "generator":
            train_gan(X, y, classes, a.epochs, a.batch_size, a.latent, a.width)
        elif request == "cnn":
            train_cnn(X, y, classes, a.epochs, a.batch_size, a.cnn_width, a.cnn_hidden)
        else:
            print("error: unknown request", flush=True)
            continue
        print("seconds %f" % (time.perf_counter() - t0), flush=True)


if __name__ == "__main__":
    main()
