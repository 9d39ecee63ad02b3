"""CRAFT: counterfactual-to-interactive reinforcement fine-tuning of a vocabulary-scoring driving policy.

Modules: suites (the scenario suites), policy (MLP / set-attention scorers over the 16
candidates), collect (on-policy episodes with the decision records), proxy (group
counterfactual scores and the grounded realised scores), kernels (interaction-critical
events), losses (dual-clip surrogate, asymmetric KL), finetune (the loop and its methods),
demos, pretrain, evaluate.
"""
