"""IRT estimators under AI-benchmark regimes: simulator, four estimators, scoring, sweeps.

Modules: models (response functions), profiles (benchmark item profiles), simulate
(capability distributions and response draws), data (response matrices in and out),
mml / mcmc / vi / psn (the estimators), estimators (the registry and run()),
evaluate (linking and metrics), sweep (grid study driver), report (tidy table and
markdown), diagnostics (R-hat, ESS), kernels (Numba).
"""
