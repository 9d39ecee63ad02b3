"""Scenario suites: lists of routes over six highway families, and the built-in suites.

A suite is a JSON list of routes `{"family": F, "seed": S, "params": {...}}` (params are
methodkit-sim family parameters, see `methodkit-sim families`), or an object
`{"routes": [...]}`. Route r is scene 0 of the one-entry methodkit-sim spec
`{"seed": S, "family": F, "count": 1, "params": P}`, so a route does not depend on its
position in the suite. The built-ins draw each route's traffic parameters (lanes, density,
politeness, aggressive share) from its seed.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import DataError, UsageError

FAMILIES = ("cruise-dense", "merge", "lane-drop", "exit", "cut-in", "stopped-vehicle")
ROUTE_LENGTH = 600.0  # m (the 1.2 km halved: CPU budget)
SPEED_LIMIT = 30.0
# 1.5 x the free-flow time at 25 m/s (the ego's start speed) + 10 s of merging slack
DURATION = 1.5 * ROUTE_LENGTH / 25.0 + 10.0
BUILTIN = {"hwy-mini": (5, 0), "hwy-train": (40, 1000), "hwy-test": (20, 5000)}  # routes per family, seed base
ROUTE_KEYS = {"family", "seed", "params"}


def builtin(name: str) -> list[dict]:
    """A built-in suite: per family `n` routes with seeds base..base+n-1 (hwy-test's are disjoint)."""
    if name not in BUILTIN:
        raise DataError(f"unknown suite {name!r} (known: {', '.join(BUILTIN)})")
    n, base = BUILTIN[name]
    return [route_for(family, base + k) for family in FAMILIES for k in range(n)]


def route_for(family: str, seed: int) -> dict:
    """One route with traffic parameters drawn from (family, seed)."""
    rng = np.random.default_rng([FAMILIES.index(family), seed])
    lanes = int(rng.integers(2, 5))
    params = {
        "lanes": lanes,
        "length": ROUTE_LENGTH,
        "duration": DURATION,
        "speed_limit": SPEED_LIMIT,
        "vehicles": int(rng.integers(12, 21)),
        "density": round(float(rng.uniform(0.8, 1.6)), 3),
        "politeness": round(float(rng.uniform(0.0, 0.5)), 3),
        "aggressive_fraction": round(float(rng.uniform(0.0, 0.3)), 3),
    }
    if family == "cruise-dense":
        params["density"] = round(float(rng.uniform(1.5, 2.5)), 3)
    return {"family": family, "seed": int(seed), "params": params}


def parse(doc, where: str = "suite") -> list[dict]:
    """Validated routes of a suite document; errors name the route index."""
    from methodkit.core.sim.highway import scenarios

    routes = doc.get("routes") if isinstance(doc, dict) else doc
    if not isinstance(routes, list) or not routes:
        raise DataError(f"{where}: a suite is a non-empty JSON list of routes (or {{'routes': [...]}})")
    out = []
    for r, route in enumerate(routes):
        at = f"{where}: route {r}"
        if not isinstance(route, dict):
            raise DataError(f"{at} must be an object")
        extra = set(route) - ROUTE_KEYS
        if extra:
            raise DataError(f"{at}: unknown key {sorted(extra)[0]!r} (known: family, seed, params)")
        family = route.get("family")
        if family not in FAMILIES:
            raise DataError(f"{at}: unknown family {family!r} (known: {', '.join(FAMILIES)})")
        seed = route.get("seed", r)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise DataError(f"{at}: seed must be a non-negative integer, got {seed!r}")
        params = scenarios.check_params(family, route.get("params", {}), at)
        out.append({"family": family, "seed": seed, "params": params})
    return out


def scenes(routes: list[dict]):
    """(SceneInit list, route ids) of validated routes."""
    from methodkit.core.sim.highway import scenarios

    inits, ids = [], []
    for route in routes:
        spec = {"seed": route["seed"], "family": route["family"], "count": 1, "params": route["params"]}
        scene, _, _ = scenarios.generate(spec)
        inits.append(scene[0])
        ids.append(f"{route['family']}-{route['seed']}")
    return inits, ids


def fingerprint(routes: list[dict]) -> str:
    from methodkit.core.checkpoint import spec_hash

    return spec_hash({"routes": routes})


def resolve(value: str, read_input, flag: str = "--suite") -> list[dict]:
    """The routes a --suite value names: a built-in suite, or a suite JSON file (`-` is stdin) read
    through `read_input(path)` (the command's input reader, so the file is named in errors)."""
    from methodkit.core import io

    if value in BUILTIN:
        return builtin(value)
    if value.endswith(".json") or value == "-":
        data = read_input(value)
        return parse(io.read_json(data), data.name)
    raise UsageError(f"{flag} {value!r}: not a built-in suite ({', '.join(BUILTIN)}) nor a .json file")


def check_backend(name: str, verb: str = "eval") -> None:
    """highway-env is `eval`'s parity backend: without the package, exit 2 with the pip command; for
    `demos` (the privileged expert) and `finetune` (counterfactual groups) only the Numba simulator works."""
    if name != "highway-env":
        return
    from methodkit.core.errors import require

    require("highway_env", "craft")
    if verb != "eval":
        raise UsageError(
            f"{verb} --backend highway-env: highway-env has no privileged expert and no snapshot of its road for "
            "the counterfactual groups; it is the parity backend of `craft-finetune eval --backend highway-env`"
        )
