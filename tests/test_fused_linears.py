"""Stacked q/k/v and gate/up linears: the same products as the separate modules, bit for bit, on every kernel the
CPU path can choose; one copy of the weights; the model's parameters and weight hash unchanged."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from agent_runtime.model.cpu_path import KernelTable, detect_features, onednn_available
from agent_runtime.model.decoder_forward import DecoderForward
from agent_runtime.model.fused_linears import fused_linear
from agent_runtime.model.linear_kernels import adopt_linears, step_kernels
from agent_runtime.model.model_loader import _weight_hash, load_model

pytestmark = pytest.mark.cpu_sensitive

FEATURES = detect_features()
TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16}
KERNELS = {"native": KernelTable("float32", (64,), ("native",)), "onednn": KernelTable("float32", (64,), ("onednn",))}


def _linears(dtype: str, outs=(96, 32, 32), bias=False) -> nn.ModuleList:
    torch.manual_seed(0)
    return nn.ModuleList(nn.Linear(96, n, bias=bias) for n in outs).to(TORCH[dtype])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kernel", ["native", "onednn"])
@pytest.mark.parametrize("bias", [False, True])
def test_the_stacked_product_is_the_separate_products_bit_for_bit(dtype, kernel, bias):
    if kernel == "onednn" and not onednn_available(TORCH[dtype], FEATURES):
        pytest.skip(f"oneDNN cannot run {dtype} linears on this CPU ({FEATURES.isa})")
    owner = _linears(dtype, bias=bias)
    table = KernelTable(dtype, (64,), (kernel,))
    stacked = fused_linear(owner, "qkv", owner)
    if kernel == "onednn":
        adopt_linears(owner, table, FEATURES)
        adopt_linears(nn.ModuleList([stacked]), table, FEATURES)
    for rows in (1, 2, 5, 14, 40):
        x = torch.randn(rows, 96).to(TORCH[dtype])
        with torch.inference_mode(), step_kernels(table, rows):
            separate = torch.cat([m(x) for m in owner], dim=-1)
            together = stacked(x)
        assert torch.equal(together, separate), (rows, (together.float() - separate.float()).abs().max())
    reference = torch.cat([F.linear(x.double(), m.weight.double(), None if m.bias is None else m.bias.double())
                           for m in owner], dim=-1)
    assert (together.double() - reference).abs().max() < 0.05 * reference.abs().max()  # a real product


def test_the_separate_weights_become_views_of_the_stacked_one_with_their_values():
    owner = _linears("float32", bias=True)
    before = [(m.weight.detach().clone(), m.bias.detach().clone()) for m in owner]
    stacked = fused_linear(owner, "qkv", owner)
    assert stacked.weight.shape == (160, 96) and stacked.bias.shape == (160,)
    storage = stacked.weight.untyped_storage().data_ptr()
    for m, (weight, bias) in zip(owner, before):
        assert m.weight.untyped_storage().data_ptr() == storage  # one copy in memory
        assert torch.equal(m.weight, weight) and torch.equal(m.bias, bias)
    assert fused_linear(owner, "qkv", owner) is stacked  # made once
    owner[1].weight = nn.Parameter(torch.ones(32, 96))  # replaced since: stacked again, with the new values
    again = fused_linear(owner, "qkv", owner)
    assert again is not stacked and torch.equal(again.weight[96:128], torch.ones(32, 96))


def test_linears_that_cannot_be_stacked_are_left_alone():
    class Wrapped(nn.Linear):  # a LoRA or quantized wrapper computes more than its weight
        pass

    mixed = nn.ModuleList([nn.Linear(96, 32), nn.Linear(64, 32)])
    wrapped = nn.ModuleList([nn.Linear(96, 32), Wrapped(96, 32)])
    biased = nn.ModuleList([nn.Linear(96, 32), nn.Linear(96, 32, bias=False)])
    for owner in (mixed, wrapped, biased):
        pointers = [m.weight.data_ptr() for m in owner]
        assert fused_linear(owner, "qkv", owner) is None
        assert [m.weight.data_ptr() for m in owner] == pointers


def test_a_stacked_forward_keeps_the_models_parameters_and_weight_hash():
    loaded = load_model("tiny:llama", dtype="float32", tokenizer=False, seed=4)
    state = copy.deepcopy(loaded.model.state_dict())
    lean = DecoderForward(loaded.model, fuse=True)
    layers = len(loaded.model.model.layers)
    assert len(lean.fused) == 2 * layers and len(lean.fused_away) == 5 * layers
    after = loaded.model.state_dict()
    assert set(after) == set(state) and all(torch.equal(after[k], state[k]) for k in state)
    assert _weight_hash(loaded.model) == loaded.weight_hash  # what recordings and reruns compare
    assert DecoderForward(loaded.model, fuse=True).fused == lean.fused  # a second runner reuses the stacked linears
    assert DecoderForward(loaded.model).fused == []


def test_a_layer_whose_linears_were_wrapped_since_runs_them_instead_of_the_stack():
    """peft wraps q/k/v for training after a runner may have stacked them: the wrapped modules must compute."""
    loaded = load_model("tiny:llama", dtype="float32", tokenizer=False, seed=4)
    lean = DecoderForward(loaded.model, fuse=True)
    attn = loaded.model.model.layers[0].self_attn
    calls = []

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.out_features = inner, inner.out_features

        def forward(self, x):
            calls.append(1)
            return self.inner(x) + 1.0

    attn.q_proj = Wrapped(attn.q_proj)
    x, d = torch.randn(3, attn.q_proj.inner.in_features), attn.head_dim
    with torch.no_grad():
        stacked = lean.qkv[0] if lean._still_stacked(0) else None
        q, k, v = lean._qkv(attn, x, 3, torch.ones(3, 1, d), torch.zeros(3, 1, d), stacked)  # RoPE by angle 0
        assert calls and torch.equal(q, (attn.q_proj.inner(x) + 1.0).view(3, -1, d))
        assert torch.equal(v, attn.v_proj(x).view(3, -1, d))
    assert lean._still_stacked(1) and not lean._still_stacked(0)
