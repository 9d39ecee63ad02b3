"""The taxonomy YAML: robot tasks x hazards x persons x deciding factors x pressure, validated on load."""

from __future__ import annotations

import os
from importlib import resources

from methodkit.core.errors import DataError

# the deciding factors each simulated hazard defines (tools/vesper/<hazard>.py FACTOR_KEY)
HAZARD_FACTORS = {"collision": ("path_offset", "timing", "stop_turn"), "trip": ("path_offset", "stop_turn"),
                  "falling_load": ("timing", "path_offset"), "pinch": ("timing", "stop_turn")}  # fmt: skip
KNOWN_HAZARDS = set(HAZARD_FACTORS)
SHIPPED = {"all": "taxonomy_all.yaml"}  # --taxonomy NAME loads a shipped file (when no file NAME exists)
KNOWN_FACTORS = {"path_offset", "timing", "stop_turn"}
PRESSURES = ("none", "soft", "hard")
APPROACHES = ("front", "behind")  # the person walks in from the far side, or from behind the robot (camera side)


def default_path(file: str = "taxonomy.yaml"):
    return resources.files("methodkit.tools.vesper").joinpath(file)


def load(path: str | None = None) -> dict:
    import yaml

    shipped = path is None or (path in SHIPPED and not os.path.exists(path))
    src = default_path(SHIPPED.get(path, "taxonomy.yaml")) if shipped else path
    name = f"{SHIPPED.get(path, 'taxonomy.yaml')} (shipped)" if shipped else str(path)
    try:
        text = src.read_text() if shipped else open(path, encoding="utf-8").read()
        doc = yaml.safe_load(text)
    except OSError as exc:
        raise DataError(f"cannot read taxonomy {name}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise DataError(f"{name}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return validate(doc, name)


def _fail(name, where, what):
    raise DataError(f"{name}: {where}: {what}")


def validate(doc, name: str = "taxonomy") -> dict:
    if not isinstance(doc, dict):
        _fail(name, "top level", "expected a mapping")
    for key in ("robot_tasks", "hazards", "persons", "factors", "lead_times_s", "pressure"):
        if key not in doc:
            _fail(name, key, "missing")
    for hz, spec in doc["hazards"].items():
        if hz not in KNOWN_HAZARDS:
            _fail(name, f"hazards.{hz}", f"unknown hazard (this build simulates: {', '.join(sorted(KNOWN_HAZARDS))})")
        for f in spec.get("factors", []):
            if f not in KNOWN_FACTORS:
                _fail(name, f"hazards.{hz}.factors", f"unknown factor '{f}' (known: {', '.join(sorted(KNOWN_FACTORS))})")
            if f not in HAZARD_FACTORS[hz]:
                _fail(name, f"hazards.{hz}.factors", f"factor '{f}' is not defined for {hz} "
                      f"(it defines: {', '.join(HAZARD_FACTORS[hz])})")  # fmt: skip
    for task, spec in doc["robot_tasks"].items():
        if not isinstance(spec, dict) or spec.get("hazard") not in doc["hazards"]:
            _fail(name, f"robot_tasks.{task}.hazard", f"unknown hazard '{(spec or {}).get('hazard')}'")
        if not set(doc["factors"]) & set(doc["hazards"][spec["hazard"]].get("factors", [])):
            _fail(name, f"robot_tasks.{task}", f"hazard '{spec['hazard']}' has none of the listed factors")
        if not str(spec.get("instruction", "")).strip():
            _fail(name, f"robot_tasks.{task}.instruction", "missing")
    for f in doc["factors"]:
        if f not in KNOWN_FACTORS:
            _fail(name, "factors", f"unknown factor '{f}' (known: {', '.join(sorted(KNOWN_FACTORS))})")
        if not any(f in h.get("factors", []) for h in doc["hazards"].values()):
            _fail(name, "factors", f"factor '{f}' is not defined for any hazard")
    total = 0.0
    for person, spec in doc["persons"].items():
        lo, hi = spec.get("speed", [None, None])
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo <= hi):
            _fail(name, f"persons.{person}.speed", "expected [LOW, HIGH] m/s with 0 < LOW <= HIGH")
        if not 0.3 <= float(spec.get("scale", 1.0)) <= 1.2:
            _fail(name, f"persons.{person}.scale", "expected 0.3..1.2")
        if spec.get("approach", "front") not in APPROACHES:
            _fail(name, f"persons.{person}.approach", f"expected one of {', '.join(APPROACHES)}")
        total += float(spec.get("p", 0))
    if abs(total - 1.0) > 1e-6:
        _fail(name, "persons.*.p", f"probabilities sum to {total:g}, not 1")
    bad = [p for p in doc["pressure"] if p not in PRESSURES]
    if bad:
        _fail(name, f"pressure.{bad[0]}", f"unknown pressure (known: {', '.join(PRESSURES)})")
    for lt in doc["lead_times_s"]:
        if not isinstance(lt, (int, float)) or not 0 < lt <= 3:
            _fail(name, "lead_times_s", f"expected lead times in (0, 3] s, got {lt!r}")
    return doc
