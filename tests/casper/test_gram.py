"""The LDL^T Gram factorisation of the sparse projection path, and the vectorised certificate tables."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from methodkit.tools.casper.builders import compiled, sudoku_spec
from methodkit.tools.casper.compiler import compile_spec
from methodkit.tools.casper.decode import _TEMPLATE_CHECKS, Decoder, _tables, certify
from methodkit.tools.casper.gram import SparseGram
from methodkit.tools.casper.projection import Projector


def test_assembly_and_symmetric_matvec_kernels_match_scipy():
    from methodkit.tools.casper.kernels import symmetric_upper_matvec

    program = compiled("grid", 12, False)
    gram = SparseGram.build(program.A)
    rng = np.random.default_rng(1)
    weight = rng.random(program.n)
    full = (program.A @ sp.diags(weight) @ program.A.T).toarray() + 0.5 * np.eye(program.m)
    upper = gram.matrix(weight, 0.5)
    np.testing.assert_allclose(upper.toarray(), np.triu(full), atol=1e-12)
    x = rng.normal(size=program.m)
    np.testing.assert_allclose(symmetric_upper_matvec(upper.indptr, upper.indices, upper.data, x), full @ x, atol=1e-10)


def test_ldl_factor_solves_the_weighted_gram_system():
    program = compiled("addition", 64, False)
    gram = SparseGram.build(program.A)
    rng = np.random.default_rng(0)
    G = lambda w, d: (program.A @ sp.diags(w) @ program.A.T).toarray() + d * np.eye(program.m)  # noqa: E731
    rhs = rng.normal(size=(program.m, 3))
    kept = []
    for step in range(3):  # transient factors refactor one solver in place; kept ones stay valid
        weight = np.where(rng.random(program.n) < 0.5, 1.0, 10.0 ** -(step + 1))
        factor = gram.factor(weight, 1e-12, keep=False)
        np.testing.assert_allclose(G(weight, 1e-12) @ factor.solve(rhs), rhs, atol=1e-8)
        kept.append((weight, gram.factor(weight, 0.0, keep=True)))
    for weight, factor in kept:
        np.testing.assert_allclose(G(weight, 0.0) @ factor.solve(rhs[:, 0]), rhs[:, 0], atol=1e-8)
    np.testing.assert_allclose(factor.solve(rhs[:, 1]), factor.solve(rhs)[:, 1], atol=1e-12)


def test_a_failed_factorisation_is_refused_not_used():
    program = compiled("addition", 64, False)
    gram = SparseGram.build(program.A)
    assert gram.factor(np.ones(program.n), 0.0, keep=False) is not None
    # All weights 0: A 0 A^T + 0 I is the zero matrix. A fresh factor raises inside QDLDL; an in-place
    # update leaves a stale factor behind, which the backward-error probe must catch.
    assert gram.factor(np.zeros(program.n), 0.0, keep=False) is None
    assert gram.factor(np.zeros(program.n), 0.0, keep=True) is None
    assert gram.factor(np.ones(program.n), 0.0, keep=False) is not None  # and it recovers


def test_ldl_projection_equals_the_superlu_projection_and_its_jacobian():
    for program in (compiled("addition", 64, False), compiled("grid", 12, False)):
        fast = Projector(program)
        assert fast.gram is not None and not fast.dense
        slow = Projector(program)
        slow.gram = None
        slow.full_factor = slow._factor(np.ones(program.n, dtype=bool), 0.0)
        rng = np.random.default_rng(3)
        theta = np.zeros((4, program.n))
        theta[:, : program.n_user] = rng.random((4, program.n_user))
        mu, states = fast.project(theta)
        ref, ref_states = slow.project(theta)
        assert all(s.status == "ok" and s.residual <= 1e-10 for s in states)
        assert all(type(s.factor).__name__ == "GramFactor" for s in states if s.factor is not None)
        assert any(s.iterations > 0 for s in states)  # Newton steps, not only the affine case
        np.testing.assert_allclose(mu, ref, atol=1e-10)
        grad = rng.normal(size=theta.shape)
        np.testing.assert_allclose(fast.vjp(states, grad), slow.vjp(ref_states, grad), atol=1e-9)


def test_certificate_tables_read_digits_and_check_long_sums_exactly():
    n_digits = 120  # numbers far beyond float precision: the check must use exact integers
    program = compiled("addition", n_digits, False)
    rng = np.random.default_rng(4)
    y = Decoder(program).decode(rng.random(program.n)).y
    assert certify(program, y) is None
    tables = _tables(program)
    tid, t = next((i, t) for i, t in enumerate(program.templates) if t["type"] == "digit_sum")
    a = tables.values(t["a"], y.astype(np.int64))
    by_loop = [int(np.argmax(y[v["offset"] : v["offset"] + 10])) for v in program.variables[:n_digits]]
    assert a.tolist() == by_loop
    wrong = y.astype(np.int64).copy()
    first_a = program.variables[0]["offset"]
    digit = int(np.argmax(wrong[first_a : first_a + 10]))
    wrong[first_a + digit], wrong[first_a + (digit + 1) % 10] = 0, 1  # a changes by one, s does not
    assert _TEMPLATE_CHECKS["digit_sum"](program, tid, t, wrong) == "digit_sum: a + b != s"
    assert certify(program, wrong) is not None  # the linear rows catch it first
    two = y.copy()
    two[first_a + (digit + 1) % 10] = 1
    assert certify(program, two) is not None


def test_certificate_all_different_and_categorical_checks():
    program = compile_spec(sudoku_spec(4))
    y = Decoder(program).decode(np.random.default_rng(5).random(program.n_user)).y
    assert certify(program, y) is None
    tid, t = next((i, t) for i, t in enumerate(program.templates) if t["type"] == "all_different")
    clash = y.astype(np.int64).copy()
    first, second = (program.variables[k]["offset"] for k in range(2))  # r0c0 and r0c1, same row
    clash[second : second + 4] = clash[first : first + 4]
    assert _TEMPLATE_CHECKS["all_different"](program, tid, t, clash).startswith("all_different")
    bools = {"variables": [{"name": "f", "domain": "bool"}, {"name": "x", "domain": 3}], "constraints": []}
    free = compile_spec(bools)
    assert certify(free, np.array([1, 0, 1, 0], dtype=np.uint8)) is None
    # Without its one-hot row (as when the compiler drops a dependent row) the count check must catch it.
    no_rows = replace(free, A=sp.csr_matrix((0, free.n)), b=np.zeros(0), row_template=np.zeros(0, dtype=np.int64))
    assert certify(no_rows, np.array([1, 0, 1, 0], dtype=np.uint8)) is None
    assert certify(no_rows, np.array([1, 0, 0, 0], dtype=np.uint8)) == "categorical 'x' does not take exactly one value"
    assert certify(no_rows, np.array([0, 1, 1, 0], dtype=np.uint8)) == "categorical 'x' does not take exactly one value"
