#!/usr/bin/env python3
"""FedMITR's receiver, tuned on a validation split (never the test set): the same algorithm as
methods/fedmitr/ (clients from a shared start with at least 600 SGD steps; the receiver's stages of
sparse inversion against the ensemble, pushed by the student's JS divergence, then distillation with
token relabelling), written in PyTorch so that its settings can be swept quickly. What it found is in
docs/methods/fedmitr.md ("Choosing the settings"); the numbers of record come from `fednode simulate`.

    python3 scripts/fedmitr_tune.py [--alpha 0.1] [--seed 1] [--start fedavg|init] [--loss tr|kd|pl]
        [--dense] [--stages 4] [--ipp 256] [--iters 40] [--depochs 5] [--dlr 0.01] [--work DIR]
        [--device cpu|cuda] [--fashion DIR] [--partition-from REPORT.json] [--ensemble probs|mean|samples]
        [--init torch|timm] [--teacher-temp 1] [--ema 0.5] [--augment shift,flip,mixup]
    python3 scripts/fedmitr_tune.py --write-split DIR

--write-split writes the split below as .npy files for `fednode simulate` (X.npy, y.npy: the
federation's 55 000 images and labels; Xv.npy, yv.npy: the 5 000 validation ones, to pass as
--test-features and --test-labels) and exits.

--partition-from gives the clients the class counts of a fednode report's nodes (scaled to the
federation's share of the training set), so that fednode's own partition can be tuned on the
validation split; --ensemble says how the models combine: probs (fednode's default, --ensemble
weighted-probabilities) mixes their softmax probabilities weighted by their images, mean (the
paper's) averages their logits, samples weighs their logits by their images.

On a GPU (--device cuda) the paper's budget (100 iterations, thousands of images) takes minutes
where the 2-core machine needs hours; the numbers differ from a CPU run's in float rounding only.

The split: Debian's Fashion-MNIST training set, permuted by numpy's default_rng(0); the first 5 000
are the validation images, the other 55 000 the federation's. The ten clients' models are trained
once per alpha and seed and kept in --work; each run appends one JSON line to --work/results.jsonl.
--augment distils on random views of the synthetic images (fednode's --distill-views: shifts of up
to 2 pixels, mirror images; mixup too), the ensemble asked on each view for its targets and its 7
most attended tokens. Each stage prints the student's validation accuracy and, read beside it (never trained), that of the
mean of the students after stages 1..k and of their EMA (--ema, the decay).
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # beside PyTorch's own threads (methods/fedmitr/vit.cpp)

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from ref_vit import Vit, js_divergence, total_variation  # noqa: E402


def split(fashion):
    def idx(name, offset):
        return np.frombuffer(gzip.open(os.path.join(fashion, name)).read(), np.uint8, offset=offset)
    X = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255
    y = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    p = np.random.default_rng(0).permutation(len(y))
    return (torch.from_numpy(X[p[5000:]]), torch.from_numpy(y[p[5000:]]),
            torch.from_numpy(X[p[:5000]]), torch.from_numpy(y[p[:5000]]))


p = argparse.ArgumentParser()
p.add_argument('--alpha', type=float, default=0.1); p.add_argument('--seed', type=int, default=1)
p.add_argument('--threads', type=int, default=1)
p.add_argument('--start', default='fedavg')  # fedavg | init
p.add_argument('--loss', default='tr')  # tr | kd | pl
p.add_argument('--dense', action='store_true')
p.add_argument('--stages', type=int, default=4); p.add_argument('--ipp', type=int, default=256)
p.add_argument('--iters', type=int, default=50); p.add_argument('--inv-lr', type=float, default=0.1)
p.add_argument('--js', type=float, default=1.0)
p.add_argument('--depochs', type=int, default=5); p.add_argument('--dlr', type=float, default=0.01)
p.add_argument('--work', default='/tmp/fedmitr_tune')
p.add_argument('--device', default='cpu')
p.add_argument('--fashion', default='/usr/share/datasets/fashion-mnist/')
p.add_argument('--partition-from', default='')  # a fednode report: its nodes' class counts, drawn from the split
p.add_argument('--init', default='torch')  # torch: PyTorch's defaults; timm: every weight N(0, 0.02) cut at 2 sd, as fednode's vit_init
p.add_argument('--ensemble', default='probs')  # probs: their probabilities weighted by images (fednode's); mean: logits averaged; samples: logits weighted
p.add_argument('--write-split', default='')
p.add_argument('--teacher-temp', type=float, default=1.0)  # the ensemble's targets divided by it before distillation (< 1 sharpens)
p.add_argument('--ema', type=float, default=0.5)  # the decay of the students' EMA (read beside the curve)
p.add_argument('--augment', default='')  # e.g. shift,flip,mixup: distil on random views, the teacher asked on each view
a = p.parse_args()
torch.set_num_threads(a.threads)
X, y, Xv, yv = split(a.fashion)
if a.write_split:
    os.makedirs(a.write_split, exist_ok=True)
    for name, t in (('X', X), ('y', y), ('Xv', Xv), ('yv', yv)):
        np.save(os.path.join(a.write_split, name + '.npy'), t.numpy())
    sys.exit(0)
os.makedirs(a.work, exist_ok=True)
torch.manual_seed(0); init = Vit()  # on the CPU's generator, as on a CPU run
if a.init == 'timm':
    for mod in init.modules():
        if isinstance(mod, torch.nn.Linear):
            torch.nn.init.trunc_normal_(mod.weight, std=0.02, a=-0.04, b=0.04); torch.nn.init.zeros_(mod.bias)
init = init.to(a.device)
# Every tensor made from here on lives on the device; seeded draws come from CPU generators and move.
if a.device != 'cpu':
    torch.set_default_device(a.device)  # PyTorch 2 (a GPU machine's); Debian's 1.13 runs on the CPU
X, y, Xv, yv = X.to(a.device), y.to(a.device), Xv.to(a.device), yv.to(a.device)
N, C = 10, 10
def acc(m):
    with torch.no_grad(): return (m(Xv)[0].argmax(1) == yv).float().mean().item()
tag = ('_' + os.path.basename(a.partition_from).replace('.json', '') if a.partition_from else '') + \
    ('_timm' if a.init == 'timm' else '')
cache = os.path.join(a.work, f'clients_a{a.alpha}_s{a.seed}{tag}.pt')
if not os.path.exists(cache):
    rng = np.random.default_rng(a.seed); idx = [[] for _ in range(N)]
    # fednode's own partition (its report's class counts, scaled to the federation's share of the
    # training set), or numpy's Dirichlet draw.
    want = [n['class_counts'] for n in json.load(open(a.partition_from))['nodes']] if a.partition_from else None
    for c in range(C):
        ids = np.where(y.cpu().numpy() == c)[0]; rng.shuffle(ids)
        if want:
            need = [w[c] for w in want]; scale = min(1.0, len(ids) / max(sum(need), 1)); at = 0
            for k in range(N):
                take = int(round(need[k] * scale)); idx[k] += ids[at:at + take].tolist(); at += take
            continue
        pr = rng.dirichlet([a.alpha] * N); cuts = (np.cumsum(pr) * len(ids)).astype(int)[:-1]
        for k, part in enumerate(np.split(ids, cuts)): idx[k] += part.tolist()
    sds, counts = [], []
    for k in range(N):
        m = Vit(); m.load_state_dict(init.state_dict()); ii = torch.tensor(idx[k]); n = len(ii)
        steps = math.ceil(n / 64); epochs = max(3, math.ceil(600 / max(steps, 1)))
        sgd = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        for e in range(epochs):
            perm = ii[torch.randperm(n, device='cpu').to(a.device)]
            for f in range(0, n, 64):
                b = perm[f:f+64]; loss = F.cross_entropy(m(X[b])[0], y[b]); sgd.zero_grad(); loss.backward(); sgd.step()
        print(f'client {k}: n={n} epochs={epochs} acc={acc(m):.3f}', flush=True)
        sds.append(m.state_dict()); counts.append(n)
    torch.save({'sds': sds, 'counts': counts, 'init': init.state_dict()}, cache)
d = torch.load(cache, map_location=a.device); init.load_state_dict(d['init'])
models = []
for sd in d['sds']:
    m = Vit(); m.load_state_dict(sd); m.requires_grad_(False); models.append(m)
counts = d['counts']; tot = sum(counts)
fedavg = Vit(); fedavg.load_state_dict({k: sum(sd[k] * c for sd, c in zip(d['sds'], counts)) / tot for k in d['init']})
weights = (torch.tensor([float(c) for c in counts]) / tot if a.ensemble in ('samples', 'probs')
           else torch.full((len(models),), 1.0 / len(models)))
def ensemble_logits(outputs):  # [M, B, C] -> [B, C]; with probs, log of the models' weighted mixture
    if a.ensemble == 'probs':
        return torch.logsumexp(outputs.log_softmax(2) + weights.log().view(-1, 1, 1), 0)
    return (weights.view(-1, 1, 1) * outputs).sum(0)
with torch.no_grad():
    Lv = torch.stack([m(Xv)[0] for m in models])
    for k in range(len(models)):  # how large a model's logits are, and how much they depend on the image
        print(f'client {k}: n={counts[k]} acc={(Lv[k].argmax(1) == yv).float().mean().item():.3f} '
              f'max-logit {Lv[k].max(1).values.mean().item():.1f} spread {Lv[k].std(0).mean().item():.2f}', flush=True)
    ens = (ensemble_logits(Lv).argmax(1) == yv).float().mean().item()
    mean = (Lv.mean(0).argmax(1) == yv).float().mean().item()
print(f'fedavg {acc(fedavg):.3f} ensemble ({a.ensemble}) {ens:.3f} (mean of logits {mean:.3f}) init {acc(init):.3f}', flush=True)

def full(m, x):  # class and token logits
    B = x.shape[0]; img = x.view(B, 1, 28, 28)
    patches = F.unfold(img, kernel_size=7, stride=7).transpose(1, 2)
    h = torch.cat([m.cls.expand(B, -1, -1), m.embed(patches)], 1) + m.pos
    for blk in m.blocks: h, _ = blk(h)
    s = m.head(m.ln(h)); return s[:, 0], s[:, 1:]

def invert(student, targets, iters, dense, gen):
    n = len(targets); g = 4
    x = torch.rand(n, 784, generator=gen, device='cpu').to(a.device).requires_grad_(True); adam = torch.optim.Adam([x], lr=a.inv_lr)
    keep = torch.ones(n, 16, dtype=torch.bool); frozen = att = None
    mask_at = set() if dense else {iters // 4, iters // 2, 3 * iters // 4}
    for it in range(iters):
        if it in mask_at and att is not None:
            with torch.no_grad():
                order = att.masked_fill(~keep, float('inf')).argsort(1); k = int(keep[0].sum())
                keep.scatter_(1, order[:, :min(int(0.3 * k), k - 1)], False)
                frozen = x.detach().clone()
        outs, att = [], 0
        for i, m in enumerate(models):
            o, aa = m(x, keep); outs.append(o); att = att + weights[i] * aa.detach()
        lg = ensemble_logits(torch.stack(outs))
        loss = F.cross_entropy(lg, targets) + 1e-4 * total_variation(x, 28)
        if a.js > 0: loss = loss - a.js * js_divergence(student(x, keep)[0], lg)
        adam.zero_grad(); loss.backward(); adam.step()
        if frozen is not None:
            with torch.no_grad():
                px = keep.view(n, 1, g, 1, g, 1).expand(n, 1, g, 7, g, 7).reshape(n, -1); x.copy_(torch.where(px, x, frozen))
    return x.detach(), keep

def dloss(student, xb, teacher, pseudo, high):
    cl, tok = full(student, xb)
    if a.loss == 'pl': return F.cross_entropy(cl, pseudo)
    kd = F.kl_div(F.log_softmax(cl, -1), F.softmax(teacher, -1), reduction='batchmean')
    if a.loss == 'kd': return kd
    lp = F.log_softmax(tok, -1); B, T, _ = lp.shape
    ce = -lp.gather(2, pseudo.view(B, 1, 1).expand(B, T, 1)).squeeze(2)
    pt = F.softmax(teacher, -1).unsqueeze(1); kl = (pt * (pt.clamp_min(1e-12).log() - lp)).sum(-1)
    hi = high.float(); lo = 1 - hi
    return kd + 0.5 * (ce * hi).sum() / hi.sum().clamp_min(1) + 0.5 * (kl * lo).sum() / lo.sum().clamp_min(1)

AUG = set(filter(None, a.augment.split(',')))
def view(xb, gen):
    # A random view of synthetic images, so that a few hundred of them teach more than their own
    # pixels: shifts of up to 2 pixels, mirror images, mixtures of two images.
    B = xb.shape[0]; img = xb.view(B, 1, 28, 28)
    if 'shift' in AUG:
        padded = F.pad(img, (2, 2, 2, 2)); dx, dy = torch.randint(0, 5, (2, B), generator=gen, device='cpu').tolist()
        img = torch.stack([padded[i, :, dy[i]:dy[i] + 28, dx[i]:dx[i] + 28] for i in range(B)])
    if 'flip' in AUG:
        flip = (torch.rand(B, generator=gen, device='cpu') < 0.5).to(a.device).view(B, 1, 1, 1)
        img = torch.where(flip, img.flip(3), img)
    x = img.reshape(B, 784)
    if 'mixup' in AUG:
        lam = torch.distributions.Beta(1.0, 1.0).sample((B, 1)).to(a.device)
        x = lam * x + (1 - lam) * x[torch.randperm(B, generator=gen, device='cpu').to(a.device)]
    return x

def teach(xb):
    # The ensemble's targets on a view: class scores, pseudo-label, and the 7 tokens its CLS attends most.
    with torch.no_grad():
        outs, att = [], 0
        for i, m in enumerate(models):
            o, aa = m(xb); outs.append(o); att = att + weights[i] * aa
        te = ensemble_logits(torch.stack(outs)) / a.teacher_temp
        high = torch.zeros_like(att, dtype=torch.bool).scatter_(1, att.topk(7, 1).indices, True)
    return te, te.argmax(1), high

student = Vit(); student.load_state_dict((fedavg if a.start == 'fedavg' else init).state_dict())
gen = torch.Generator(device='cpu').manual_seed(a.seed * 1000 + 7)
pool, T_, P_, H_ = [], [], [], []
t0 = time.time(); rows = []
# Beside the student itself, the mean of its weights after stages 1..k and their EMA (LayerNorm
# only, so an average needs no recalibration): whether averaging steadies the student's swings. They
# are read, never trained, so the student's own curve is the same as without them.
averaged, ema = {}, {}
rows_avg, rows_ema = [], []
shadow = Vit()
def acc_of(sd):
    shadow.load_state_dict(sd); return acc(shadow)
for st in range(a.stages):
    off = int(torch.randint(0, C, (1,), generator=gen, device='cpu')); targets = (torch.arange(a.ipp) + off) % C
    student.eval(); student.requires_grad_(False)
    t1 = time.time(); xs, keep = invert(student, targets, a.iters, a.dense, gen); ti = time.time() - t1
    with torch.no_grad(): te = ensemble_logits(torch.stack([m(xs)[0] for m in models])) / a.teacher_temp
    pool.append(xs); T_.append(te); P_.append(te.argmax(1)); H_.append(keep)
    Xp, Tp, Pp, Hp = torch.cat(pool), torch.cat(T_), torch.cat(P_), torch.cat(H_)
    match = (Pp[-a.ipp:] == targets).float().mean().item()
    student.requires_grad_(True); sgd = torch.optim.SGD(student.parameters(), lr=a.dlr, momentum=0.9, weight_decay=1e-4)
    t2 = time.time()
    for e in range(a.depochs):
        perm = torch.randperm(len(Xp), generator=gen, device='cpu').to(a.device)
        for f in range(0, len(Xp), 64):
            b = perm[f:f+64]
            if AUG:
                xb = view(Xp[b], gen); l = dloss(student, xb, *teach(xb))
            else:
                l = dloss(student, Xp[b], Tp[b], Pp[b], Hp[b])
            sgd.zero_grad(); l.backward(); sgd.step()
    r = acc(student); rows.append(r)
    with torch.no_grad():
        for k, v in student.state_dict().items():
            averaged[k] = v.clone() if st == 0 else (averaged[k] * st + v) / (st + 1)
            ema[k] = v.clone() if st == 0 else a.ema * ema[k] + (1 - a.ema) * v
    rows_avg.append(acc_of(averaged)); rows_ema.append(acc_of(ema))
    print(f'stage {st+1}: inv {ti:.0f}s distil {time.time()-t2:.0f}s target-match {match:.2f} val {r:.3f} '
          f'averaged {rows_avg[-1]:.3f} ema {rows_ema[-1]:.3f}', flush=True)
res = dict(vars(a)); res.update(final=rows[-1] if rows else None, curve=rows, curve_averaged=rows_avg, curve_ema=rows_ema,
                                seconds=time.time() - t0)
print('RESULT', json.dumps(res), flush=True)
with open(os.path.join(a.work, 'results.jsonl'), 'a') as f: f.write(json.dumps(res) + '\n')
