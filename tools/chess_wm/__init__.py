"""Chess-World-Model (Walker & Lyons 2026): exact chess state tracking from move sequences.

Data (PGN -> move tokens + 75-label states), the four model families with their
ablations, training, evaluation and prediction. Import the submodules directly.
"""
