"""The closed loop (cluster -> mix -> retrieve -> train -> evaluate -> Cluster-GA) and the baselines on the
same code path: every method ends in a synthetic selection of the budget, one planner trained on
real + selected, and its PDMS on val and test."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import mixing, search
from methodkit.tools.autoscale import planner as P

METHODS = ("autoscale", "vanilla", "real-only", "all-synth", "domain-cls", "knn-real", "doremi", "regmix")
ESTIMATORS = ("hypergrad", "spsa")
EVALS = ("open-loop", "closed-loop")
APPLY = ("resample", "reweight")
FAIL_PDMS = 0.8


@dataclass
class LoopConfig:
    method: str = "autoscale"
    budget: int = 3000
    rounds: int = 6
    clusters: int = 32
    eta: float = 0.5
    smoothing: float = 0.05
    trust: float = 0.5  # x100 PDMS drop that reverts a GA step
    ga_samples: int = 512
    ga_checkpoints: int = 4
    estimator: str = "hypergrad"
    spsa_c: float = 0.5
    apply: str = "resample"
    warm_start: bool = False
    regmix_proxies: int = 16
    regmix_candidates: int = 10000
    doremi_steps: int = 20
    evaluate: str = "open-loop"  # the feedback: NAVSIM PDMS on val snapshots, or closed-loop routes on val
    planner: P.PlannerConfig = field(default_factory=P.PlannerConfig)


@dataclass
class Pools:
    real: dict
    synth: dict
    val: dict
    test: dict
    emb: dict  # pool -> embeddings [n, d]
    synth_tags: np.ndarray
    synth_gens: np.ndarray
    routes: dict = field(default_factory=dict)  # pool -> closedloop.Routes (closed-loop evaluation)

    def x(self, pool: str) -> np.ndarray:
        cache = self.__dict__.setdefault("_x", {})
        if pool not in cache:
            cache[pool] = F.flat(F.featurise(getattr(self, pool)))
        return cache[pool]

    def y(self, pool: str) -> np.ndarray:
        return getattr(self, pool)["expert_index"].astype(np.int64)

    def plans(self, pool: str) -> tuple:
        """planner.plan_targets of a pool (the candidates' and the expert's (x, y) plans), cached."""
        cache = self.__dict__.setdefault("_plans", {})
        if pool not in cache:
            cache[pool] = P.plan_targets(getattr(self, pool))
        return cache[pool]


@dataclass
class LoopResult:
    method: str
    rounds: list
    mixtures: list
    selected: list
    best_round: int
    mixture_best: list
    mixture_average: list
    val_pdms: float
    test: dict
    clusters: dict
    model_state: dict = field(repr=False, default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("model_state")
        d.pop("selected")
        return d


def check(cfg: LoopConfig, n_synth: int) -> None:
    if cfg.method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, got {cfg.method!r}")
    if cfg.method != "all-synth" and not 1 <= cfg.budget <= n_synth:
        raise UsageError(f"--budget {cfg.budget} is outside [1, {n_synth}] (the synthetic pool's size)")
    if not 2 <= cfg.clusters <= n_synth:
        raise UsageError(f"--clusters {cfg.clusters} is outside [2, {n_synth}] (the synthetic pool's size)")
    if cfg.rounds < 1:
        raise UsageError(f"--rounds must be >= 1, got {cfg.rounds}")
    if cfg.evaluate not in EVALS:
        raise UsageError(f"--eval must be one of {', '.join(EVALS)}, got {cfg.evaluate!r}")


def feedback_of(val_sum: dict) -> float:
    """J of a round: the closed-loop score where the round was evaluated closed loop, else val PDMS."""
    return val_sum["closed_loop"]["score"] if "closed_loop" in val_sum else val_sum["pdms"]


def score_set(model, pools: Pools, pool: str, cfg: LoopConfig) -> tuple[dict, np.ndarray]:
    """(summary, per-scene feedback score in [0, 1]) of the planner on val or test: the PDMS sub-scores and,
    closed loop, the route scores of tools.autoscale.closedloop under "closed_loop"."""
    summary, per = P.evaluate(P.choose(model, pools.x(pool)), getattr(pools, pool)["cand_scores"])
    if cfg.evaluate != "closed-loop":
        return summary, per[:, 5]
    from methodkit.tools.autoscale import closedloop

    cl, cl_per = closedloop.drive(model, pools.routes[pool])
    return {**summary, "closed_loop": cl}, cl_per[:, 2]


def _train_eval(pools: Pools, sel: np.ndarray, cfg: LoopConfig, seed: int, weights=None, snapshots=0, progress=None,
                steps: int | None = None, init_state=None, log=None):  # fmt: skip
    pc = cfg.planner if steps is None else P.PlannerConfig(**{**asdict(cfg.planner), "steps": steps})
    data = P.TrainData(pools.x("real"), pools.y("real"), pools.x("synth")[sel], pools.y("synth")[sel], weights)
    if pc.expert_l2 > 0:
        data.real_plans = pools.plans("real")
        data.syn_plans = tuple(a[sel] for a in pools.plans("synth"))
    model, states = P.train(data, pc, seed, snapshots=snapshots, progress=progress, init_state=init_state, log=log)
    val_sum, val_s = score_set(model, pools, "val", cfg)
    return model, states, val_sum, val_s


def run(pools: Pools, cfg: LoopConfig, seed: int, progress=None, log=None, ckpt_dir=None, resume: bool = False,
        on_round=None):  # fmt: skip
    """Run one method; returns a LoopResult (the planner of the best-val round and its test scores).

    ckpt_dir: write a round checkpoint there after every round; resume: continue after the newest one
    (tools.autoscale.resume). on_round(r) is called after round r's checkpoint (a stop hook for tests)."""
    import torch

    from methodkit.tools.autoscale import resume as RS

    log = log or (lambda msg: None)
    n_syn = pools.synth["ego"].shape[0]
    check(cfg, n_syn)
    rng = np.random.default_rng([seed, 7])
    k = cfg.clusters
    cent = search.kmeans(pools.emb["synth"], k, seed, log=log)
    syn_c = search.assign(pools.emb["synth"], cent)
    val_c = search.assign(pools.emb["val"], cent)
    sizes = np.bincount(syn_c, minlength=k)
    w0 = sizes / sizes.sum()
    members = [np.flatnonzero(syn_c == c) for c in range(k)]
    clusters = _composition(syn_c, pools.synth_tags, k)
    budget = n_syn if cfg.method == "all-synth" else cfg.budget
    rounds = cfg.rounds if cfg.method == "autoscale" else 1

    if cfg.method == "real-only":
        sel_fixed = np.zeros(0, dtype=np.int64)
    elif cfg.method == "vanilla":
        sel_fixed = np.sort(rng.choice(n_syn, budget, replace=False))
    elif cfg.method == "all-synth":
        sel_fixed = np.arange(n_syn)
    elif cfg.method == "domain-cls":
        sel_fixed = _domain_cls(pools, budget)
    elif cfg.method == "knn-real":
        sel_fixed = mixing.retrieve(pools.emb["synth"], np.arange(n_syn), pools.emb["real"], budget, rng)
    else:
        sel_fixed = None
    cfg_dict = asdict(cfg)
    saved = RS.load_latest(ckpt_dir, cfg_dict, seed, log) if resume and ckpt_dir else None
    if saved is not None:
        w0 = np.asarray(saved[0]["mixtures"][0])
    elif cfg.method == "doremi":
        w0 = _doremi(pools, cfg, seed, members, w0, rng, progress)
    elif cfg.method == "regmix":
        w0 = _regmix(pools, cfg, seed, members, w0, rng, progress, log)

    w = w0.copy()
    eta = cfg.eta
    history, mixtures, selected = [], [], []
    prev_fail = None
    best = (-np.inf, -1, None)
    decreases = 0
    last_state, start = None, 0
    if saved is not None:
        w, eta, prev_fail, best_j, best_r, decreases, history, mixtures, selected, start = RS.unpack(saved[0], rng)
        best, last_state = (best_j, best_r, saved[1]), saved[2]
        log(f"resume: rounds 0..{start - 1} restored from {RS.SUBDIR}/")
    stopped = saved is not None and saved[0].get("stopped", False)
    for r in range(start, rounds if not stopped else start):
        if sel_fixed is not None:
            sel = sel_fixed
        else:
            n_k = mixing.quotas(w, sizes, budget)
            parts = []
            for c in range(k):
                if cfg.method == "autoscale":
                    q_idx = np.flatnonzero(val_c == c)
                    if prev_fail is not None:
                        q_idx = q_idx[prev_fail[q_idx]]
                    queries = pools.emb["val"][q_idx] if len(q_idx) else cent[c : c + 1]
                    parts.append(mixing.retrieve(pools.emb["synth"], members[c], queries, int(n_k[c]), rng))
                else:
                    parts.append(np.sort(rng.choice(members[c], int(n_k[c]), replace=False)))
            sel = np.sort(np.concatenate(parts)).astype(np.int64)
        weights = None
        if cfg.apply == "reweight" and sel_fixed is None:
            # reweight: every selected sample weighted by its cluster's weight over its selected count
            counts = np.bincount(syn_c[sel], minlength=k)
            weights = w[syn_c[sel]] / np.maximum(counts[syn_c[sel]], 1)
        model, states, val_sum, val_s = _train_eval(
            pools, sel, cfg, seed, weights=weights, snapshots=cfg.ga_checkpoints if cfg.method == "autoscale" else 0,
            progress=progress, init_state=last_state if cfg.warm_start else None, log=log,
        )  # fmt: skip
        last_state = {k_: v.detach().clone() for k_, v in model.state_dict().items()}
        j = feedback_of(val_sum)
        record = {"round": r, "method": cfg.method, "val": val_sum, "n_selected": int(len(sel)),
                  "reckless_share": float(np.mean(pools.synth_tags[sel] == "reckless")) if len(sel) else 0.0,
                  "eta": eta}  # fmt: skip
        mixtures.append(w.tolist())
        selected.append(sel)
        if j > best[0]:
            best = (j, r, {k_: v.clone() for k_, v in model.state_dict().items()})
        if cfg.method == "autoscale" and r < rounds - 1:
            s = val_s
            fails = s < FAIL_PDMS
            if history and j < feedback_of(history[-1]["val"]) - cfg.trust:
                w = np.asarray(mixtures[-2])
                eta /= 2
                record["ga"] = "reverted: J fell by more than the trust region; eta halved"
            elif not fails.any():
                record["ga"] = "skipped: no val failures"
            else:
                if cfg.estimator == "spsa":
                    g = _spsa(pools, cfg, seed + r, w, sizes, members, rng, progress)
                else:
                    g = _hypergrad(pools, cfg, states, members, s, rng)
                w = mixing.ascent(w, g, eta, cfg.smoothing)
                record["ga"] = "step"
                record["grad"] = [float(v) for v in g]
            prev_fail = fails
            if history and j < feedback_of(history[-1]["val"]):
                decreases += 1
            else:
                decreases = 0
        history.append(record)
        what = "closed-loop score" if cfg.evaluate == "closed-loop" else "PDMS"
        log(f"round {r}: val {what} {j:.2f}, {len(sel)} synthetic, reckless {record['reckless_share']:.3f}")
        stop = decreases >= 2
        if ckpt_dir is not None:
            state = RS.pack(rng, w, eta, prev_fail, best[0], best[1], decreases, history, mixtures, selected, r + 1)
            RS.save(ckpt_dir, r, {**state, "stopped": stop}, best[2], last_state if cfg.warm_start else None,
                    cfg_dict, seed)  # fmt: skip
        if on_round is not None:
            on_round(r)
        if stop:
            log("J fell twice in a row: early stop with the best mixture")
            break
    model = P.build(pools.x("real").shape[1], cfg.planner)
    model.load_state_dict(best[2])
    test_sum, _ = score_set(model, pools, "test", cfg)
    avg = np.mean(np.asarray(mixtures), axis=0)
    del torch
    return LoopResult(
        method=cfg.method, rounds=history, mixtures=mixtures, selected=selected, best_round=int(best[1]),
        mixture_best=mixtures[best[1]], mixture_average=avg.tolist(), val_pdms=float(best[0]), test=test_sum,
        clusters=clusters, model_state=best[2],
    )  # fmt: skip


def _composition(labels, tags, k) -> dict:
    out = {}
    for c in range(k):
        t = tags[labels == c]
        names, counts = np.unique(t, return_counts=True)
        out[str(c)] = {"size": int(len(t)), **{str(n): int(v) for n, v in zip(names, counts)}}
    return out


def _hypergrad(pools, cfg, states, members, s, rng):
    u = (1.0 - s) + 0.05
    cx, cy = [], []
    for m in members:
        pick = rng.choice(m, min(cfg.ga_samples, len(m)), replace=False) if len(m) else m
        cx.append(pools.x("synth")[pick])
        cy.append(pools.y("synth")[pick])
    build = lambda: P.build(pools.x("real").shape[1], cfg.planner)  # noqa: E731
    return mixing.cluster_gradients(states, build, cx, cy, pools.x("val"), pools.y("val"), u, P.per_sample_loss)


def _random_selection(w, sizes, members, budget, rng):
    n_k = mixing.quotas(w, sizes, budget)
    return np.sort(np.concatenate([rng.choice(m, int(n), replace=False) for m, n in zip(members, n_k)])).astype(int)


def _spsa(pools, cfg, seed, w, sizes, members, rng, progress):
    """Black-box estimate: g = [J(w e^{c d}) - J(w e^{-c d})] / (2c) d, d Rademacher, two short proxies."""
    d = rng.choice([-1.0, 1.0], size=len(w))
    js = []
    for sign in (1.0, -1.0):
        wp = mixing.smooth(w * np.exp(sign * cfg.spsa_c * d), 0.0)
        sel = _random_selection(wp, sizes, members, cfg.budget, rng)
        _, _, val_sum, _ = _train_eval(pools, sel, cfg, seed, steps=max(50, cfg.planner.steps // 4), progress=progress)
        js.append(feedback_of(val_sum))
    return (js[0] - js[1]) / (2 * cfg.spsa_c) * d


def _domain_cls(pools, budget):
    """Logistic regression p(real | z) on real-train vs synthetic embeddings; the top density ratios."""
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([pools.emb["real"], pools.emb["synth"]])
    y = np.r_[np.ones(len(pools.emb["real"])), np.zeros(len(pools.emb["synth"]))]
    clf = LogisticRegression(max_iter=1000, class_weight="balanced").fit(x, y)
    p = clf.predict_proba(pools.emb["synth"])[:, 1]
    ratio = p / np.maximum(1 - p, 1e-12)
    return np.sort(np.argsort(-ratio, kind="stable")[:budget])


def _doremi(pools, cfg, seed, members, w0, rng, progress):
    """DoReMi: a reference planner on w0, then a proxy trained by Group-DRO over the clusters (exponentiated
    gradient on the excess loss over the reference, smoothed), no closed-loop feedback; the time-averaged
    weights are returned."""
    import torch

    sizes = np.array([len(m) for m in members])
    ref_sel = _random_selection(w0, sizes, members, cfg.budget, rng)
    ref, _, _, _ = _train_eval(pools, ref_sel, cfg, seed, progress=progress)
    sx, sy = torch.as_tensor(pools.x("synth")), torch.as_tensor(pools.y("synth"))
    w = w0.copy()
    trace = []
    model = P.build(pools.x("real").shape[1], cfg.planner)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.planner.lr)
    steps = max(cfg.doremi_steps, 1)
    inner = max(1, cfg.planner.steps // steps)
    eta = 1.0
    for _ in range(steps):
        for _ in range(inner):
            c = rng.choice(len(w), size=cfg.planner.batch_size, p=w)
            idx = np.array([members[k][rng.integers(len(members[k]))] for k in c])
            loss = P.per_sample_loss(model, sx[idx], sy[idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        excess = np.zeros(len(w))
        with torch.no_grad():
            for k, m in enumerate(members):
                pick = torch.as_tensor(rng.choice(m, min(cfg.ga_samples, len(m)), replace=False))
                excess[k] = max(float(P.per_sample_loss(model, sx[pick], sy[pick]).mean()
                                      - P.per_sample_loss(ref, sx[pick], sy[pick]).mean()), 0.0)  # fmt: skip
        logw = np.log(w) + eta * excess
        w = mixing.smooth(np.exp(logw - logw.max()), cfg.smoothing)
        trace.append(w)
    return np.mean(trace, axis=0)


def _regmix(pools, cfg, seed, members, w0, rng, progress, log):
    """RegMix: short proxies on Dirichlet mixtures, LightGBM regression of val PDMS on the mixture, the
    argmax of many sampled mixtures."""
    import lightgbm as lgb

    sizes = np.array([len(m) for m in members])
    ws, js = [], []
    for p in range(cfg.regmix_proxies):
        wp = rng.dirichlet(np.ones(len(w0)))
        sel = _random_selection(wp, sizes, members, cfg.budget, rng)
        _, _, val_sum, _ = _train_eval(pools, sel, cfg, seed + p, steps=max(50, cfg.planner.steps // 4),
                                       progress=progress)  # fmt: skip
        ws.append(wp)
        js.append(feedback_of(val_sum))
    reg = lgb.LGBMRegressor(n_estimators=200, learning_rate=0.05, num_leaves=7, min_child_samples=2,
                            random_state=seed, verbose=-1)  # fmt: skip
    reg.fit(np.array(ws), np.array(js))
    cands = rng.dirichlet(np.ones(len(w0)), size=cfg.regmix_candidates)
    best = cands[int(np.argmax(reg.predict(cands)))]
    log(f"regmix: {cfg.regmix_proxies} proxies, val PDMS {min(js):.1f}..{max(js):.1f}")
    return best
