"""Prepacked oneDNN linears give the same products as nn.Linear, keep the module's parameters, and the
1-row switch restores oneDNN whatever happens inside it."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from agent_runtime.kv_block_store import KVBlockStore
from agent_runtime.model_loader import load_model
from agent_runtime.model_runner import ModelRunner, StreamInput
from agent_runtime.packed_linear import NATIVE_MAX_ROWS, PackedLinear, pack_linears, packed_linear_available, native_linear_step
from agent_runtime.view import View

pytestmark = pytest.mark.skipif(not packed_linear_available(), reason="torch built without oneDNN")


def _bf16_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # both round an fp32 accumulation to bf16: at most a couple of bf16 ulps apart
    scale = expected.float().abs().amax().item()
    assert (actual.float() - expected.float()).abs().max().item() <= 2 ** -6 * scale


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 96), (1, 4, 96), (35, 96), (2, 3, 96)])
def test_packed_linear_equals_nn_linear(shape, bias):
    torch.manual_seed(0)
    plain = nn.Linear(96, 80, bias=bias).to(torch.bfloat16)
    packed = PackedLinear.adopt(copy.deepcopy(plain))
    x = torch.randn(*shape).to(torch.bfloat16)
    with torch.inference_mode():
        out = packed(x)
        assert out.shape == (*shape[:-1], 80) and out.dtype == torch.bfloat16
        _bf16_close(out, plain(x))
        reference = F.linear(x.double(), plain.weight.double(), None if plain.bias is None else plain.bias.double())
        _bf16_close(out, reference)


def test_pack_linears_keeps_parameters_tied_weights_and_is_idempotent():
    loaded = load_model("tiny:llama", tokenizer=False)  # bf16, tied embeddings
    model = loaded.model
    linears = sum(type(m) is nn.Linear for m in model.modules())
    params_before = {name: p.data_ptr() for name, p in model.named_parameters()}
    assert pack_linears(model) == linears > 0
    assert pack_linears(model) == linears  # second call packs nothing new
    assert all(type(m) is not nn.Linear for m in model.modules())
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == params_before
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert load_model("tiny:llama", tokenizer=False).weight_hash == loaded.weight_hash


def test_float32_models_are_left_alone():
    loaded = load_model("tiny:llama", dtype="float32", tokenizer=False)
    assert pack_linears(loaded.model) == 0


def test_native_linear_step_switches_onednn_off_only_for_one_row_and_always_restores_it():
    assert torch.backends.mkldnn.enabled
    with native_linear_step(4):
        assert torch.backends.mkldnn.enabled
    with pytest.raises(RuntimeError, match="boom"):
        with native_linear_step(1):
            assert not torch.backends.mkldnn.enabled
            raise RuntimeError("boom")
    assert torch.backends.mkldnn.enabled


def test_runner_logits_with_and_without_packed_linears_agree():
    """Decode (1 row) and a mixed 5-row step through packed linears match the plain modules closely."""
    results = []
    for packed in (False, True):
        loaded = load_model("tiny:llama", tokenizer=False, seed=3)
        store = KVBlockStore.for_model(loaded.config, capacity_tokens=256, page_size=16, dtype=torch.bfloat16)
        runner = ModelRunner(loaded, store, packed_linears=packed)
        assert (runner.packed_linears > 0) == packed
        a, b = View(store, []), View(store, [])
        a.start_own("a")
        b.start_own("b")
        step1 = runner.forward([StreamInput(a, [5, 6, 7, 8]), StreamInput(b, [9])]).logits
        step2 = runner.forward([StreamInput(a, [10])]).logits
        results.append([step1[0], step1[1], step2[0]])
    for plain, packed in zip(*results):
        assert plain.argmax() == packed.argmax()
        assert (plain - packed).abs().max().item() < 0.05 * plain.abs().max().item()
