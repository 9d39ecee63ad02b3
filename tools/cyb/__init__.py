"""Catch Your Breath (Galashov et al. 2025): adaptive pause training with a <don't know> output.

Our reconstruction of the abstract (no public code): a model emits DK to request one more compute
step; a <pause> input token is then inserted; the three CYB losses (anytime prediction, variational,
compute budget) train when to abstain. Modules: config (settings and checks), model (the grouped
pause layout over core.nn.transformer), losses, data (corpora, arith), training, evaluation, decode.
"""
