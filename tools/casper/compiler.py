"""The compiler: a JSON constraint spec -> a `Program` (the "fully automated" part of Casper).

Every template lowers to rows of A y = b over binary indicators (categoricals are expanded
into one-hot indicators "x=v"); inequalities get a slack s >= 0. The compiler then tags the
structure, which picks the exact hard decoder, drops linearly dependent rows (so the Newton
systems are nonsingular), and checks that P and, where cheap, C are not empty.

Spec (JSON):
  {"variables": [{"name": "x", "domain": 10}, {"name": "f", "domain": "bool"}],
   "constraints": [{"type": "exactly_k", "vars": ["f", "x=3"], "k": 1}, ...]}
Terms: a bool name, or "x=v" for the indicator of categorical x taking value v. In `linear`,
a bare categorical name stands for its integer value (sum of v * [x=v]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.casper.program import Program, onehot_only

TEMPLATES = ("one_hot", "exactly_k", "at_most_k", "all_different", "linear", "flow_path", "digit_sum", "fixed")
DENSE_LIMIT = 20_000  # variables above which the dense rank check needs allow_dense


@dataclass
class _Builder:
    """Accumulates variables, rows and bounds while templates are lowered."""

    names: list = field(default_factory=list)
    index: dict = field(default_factory=dict)
    group: list = field(default_factory=list)
    categorical: dict = field(default_factory=dict)  # name -> (offset, domain)
    booleans: dict = field(default_factory=dict)  # name -> index
    variables: list = field(default_factory=list)
    rows: list = field(default_factory=list)  # (dict col->coef, rhs, op, template id)
    fixes: list = field(default_factory=list)  # (col, value, template id)
    templates: list = field(default_factory=list)
    n_groups: int = 0

    def add_var(self, name: str, group: int = -1) -> int:
        if name in self.index:
            raise DataError(f"duplicate variable name '{name}'")
        self.index[name] = len(self.names)
        self.names.append(name)
        self.group.append(group)
        return self.index[name]

    def add_categorical(self, name: str, domain: int, template: int | None = None) -> None:
        if name in self.categorical or name in self.booleans or name in self.index:
            raise DataError(f"duplicate variable name '{name}'")
        offset = len(self.names)
        gid = self.n_groups
        self.n_groups += 1
        for v in range(domain):
            self.add_var(f"{name}={v}", gid)
        self.categorical[name] = (offset, domain)
        self.variables.append({"name": name, "domain": domain, "offset": offset})
        tid = template if template is not None else self.add_template({"type": "one_hot", "var": name, "implied": True})
        self.rows.append(({offset + v: 1.0 for v in range(domain)}, 1.0, "==", tid))

    def add_bool(self, name: str) -> None:
        if name in self.categorical or name in self.index:
            raise DataError(f"duplicate variable name '{name}'")
        self.booleans[name] = self.add_var(name)
        self.variables.append({"name": name, "domain": "bool", "offset": self.booleans[name]})

    def add_template(self, resolved: dict) -> int:
        self.templates.append(resolved)
        return len(self.templates) - 1

    def term(self, term, where: str) -> int:
        """Column of an indicator term ("f" or "x=3")."""
        if not isinstance(term, str):
            raise DataError(f"{where}: a term must be a string like 'f' or 'x=3', got {term!r}")
        if term in self.booleans:
            return self.booleans[term]
        if term in self.index and "=" in term:
            return self.index[term]
        if term in self.categorical:
            raise DataError(f"{where}: '{term}' is categorical; name one of its values, e.g. '{term}=0'")
        raise DataError(f"{where}: unknown variable '{term}'")

    def value_terms(self, name: str) -> dict:
        offset, domain = self.categorical[name]
        return {offset + v: float(v) for v in range(1, domain)}


def _integer(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"{what} must be an integer, got {value!r}")
    if float(value) != int(value):
        raise DataError(f"{what} must be an integer in an exact template, got {value!r}")
    return int(value)


def _names(value, what: str) -> list:
    if not isinstance(value, list) or not value:
        raise DataError(f"{what} must be a non-empty list of variable names")
    return value


# ---------------------------------------------------------------- templates


def _lower_cardinality(builder: _Builder, spec: dict, where: str, tid: int, op: str) -> None:
    terms = _names(spec.get("vars"), f"{where}: 'vars'")
    k = _integer(spec.get("k", 1), f"{where}: 'k'")
    cols = [builder.term(t, where) for t in terms]
    if len(set(cols)) != len(cols):
        raise DataError(f"{where}: a variable is listed twice")
    if not 0 <= k <= len(cols):
        raise DataError(f"{where}: k={k} is outside 0..{len(cols)}")
    builder.rows.append(({c: 1.0 for c in cols}, float(k), op, tid))


def _lower_all_different(builder: _Builder, spec: dict, where: str, tid: int) -> None:
    names = _names(spec.get("vars"), f"{where}: 'vars'")
    domains = set()
    for name in names:
        if name not in builder.categorical:
            raise DataError(f"{where}: '{name}' is not a categorical variable")
        domains.add(builder.categorical[name][1])
    if len(domains) != 1:
        raise DataError(f"{where}: all_different needs variables of one domain, got {sorted(domains)}")
    if len(set(names)) != len(names):
        raise DataError(f"{where}: a variable is listed twice")
    domain = domains.pop()
    if len(names) > domain:
        raise DataError(f"{where}: {len(names)} variables cannot all differ over a domain of {domain}")
    op = "==" if len(names) == domain else "<="
    for v in range(domain):  # value v is taken exactly (at most) once
        builder.rows.append(({builder.categorical[n][0] + v: 1.0 for n in names}, 1.0, op, tid))


def _lower_linear(builder: _Builder, spec: dict, where: str, tid: int) -> None:
    coefs = spec.get("coefs")
    if isinstance(coefs, dict):
        pairs = list(coefs.items())
    elif isinstance(coefs, list) and all(isinstance(p, list) and len(p) == 2 for p in coefs):
        pairs = [tuple(p) for p in coefs]
    else:
        raise DataError(f"{where}: 'coefs' must be an object {{term: coef}} or a list of [term, coef]")
    op = spec.get("op", "==")
    if op not in ("==", "<=", ">="):
        raise DataError(f"{where}: 'op' must be one of ==, <=, >=, got {op!r}")
    rhs = spec.get("rhs")
    if isinstance(rhs, bool) or not isinstance(rhs, (int, float)) or not math.isfinite(rhs):
        raise DataError(f"{where}: 'rhs' must be a finite number, got {rhs!r}")
    row: dict = {}
    for term, coef in pairs:
        if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef):
            raise DataError(f"{where}: coefficient of '{term}' must be a finite number")
        expanded = builder.value_terms(term) if term in builder.categorical else {builder.term(term, where): 1.0}
        for col, c in expanded.items():
            row[col] = row.get(col, 0.0) + float(coef) * c
    sign = -1.0 if op == ">=" else 1.0
    builder.rows.append(({c: sign * v for c, v in row.items()}, sign * float(rhs), "==" if op == "==" else "<=", tid))


def grid_edges(n: int, neighborhood: int) -> np.ndarray:
    """Directed edges (tail, head) of the n x n grid graph, nodes numbered row-major."""
    steps = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    if neighborhood == 8:
        steps += [(-1, -1), (-1, 1), (1, -1), (1, 1)]
    r, c = np.divmod(np.arange(n * n), n)
    edges = []
    for dr, dc in steps:
        rr, cc = r + dr, c + dc
        ok = (rr >= 0) & (rr < n) & (cc >= 0) & (cc < n)
        edges.append(np.stack([(r * n + c)[ok], (rr * n + cc)[ok]], axis=1))
    out = np.concatenate(edges)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def _lower_flow_path(builder: _Builder, spec: dict, where: str, tid: int) -> dict:
    prefix = spec.get("name", "path")
    if not isinstance(prefix, str) or not prefix:
        raise DataError(f"{where}: 'name' must be a non-empty string")
    if "grid" in spec:
        grid = spec["grid"]
        if isinstance(grid, list):
            if len(grid) != 2 or grid[0] != grid[1]:
                raise DataError(f"{where}: the grid must be square, got {grid!r}")
            grid = grid[0]
        n = _integer(grid, f"{where}: 'grid'")
        if n < 2:
            raise DataError(f"{where}: the grid side must be at least 2, got {n}")
        neighborhood = spec.get("neighborhood", 8)
        if neighborhood not in (4, 8):
            raise DataError(f"{where}: 'neighborhood' must be 4 or 8, got {neighborhood!r}")
        edges = grid_edges(n, neighborhood)
        n_nodes = n * n

        def node_id(value, what):
            if not (isinstance(value, list) and len(value) == 2):
                raise DataError(f"{where}: '{what}' must be [row, col]")
            rr, cc = (_integer(v, f"{where}: '{what}'") for v in value)
            if not (0 <= rr < n and 0 <= cc < n):
                raise DataError(f"{where}: '{what}' {value} is outside the {n}x{n} grid")
            return rr * n + cc

        node_name = [f"{prefix}.v{i // n}_{i % n}" for i in range(n_nodes)]
    elif "edges" in spec:
        n_nodes = _integer(spec.get("n_nodes"), f"{where}: 'n_nodes'")
        try:
            edges = np.asarray(spec["edges"], dtype=np.int64).reshape(-1, 2)
        except (TypeError, ValueError):
            raise DataError(f"{where}: 'edges' must be a list of [tail, head] node numbers") from None
        if edges.size and (edges.min() < 0 or edges.max() >= n_nodes):
            raise DataError(f"{where}: an edge names a node outside 0..{n_nodes - 1}")
        if len({tuple(e) for e in edges.tolist()}) != len(edges) or np.any(edges[:, 0] == edges[:, 1]):
            raise DataError(f"{where}: edges must be distinct and without self-loops")
        n = 0

        def node_id(value, what):
            node = _integer(value, f"{where}: '{what}'")
            if not 0 <= node < n_nodes:
                raise DataError(f"{where}: '{what}' {value} is outside 0..{n_nodes - 1}")
            return node

        node_name = [f"{prefix}.v{i}" for i in range(n_nodes)]
    else:
        raise DataError(f"{where}: flow_path needs 'grid' (side) or 'edges' and 'n_nodes'")
    source, target = node_id(spec.get("source"), "source"), node_id(spec.get("target"), "target")
    if source == target:
        raise DataError(f"{where}: source and target are the same node")
    node_col = np.array([builder.add_var(name) for name in node_name], dtype=np.int64)
    edge_col = np.array([builder.add_var(f"{prefix}.e{u}_{v}") for u, v in edges.tolist()], dtype=np.int64)
    out_rows: list = [dict() for _ in range(n_nodes)]
    in_cols: list = [[] for _ in range(n_nodes)]
    for e, (u, v) in enumerate(edges.tolist()):
        out_rows[u][int(edge_col[e])] = 1.0
        out_rows[v][int(edge_col[e])] = -1.0
        in_cols[v].append(int(edge_col[e]))
    for u in range(n_nodes):  # conservation: out - in = [u=s] - [u=t]
        builder.rows.append((out_rows[u], float(u == source) - float(u == target), "==", tid))
    for u in range(n_nodes):  # linking: v_u - sum_in x = [u=s]
        row = {int(node_col[u]): 1.0}
        for c in in_cols[u]:
            row[c] = -1.0
        builder.rows.append((row, float(u == source), "==", tid))
    return {
        "type": "flow_path",
        "name": prefix,
        "grid": n,
        "n_nodes": n_nodes,
        "source": source,
        "target": target,
        "node_col": node_col,
        "edge_col": edge_col,
        "edges": edges,
    }


def _lower_digit_sum(builder: _Builder, spec: dict, where: str, tid: int) -> dict:
    base = _integer(spec.get("base", 10), f"{where}: 'base'")
    a, b, s = (_names(spec.get(k), f"{where}: '{k}'") for k in ("a", "b", "s"))
    if len(a) != len(b) or len(s) != len(a) + 1:
        raise DataError(f"{where}: need len(a) == len(b) == N and len(s) == N + 1 (digits least significant first)")
    for name in [*a, *b, *s]:
        if name not in builder.categorical:
            raise DataError(f"{where}: '{name}' is not a categorical variable")
        if builder.categorical[name][1] != base:
            raise DataError(f"{where}: '{name}' has domain {builder.categorical[name][1]}, not the base {base}")
    prefix = spec.get("name", "sum")
    n_digits = len(a)
    carries = [f"{prefix}.c{i}" for i in range(n_digits + 1)]
    for name in carries:
        builder.add_categorical(name, 2, template=tid)
    builder.fixes.append((builder.categorical[carries[0]][0] + 1, 0.0, tid))  # c_0 = 0
    for i in range(n_digits):
        row: dict = {}
        for name, sign in ((a[i], 1.0), (b[i], 1.0), (s[i], -1.0)):
            for col, v in builder.value_terms(name).items():
                row[col] = row.get(col, 0.0) + sign * v
        row[builder.categorical[carries[i]][0] + 1] = 1.0
        row[builder.categorical[carries[i + 1]][0] + 1] = -float(base)
        builder.rows.append((row, 0.0, "==", tid))
    row = {col: v for col, v in builder.value_terms(s[n_digits]).items()}  # top sum digit = last carry
    row[builder.categorical[carries[n_digits]][0] + 1] = -1.0
    builder.rows.append((row, 0.0, "==", tid))
    offsets = lambda names: np.array([builder.categorical[n][0] for n in names], dtype=np.int64)  # noqa: E731
    return {
        "type": "digit_sum",
        "name": prefix,
        "base": base,
        "a": a,
        "b": b,
        "s": s,
        "a_off": offsets(a),
        "b_off": offsets(b),
        "s_off": offsets(s),
        "c_off": offsets(carries),
    }


def _lower_fixed(builder: _Builder, spec: dict, where: str, tid: int) -> None:
    name = spec.get("var")
    value = spec.get("value")
    if name in builder.categorical:
        offset, domain = builder.categorical[name]
        v = _integer(value, f"{where}: 'value'")
        if not 0 <= v < domain:
            raise DataError(f"{where}: value {v} of '{name}' is outside its domain 0..{domain - 1}")
        for w in range(domain):
            builder.fixes.append((offset + w, float(w == v), tid))
    elif name in builder.booleans:
        v = _integer(value, f"{where}: 'value'")
        if v not in (0, 1):
            raise DataError(f"{where}: value {v} of boolean '{name}' must be 0 or 1")
        builder.fixes.append((builder.booleans[name], float(v), tid))
    else:
        raise DataError(f"{where}: unknown variable {name!r}")


# ---------------------------------------------------------------- the compiler


def parse_variables(builder: _Builder, spec: dict) -> None:
    variables = spec.get("variables")
    if not isinstance(variables, list):
        raise DataError("spec: 'variables' must be a list of {name, domain}")
    for i, var in enumerate(variables):
        where = f"spec: variables[{i}]"
        if not isinstance(var, dict) or not isinstance(var.get("name"), str) or not var["name"]:
            raise DataError(f"{where}: needs a non-empty string 'name'")
        name, domain = var["name"], var.get("domain")
        if "=" in name or name.startswith("~"):
            raise DataError(f"{where}: name '{name}' may not contain '=' or start with '~'")
        if domain == "bool":
            builder.add_bool(name)
        elif isinstance(domain, int) and not isinstance(domain, bool) and domain >= 2:
            builder.add_categorical(name, domain)
        else:
            raise DataError(f"{where}: 'domain' must be an integer >= 2 or \"bool\", got {domain!r}")


def compile_spec(spec: dict, *, check_feasible: bool = True, allow_dense: bool = False) -> Program:
    """Lower a constraint spec to a Program; raise DataError naming the bad or conflicting template."""
    if not isinstance(spec, dict):
        raise DataError("spec: expected a JSON object with 'variables' and 'constraints'")
    builder = _Builder()
    parse_variables(builder, spec)
    constraints = spec.get("constraints", [])
    if not isinstance(constraints, list):
        raise DataError("spec: 'constraints' must be a list")
    extra_templates: dict[int, dict] = {}
    for i, con in enumerate(constraints):
        where = f"spec: constraints[{i}]"
        kind = con.get("type") if isinstance(con, dict) else None
        if kind not in TEMPLATES:
            raise DataError(f"{where}: unknown template {kind!r} (known: {', '.join(TEMPLATES)})")
        tid = builder.add_template({"type": kind, "index": i})
        if kind == "one_hot":
            _lower_cardinality(builder, {**con, "k": 1}, where, tid, "==")
        elif kind == "exactly_k":
            _lower_cardinality(builder, con, where, tid, "==")
        elif kind == "at_most_k":
            _lower_cardinality(builder, con, where, tid, "<=")
        elif kind == "all_different":
            _lower_all_different(builder, con, where, tid)
            builder.templates[tid]["vars"] = list(con["vars"])
        elif kind == "linear":
            _lower_linear(builder, con, where, tid)
        elif kind == "flow_path":
            extra_templates[tid] = _lower_flow_path(builder, con, where, tid)
        elif kind == "digit_sum":
            extra_templates[tid] = _lower_digit_sum(builder, con, where, tid)
        else:
            _lower_fixed(builder, con, where, tid)
    return _assemble(builder, extra_templates, check_feasible=check_feasible, allow_dense=allow_dense)


def _assemble(builder: _Builder, extra_templates: dict, *, check_feasible: bool, allow_dense: bool) -> Program:
    n_user = len(builder.names)
    n_slack = sum(1 for r in builder.rows if r[2] == "<=")
    if n_user == 0:
        raise DataError("spec: no variables")
    rows, cols, vals, rhs, row_tid = [], [], [], [], []
    slack = n_user
    for r, (coefs, value, op, tid) in enumerate(builder.rows):
        for c, v in coefs.items():
            if v != 0.0:
                rows.append(r)
                cols.append(c)
                vals.append(v)
        if op == "<=":
            rows.append(r)
            cols.append(slack)
            vals.append(1.0)
            slack += 1
        rhs.append(value)
        row_tid.append(tid)
    n = n_user + n_slack
    A = sp.csr_matrix((vals, (rows, cols)), shape=(len(builder.rows), n), dtype=np.float64)
    A.sum_duplicates()
    b = np.asarray(rhs, dtype=np.float64)
    lower = np.zeros(n)
    upper = np.concatenate([np.ones(n_user), np.full(n_slack, np.inf)])
    fix_tid = np.full(n, -1)
    for col, value, tid in builder.fixes:
        if fix_tid[col] >= 0 and lower[col] != value:
            raise DataError(
                f"spec: constraints {_label(builder, fix_tid[col])} and {_label(builder, tid)} fix "
                f"'{builder.names[col]}' to different values"
            )
        lower[col] = upper[col] = value
        fix_tid[col] = tid
    row_tid_arr = np.asarray(row_tid, dtype=np.int64)
    if check_feasible:
        _check_lp_feasible(builder, A, b, lower, upper, row_tid_arr, fix_tid)
    names = builder.names + [f"~slack{k}" for k in range(n_slack)]
    templates = []
    extra: dict = {}
    for tid, t in enumerate(builder.templates):
        if tid in extra_templates:
            full = extra_templates[tid]
            templates.append({k: v for k, v in full.items() if not isinstance(v, np.ndarray)} | {"index": t["index"]})
            for k, v in full.items():
                if isinstance(v, np.ndarray):
                    extra[f"t{tid}_{k}"] = v
        else:
            templates.append(t)
    program = Program(
        A=A,
        b=b,
        lower=lower,
        upper=upper,
        names=names,
        n_user=n_user,
        group=np.asarray(builder.group, dtype=np.int64),
        row_template=row_tid_arr,
        structure="general",
        templates=templates,
        variables=builder.variables,
        extra=extra,
    )
    program.structure = detect_structure(program)
    _drop_dependent_rows(program, allow_dense)
    if check_feasible and program.structure == "general":
        _check_integer_feasible(program, builder)
    return program


def _label(builder: _Builder, tid: int) -> str:
    t = builder.templates[tid]
    if t.get("implied"):
        return f"one_hot({t['var']}) (implied by its domain)"
    return f"constraints[{t['index']}] ({t['type']})"


# ---------------------------------------------------------------- structure


def user_templates(program: Program) -> list[dict]:
    return [t for t in program.templates if not t.get("implied")]


def detect_structure(program: Program) -> str:
    """The structure tag that picks the exact hard decoder (see the man page)."""
    kinds = [t["type"] for t in user_templates(program)]
    fixed_any = bool(np.any(program.lower[: program.n_user] == program.upper[: program.n_user]))
    if onehot_only(program):
        return "onehot"
    if kinds == ["flow_path"] and not fixed_any and not program.variables:
        return "flow"
    if kinds and kinds.count("digit_sum") == 1 and set(kinds) <= {"digit_sum", "fixed"}:
        t = next(t for t in program.templates if t["type"] == "digit_sum")
        digit_vars = {*t["a"], *t["b"], *t["s"]}
        declared = {v["name"] for v in program.variables if not v["name"].startswith(f"{t['name']}.c")}
        if declared == digit_vars and program.n == program.n_user:
            return "chain"
    if _assignment_sides(program) is not None:
        return "assignment"
    return "general"


def _assignment_sides(program: Program):
    """For a bipartite exactly-one system (Birkhoff polytope), the (row-side, col-side) row ids per var."""
    A = program.A.tocsc()
    if program.n != program.n_user or A.nnz == 0:
        return None
    if not (np.all(A.data == 1) and np.all(program.b == 1)):
        return None
    if not (np.all(program.lower == 0) and np.all(program.upper == 1)):
        return None
    counts = np.diff(A.indptr)
    if not np.all(counts == 2):
        return None
    pairs = A.indices.reshape(-1, 2)
    side = np.full(program.m, -1)
    adjacency: list = [[] for _ in range(program.m)]
    for r1, r2 in pairs.tolist():
        adjacency[r1].append(r2)
        adjacency[r2].append(r1)
    for start in range(program.m):  # 2-colour the rows
        if side[start] >= 0:
            continue
        side[start] = 0
        stack = [start]
        while stack:
            r = stack.pop()
            for q in adjacency[r]:
                if side[q] < 0:
                    side[q] = 1 - side[r]
                    stack.append(q)
                elif side[q] == side[r]:
                    return None
    if np.sum(side == 0) != np.sum(side == 1):
        return None
    first = np.where(side[pairs[:, 0]] == 0, pairs[:, 0], pairs[:, 1])
    second = np.where(side[pairs[:, 0]] == 0, pairs[:, 1], pairs[:, 0])
    return side, first, second


def _drop_dependent_rows(program: Program, allow_dense: bool) -> None:
    """Remove linearly dependent rows so that A A^T is nonsingular."""
    if program.structure in ("onehot", "chain"):
        return  # disjoint groups / a triangular carry chain: independent by construction
    if program.structure == "flow":
        t = next(t for t in program.templates if t["type"] == "flow_path")
        keep = np.ones(program.m, dtype=bool)
        keep[int(t["target"])] = False  # conservation rows sum to zero on every component
        _keep_rows(program, keep)
        return
    if program.structure == "assignment":
        sides = _assignment_sides(program)
        keep = np.ones(program.m, dtype=bool)
        keep[np.flatnonzero(sides[0] == 1)[-1]] = False  # row sums = column sums
        _keep_rows(program, keep)
        program.extra["assign_first"] = sides[1]
        program.extra["assign_second"] = sides[2]
        return
    if program.n > DENSE_LIMIT and not allow_dense:
        raise UsageError(
            f"the program has {program.n} variables and a general structure: its rank check is dense above "
            f"{DENSE_LIMIT}; pass --allow-dense to run it anyway"
        )
    from scipy.linalg import qr

    dense = program.A.toarray()
    _, R, piv = qr(dense.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > 1e-9 * max(1.0, diag.max(initial=0.0))))
    keep = np.zeros(program.m, dtype=bool)
    keep[np.sort(piv[:rank])] = True
    _keep_rows(program, keep)


def _keep_rows(program: Program, keep: np.ndarray) -> None:
    program.dropped_rows += int(np.sum(~keep))
    program.A = program.A[keep].tocsr()
    program.b = program.b[keep]
    program.row_template = program.row_template[keep]


# ---------------------------------------------------------------- feasibility


def _lp_feasible(A, b, lower, upper) -> bool:
    from scipy.optimize import linprog

    bounds = np.stack([lower, np.where(np.isinf(upper), np.nan, upper)], axis=1)
    bounds = [(lo, None if np.isnan(hi) else hi) for lo, hi in bounds]
    res = linprog(np.zeros(A.shape[1]), A_eq=A, b_eq=b, bounds=bounds, method="highs")
    return res.status == 0


def _check_lp_feasible(builder, A, b, lower, upper, row_tid, fix_tid) -> None:
    if _lp_feasible(A, b, lower, upper):
        return
    culprits = []
    for tid in range(len(builder.templates)):  # drop one template at a time
        keep = row_tid != tid
        lo, hi = lower.copy(), upper.copy()
        freed = fix_tid == tid
        lo[freed], hi[freed] = 0.0, np.where(np.isinf(upper[freed]), np.inf, 1.0)
        if not keep.all() or freed.any():
            if _lp_feasible(A[keep], b[keep], lo, hi):
                culprits.append(_label(builder, tid))
    named = ", ".join(culprits) if culprits else "several templates together (no single one)"
    raise DataError(f"spec: the constraints admit no solution (empty polytope); conflicting: {named}")


def _check_integer_feasible(program: Program, builder: _Builder) -> None:
    from scipy.optimize import Bounds, LinearConstraint, milp

    integrality = np.r_[np.ones(program.n_user), np.zeros(program.n - program.n_user)]
    res = milp(
        np.zeros(program.n),
        constraints=LinearConstraint(program.A, program.b, program.b),
        integrality=integrality,
        bounds=Bounds(program.lower, program.upper),
        options={"time_limit": 10.0},
    )
    if res.status == 2:
        raise DataError(
            "spec: the constraints admit no 0/1 solution (the LP relaxation is feasible, the integer program is not)"
        )
