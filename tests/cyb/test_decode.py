"""Adaptive decoding: the KV-cached loop (pauses inserted only on request) equals recomputation and
the parallel training forward's greedy stop."""

import torch

from methodkit.tools.cyb.decode import AdaptiveDecoder, generate, pause_report
from methodkit.tools.cyb.losses import slot_terms
from methodkit.tools.cyb.model import PauseLM, PauseModelConfig


def _model(mask="private"):
    torch.manual_seed(1)
    model = PauseLM(PauseModelConfig(d_model=32, n_layers=2, n_heads=4, ctx=16, max_pauses=2, pause_mask=mask))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        model.dk_bias.fill_(float(model.dk_bias) + 2.0)  # d near 1/2: both branches of the policy occur
    return model.eval()


def _ids():
    return torch.randint(0, 256, (14,), generator=torch.Generator().manual_seed(2)).tolist()


def test_cached_equals_recompute_and_parallel_greedy_stop():
    for mask in ("private", "visible"):
        model = _model(mask)
        ids = _ids()
        cached = pause_report(AdaptiveDecoder(model), ids, str)
        full = pause_report(AdaptiveDecoder(model, recompute=True), ids, str)
        assert [r["n_pauses"] for r in cached] == [r["n_pauses"] for r in full]
        for a, b in zip(cached, full):
            assert abs(a["p_target"] - b["p_target"]) < 1e-5
        x, y = torch.tensor([ids[:-1]]), torch.tensor([ids[1:]])
        with torch.no_grad():
            stop = slot_terms(model.group_logits(x), y, 256).greedy_stop(0.5)[0].tolist()
        assert [r["n_pauses"] for r in cached] == stop
        assert 0 < sum(stop) < 2 * len(stop)  # the test exercises pausing and answering


def test_fixed_pauses_for_ce_pause():
    model = _model()
    rows = pause_report(AdaptiveDecoder(model, fixed_pauses=2), _ids(), str)
    assert all(r["n_pauses"] == 2 for r in rows)


def test_generate_same_seed_same_tokens():
    model = _model()
    a = generate(AdaptiveDecoder(model, policy="sample", seed=4), [65, 66], 8, temperature=1.0)
    b = generate(AdaptiveDecoder(model, policy="sample", seed=4), [65, 66], 8, temperature=1.0)
    c = generate(AdaptiveDecoder(model, policy="sample", seed=4, recompute=True), [65, 66], 8, temperature=1.0)
    assert a == b == c and len(a[0]) == 8
