"""Issue 36 item 5: decode weights -log mu (the most probable valid output) beside 1 - mu; the exact
decoder is optimal for either, checked by enumerating every valid one-digit sum."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.casper.compiler import compile_spec
from methodkit.tools.casper.decode import Decoder

SPEC = {
    "variables": [{"name": n, "domain": 10} for n in ("a", "b", "s0", "s1")],
    "constraints": [{"type": "digit_sum", "a": ["a"], "b": ["b"], "s": ["s0", "s1"]}],
}


def _chosen(program, a, b):
    s = a + b
    names = [f"a={a}", f"b={b}", f"s0={s % 10}", f"s1={s // 10}", "sum.c0=0", f"sum.c1={s // 10}"]
    return [program.names.index(n) for n in names]


def _random_mu(program, rng):
    mu = np.full(program.n_user, 0.5)  # carries: both values alike, a constant in every objective
    for var in ("a", "b", "s0", "s1"):
        idx = [program.names.index(f"{var}={v}") for v in range(10)]
        mu[idx] = rng.dirichlet(np.full(10, 0.3))
    return mu


@pytest.mark.parametrize("weighting", ["linear", "log"])
def test_decode_is_optimal_for_its_weights(weighting):
    program = compile_spec(SPEC)
    decoder = Decoder(program, weighting=weighting)
    rng = np.random.default_rng(0)
    for _ in range(30):
        mu = _random_mu(program, rng)
        w = decoder.weights(mu)
        best = min(sum(w[i] for i in _chosen(program, a, b)) for a in range(10) for b in range(10))
        y = decoder.decode(mu).y
        assert sum(w[i] for i in np.flatnonzero(y)) == pytest.approx(best, abs=1e-9)


def test_log_weights_refuse_a_ruled_out_digit_that_linear_weights_accept():
    """s0 = 9 certain, a = 3 nearly so (0.99, else 4), b split 5 / 6 at 0.5 / 1e-6: 1 - mu keeps a = 3 and
    takes b = 6, a digit the scores rule out (it costs at most 1); -log mu gives the most probable valid
    output, a = 4, b = 5 (product 0.005 against 1e-6)."""
    program = compile_spec(SPEC)
    mu = np.full(program.n_user, 0.5)
    for var in ("a", "b", "s0", "s1"):
        mu[[program.names.index(f"{var}={v}") for v in range(10)]] = 1e-6
    put = {"a=3": 0.99, "a=4": 0.01, "b=5": 0.5, "b=6": 1e-6, "s0=9": 1.0, "s1=0": 1.0}
    for name, value in put.items():
        mu[program.names.index(name)] = value
    digits = {}
    for weighting in ("linear", "log"):
        y = Decoder(program, weighting=weighting).decode(mu).y
        digits[weighting] = {
            var: next(v for v in range(10) if y[program.names.index(f"{var}={v}")]) for var in ("a", "b", "s0")
        }
    assert digits["linear"] == {"a": 3, "b": 6, "s0": 9}
    assert digits["log"] == {"a": 4, "b": 5, "s0": 9}
    assert Decoder(program).weighting == "linear"
    with pytest.raises(ValueError):
        Decoder(program, weighting="quadratic")


def test_log_p_decodes_the_most_probable_valid_output_of_the_scores():
    """project --decode-weights log-p: -log of the scores' probabilities (no projection), the argmax of
    the product of p over the valid sums; it differs from -log mu on some score sets."""
    from methodkit.tools.casper.solve import run, to_theta

    program = compile_spec(SPEC)
    rng = np.random.default_rng(4)
    scores = np.zeros((30, program.n_user))
    for var in ("a", "b", "s0", "s1"):
        idx = [program.names.index(f"{var}={v}") for v in range(10)]
        scores[:, idx] = rng.normal(0, 3, size=(30, 10))
    p = to_theta(program, scores, "scores")[:, : program.n_user]
    ours = run(program, scores, decode_weights="log-p")
    on_mu = run(program, scores, decode_weights="log")
    assert {r["certificate"]["decoded_from"] for r in ours.rows} == {"probabilities"}
    for i in range(30):
        best = max(((a, b) for a in range(10) for b in range(10)), key=lambda ab: np.prod(p[i, _chosen(program, *ab)]))
        np.testing.assert_array_equal(np.flatnonzero(ours.hard[i]), sorted(_chosen(program, *best)))
    assert (ours.hard != on_mu.hard).any(axis=1).sum() > 0
