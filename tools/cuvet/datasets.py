"""The randomized trials in PyPI causaldata that suit budgeted treatment assignment.

thornton_hiv (cash-incentive doses with a cost), social_insure (a randomized information
session) and nsw_mixtape (the NSW job-training experiment) are RCTs; causaldata's other
sets are observational or toy tables.
"""

from __future__ import annotations

from methodkit.core.datasets import Dataset, register

_LICENCE = "MIT (causaldata)"


def _loader(name: str):
    def load():
        from methodkit.tools.cuvet.synth import _causaldata

        return _causaldata(name)

    return load


register(
    Dataset(
        "thornton_hiv",
        _loader("thornton_hiv"),
        "causaldata",
        _LICENCE,
        "Thornton (2008) Malawi RCT: randomized cash incentive tinc to learn one's HIV result, got = learned it",
        "got",
    )
)
register(
    Dataset(
        "social_insure",
        _loader("social_insure"),
        "causaldata",
        _LICENCE,
        "Cai et al. (2015) China RCT: randomized intensive insurance session, takeup_survey = bought weather insurance",
        "takeup_survey",
    )
)
register(
    Dataset(
        "nsw_mixtape",
        _loader("nsw_mixtape"),
        "causaldata",
        _LICENCE,
        "NSW job-training experiment (LaLonde 1986): randomized treat, re78 = 1978 earnings",
        "re78",
    )
)
