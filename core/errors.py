"""Exceptions that carry their exit status, so the one CLI handler can map them.

Exit statuses (CONVENTIONS): 0 success, 1 failure while running, 2 bad usage or
bad input data, 3 a check the user asked for failed, 130 interrupted.
"""

from __future__ import annotations


class MethodkitError(Exception):
    """Base class: a message meant for the user and the exit status to use."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class DataError(MethodkitError):
    """The input data is unusable: missing file, bad format, malformed row, NaN..."""

    exit_code = 2


class UsageError(MethodkitError):
    """The command line asks for something impossible (bad flag combination...)."""

    exit_code = 2


class MissingExtraError(UsageError):
    """An optional dependency is not installed; the message says how to install it."""

    def __init__(self, package: str, extra: str):
        super().__init__(
            f"this needs the Python package '{package}'; install it with: pip install 'methodkit[{extra}]'"
        )


class RunFailure(MethodkitError):
    """The computation itself failed (numerical breakdown, out of memory...)."""

    exit_code = 1


class CheckFailed(MethodkitError):
    """A gate the user asked for (--fail-if-reject, --fail-below) did not pass."""

    exit_code = 3


def require(module: str, extra: str):
    """Import an optional dependency or raise MissingExtraError naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module.split(".")[0], extra) from exc
