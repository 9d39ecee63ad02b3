"""The paper's qualitative effect at toy size: adding the MCD terms to KD brings the student's circuits
closer to the teacher's (lower node-level transport and pathway OT cost) than KD alone, in equal steps."""

import numpy as np
import torch

from methodkit.core.train import TrainConfig
from methodkit.tools.mcd import distill as D
from methodkit.tools.mcd import evaluate as E
from methodkit.tools.mcd import graph as G
from methodkit.tools.mcd import losses, models
from methodkit.tools.mcd import transcoder as T


def _teacher():
    teacher = models.build(models.model_config("micro", 12, 24, layers=2, width=16), 0).eval()
    for p in teacher.parameters():
        p.data.mul_(6.0)  # a random teacher with sharp, structured computation
    tcs = T.for_model(teacher, k=4)
    for tc in tcs.layers:
        tc.b_dec.data.zero_()
    return teacher, tcs.eval()


def _distill(teacher, t_tcs, windows, lam):
    student = models.build(models.model_config("micro", 12, 24, layers=2, width=8), 1)
    cfg = D.DistillConfig(kd="fkl", lam_path=lam, lam_node=lam, n_targets=2, mcd_warmup=2,
                          graph=G.GraphSettings(max_nodes=8, n_paths=8))  # fmt: skip
    result, bundle, s_tcs, lmap = D.distill(teacher, t_tcs, student, windows, cfg,
                                            TrainConfig(steps=40, batch_size=4, lr=1e-2, log_every=40, seed=0),
                                            subset=torch.arange(24))  # fmt: skip
    return student, bundle, s_tcs, lmap, result


def test_mcd_lowers_the_circuit_distance_kd_alone_leaves():
    teacher, t_tcs = _teacher()
    stream = np.random.default_rng(0).integers(0, 24, 4000).astype(np.uint8)
    windows = models.Windows.cut(stream, 12, 32, 0)
    held = models.Windows.cut(stream, 12, 8, 5)
    measured = {}
    for lam in (0.0, 1.0):
        student, bundle, s_tcs, lmap, result = _distill(teacher, t_tcs, windows, lam)
        assert result.mcd_batches == (38 if lam else 0)
        x, _ = held.batch(np.arange(8))
        rows = losses.bound_check(teacher, t_tcs, student, s_tcs, bundle.adapter, x, lmap, positions=[4, 8, 11])
        assert all(r["discrepancy"] <= r["bound"] + 1e-4 for r in rows)
        cost, _ = E.pathway_cost(teacher, t_tcs, student, s_tcs, held, G.GraphSettings(max_nodes=8, n_paths=8),
                                 torch.arange(24), G.CostWeights(), 2, 0)  # fmt: skip
        measured[lam] = (np.mean([r["w1"] * r["m_t"] for r in rows]), cost)
    assert measured[1.0][0] < measured[0.0][0]  # node-level transport (the bound's main term)
    assert measured[1.0][1] < measured[0.0][1]  # pathway OT cost
