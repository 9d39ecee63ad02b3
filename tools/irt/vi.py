"""Mean-field variational inference, py-irt style (the estimator behind tinyBenchmarks forks).

q = product of Gaussians over theta_n, b_j, log a_j (and logit c_j for the 3PL); positive a
through the log-normal (the py-irt PR #95 fix, kept; the point estimate is exp(loc), the
log-normal median, as PR #95 exports it). Reparameterised ELBO with one Monte Carlo sample per
step, Adam lr 0.1 with a x0.9999 per-step decay, 2000 full-batch steps; the last step's
parameters are reported (py-irt saves `last_params`).
Priors: `hierarchical` as py-irt's model_hierarchical: x ~ N(mu, 1/u) (the scale is 1/precision,
as in py-irt) with mu ~ N(0, 1e6) and u ~ Gamma(1, 1) for each of theta, b, log a; the guide
holds q(mu) = N(m, s) (s starts at 10) and q(u) = Gamma(alpha, beta) (both start at 1), and
its hyper terms enter the ELBO as one Monte Carlo sample of log p - log q (Trace_ELBO). The
Gaussian latents start at loc 0 and scale 1 (py-irt's guide; no initializer by default); for
them the analytic entropy has exactly the reparameterised gradient of Trace_ELBO's -log q.
`vague`: theta ~ N(0, 1) fixes the scale, b and log a ~ N(0, 1e3^2) (py-irt's "vague" uses
N(0, 0.1^2), which is not vague; we keep a truly vague prior and say so).
c ~ Beta(5, 17) on the logit scale. Above 5e6 observed cells the steps use cell minibatches with
the likelihood scaled by cells / batch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.irt.models import MODEL_CODE
from methodkit.tools.irt.result import Clock, Estimate, torch_threads_for

VI_PRIORS = ("hierarchical", "vague")
MINIBATCH_ABOVE = 5_000_000


@dataclass
class VISettings:
    prior: str = "hierarchical"
    steps: int = 2000
    lr: float = 0.1
    decay: float = 0.9999
    batch_cells: int = 1_000_000
    c_prior: tuple[float, float] = (5.0, 17.0)
    elbo_rtol: float = 0.01  # converged: the mean ELBO of the last two windows differs by less than this
    elbo_window: int = 100
    device: str = "cpu"

    def check(self) -> None:
        if self.prior not in VI_PRIORS:
            raise UsageError(f"--vi-prior must be one of {', '.join(VI_PRIORS)}")
        if self.steps < 1:
            raise UsageError("--epochs must be at least 1")


def cells(Y: np.ndarray):
    """Observed cells as (row, col, y) index arrays."""
    rows, cols = np.nonzero(Y != 255)
    return rows.astype(np.int64), cols.astype(np.int64), Y[rows, cols].astype(np.float32)


def _normal_logpdf(torch, x, mu, sd):
    return -0.5 * ((x - mu) / sd) ** 2 - torch.log(sd) - 0.5 * math.log(2 * math.pi)


def hierarchical_logprior(torch, groups, mu, u):
    """log p of py-irt's model_hierarchical: x_k ~ N(mu_k, 1/u_k), mu_k ~ N(0, 1e6), u_k ~ Gamma(1, 1)."""
    total = sum(_normal_logpdf(torch, x, mu[i], 1.0 / u[i]).sum() for i, x in enumerate(groups))
    total = total + _normal_logpdf(torch, mu, torch.zeros_like(mu), torch.full_like(mu, 1e6)).sum()
    return total - u.sum()  # Gamma(1, 1): log density -u


def _fit(Y: np.ndarray, model: str, settings: VISettings, *, seed=0, time_limit=None, callback=None) -> Estimate:
    import torch

    settings.check()
    clock = Clock(time_limit)
    code = MODEL_CODE[model]
    seed_int = int(seed) if isinstance(seed, int) else int(seed.generate_state(1)[0])
    torch.manual_seed(seed_int)
    dev = torch.device(settings.device)
    N, J = Y.shape
    r, c_, y = cells(Y)
    rows, cols, ys = (torch.from_numpy(v).to(dev) for v in (r, c_, y))
    n_cells = len(ys)
    batch = n_cells if n_cells <= MINIBATCH_ABOVE else min(settings.batch_cells, n_cells)
    scale = n_cells / batch
    f32 = dict(dtype=torch.float32, device=dev)

    # variational parameters: one location and one log-sd vector over all latents (few tensors = fast Adam)
    groups = {"theta": N, "b": J}
    if code > 1:
        groups["la"] = J
    if code == 3:
        groups["lc"] = J
    offsets, total = {}, 0
    for k, n in groups.items():
        offsets[k] = slice(total, total + n)
        total += n
    init = np.zeros(total, np.float32)  # py-irt's guide: every loc at 0, every scale at 1
    if code == 3:
        init[offsets["lc"]] = math.log(0.2 / 0.8)
    loc = torch.from_numpy(init).to(dev).requires_grad_(True)
    log_sd = torch.zeros(total, **f32).requires_grad_(True)
    hier = [k for k in ("theta", "b", "la") if k in groups]
    # hierarchical guide per latent group: q(mu) = N(m, s), q(u) = Gamma(alpha, beta), kept as
    # (m, log s, log alpha, log beta) with py-irt's starting values (0, 10, 1, 1)
    hyper = torch.tensor([0.0, math.log(10.0), 0.0, 0.0] * len(hier), **f32).requires_grad_(True)
    params = [loc, log_sd] + ([hyper] if settings.prior == "hierarchical" else [])
    opt = torch.optim.Adam(params, lr=settings.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=settings.decay)
    gen = torch.Generator(device=dev).manual_seed(seed_int)
    al, be = settings.c_prior
    trace, status, last_good = [], "ok", None
    step = 0
    zero = torch.zeros(1, **f32)
    vague = {"theta": 1.0, "b": 1e3, "la": 1e3}
    for step in range(1, settings.steps + 1):
        opt.zero_grad()
        draw = loc + torch.exp(log_sd) * torch.randn(total, generator=gen, **f32)
        sample = {k: draw[offsets[k]] for k in groups}
        if batch < n_cells:
            pick = torch.randint(0, n_cells, (batch,), generator=gen, device=dev)
            br, bc, by = rows[pick], cols[pick], ys[pick]
        else:
            br, bc, by = rows, cols, ys
        a = torch.exp(sample["la"][bc]) if code > 1 else 1.0
        z = a * (sample["theta"][br] - sample["b"][bc])
        if code == 3:
            cc = torch.sigmoid(sample["lc"][bc])
            prob = (cc + (1 - cc) * torch.sigmoid(z)).clamp(1e-6, 1 - 1e-6)
            loglik = (by * torch.log(prob) + (1 - by) * torch.log1p(-prob)).sum()
        else:
            loglik = -torch.nn.functional.binary_cross_entropy_with_logits(z, by, reduction="sum")
        logprior = torch.zeros((), **f32)
        entropy = log_sd.sum()
        if settings.prior == "hierarchical":
            h = hyper.view(len(hier), 4)
            q_mu = torch.distributions.Normal(h[:, 0], torch.exp(h[:, 1]))
            q_u = torch.distributions.Gamma(torch.exp(h[:, 2]), torch.exp(h[:, 3]))
            mu, u = q_mu.rsample(), q_u.rsample().clamp_min(1e-30)
            logprior = logprior + hierarchical_logprior(torch, [sample[k] for k in hier], mu, u)
            entropy = entropy - q_mu.log_prob(mu).sum() - q_u.log_prob(u).sum()  # Trace_ELBO's MC -log q
        else:
            for k in hier:
                logprior = logprior + _normal_logpdf(torch, sample[k], zero, torch.full((1,), vague[k], **f32)).sum()
        if code == 3:
            logprior = (
                logprior
                + (
                    al * torch.nn.functional.logsigmoid(sample["lc"])
                    + be * torch.nn.functional.logsigmoid(-sample["lc"])
                ).sum()
            )
        elbo = scale * loglik + logprior + entropy
        loss = -elbo
        if not torch.isfinite(loss):
            status = "diverged"
            break
        loss.backward()
        opt.step()
        sched.step()
        trace.append(float(elbo.detach()))
        last_good = (loc.detach().clone(), log_sd.detach().clone())
        if callback is not None and step % 100 == 0:
            callback("vi", step, settings.steps)
        if clock.expired():
            status = "timeout"
            break
    if last_good is None:
        last_good = (loc.detach().clone(), log_sd.detach().clone())
    m_all, s_all = (t.cpu().numpy().astype(np.float64) for t in last_good)
    post = {k: (m_all[offsets[k]], np.exp(s_all[offsets[k]])) for k in groups}
    return _summarise(post, code, J, trace, status, step, settings)


def elbo_change(trace: list[float], window: int) -> float | None:
    """|m2 - m1| / |m2| for the mean ELBO m1, m2 of the last two windows of steps (None when shorter).

    Stan ADVI's criterion (tol_rel_obj 0.01, the ELBO every 100 iterations), on window means because one
    Monte Carlo sample per step makes a single step's ELBO too noisy to compare. The steps still run to
    the end (py-irt's fixed schedule); this only says whether they were enough.
    """
    if len(trace) < 2 * window:
        return None
    last, before = float(np.mean(trace[-window:])), float(np.mean(trace[-2 * window : -window]))
    return abs(last - before) / max(abs(last), 1e-300)


def _summarise(post, code, J, trace, status, step, settings) -> Estimate:
    z = 1.959963984540054
    tm, ts = post["theta"]
    bm, bs = post["b"]
    est = Estimate(
        a=np.ones(J), b=bm, c=np.zeros(J), theta=tm, theta_sd=ts, b_sd=bs, b_low=bm - z * bs, b_high=bm + z * bs
    )
    if code > 1:
        m, s = post["la"]
        est.a = np.exp(m)  # log-normal median, what py-irt (PR #95) exports
        est.a_sd = np.sqrt((np.exp(s**2) - 1) * np.exp(2 * m + s**2))
        est.a_low, est.a_high = np.exp(m - z * s), np.exp(m + z * s)
    if code == 3:
        m, s = post["lc"]
        x, w = np.polynomial.hermite_e.hermegauss(20)
        w = w / w.sum()
        cs = 1 / (1 + np.exp(-(m[:, None] + s[:, None] * x[None, :])))
        est.c = cs @ w
        est.c_sd = np.sqrt(np.maximum((cs**2) @ w - est.c**2, 0))
        est.c_low, est.c_high = 1 / (1 + np.exp(-(m - z * s))), 1 / (1 + np.exp(-(m + z * s)))
    tail = trace[-100:] if trace else [float("nan")]
    change = elbo_change(trace, settings.elbo_window)
    est.info = {
        "n_iter": step,
        "converged": bool(status == "ok" and change is not None and change < settings.elbo_rtol),
        "convergence": {"elbo_rel_change": change, "elbo_rtol": settings.elbo_rtol, "window": settings.elbo_window},
        "status": status,
        "elbo": float(np.mean(tail)),
        "trace": {"first": trace[0] if trace else None, "last": trace[-1] if trace else None, "n": len(trace)},
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()},
    }
    return est


def fit(Y: np.ndarray, model: str, settings: VISettings, *, seed=0, time_limit=None, callback=None) -> Estimate:
    """Fit `model` to the N x J uint8 matrix Y (255 = missing)."""
    with torch_threads_for(int((Y != 255).sum())):
        return _fit(Y, model, settings, seed=seed, time_limit=time_limit, callback=callback)
