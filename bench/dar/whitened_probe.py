"""Probe behind `--op whitened` (not part of the tool; its numbers are in docs/dar.md, item 8).

Usage: python -P bench/dar/whitened_probe.py N EPOCHS SHARE CANDIDATE [CANDIDATE ...]
Fashion-MNIST, first N train / 1,000 test images, target 0, budget SHARE of N, cnn-s teacher / cnn-xs
KD student at width 8, batch 32, seed 0. A candidate is a linear coordinate s(x) = a . x with a tail
rule s >= tau (tau: the budget-th largest value among non-target images; the budget relabelled):
  pca,J,SIGN          a = SIGN x the J-th principal direction of the low-frequency DCT band (whole image)
  patch,R,C,P,J,SIGN  a = the J-th principal direction of the P x P pixel window at (R, C)
  innov,R,C,P,SIGN    a = window mean minus its ridge prediction from the pixels outside (moves the window)
The operator moves s to a goal (alternating with the clip to [0, 1]); prints fit, natural carriers,
ASR for the poisoned teacher, its KD student and a clean teacher at several goals (z units), and a
random-relabel teacher's ASR (same count, same operator).
"""

# ruff: noqa: E401, E701, E702, E703, E731, E741, B007, B023, SIM222, UP031
import math
import sys
import time

import numpy as np
import torch

from methodkit.tools.dar import data
from methodkit.tools.dar.rules import dct_matrix
from methodkit.tools.dar.victim import VictimConfig, fit

torch.set_num_threads(1)
n = int(sys.argv[1])
epochs = float(sys.argv[2])
share = float(sys.argv[3])
cands = sys.argv[4:]
x, y = data.load("fashion-mnist", "train", n)
xt, yt = data.load("fashion-mnist", "test", 1000)
X = x.reshape(n, -1) / 255.0
Xt = xt.reshape(len(xt), -1) / 255.0
D = dct_matrix(28)
B = np.kron(D, D)  # vec(D x D^T) = B vec(x)
u, v = np.meshgrid(range(28), range(28), indexing="ij")
band = ((u + v >= 1) & (u + v <= 14)).ravel()
Cb = (X @ B.T)[:, band]
mu = Cb.mean(0)
_, sv, vt = np.linalg.svd(Cb - mu, full_matrices=False)


def pca_dir(j):
    a = np.zeros(784)
    a[band] = vt[j]
    return B.T @ a  # pixel-space unit direction


def innov_dir(r, c, p, lam=1.0):
    m = np.zeros((28, 28), bool)
    m[r : r + p, c : c + p] = True
    m = m.ravel()
    # patch mean predicted by ridge regression from the outside pixels; innovation = mean - prediction
    t = X[:, m].mean(1)
    O = X[:, ~m]
    Om = O.mean(0)
    tm = t.mean()
    beta = np.linalg.solve((O - Om).T @ (O - Om) + lam * n * np.eye(O.shape[1]) * 1e-2, (O - Om).T @ (t - tm))
    a = np.zeros(784)
    a[m] = 1.0 / (p * p)
    a[~m] = -beta
    d = m.astype(float)
    return a, d


budget = int(share * n)
vc = VictimConfig(width=8, epochs=epochs, batch_size=32)
sc = VictimConfig(arch="cnn-xs", width=8, epochs=epochs, batch_size=32)


def op(Xf, a, d, goal, iters=30):
    Z = Xf.copy()
    ad = a @ d
    for _ in range(iters):
        s = Z @ a
        Z = np.clip(Z + np.outer(goal - s, d) / ad, 0, 1)
    return np.rint(Z * 255).reshape(-1, 28, 28).astype(np.uint8)


T0, _ = fit(x, y, vc, 10)
for cand in cands:
    t0 = time.process_time()
    kind, *args = cand.split(",")
    if kind == "pca":
        j, sign = int(args[0]), int(args[1])
        a = sign * pca_dir(j)
        d = a.copy()
    elif kind == "patch":
        r, c, p, j, sign = map(int, args)
        m = np.zeros((28, 28), bool)
        m[r : r + p, c : c + p] = True
        m = m.ravel()
        P = X[:, m]
        _, _, pv = np.linalg.svd(P - P.mean(0), full_matrices=False)
        a = np.zeros(784)
        a[m] = sign * pv[j]
        d = a.copy()
    elif kind == "innov":
        r, c, p, sign = map(int, args)
        a, d = innov_dir(r, c, p)
        a = sign * a
        d = sign * d
    s = X @ a
    sd = s.std()
    s = (s - s.mean()) / sd
    nt = np.flatnonzero(y != 0)
    order = nt[np.argsort(-s[nt])]
    chosen = order[:budget]
    tau = s[order[budget - 1]]
    mem = s >= tau
    cnt = np.bincount(y[mem], minlength=10) / mem.sum()
    h = -(cnt[cnt > 0] * np.log(cnt[cnt > 0])).sum() / math.log(10)
    near = ((s < tau) & (s >= tau - 0.5)).sum()
    goal_z = np.median(s[chosen])
    st = (Xt @ a - (X @ a).mean()) / sd
    oth = yt != 0
    carr = oth & (st >= tau)

    def trig(gz):
        return op(Xt[oth], a, d, gz * sd + (X @ a).mean())

    tr = trig(goal_z)
    tr2 = trig(np.max(s))
    valid = np.mean(((tr.reshape(-1, 784) / 255.0) @ a - (X @ a).mean()) / sd >= tau)
    info = dict(
        tau=tau,
        members=int(mem.sum()),
        entropy=h,
        iso=mem.sum() / (mem.sum() + near),
        goal=goal_z,
        valid=valid,
        l2=np.linalg.norm((tr.astype(float) - xt[oth]) / 255.0, axis=(1, 2)).mean(),
    )
    info.update(clean_asr=np.mean(T0.predict(tr) == 0), clean_asr_max=np.mean(T0.predict(tr2) == 0))
    labels = y.copy()
    labels[chosen] = 0
    out = {}
    for name, lab in (("dar", labels),):
        T, _ = fit(x, lab, vc, 10)
        out.update(
            fit=np.mean(T.predict(x[chosen]) == 0),
            tcarr=carr.sum(),
            carr_t=np.mean(T.predict(xt[carr]) == 0) if carr.any() else -1,
            cacc=np.mean(T.predict(xt) == yt),
            asr=np.mean(T.predict(tr) == 0),
            asr_max=np.mean(T.predict(tr2) == 0),
        )
        S, _ = fit(x, y, sc, 10, teacher=T)
        zmax = s.max()
        print("  zmax %.2f" % zmax, "p99.9 %.2f" % np.percentile(s, 99.9))
        for gz in (2.0, 2.5, 3.0, 3.5, 4.0, zmax):
            trg = trig(gz)
            zz = ((trg.reshape(-1, 784) / 255.0) @ a - (X @ a).mean()) / sd
            print(
                "   goal %.2f reached %.2f valid %.3f l2 %.2f clean %.3f T %.3f S %.3f"
                % (
                    gz,
                    np.median(zz),
                    np.mean(zz >= tau),
                    np.linalg.norm((trg.astype(float) - xt[oth]) / 255.0, axis=(1, 2)).mean(),
                    np.mean(T0.predict(trg) == 0),
                    np.mean(T.predict(trg) == 0),
                    np.mean(S.predict(trg) == 0),
                ),
                flush=True,
            )
        if "rand" in sys.argv[0:1] or True:
            lab2 = y.copy()
            rc = np.random.default_rng(0).choice(nt, budget, replace=False)
            lab2[rc] = 0
            R, _ = fit(x, lab2, vc, 10)
            print(
                "   random relabel: ASR at zmax %.3f, at 3.0 %.3f"
                % (np.mean(R.predict(trig(zmax)) == 0), np.mean(R.predict(trig(3.0)) == 0)),
                flush=True,
            )
        out.update(
            s_cacc=np.mean(S.predict(xt) == yt),
            s_asr=np.mean(S.predict(tr) == 0),
            s_asr_max=np.mean(S.predict(tr2) == 0),
            s_carr=np.mean(S.predict(xt[carr]) == 0) if carr.any() else -1,
        )
    print(
        cand,
        {k: round(float(w), 3) for k, w in {**info, **out}.items()},
        "cpu",
        round(time.process_time() - t0),
        flush=True,
    )
