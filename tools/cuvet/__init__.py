"""CUVET: cost-per-unit-value equalization tree for budgeted treatment assignment.

fit() grows a decision-focused tree over an RCT, fits a power law dV = alpha s^beta per
leaf and spends the budget where the marginal value per unit cost is equal across
leaves; CUVET-B adds a hierarchical Bayesian posterior per leaf and a cost-feasibility
margin. See model.fit, model.CuvetModel.policy, evaluate.evaluate and compare.run.
"""
