"""A guard for big allocations: refuse a size flag before the work, with the estimate and the flag.

A size flag without an upper bound (--trials 1e8) used to run until the kernel's OOM killer ended
the process (and slowed everything else on the machine first). A tool estimates the bytes of its
largest allocations from its flags and calls `guard_memory` before making them.
"""

from __future__ import annotations

import os

from methodkit.core.errors import UsageError

SHARE = 0.8  # of the memory available now: leave room for the rest of the process and the machine


def available_bytes() -> int:
    """Memory available to a new allocation: MemAvailable (Linux), capped by RLIMIT_AS if set."""
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = 2**62  # unknown: do not refuse
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            available = min(available, soft)
    except (ImportError, ValueError, OSError):
        pass
    return available


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def guard_memory(estimate: float, what: str, flag: str, *, available: int | None = None) -> None:
    """Raise UsageError (exit 2) if `estimate` bytes do not fit in the memory available now.

    `what` says what the memory is for ("a table of 400,000,000 rows"), `flag` which option to
    lower; the message carries both numbers so that the user can pick a size that fits.
    """
    limit = SHARE * (available_bytes() if available is None else available)
    if estimate > limit:
        raise UsageError(
            f"{flag}: {what} needs about {human_bytes(estimate)} of memory, more than the "
            f"{human_bytes(limit)} this machine can spare now; lower {flag}"
        )
