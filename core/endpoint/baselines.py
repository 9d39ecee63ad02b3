"""Built-in baselines: named non-model answerers a method ships beside the real models.

Each method keeps its own registry (its names feed the --model click.Choice of that method only):

    BASELINES = BaselineRegistry()

    @BASELINES.register("always-a", "answers (A) to every question")
    def always_a(messages, params):
        return "(A)"

A baseline gets the chat messages and parameters and returns the answer text (or an Answer). So that
`--help` stays fast, a registry entry may also be a "package.module:function" string, imported on use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


class BaselineRegistry(dict):
    """name -> function(messages, params) -> str, or a "module:function" string resolved lazily."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help: dict[str, str] = {}

    def register(self, name: str, help: str = "") -> Callable:
        def deco(function):
            self[name] = function
            self.help[name] = help
            return function

        return deco

    def resolve(self, name: str) -> Callable:
        entry = self[name]
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(module), attr)
            self[name] = entry
        return entry
