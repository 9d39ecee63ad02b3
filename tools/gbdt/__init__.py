"""Clean-label poisoning of LightGBM gradient-boosted trees (gbdt-poison).

BoostIn influence picks the rows, split gain picks the columns, and a projected
zeroth-order ascent moves those rows inside class-shaped ellipsoids while their
labels stay untouched. Entry points: `attack.run`, `sweep.run`, `influence.run`,
`victim.evaluate`.
"""
