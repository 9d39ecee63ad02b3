"""A small worked spec per constraint template (`casper-solve compile --example TEMPLATE`).

The spec schema: {"variables": [{"name": N, "domain": K or "bool"}, ...], "constraints": [C, ...]}.
A categorical variable x of domain K is K indicators "x=0" ... "x=K-1", exactly one of them 1;
a term is a bool name or "x=v". Each constraint C is an object with a "type" and its fields:
  one_hot        vars: [terms]                 exactly one term is 1
  exactly_k      vars: [terms], k              exactly k terms are 1
  at_most_k      vars: [terms], k              at most k terms are 1
  all_different  vars: [categoricals]          pairwise different values (one domain)
  linear         coefs: {term: c}, op, rhs     sum c * term op rhs (op ==, <=, >=; a bare categorical
                                               name stands for its value)
  flow_path      grid: side, source: [r, c], target: [r, c], neighborhood 4|8 (default 8), name;
                 or n_nodes, edges: [[u, v], ...], source, target   a simple source-target path
  digit_sum      a, b, s: [categoricals, least significant digit first], base (default 10), name
                                               a + b = s digit by digit, len(s) = len(a) + 1
  fixed          var, value                    pin a variable
"""

from __future__ import annotations

EXAMPLES: dict[str, dict] = {
    "one_hot": {
        "variables": [
            {"name": "red", "domain": "bool"},
            {"name": "green", "domain": "bool"},
            {"name": "blue", "domain": "bool"},
        ],
        "constraints": [{"type": "one_hot", "vars": ["red", "green", "blue"]}],
    },  # fmt: skip
    "exactly_k": {
        "variables": [{"name": f"pick{i}", "domain": "bool"} for i in range(5)],
        "constraints": [{"type": "exactly_k", "vars": [f"pick{i}" for i in range(5)], "k": 2}],
    },
    "at_most_k": {
        "variables": [{"name": f"item{i}", "domain": "bool"} for i in range(4)],
        "constraints": [{"type": "at_most_k", "vars": [f"item{i}" for i in range(4)], "k": 1}],
    },
    "all_different": {
        "variables": [{"name": f"cell{i}", "domain": 4} for i in range(4)],
        "constraints": [{"type": "all_different", "vars": [f"cell{i}" for i in range(4)]}],
    },
    "linear": {
        "variables": [{"name": "x", "domain": 5}, {"name": "y", "domain": 5}, {"name": "bonus", "domain": "bool"}],
        "constraints": [{"type": "linear", "coefs": {"x": 1, "y": 1, "bonus": 2}, "op": "<=", "rhs": 5}],
    },
    "flow_path": {
        "variables": [],
        "constraints": [{"type": "flow_path", "grid": 4, "source": [0, 0], "target": [3, 3], "neighborhood": 8}],
    },
    "digit_sum": {
        "variables": [{"name": n, "domain": 10} for n in ("a0", "a1", "b0", "b1", "s0", "s1", "s2")],
        "constraints": [{"type": "digit_sum", "a": ["a0", "a1"], "b": ["b0", "b1"], "s": ["s0", "s1", "s2"]}],
    },
    "fixed": {
        "variables": [{"name": "x", "domain": 3}, {"name": "on", "domain": "bool"}],
        "constraints": [{"type": "fixed", "var": "x", "value": 2}, {"type": "fixed", "var": "on", "value": 1}],
    },
}


def example(template: str) -> dict:
    """The worked spec of one template (a KeyError names no template: the CLI's Choice guards it)."""
    return EXAMPLES[template]
