"""Linears on the CPU path's kernels: each kernel gives the same products as nn.Linear, adoption keeps the
module's parameters, nothing oneDNN cannot run is ever packed (the AVX2 crash), and the per-step switch
restores oneDNN whatever happens inside it."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from agent_runtime.model.cpu_path import KernelTable, detect_features, onednn_available
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.linear_kernels import CpuLinear, adopt_linears, step_kernels
from agent_runtime.model.model_loader import load_model
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View

pytestmark = pytest.mark.cpu_sensitive

FEATURES = detect_features()
MIXED = {dtype: KernelTable(dtype, (2, 64), ("native", "onednn")) for dtype in ("float32", "bfloat16")}
TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: str) -> None:
    # fp32: summation order only; bf16: both round an fp32 accumulation, a couple of bf16 ulps apart
    tol = 1e-5 if dtype == "float32" else 2 ** -6
    scale = expected.float().abs().amax().item()
    assert (actual.float() - expected.float()).abs().max().item() <= tol * scale


def _packable(dtype: str) -> bool:
    return onednn_available(TORCH[dtype], FEATURES)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 96), (1, 2, 96), (1, 4, 96), (35, 96), (2, 3, 96)])
def test_every_kernel_equals_nn_linear_at_every_row_count(shape, bias, dtype):
    if not _packable(dtype):
        pytest.skip(f"oneDNN cannot run {dtype} linears on this CPU ({FEATURES.isa})")
    torch.manual_seed(0)
    plain = nn.Linear(96, 80, bias=bias).to(TORCH[dtype])
    fast = copy.deepcopy(plain)
    assert adopt_linears(fast, MIXED[dtype], FEATURES) == 1
    x = torch.randn(*shape).to(TORCH[dtype])
    rows = x.numel() // 96
    with torch.inference_mode(), step_kernels(MIXED[dtype], rows):
        out = fast(x)
        expected = plain(x)
    assert out.shape == (*shape[:-1], 80) and out.dtype == TORCH[dtype]
    _close(out, expected, dtype)
    reference = F.linear(x.double(), plain.weight.double(), None if plain.bias is None else plain.bias.double())
    _close(out, reference, dtype)


def test_adoption_keeps_parameters_tied_weights_and_is_idempotent():
    loaded = load_model("tiny:llama", dtype="float32", tokenizer=False)
    model = loaded.model
    linears = sum(type(m) is nn.Linear for m in model.modules())
    params_before = {name: p.data_ptr() for name, p in model.named_parameters()}
    if not _packable("float32"):
        assert adopt_linears(model, MIXED["float32"], FEATURES) == 0
        return
    assert adopt_linears(model, MIXED["float32"], FEATURES) == linears > 0
    assert adopt_linears(model, MIXED["float32"], FEATURES) == linears  # nothing new the second time
    assert all(type(m) is not nn.Linear for m in model.modules())
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == params_before
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert load_model("tiny:llama", dtype="float32", tokenizer=False).weight_hash == loaded.weight_hash


def test_a_bf16_model_runs_on_every_cpu_and_is_packed_only_where_onednn_runs_bf16():
    """The AVX2 crash: oneDNN's bf16 reorder raised while the runner packed its linears."""
    loaded = load_model("tiny:llama", dtype="bfloat16", tokenizer=False)
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=128, page_size=16, dtype=torch.bfloat16)
    runner = ModelRunner(loaded, store)
    assert (runner.packed_linears > 0) == (FEATURES.onednn_bf16 and "onednn" in runner.kernels.kernels)
    view = View(store, [])
    view.start_own("a")
    logits = runner.forward([StreamInput(view, [5, 6, 7, 8, 9])]).logits[0]
    assert torch.isfinite(logits).all()


def test_table_without_onednn_packs_nothing():
    loaded = load_model("tiny:llama", dtype="float32", tokenizer=False)
    assert adopt_linears(loaded.model, KernelTable("float32", (64,), ("native",)), FEATURES) == 0
    assert all(type(m) is not CpuLinear for m in loaded.model.modules())


def test_step_switch_turns_onednn_off_only_for_native_bf16_rows_and_always_restores_it():
    assert torch.backends.mkldnn.enabled
    with step_kernels(MIXED["bfloat16"], 4):
        assert torch.backends.mkldnn.enabled
    with step_kernels(MIXED["float32"], 1):
        assert torch.backends.mkldnn.enabled  # fp32 native never goes through oneDNN anyway
    with pytest.raises(RuntimeError, match="boom"):
        with step_kernels(MIXED["bfloat16"], 1):
            assert not torch.backends.mkldnn.enabled
            raise RuntimeError("boom")
    assert torch.backends.mkldnn.enabled


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_runner_logits_with_and_without_packed_linears_agree(dtype):
    """Decode (1 row) and a mixed 5-row step through the chosen kernels match the plain modules closely."""
    results = []
    for packed in (False, True):
        loaded = load_model("tiny:llama", dtype=dtype, tokenizer=False, seed=3)
        store = KVBlockStore.for_model(loaded.config, capacity_tokens=256, page_size=16, dtype=TORCH[dtype])
        runner = ModelRunner(loaded, store, packed_linears=packed)
        a, b = View(store, []), View(store, [])
        a.start_own("a")
        b.start_own("b")
        step1 = runner.forward([StreamInput(a, [5, 6, 7, 8]), StreamInput(b, [9])]).logits
        step2 = runner.forward([StreamInput(a, [10])]).logits
        results.append([step1[0], step1[1], step2[0]])
    tol = 1e-4 if dtype == "float32" else 0.05
    for plain, fast in zip(*results):
        assert plain.argmax() == fast.argmax()
        assert (plain - fast).abs().max().item() < tol * plain.abs().max().item()
