"""The hazard mechanisms this build simulates, by taxonomy name: each module gives FACTOR_KEY (the one
scenario key a deciding factor changes), draw(rng, person_spec, factor) -> (dangerous, safe) params,
simulator(width, height), events(params, trajectory) -> (active, hit), shapes(sim, params, t) and
CORRIDOR_FURNITURE (whether its scene holds scene.py's back wall and table, which the top-down view then draws)."""

from __future__ import annotations

from methodkit.tools.vesper import collision, falling_load, load, pinch, scene, trip

HAZARDS = {"collision": collision, "trip": trip, "falling_load": falling_load, "pinch": pinch}
PARAMS = {"collision": scene.Params, "trip": load.LoadParams, "falling_load": load.LoadParams, "pinch": pinch.DoorParams}


def get(name: str):
    return HAZARDS[name]


def params(hazard: str, values: dict):
    """The scenario's params object from its JSON (scenarios/<id>.json 'params')."""
    return PARAMS[hazard](**values)
