"""Issue 37 item 9: CV-permutation-Q2's two denominators against a plain NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest


def _pls1_coef(X, y, K):
    """NIPALS PLS1 on centred X, y: the regression coefficients."""
    Xk, yk, W, P, q = X.copy(), y.copy(), [], [], []
    for _ in range(K):
        w = Xk.T @ yk
        w /= np.linalg.norm(w)
        t = Xk @ w
        p, c = Xk.T @ t / (t @ t), yk @ t / (t @ t)
        Xk, yk = Xk - np.outer(t, p), yk - c * t
        W.append(w), P.append(p), q.append(c)
    W, P = np.array(W).T, np.array(P).T
    return W @ np.linalg.solve(P.T @ W, np.array(q))


def _reference_q2(X, y, K, folds, center):
    press = total = 0.0
    for test in folds:
        train = np.setdiff1d(np.arange(len(y)), test)
        mx, sx = X[train].mean(0), X[train].std(0, ddof=1)
        my, sy = y[train].mean(), y[train].std(ddof=1)
        b = _pls1_coef((X[train] - mx) / sx, (y[train] - my) / sy, K)
        yte = (y[test] - my) / sy
        press += ((yte - ((X[test] - mx) / sx) @ b) ** 2).sum()
        total += ((yte - (yte.mean() if center == "fold" else 0.0)) ** 2).sum()
    return 1 - press / total


@pytest.mark.parametrize("center", ["train", "fold"])
def test_q2_denominators_match_numpy(center):
    from methodkit.tools.pls import batch, methods
    from methodkit.tools.pls.simulate import simulate

    rng = np.random.default_rng(5)
    X, y = simulate("toeplitz0.5", 40, 30, snr=0.5, rng=rng)
    folds = methods.draw_folds(40, 5, rng)
    ops = batch.operations("cpu")
    for K in (1, 2):
        q = methods.cv_q2_pass(X, y[:, None], folds, K, methods.Directions(), ops, center=center)
        assert q.q2[0] == pytest.approx(_reference_q2(X, y, K, folds, center), abs=1e-10)
    train = methods.cv_q2_pass(X, y[:, None], folds, 1, methods.Directions(), ops).q2[0]
    fold = methods.cv_q2_pass(X, y[:, None], folds, 1, methods.Directions(), ops, center="fold").q2[0]
    assert fold < train  # the fold's own mean is the smaller sum of squares


def test_q2_center_flag_reaches_the_statistic(run_cli, tmp_path):
    import json

    from methodkit.tools.pls.simulate import simulate

    X, y = simulate("toeplitz0.5", 40, 12, snr=0.5, rng=np.random.default_rng(4))
    rows = "\n".join(",".join(f"{v:.17g}" for v in [*x, t]) for x, t in zip(X, y))
    (tmp_path / "d.csv").write_text(",".join([*(f"x{j}" for j in range(12)), "y"]) + "\n" + rows + "\n")
    out = {}
    for center in ("train", "fold"):
        args = ["pls-test", "test", "d.csv", "-k", "1", "--method", "cvq2-perm", "--perms", "19", "-j", "1"]
        proc = run_cli([*args, "--q2-center", center], cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out[center] = json.loads(proc.stdout)["statistic"]
    assert out["fold"] < out["train"]


@pytest.mark.parametrize("K", [1, 2, 3])
def test_wide_sample_space_route_equals_the_p_space_fit(K):
    # issue 37 item 10: NB-permutation on wide X (p > n_train) fits in sample space; same held-out z
    from methodkit.tools.pls import batch

    rng = np.random.default_rng(K)
    n_tr, n_te, p, B = 20, 18, 90, 37
    X = rng.standard_normal((n_tr + n_te, p))
    Y = rng.standard_normal((n_tr + n_te, B))
    split = batch.standardize_split(X, np.arange(n_tr), np.arange(n_tr, n_tr + n_te))
    ops = batch.operations("cpu")
    Ytr_s, Yte_s, _ = batch.standardize_y(split, Y[:n_tr], Y[n_tr:], ops)
    W, ranks = batch.pls1_weights(split.Xtr, Ytr_s, K, ops)
    ref = batch.heldout_predict(split.Xtr, Ytr_s, split.Xte, W, ops)
    got, granks = batch.pls1_heldout_gram(split.Xtr, Ytr_s, split.Xte, K, ops)
    assert np.array_equal(ranks, granks)
    assert np.max(np.abs(got - ref)) < 1e-9 * np.max(np.abs(ref))
    fast = batch.split_corr_batch(split, Y[:n_tr], Y[n_tr:], K, batch.pls1_weights, ops)
    assert (
        np.max(np.abs(fast.z - batch._score(split, ref, Yte_s, np.zeros(B, bool), ranks < K, ops, False, None).z))
        < 1e-9
    )


def test_sample_space_route_truncates_like_the_p_space_fit():
    from methodkit.tools.pls import batch

    rng = np.random.default_rng(9)
    X = rng.standard_normal((12, 40))
    X[:, 20:] = X[:, :20]  # duplicated columns: still wide
    y = rng.standard_normal((12, 3))
    split = batch.standardize_split(X, np.arange(4), np.arange(4, 12))  # 4 train rows: rank <= 3 after centring
    ops = batch.operations("cpu")
    Ytr_s, _, _ = batch.standardize_y(split, y[:4], y[4:], ops)
    _, ranks = batch.pls1_weights(split.Xtr, Ytr_s, 5, ops)
    _, granks = batch.pls1_heldout_gram(split.Xtr, Ytr_s, split.Xte, 5, ops)
    assert np.array_equal(ranks, granks) and ranks.max() < 5
