"""Quantities with explicit units in spec files: "80GiB", "900GB/s", "312TFLOP/s", "5us"."""

from __future__ import annotations

import re

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_TIME = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "ns": 1e9}  # divisors: 5/1e6 is exactly 5e-6

KINDS = ("bytes", "bandwidth", "flops", "time")


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


def parse(value, kind: str) -> float:
    """Read `value` as a quantity of `kind` in base units (bytes, bytes/s, FLOP/s, seconds).

    A bare number is taken in base units; strings need a known unit.
    """
    if isinstance(value, bool):
        raise UnitError(f"expected a {kind} quantity, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise UnitError(f"expected a {kind} quantity, got {value!r}")
    text = value.strip().replace(" ", "")
    match = re.fullmatch(_NUMBER + r"([A-Za-zµ/]*)", text)
    if not match:
        raise UnitError(f"cannot read {value!r} as a {kind} quantity")
    number, unit = float(match.group(1)), match.group(2)
    if kind == "time":
        if unit in _TIME:
            return number / _TIME[unit]
        raise UnitError(f"unknown time unit in {value!r} (use s, ms, us, ns)")
    suffix = {"bytes": "B", "bandwidth": "B/s", "flops": "FLOP/s"}[kind]
    alt = {"flops": ("FLOPS", "FLOP/s", "flop/s")}.get(kind, (suffix,))
    for tail in alt:
        if unit.endswith(tail):
            prefix = unit[: -len(tail)]
            if prefix in _BINARY:
                return number * _BINARY[prefix]
            if prefix in _PREFIX:
                return number * _PREFIX[prefix]
    raise UnitError(f"unknown unit in {value!r} for {kind} (e.g. 80GiB, 900GB/s, 312TFLOP/s)")
