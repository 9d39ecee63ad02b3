"""PSN-IRT: the neural pseudo-Siamese estimator (Zhou et al. 2025, "Lost in Benchmarks?").

Model tower one-hot(n) -> Linear(N, 64) -> ReLU -> Linear(64, 1) = theta_n; item tower
one-hot(j) -> Linear(J, 64) -> ReLU -> Linear(64, m) = (b, a, logit c); P = c + (1 - c)
sigma(a (theta - b)) (the reference's 4PL upper asymptote d is left out, as the study uses
three models). A one-hot Linear is written as nn.Embedding plus a bias (the same function,
O(1) per lookup). BCE on observed cells, Adam lr 3e-3, weight decay 1e-4, batch 512, at most
50 epochs, early stopping with patience 4 on a 20% random validation split of the cells. The
reference monitors validation F1; we monitor validation BCE (a proper score, smooth in the
parameters). As in the reference, a is unconstrained; `positive_a` passes it through softplus.
An unconstrained a leaves the direction of the scale unidentified (a, b, theta -> -a, -b, -theta
gives the same P), so the fit is reflected when mean a < 0: mean a > 0, as the other estimators
(whose a > 0 by construction) report. Items whose a still comes out negative are counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.irt.models import MODEL_CODE
from methodkit.tools.irt.result import Clock, Estimate, torch_threads_for
from methodkit.tools.irt.vi import cells


@dataclass
class PSNSettings:
    hidden: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-4
    batch: int = 512
    epochs: int = 50
    patience: int = 4
    val_frac: float = 0.2
    positive_a: bool = False
    device: str = "cpu"

    def check(self) -> None:
        if not 0 < self.val_frac < 1:
            raise UsageError("--val-frac must be in (0, 1)")
        if self.epochs < 1 or self.batch < 1:
            raise UsageError("--epochs and --batch must be at least 1")


def _towers(torch, N, J, m, hidden):
    nn = torch.nn

    class Tower(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.first = nn.Embedding(n_in, hidden)  # = Linear(n_in, hidden) on one-hot input (weights)
            self.bias = nn.Parameter(torch.zeros(hidden))  # ... and its bias
            self.out = nn.Linear(hidden, n_out)
            bound = 1.0 / n_in**0.5  # Linear(n_in, .)'s default init range
            nn.init.uniform_(self.first.weight, -bound, bound)
            nn.init.uniform_(self.bias, -bound, bound)

        def forward(self, idx):
            return self.out(torch.relu(self.first(idx) + self.bias))

    return Tower(N, 1), Tower(J, m)


def _fit(Y: np.ndarray, model: str, settings: PSNSettings, *, seed=0, time_limit=None, callback=None) -> Estimate:
    import torch

    settings.check()
    clock = Clock(time_limit)
    code = MODEL_CODE[model]
    seed_int = int(seed) if isinstance(seed, int) else int(seed.generate_state(1)[0])
    torch.manual_seed(seed_int)
    rng = np.random.default_rng(seed_int)
    dev = torch.device(settings.device)
    N, J = Y.shape
    rows, cols, ys = cells(Y)
    order = rng.permutation(len(ys))
    n_val = max(1, int(round(settings.val_frac * len(ys))))
    val, train = order[:n_val], order[n_val:]
    to = lambda v: torch.from_numpy(v).to(dev)  # noqa: E731
    tr = (to(rows[train]), to(cols[train]), to(ys[train]))
    va = (to(rows[val]), to(cols[val]), to(ys[val]))
    m = {1: 1, 2: 2, 3: 3}[code]
    model_tower, item_tower = _towers(torch, N, J, m, settings.hidden)
    model_tower.to(dev)
    item_tower.to(dev)
    opt = torch.optim.Adam(
        [*model_tower.parameters(), *item_tower.parameters()], lr=settings.lr, weight_decay=settings.weight_decay
    )

    def item_params(out):
        b = out[:, 0]
        a = out[:, 1] if code > 1 else torch.ones_like(b)
        if code > 1 and settings.positive_a:
            a = torch.nn.functional.softplus(a)
        c = torch.sigmoid(out[:, 2]) if code == 3 else torch.zeros_like(b)
        return a, b, c

    def log_prob(r, c_, y):
        theta = model_tower(r)[:, 0]
        a, b, cc = item_params(item_tower(c_))
        z = a * (theta - b)
        if code < 3:
            return torch.nn.functional.binary_cross_entropy_with_logits(z, y)
        p = (cc + (1 - cc) * torch.sigmoid(z)).clamp(1e-6, 1 - 1e-6)
        return torch.nn.functional.binary_cross_entropy(p, y)

    gen = torch.Generator().manual_seed(seed_int)
    best, best_state, bad, status, epoch = float("inf"), None, 0, "ok", 0
    history = []
    n_train = len(train)
    stop = False
    for epoch in range(1, settings.epochs + 1):
        model_tower.train()
        item_tower.train()
        perm = torch.randperm(n_train, generator=gen).to(dev)
        for start in range(0, n_train, settings.batch):
            idx = perm[start : start + settings.batch]
            opt.zero_grad()
            loss = log_prob(tr[0][idx], tr[1][idx], tr[2][idx])
            if not torch.isfinite(loss):
                status, stop = "diverged", True
                break
            loss.backward()
            opt.step()
            if clock.expired():
                status, stop = "timeout", True
                break
        with torch.no_grad():
            val_loss = float(log_prob(*va))
        history.append(val_loss)
        if np.isfinite(val_loss) and val_loss < best - 1e-6:
            best, bad = val_loss, 0
            best_state = (
                {k: v.clone() for k, v in model_tower.state_dict().items()},
                {k: v.clone() for k, v in item_tower.state_dict().items()},
            )
        else:
            bad += 1
        if callback is not None:
            callback("psn", epoch, settings.epochs)
        if stop or bad >= settings.patience:
            break
    if best_state is not None:
        model_tower.load_state_dict(best_state[0])
        item_tower.load_state_dict(best_state[1])
    with torch.no_grad():
        theta = model_tower(torch.arange(N, device=dev))[:, 0].cpu().numpy().astype(np.float64)
        a, b, c = (t.cpu().numpy().astype(np.float64) for t in item_params(item_tower(torch.arange(J, device=dev))))
    reflected = identify_sign(a, b, theta) if code > 1 else False
    est = Estimate(a=a, b=b, c=c, theta=theta)
    est.info = {
        "sign_reflected": reflected,
        "n_negative_a": int((a < 0).sum()),
        "n_iter": epoch,
        "converged": status == "ok" and bad >= settings.patience,
        "convergence": {"early_stopped": bad >= settings.patience, "epochs": epoch, "max_epochs": settings.epochs},
        "status": status,
        "val_loss": best if np.isfinite(best) else None,
        "trace": {
            "first": history[0] if history else None,
            "last": history[-1] if history else None,
            "n": len(history),
        },
        "settings": asdict(settings),
    }
    return est


def identify_sign(a: np.ndarray, b: np.ndarray, theta: np.ndarray) -> bool:
    """Reflect (a, b, theta) in place when mean a < 0 (the likelihood is unchanged); True if it did."""
    if float(np.mean(a)) >= 0:
        return False
    for values in (a, b, theta):
        np.negative(values, out=values)
    return True


def fit(Y: np.ndarray, model: str, settings: PSNSettings, *, seed=0, time_limit=None, callback=None) -> Estimate:
    """Fit `model` to the N x J uint8 matrix Y (255 = missing)."""
    with torch_threads_for(int((Y != 255).sum())):
        return _fit(Y, model, settings, seed=seed, time_limit=time_limit, callback=callback)
