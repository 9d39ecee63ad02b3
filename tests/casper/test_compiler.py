"""The compiler: lowering sizes, structure tags, rank, round trip, and rejected specs."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.casper.builders import addition_spec, grid_path_spec, sudoku_spec
from methodkit.tools.casper.compiler import compile_spec
from methodkit.tools.casper.program import Program


def test_sudoku_lowering_and_rank():
    program = compile_spec(sudoku_spec(9))
    assert program.n_user == 729 and program.structure == "general"
    assert program.m + program.dropped_rows == 81 + 243
    assert np.linalg.matrix_rank(program.A.toarray()) == program.m  # dependent rows were dropped


def test_flow_lowering_sizes_on_30x30():
    program = compile_spec(grid_path_spec(30), check_feasible=False)
    assert program.structure == "flow"
    assert program.n_user == 900 + 6844  # node visits + directed 8-neighbour edges
    assert program.m == 2 * 900 - 1


def test_digit_sum_is_a_chain_and_roundtrips():
    program = compile_spec(addition_spec(3))
    assert program.structure == "chain"
    again = Program.from_arrays(dict(np.load(__import__("io").BytesIO(program.to_bytes()))))
    assert again.names == program.names and again.structure == "chain"
    assert (again.A != program.A).nnz == 0
    np.testing.assert_array_equal(
        again.extra["t0_a_off"] if "t0_a_off" in again.extra else 0,
        program.extra["t0_a_off"] if "t0_a_off" in program.extra else 0,
    )


@pytest.mark.parametrize(
    "spec,fragment",
    [
        ({"variables": [{"name": "x", "domain": 3}, {"name": "x", "domain": 2}]}, "duplicate variable name 'x'"),
        (
            {
                "variables": [],
                "constraints": [{"type": "flow_path", "grid": [3, 4], "source": [0, 0], "target": [2, 2]}],
            },
            "must be square",
        ),
        (
            {"variables": [], "constraints": [{"type": "flow_path", "grid": 3, "source": [1, 1], "target": [1, 1]}]},
            "source and target are the same node",
        ),
        (
            {"variables": [{"name": "x", "domain": 3}], "constraints": [{"type": "fixed", "var": "x", "value": 5}]},
            "outside its domain",
        ),
        (
            {
                "variables": [{"name": "f", "domain": "bool"}],
                "constraints": [{"type": "exactly_k", "vars": ["f"], "k": 0.5}],
            },
            "must be an integer",
        ),
        ({"variables": [{"name": "x", "domain": 3}], "constraints": [{"type": "bogus"}]}, "unknown template"),
    ],
)
def test_rejected_specs(spec, fragment):
    with pytest.raises(DataError, match=fragment):
        compile_spec(spec)


def test_sudoku_side_must_be_square():
    with pytest.raises(DataError, match="square number"):
        sudoku_spec(5)


def test_infeasible_spec_names_the_conflicting_template():
    spec = {
        "variables": [{"name": f"b{i}", "domain": "bool"} for i in range(3)],
        "constraints": [
            {"type": "exactly_k", "vars": ["b0", "b1", "b2"], "k": 2},
            {"type": "at_most_k", "vars": ["b0", "b1"], "k": 0},
            {"type": "fixed", "var": "b2", "value": 1},
        ],
    }
    with pytest.raises(DataError, match=r"conflicting: .*constraints\[1\] \(at_most_k\)"):
        compile_spec(spec)


def test_lp_feasible_but_no_integer_solution_is_rejected():
    spec = {
        "variables": [{"name": f"b{i}", "domain": "bool"} for i in range(3)],
        "constraints": [{"type": "linear", "coefs": {"b0": 2, "b1": 2, "b2": 2}, "op": "==", "rhs": 3}],
    }
    with pytest.raises(DataError, match="no 0/1 solution"):
        compile_spec(spec)
