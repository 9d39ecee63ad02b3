"""Per-message tracking error (comm.csv's track_err) and the --fc-init readings of Clapping-FC."""

import numpy as np
import pytest

from methodkit.core.errors import UsageError
from methodkit.tools.clapping.config import check_fc_init
from methodkit.tools.clapping.links import LinkEnd

D, ROWS = 32, 6


def pair(algo, spec="topk:0.1", fc_init="zero"):
    kw = dict(index=0, seed=3, n_samples=20, fc_init=fc_init)
    return LinkEnd(algo, spec, D, **kw), LinkEnd(algo, spec, D, **kw)


def rel(x, y):
    return float(np.linalg.norm(x.astype(np.float64) - y) / np.linalg.norm(x.astype(np.float64)))


@pytest.mark.parametrize("algo", ["none", "naive", "ef-step", "aqsgd", "clapping-fu", "clapping-fc"])
def test_track_err_is_the_receivers_relative_error(algo):
    rng = np.random.default_rng(1)
    sender, receiver = pair(algo)
    ids = np.arange(ROWS)
    for s in range(3):
        a = rng.standard_normal((ROWS, D)).astype(np.float32)
        got = receiver.receive_activation(sender.send_activation(a, s, ids), s, ids)
        assert sender.last_error == pytest.approx(rel(a, got), rel=1e-5, abs=1e-7)
        g = rng.standard_normal((ROWS, D)).astype(np.float32)
        got = receiver.receive_gradient(sender.send_gradient(g, s), s)
        assert sender.last_error == pytest.approx(rel(g, got), rel=1e-5, abs=1e-7)
        if algo == "none" or (algo == "clapping-fu" and s == 0):
            assert sender.last_error == 0.0
        else:
            assert sender.last_error > 0.05


def test_tracking_error_falls_within_a_round_on_a_fixed_batch():
    a = np.random.default_rng(2).standard_normal((ROWS, D)).astype(np.float32)
    sender, receiver = pair("clapping-fc")
    errors = []
    for s in range(4):
        receiver.receive_activation(sender.send_activation(a, s, np.arange(ROWS)), s, np.arange(ROWS))
        errors.append(sender.last_error)
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0] - 0.1


@pytest.mark.parametrize("init", ["zero", "prev", "mean", "damp:0.5"])
def test_fc_round_start_readings(init):
    """At a round's start both ends set the reference to the same function of the old one."""
    rng = np.random.default_rng(4)
    sender, receiver = pair("clapping-fc", spec="identity", fc_init=init)  # identity: m == a after a send
    ids = np.arange(ROWS)
    old = rng.standard_normal((ROWS, D)).astype(np.float32) + 3
    receiver.receive_activation(sender.send_activation(old, 0, ids), 0, ids)
    sender.fwd = receiver.fwd = _Nothing()  # a message that changes nothing: the reference as reset
    new = rng.standard_normal((ROWS, D)).astype(np.float32)
    got = receiver.receive_activation(sender.send_activation(new, 0, ids), 0, ids)
    expected = {
        "zero": np.zeros_like(old),
        "prev": old,
        "mean": np.broadcast_to(old.mean(axis=0), old.shape),
        "damp:0.5": 0.5 * old,
    }[init]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(sender.m, receiver.m)
    assert sender.last_error == pytest.approx(rel(new, expected), rel=1e-5)


class _Nothing:
    def delta_update(self, a, m):
        return {"val": np.zeros((a.shape[0], 1), np.float32), "idx": np.zeros((a.shape[0], 1), np.uint16)}

    def decode(self, payload):
        return np.zeros((payload["val"].shape[0], D), np.float32)


@pytest.mark.parametrize("bad", ["damp:1", "damp:0", "damp:x", "half"])
def test_fc_init_refused(bad):
    with pytest.raises(UsageError, match="--fc-init must be"):
        check_fc_init(bad)
