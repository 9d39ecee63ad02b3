"""Small shared data for the irt tests (fixed seeds, tiny sizes)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def small2pl():
    from methodkit.tools.irt.simulate import DrawSpec, draw

    return draw(DrawSpec(model="2pl", profile="mmlu", n_models=300, n_items=12), 0)
