"""The pause layout: grouped private attention = the explicit masked reference; decoding with the
cache (pauses inserted only on request) = the parallel training forward; finetune row expansion."""

import pytest
import torch

from methodkit.tools.cyb.model import (
    PauseLM,
    PauseModelConfig,
    expand_for_pauses,
    grouped_hidden,
    masked_hidden,
    private_mask,
    step_hidden,
    visible_hidden,
)


def _model(k=3, mask="private", seed=0):
    torch.manual_seed(seed)
    model = PauseLM(PauseModelConfig(d_model=32, n_layers=2, n_heads=4, ctx=12, max_pauses=k, pause_mask=mask))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # away from the symmetric init, so every path matters
    return model.eval()


def test_private_mask_by_hand():
    m = private_mask(2, 1)  # slots: (0,0) (0,1) (1,0) (1,1)
    expected = torch.tensor(
        [
            [1, 0, 0, 0],  # real 0 sees itself
            [1, 1, 0, 0],  # pause (0,1) sees real 0 and itself
            [1, 0, 1, 0],  # real 1 sees reals only: not the pause of group 0
            [1, 0, 1, 1],  # pause (1,1): reals <= 1 and its own pause
        ],
        dtype=torch.bool,
    )
    assert torch.equal(m, expected)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_grouped_equals_masked_reference(k):
    model = _model(k)
    x = torch.randint(0, 256, (2, 12))
    assert torch.allclose(grouped_hidden(model, x), masked_hidden(model, x), atol=1e-5)


def test_real_states_do_not_depend_on_pauses():
    model = _model(2)
    x = torch.randint(0, 256, (1, 10))
    real = grouped_hidden(model, x)[:, :, 0]
    plain = model.core.hidden(x)  # positions differ (t*3 vs t): compare against the K-layout with a new P row
    assert plain.shape == real.shape
    with torch.no_grad():
        model.core.embed.weight[model.pause_id].mul_(5.0)  # changing the pause embedding...
    assert torch.allclose(grouped_hidden(model, x)[:, :, 0], real, atol=1e-6)  # ...leaves real slots alone


def test_visible_mask_lets_real_tokens_see_pauses():
    model = _model(2, "visible")
    x = torch.randint(0, 256, (1, 8))
    before = visible_hidden(model, x)[:, 1:, 0]
    with torch.no_grad():
        model.core.embed.weight[model.pause_id].mul_(5.0)
    assert not torch.allclose(visible_hidden(model, x)[:, 1:, 0], before, atol=1e-4)


def test_cached_decoding_with_skipped_pauses_equals_training_forward():
    model = _model(3)
    x = torch.randint(0, 256, (1, 12))
    full = grouped_hidden(model, x)
    cache = model.core.new_cache(1)
    g = 4
    rng = torch.Generator().manual_seed(1)
    for t in range(12):
        h0 = step_hidden(model, x[:, t : t + 1], torch.tensor([t * g]), cache)
        assert torch.allclose(h0[0, 0], full[0, t, 0], atol=1e-5)
        keep = cache.length
        taken = int(torch.randint(0, 4, (1,), generator=rng))  # a policy that takes 0..3 pauses
        for k in range(1, taken + 1):
            hk = step_hidden(model, torch.tensor([[model.pause_id]]), torch.tensor([t * g + k]), cache)
            assert torch.allclose(hk[0, 0], full[0, t, k], atol=1e-5)
        cache.length = keep


def test_expand_for_pauses_adds_rows_once():
    torch.manual_seed(0)
    ce = PauseLM(PauseModelConfig(d_model=16, n_layers=1, n_heads=2, ctx=8, max_pauses=0))
    state = expand_for_pauses(ce.state_dict(), 256)
    emb = ce.state_dict()["core.embed.weight"]
    assert state["core.embed.weight"].shape == (257, 16)
    assert torch.allclose(state["core.embed.weight"][256], emb.mean(0))
    assert torch.all(state["core.lm_head.weight"][256] == 0)
    again = expand_for_pauses(state, 256)
    assert again["core.embed.weight"].shape == (257, 16)  # not duplicated
    pause = PauseLM(PauseModelConfig(d_model=16, n_layers=1, n_heads=2, ctx=8, max_pauses=2))
    pause.load_state_dict(state)


def test_dk_starts_near_sigmoid_minus_two():
    model = PauseLM(PauseModelConfig(d_model=32, n_layers=1, n_heads=4, ctx=8, max_pauses=2))
    probs = torch.softmax(model.group_logits(torch.randint(0, 256, (2, 8))), -1)[..., 256]
    assert 0.08 < float(probs.mean()) < 0.16
