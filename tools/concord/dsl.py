"""A tiny symbolic expression language for the cost templates.

Nodes overload + - * / and comparisons; `minimum`, `maximum`, `ceil`, `where`
and integer `pow` complete it. The free symbols of an expression are its
dependency set, so a template cannot read something it does not declare.
An expression compiles once to a vectorised NumPy lambda whose source is also
its canonical text (hashed into the cache signature). Only IEEE-exact
elementwise operations are generated, so evaluating on a few unique strategy
rows or on every candidate gives bitwise-identical floats.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

NAMESPACES = ("layer", "global", "hw", "sigma")


class Expr:
    """Base node. Subclasses define `children`, `_code` and `_key`."""

    children: tuple = ()

    # arithmetic ------------------------------------------------------------
    def __add__(self, other):
        return _binary("+", self, other)

    def __radd__(self, other):
        return _binary("+", other, self)

    def __sub__(self, other):
        return _binary("-", self, other)

    def __rsub__(self, other):
        return _binary("-", other, self)

    def __mul__(self, other):
        return _binary("*", self, other)

    def __rmul__(self, other):
        return _binary("*", other, self)

    def __truediv__(self, other):
        return _binary("/", self, other)

    def __rtruediv__(self, other):
        return _binary("/", other, self)

    def __neg__(self):
        return _binary("-", 0.0, self)

    def __pow__(self, exponent):
        if not isinstance(exponent, int) or exponent < 0:
            raise TypeError("DSL pow takes a non-negative integer exponent (exact products only)")
        out: Expr = Const(1.0)
        for _ in range(exponent):
            out = out * self
        return out

    # comparisons (return 0/1 masks usable in `where`) ----------------------
    def eq(self, other):
        return _binary("==", self, other)

    def __lt__(self, other):
        return _binary("<", self, other)

    def __le__(self, other):
        return _binary("<=", self, other)

    def __gt__(self, other):
        return _binary(">", self, other)

    def __ge__(self, other):
        return _binary(">=", self, other)

    __hash__ = object.__hash__

    # analysis ----------------------------------------------------------------
    @cached_property
    def free_symbols(self) -> frozenset[str]:
        if isinstance(self, Sym):
            return frozenset([self.name])
        out: frozenset[str] = frozenset()
        for child in self.children:
            out |= child.free_symbols
        return out

    def substitute(self, values: Mapping[str, float]) -> Expr:
        """Replace the symbols named in `values` by constants (layer-kind constants, fixed globals)."""
        if isinstance(self, Sym):
            return Const(float(values[self.name])) if self.name in values else self
        if isinstance(self, Const):
            return self
        return self._rebuild([c.substitute(values) for c in self.children])

    @property
    def code(self) -> str:
        return self._code()

    def compile(self) -> Compiled:
        return Compiled(self)


@dataclass(eq=False)
class Const(Expr):
    value: float

    def _code(self) -> str:
        return repr(float(self.value))


@dataclass(eq=False)
class Sym(Expr):
    name: str

    def __post_init__(self):
        space = self.name.split(".", 1)[0]
        if space not in NAMESPACES or "." not in self.name:
            raise ValueError(f"symbol {self.name!r} must live in one of the namespaces {NAMESPACES}")

    def _code(self) -> str:
        return f"E[{self.name!r}]"


@dataclass(eq=False)
class BinOp(Expr):
    op: str
    left: Expr
    right: Expr

    @property
    def children(self):
        return (self.left, self.right)

    def _rebuild(self, kids):
        return _binary(self.op, kids[0], kids[1])

    def _code(self) -> str:
        a, b = self.left._code(), self.right._code()
        if self.op in ("==", "<", "<=", ">", ">="):
            return f"np.asarray({a} {self.op} {b}, dtype=np.float64)"
        return f"({a} {self.op} {b})"


@dataclass(eq=False)
class Call(Expr):
    fn: str
    args: tuple

    @property
    def children(self):
        return self.args

    def _rebuild(self, kids):
        return _call(self.fn, *kids)

    def _code(self) -> str:
        parts = [a._code() for a in self.args]
        if self.fn == "where":
            return f"np.where({parts[0]} != 0.0, {parts[1]}, {parts[2]})"
        return f"np.{self.fn}({', '.join(parts)})"


def _wrap(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Const(float(value))
    raise TypeError(f"cannot use {type(value).__name__} in a DSL expression")


_FOLD = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "==": lambda a, b: float(a == b),
    "<": lambda a, b: float(a < b),
    "<=": lambda a, b: float(a <= b),
    ">": lambda a, b: float(a > b),
    ">=": lambda a, b: float(a >= b),
}


def _binary(op: str, a, b) -> Expr:
    a, b = _wrap(a), _wrap(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(_FOLD[op](a.value, b.value))
    # identities keep substituted templates small; they are exact in IEEE arithmetic
    if op == "*" and (_is(a, 0.0) or _is(b, 0.0)):
        return Const(0.0)
    if op == "*" and _is(a, 1.0):
        return b
    if op in ("*", "/") and _is(b, 1.0):
        return a
    if op in ("+", "-") and _is(b, 0.0):
        return a
    if op == "+" and _is(a, 0.0):
        return b
    return BinOp(op, a, b)


def _is(e: Expr, v: float) -> bool:
    return isinstance(e, Const) and e.value == v


def _call(fn: str, *args) -> Expr:
    args = tuple(_wrap(a) for a in args)
    if all(isinstance(a, Const) for a in args):
        import math

        vals = [a.value for a in args]
        folded = {
            "minimum": lambda: min(vals),
            "maximum": lambda: max(vals),
            "ceil": lambda: float(math.ceil(vals[0])),
            "where": lambda: vals[1] if vals[0] != 0.0 else vals[2],
        }[fn]()
        return Const(folded)
    if fn == "where" and isinstance(args[0], Const):
        return args[1] if args[0].value != 0.0 else args[2]
    return Call(fn, args)


def minimum(a, b) -> Expr:
    return _call("minimum", a, b)


def maximum(a, b) -> Expr:
    return _call("maximum", a, b)


def ceil(a) -> Expr:
    return _call("ceil", a)


def where(cond, a, b) -> Expr:
    """`a` where `cond` is non-zero, else `b` (elementwise)."""
    return _call("where", cond, a, b)


class Compiled:
    """An expression compiled once to `lambda E: ...` over NumPy arrays and scalars."""

    def __init__(self, expr: Expr):
        import numpy as np

        self.expr = expr
        self.source = expr.code
        self.symbols = tuple(sorted(expr.free_symbols))
        self.code_hash = hashlib.blake2b(self.source.encode(), digest_size=16).hexdigest()
        self._fn = eval(f"lambda E: {self.source}", {"np": np})  # noqa: S307 - our own generated code

    def __call__(self, env: Mapping[str, object], size: int):
        """Evaluate with `env` (symbol -> scalar or float64 array of length `size`); returns a float64 vector."""
        import numpy as np

        out = np.asarray(self._fn(env), dtype=np.float64)
        if out.ndim == 0:
            out = np.full(size, float(out), dtype=np.float64)
        return out


def sym(name: str) -> Sym:
    return Sym(name)
