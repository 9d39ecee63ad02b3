"""cbf-sim and cbf-fit's shared parsing steps, kept out of the click layer: LO,HI pairs and the learner
settings (grid, filter options) from the parsed options."""

from __future__ import annotations


def parse_pair(text: str, flag: str) -> tuple[float, float]:
    """LO,HI with LO < HI (UsageError naming `flag` otherwise)."""
    from methodkit.core.errors import UsageError

    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"{flag} must be LO,HI (two numbers), got {text!r}") from None
    if not lo < hi:
        raise UsageError(f"{flag} must have LO < HI, got {text!r}")
    return lo, hi


def learner_settings(params: dict):
    """The GridSpec and FilterOptions of the learner options (learner_options in cli/_cbf_options)."""
    from methodkit.tools.cbf.forward import FilterOptions
    from methodkit.tools.cbf.grid import GridSpec

    grid = GridSpec(params["k"], parse_pair(params["v_range"], "--v-range"), parse_pair(params["s_range"], "--s-range"))
    if grid.v_range[0] <= 0 or grid.s_range[0] <= 0:
        from methodkit.core.errors import UsageError

        raise UsageError("--v-range and --s-range must be positive variances")
    fopts = FilterOptions(params["m0"], params["w0"], params["switch"], params["carry_over"])
    return grid, fopts
