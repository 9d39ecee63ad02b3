"""The model families: chunked vs step kernels (values and gradients), the torch-slices oracle,
causality, padding, the shared 1,878-logit head and the loss."""

from __future__ import annotations

import pytest
import torch

from methodkit.tools.chess_wm import spec
from methodkit.tools.chess_wm.models import ModelConfig, build_model, label_nll, masked_loss, n_params, split_logits
from methodkit.tools.chess_wm.models.gdn import delta_rule_chunk, delta_rule_recurrent
from methodkit.tools.chess_wm.models.slice import SLiCELayer

RECURRENT = ("slice", "slice-diag", "gdn", "gdn-pos", "mamba3", "mamba2")


def _rel(a, b):
    return float(((a - b).abs().max() / b.abs().max().clamp(min=1e-12)).detach())


def _outputs_and_grads(model, tokens, kernels):
    """Per kernel: the model's output and its flattened parameter gradients for one loss."""
    outs, grads = {}, {}
    for kernel in kernels:
        model.zero_grad()
        model.set_kernel(kernel)
        out = model(tokens)
        out.square().mean().backward()
        outs[kernel] = out.detach()
        grads[kernel] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return outs, grads


@pytest.mark.parametrize("arch", RECURRENT)
def test_chunked_equals_step_form_values_and_gradients(arch):
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, size="d64", dropout=0.0))
    tokens = torch.randint(0, 20480, (2, 80))
    outs, grads = _outputs_and_grads(model, tokens, ("chunk", "recurrent"))
    assert _rel(outs["chunk"], outs["recurrent"]) < 1e-4
    assert _rel(grads["chunk"], grads["recurrent"]) < 1e-3


@pytest.mark.parametrize("arch", ["slice", "slice-diag", "mamba3", "mamba2"])
def test_numba_scan_equals_step_form_values_and_gradients(arch):
    torch.manual_seed(2)
    model = build_model(ModelConfig(arch=arch, size="d64", dropout=0.0))
    tokens = torch.randint(0, 20480, (2, 70) if arch.startswith("slice") else (2, 40))  # the Mamba step loop is slow
    outs, grads = _outputs_and_grads(model, tokens, ("numba", "recurrent"))
    assert _rel(outs["numba"], outs["recurrent"]) < 1e-5
    assert _rel(grads["numba"], grads["recurrent"]) < 1e-4


@pytest.mark.parametrize("k", [3, 1])
def test_numba_scan_gradcheck(k):
    from methodkit.tools.chess_wm.models.slice import _NumbaScan

    torch.manual_seed(3)
    maps = (torch.eye(k) + 0.3 * torch.randn(2, 5, 2, k, k, dtype=torch.float64)).requires_grad_(True)
    bias = torch.randn(2, 5, 2, k, dtype=torch.float64, requires_grad=True)
    y0 = torch.randn(2, 2, k, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_NumbaScan.apply, (maps, bias, y0))


@pytest.mark.parametrize("trapezoid, rotate", [(False, False), (True, True)])
def test_numba_ssd_gradcheck(trapezoid, rotate):
    """The Mamba scan's hand-written backward: Mamba-2 (Euler, rank 1 here 2) and Mamba-3 (trapezoid, rotation)."""
    from methodkit.tools.chess_wm.models.mamba import _NumbaSSD

    torch.manual_seed(4)
    b, h, t, r, p, n = 2, 2, 5, 2, 3, 4

    def leaf(*shape, positive=False):
        z = torch.rand(*shape, dtype=torch.float64) if positive else torch.randn(*shape, dtype=torch.float64)
        return z.requires_grad_(True)

    inputs = (
        leaf(b, h, t, r, p),
        leaf(b, t, r, n),
        leaf(b, t, r, n),
        leaf(b, h, t, positive=True),
        leaf(b, h, t, positive=True) if trapezoid else None,
        leaf(b, h, t, positive=True),
        leaf(b, h, t, n // 2) if rotate else None,
    )
    assert torch.autograd.gradcheck(_NumbaSSD.apply, inputs)


def test_numba_kernel_is_refused_for_other_architectures():
    from methodkit.core.errors import UsageError

    with pytest.raises(UsageError, match="--kernel numba exists for slice, slice-diag, mamba3, mamba2 only"):
        ModelConfig(arch="gdn", kernel="numba")


@pytest.mark.parametrize("block", [8, 1])
def test_slice_layer_matches_torch_slices(block):
    slices = pytest.importorskip("slices")
    torch.manual_seed(1)
    ref = slices.SLiCELayer(32, block_size=block, dropout_rate=0.0, use_parallel=False, init_std=0.05)
    ours = SLiCELayer(32, block_size=block, dropout=0.0, chunk_size=16)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 50, 32)
    expected = ref(x)
    assert _rel(ours(x), expected) < 1e-5
    ours.slice.kernel = "recurrent"
    assert _rel(ours(x), expected) < 1e-6


def test_delta_rule_chunk_with_gates_at_one_and_negative_eigenvalues():
    torch.manual_seed(2)
    b, h, t = 2, 2, 150
    q = torch.nn.functional.normalize(torch.randn(b, h, t, 16), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(b, h, t, 16), dim=-1)
    v = torch.randn(b, h, t, 24)
    beta = torch.rand(b, h, t) * 2.0  # eigenvalue 1 - beta in (-1, 1)
    for log_a in (torch.zeros(b, h, t), -torch.rand(b, h, t) * 5):
        assert _rel(delta_rule_chunk(q, k, v, beta, log_a), delta_rule_recurrent(q, k, v, beta, log_a)) < 1e-5


def test_delta_rule_one_step_by_hand():
    q = torch.tensor([[[[1.0, 0.0]]]])
    k = torch.tensor([[[[1.0, 0.0]]]])
    v = torch.tensor([[[[2.0, 3.0]]]])
    out = delta_rule_recurrent(q, k, v, torch.tensor([[[0.5]]]), torch.zeros(1, 1, 1))
    # S = beta v k^T, o = S q / sqrt(2)
    assert torch.allclose(out, torch.tensor([[[[1.0, 1.5]]]]) / 2**0.5)


@pytest.mark.parametrize("arch", ("transformer", *RECURRENT))
def test_causal_and_padding_does_not_leak(arch):
    torch.manual_seed(3)
    model = build_model(ModelConfig(arch=arch, size="d64", dropout=0.0)).to("cpu").eval()  # .to: no name clash
    tokens = torch.randint(0, 20480, (1, 30))
    changed = tokens.clone()
    changed[0, 20:] = spec.PAD
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert a.shape == (1, 30, spec.HEAD_SIZE)
    assert _rel(a[:, :20], b[:, :20]) < 1e-5
    assert (a[:, 20:] - b[:, 20:]).abs().max() > 1e-4


def test_paper_sizes_parameter_counts():
    counts = {
        arch: n_params(build_model(ModelConfig(arch=arch, size="d128"))) for arch in ("transformer", "gdn", "slice")
    }
    for arch, count in counts.items():
        assert 2.9e6 < count < 3.4e6, (arch, count)  # paper: about 3.1M at d128/l1, 2.6M of it the embedding


def test_loss_is_mean_ce_over_labels_and_unmasked_steps():
    torch.manual_seed(4)
    logits = torch.randn(2, 5, spec.HEAD_SIZE)
    states = torch.stack([torch.randint(0, c, (2, 5)) for c in spec.LABEL_CLASSES], dim=-1)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float32)
    blocks = split_logits(logits)
    assert [tuple(x.shape[2:]) for x in blocks] == [(64, 13), (5, 2), (1, 9), (1, 3), (4, 256)]
    by_hand = 0.0
    for bi in range(2):
        for t in range(5):
            if mask[bi, t]:
                total, label = 0.0, 0
                for (first, count, _), block in zip(spec.BLOCKS, blocks):
                    for j in range(count):
                        total -= torch.log_softmax(block[bi, t, j], -1)[states[bi, t, first + j]]
                        label += 1
                by_hand += total / 75
    assert torch.allclose(masked_loss(logits, states, mask), (by_hand / 8).detach(), atol=1e-5)
    assert label_nll(logits, states).shape == (2, 5, 75)
