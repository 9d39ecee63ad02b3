"""The rollout kernel: known answers, agreement with its pure-Python twin, thread-count invariance."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.cita.kernels import sim_values


def _one_tool_case(ok: float, steps: int, cand: int, mutating: bool = False, goal: int = 1):
    n = 2  # tool 0 = the goal, tool 1 = off-goal
    probs = np.full((1, n + 1, n + 1), 1.0 / (n + 1))
    rho = np.ones((1, n))
    return dict(
        probs=probs,
        rho=rho,
        goal=np.array([goal], np.uint64),
        prereq=np.zeros((1, n), np.uint64),
        done=np.zeros(1, np.uint64),
        cand=np.array([[cand]], np.int32),
        cand_ok=np.array([[ok]]),
        mut=np.uint64(2 if mutating else 0),
        multi=np.zeros(1, np.uint64),
        eps=0.0,
        gamma=0.0,
        beta=1.0,
        steps=np.array([steps], np.int32),
    )


def _run(case, R=4000, seed=3):
    return sim_values(
        case["probs"],
        case["rho"],
        case["goal"],
        case["prereq"],
        case["done"],
        case["cand"],
        case["cand_ok"],
        case["mut"],
        case["multi"],
        case["eps"],
        case["gamma"],
        case["beta"],
        case["steps"],
        R,
        np.uint64(seed),
    )


def test_known_answers():
    # the goal tool executed with certainty, no steps left: success
    assert _run(_one_tool_case(1.0, 0, 0))[0][0, 0] == 1.0
    # end_turn (index n) before the goal is done: failure
    assert _run(_one_tool_case(1.0, 0, 2))[0][0, 0] == 0.0
    # a mutating off-goal call breaks the task whatever follows
    assert _run(_one_tool_case(1.0, 5, 1, mutating=True))[0][0, 0] == 0.0
    # success probability of the first call = the value when no step is left
    mean, var = _run(_one_tool_case(0.3, 0, 0), R=20000)
    assert abs(mean[0, 0] - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 20000)
    assert abs(var[0, 0] - 0.21) < 0.01


def test_one_step_recovery_matches_the_closed_form():
    # off-goal read-only first call, one step left; π uniform over {goal, off, STOP}: success iff it picks
    # the goal tool (1/3), whose execution succeeds surely; then the horizon ends with done == goal.
    mean, _ = _run(_one_tool_case(1.0, 1, 1), R=30000)
    assert abs(mean[0, 0] - 1 / 3) < 4 * np.sqrt(2 / 9 / 30000)


def _random_case(rng, C=6, K=4, n=7):
    probs = rng.dirichlet(np.ones(n + 1), size=(3, n + 1))
    rho = rng.uniform(0.5, 1.0, size=(3, n))
    goal = rng.integers(1, 2**n, size=C).astype(np.uint64)
    prereq = np.zeros((C, n), np.uint64)
    for c in range(C):
        for j in range(1, n):
            if (int(goal[c]) >> j) & 1 and rng.random() < 0.5:
                prereq[c, j] = np.uint64(int(goal[c]) & ((1 << j) - 1) & int(rng.integers(0, 2**n)))
    done = np.array([int(g) & int(rng.integers(0, 2**n)) for g in goal], np.uint64)
    cand = rng.integers(0, n + 1, size=(C, K)).astype(np.int32)
    ok = rng.uniform(0.3, 1.0, size=(C, K))
    return (
        probs,
        rho,
        goal,
        prereq,
        done,
        cand,
        ok,
        np.uint64(int(rng.integers(0, 2**n))),
        np.zeros(C, np.uint64),
        0.1,
        3.0,
        2.0,
        rng.integers(0, 6, size=C).astype(np.int32),
    )


def test_kernel_equals_its_interpreted_twin_bit_for_bit(tmp_path):
    """The same function run by the Python interpreter (NUMBA_DISABLE_JIT=1, prange = range) is the
    serial reference: equal means bit for bit."""
    import os
    import subprocess
    import sys

    args = _random_case(np.random.default_rng(11))
    mean, _ = sim_values(*args, 40, np.uint64(9))
    np.save(tmp_path / "args.npy", np.array(args, dtype=object), allow_pickle=True)
    code = (
        "import sys, numpy as np\n"
        "from methodkit.tools.cita.kernels import sim_values\n"
        f"args = list(np.load({str(tmp_path / 'args.npy')!r}, allow_pickle=True))\n"
        "np.save(sys.argv[1], sim_values(*args, 40, np.uint64(9))[0])\n"
    )
    out = tmp_path / "ref.npy"
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run([sys.executable, "-P", "-c", code, str(out)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_array_equal(mean, np.load(out))


@pytest.mark.parametrize("threads", [1, 2])
def test_same_bits_for_any_thread_count(threads):
    import numba

    args = _random_case(np.random.default_rng(5))
    numba.set_num_threads(1)
    one = sim_values(*args, 64, np.uint64(1))[0]
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        other = sim_values(*args, 64, np.uint64(1))[0]
    finally:
        numba.set_num_threads(1)
    np.testing.assert_array_equal(one, other)
