"""Categorical Bayes Filter (CBF) for joint volatility-stochasticity learning, with particle-filter baselines.

The learner's model (Piray & Daw 2021, 2024): a latent x_t drifts with variance v (volatility) and is
observed with noise s (stochasticity). CBF keeps one exact Kalman filter per cell of a K x K grid of
(v, s) values whose nodes are Beta quantiles, so the observer's evidence and the response likelihood
are deterministic and differentiable in the grid's location and dispersion.
"""
