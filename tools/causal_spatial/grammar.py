"""Grounding by a small grammar: which object moves, how, and what the options name.

The COW needs {object, motion} from the question. A colour x shape lexicon finds the objects, a few
motion patterns find the verb and its numbers; nothing else of the item is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from methodkit.core.errors import DataError
from methodkit.tools.causal_spatial.scenes import PALETTE

_COLOUR = "|".join(PALETTE)
_NOUN = "box|cylinder|ball|vase|mat"
OBJECT = re.compile(rf"\b(?:the\s+)?({_COLOUR})\s+({_NOUN})\b", re.I)
OPTION = re.compile(r"^\(([A-J])\)\s*(.+?)\s*$", re.M)

_PATTERNS = [
    ("collision", re.compile(r"car moves forward ([\d.]+) m", re.I)),
    ("occlusion", re.compile(rf"the ({_COLOUR}) ({_NOUN}) moves ([\d.]+) m to its left", re.I)),
    ("compatibility", re.compile(rf"if the ({_COLOUR}) ({_NOUN}) is released", re.I)),
    ("compatibility", re.compile(r"which of these objects would end up inside", re.I)),
    ("trajectory", re.compile(rf"the ({_COLOUR}) ball is thrown .*? at ([\d.]+) m/s, ([\d.]+) degrees", re.I)),
    ("ramp", re.compile(rf"the ({_COLOUR}) ball slides up the \w+ ramp \(([\d.]+) degrees[^)]*\) at ([\d.]+) m/s", re.I)),
]
RESTITUTION = re.compile(r"restitution of (\d+(?:\.\d+)?)", re.I)


@dataclass
class Grounding:
    task: str
    kind: str  # linear | translate | release | launch
    mover: str | None  # colour of the moving object ("car" for the car)
    distance: float | None = None
    speed: float | None = None
    elevation: float | None = None
    launcher: str = "throw"  # trajectory: throw | ramp (the speed is then up the slope, elevation its pitch)
    restitution: float | None = None  # trajectory: the wall's coefficient of restitution, when one is stated
    targets: list[str] = field(default_factory=list)  # colours the question asks about
    options: dict[str, str] = field(default_factory=dict)  # letter -> option text


def option_colour(text: str) -> str | None:
    m = OBJECT.search(text)
    return m.group(1).lower() if m else None


def ground(question: str) -> Grounding:
    stem = question.split("\n(", 1)[0]
    options = {m.group(1): m.group(2) for m in OPTION.finditer(question)}
    option_colours = [c for c in (option_colour(t) for t in options.values()) if c]
    for task, pattern in _PATTERNS:
        m = pattern.search(stem)
        if not m:
            continue
        if task == "collision":
            return Grounding(task, "linear", "car", distance=float(m.group(1)), targets=option_colours,
                             options=options)  # fmt: skip
        if task == "occlusion":
            asked = [c.group(1).lower() for c in OBJECT.finditer(stem[m.end() :])]
            return Grounding(task, "translate", m.group(1).lower(), distance=float(m.group(3)),
                             targets=asked or option_colours, options=options)  # fmt: skip
        if task == "compatibility":
            movers = [m.group(1).lower()] if m.groups() else option_colours
            return Grounding(task, "release", None, targets=movers, options=options)
        bounce = RESTITUTION.search(stem)
        e = float(bounce.group(1)) if bounce else None
        if task == "ramp":
            return Grounding("trajectory", "launch", m.group(1).lower(), speed=float(m.group(3)),
                             elevation=float(m.group(2)), launcher="ramp", restitution=e, targets=option_colours,
                             options=options)  # fmt: skip
        return Grounding(task, "launch", m.group(1).lower(), speed=float(m.group(2)), elevation=float(m.group(3)),
                         restitution=e, targets=option_colours, options=options)  # fmt: skip
    raise DataError(f"cannot ground the question (no known motion phrase): {stem[:80]!r}")


GROUNDER_PROMPT = (
    "Read this question about a 3D scene and return only a JSON object with the keys: task (one of "
    "collision, compatibility, occlusion, trajectory), kind (linear, release, translate or launch), mover (the "
    "colour of the moving object, or 'car'), distance (metres or null), speed (m/s or null), elevation (degrees "
    "or null), launcher (throw or ramp), restitution (the wall's coefficient or null), targets (list of the colours "
    "of the objects the question or its options ask about).\n\n"
)


def ground_with_model(questions: list[str], endpoint) -> list[Grounding]:
    """--grounder: ask a model for {object, motion} as JSON (through core.endpoint), one request per question."""
    from methodkit.core.endpoint import Request, parse_json

    answers = endpoint.ask_many([Request.user(GROUNDER_PROMPT + q) for q in questions])
    out = []
    for q, a in zip(questions, answers):
        parsed = parse_json(a.text)
        v = parsed.value if parsed.ok else None
        if not isinstance(v, dict) or v.get("task") not in {"collision", "compatibility", "occlusion", "trajectory"}:
            raise DataError(f"--grounder: unusable grounding for {q.splitlines()[0][:60]!r}: {a.text[:80]!r}")
        options = {m.group(1): m.group(2) for m in OPTION.finditer(q)}

        def num(key, v=v):
            x = v.get(key)
            return float(x) if isinstance(x, int | float) else None

        targets = [str(t).lower() for t in v.get("targets") or [] if str(t).lower() in PALETTE]
        out.append(Grounding(v["task"], str(v.get("kind")), str(v.get("mover") or "").lower() or None,
                             distance=num("distance"), speed=num("speed"), elevation=num("elevation"),
                             launcher="ramp" if v.get("launcher") == "ramp" else "throw",
                             restitution=num("restitution"), targets=targets, options=options))  # fmt: skip
    return out
