"""The packages list in pyproject.toml names every subpackage; bare `core` is not importable."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"cli": "methodkit.cli", "tools": "methodkit.tools", "core": "methodkit.core"}


def test_packages_list_matches_folders():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {v: k for k, v in ROOTS.items()}
    on_disk = set()
    for folder, dotted in ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            on_disk.add(".".join((dotted, *relative)))
    assert set(config["packages"]) == on_disk


def test_no_bare_top_level_packages():
    for name in ROOTS:
        assert importlib.util.find_spec(name) is None, f"bare '{name}' is importable: run the pytest script"
    assert importlib.util.find_spec("methodkit.core.io") is not None


def test_methodkit_is_a_namespace():
    assert not (REPO / "methodkit").exists()
    import methodkit

    assert getattr(methodkit, "__file__", None) is None
