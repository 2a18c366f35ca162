"""The CPU path: features as torch sees them, overrides, the precision and kernel decision, the probe cache."""

from __future__ import annotations

import json

import pytest
import torch

from agent_runtime.model import cpu_path as cp
from agent_runtime.errors import UserError

pytestmark = pytest.mark.cpu_sensitive

ROWS = cp.PROBE_ROWS


def _flat(ms: float) -> dict[int, float]:
    return {rows: ms * rows for rows in ROWS}


def _features(**kw) -> cp.CpuFeatures:
    base = dict(arch="x86_64", isa="AVX2", hardware_bf16=False, onednn_bf16=False, onednn=True, cores=2,
                model_name="test cpu")
    return cp.CpuFeatures(**{**base, **kw})


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh probe cache; the process's torch threads are restored afterwards."""
    threads = torch.get_num_threads()
    monkeypatch.setenv("DOOM_AGENT_CACHE", str(tmp_path))
    monkeypatch.setattr(cp, "_MEASURED", {})
    yield tmp_path
    torch.set_num_threads(threads)


def test_features_follow_torch_and_the_avx2_override(monkeypatch):
    monkeypatch.delenv(cp.OVERRIDE_ENV, raising=False)
    native = cp.detect_features()
    assert native.isa == torch.backends.cpu.get_cpu_capability()
    assert native.onednn_bf16 == (native.onednn and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert native.cores >= 1 and native.forced is None
    flags, _ = cp._cpu_flags()
    if "avx2" not in flags:
        pytest.skip("this CPU has no AVX2: the AVX2 override cannot be tested here")
    monkeypatch.setenv(cp.OVERRIDE_ENV, "avx2")
    forced = cp.detect_features()
    assert (forced.isa, forced.hardware_bf16, forced.onednn_bf16, forced.forced) == ("AVX2", False, False, "avx2")
    assert not forced.bf16_eligible


def test_avx512_override_needs_the_hardware_and_bad_values_are_named(monkeypatch):
    monkeypatch.setenv(cp.OVERRIDE_ENV, "avx512")
    flags, _ = cp._cpu_flags()
    if "avx512f" in flags:
        assert cp.detect_features().isa == "AVX512"
    else:
        with pytest.raises(UserError, match="no AVX-512"):
            cp.detect_features()
    monkeypatch.setenv(cp.OVERRIDE_ENV, "sse9")
    with pytest.raises(UserError, match="DOOM_AGENT_CPU='sse9' is not a CPU path"):
        cp.detect_features()


def test_kernel_table_merges_ranges_and_maps_every_row_count():
    best = {1: "native", 2: "onednn", 4: "onednn", 8: "onednn", 16: "native", 32: "native"}
    table = cp._table_from("float32", best)
    assert table.bounds == (1, 8, 32) and table.kernels == ("native", "onednn", "native")
    assert [table.kernel_for(r) for r in (1, 2, 5, 8, 9, 32, 500)] == [
        "native", "onednn", "onednn", "onednn", "native", "native", "native"]
    assert table.describe() == "1 rows native, 2-8 rows onednn, 9+ rows native"


def test_decision_takes_the_faster_precision_only_where_bf16_is_native():
    timings = {"float32": {"native": _flat(2.0), "onednn": _flat(1.0)},
               "bfloat16": {"native": _flat(0.5), "onednn": _flat(0.6)}}
    without = cp.decide(_features(), 2, timings)
    assert without.dtype == "float32" and without.warning is None  # bf16 measured faster, but not native here
    assert without.name == "avx2-fp32-onednn"
    native = cp.decide(_features(isa="AVX512", hardware_bf16=True, onednn_bf16=True), 2, timings)
    assert native.dtype == "bfloat16" and native.name == "avx512-bf16-native"
    slow_bf16 = {**timings, "bfloat16": {"native": _flat(5.0)}}
    assert cp.decide(_features(isa="AVX512", onednn_bf16=True), 2, slow_bf16).dtype == "float32"


def test_an_explicit_precision_the_cpu_serves_badly_runs_with_one_warning_naming_cost_and_fix():
    timings = {"float32": {"native": _flat(2.0), "onednn": _flat(1.0)}, "bfloat16": {"native": _flat(5.0)}}
    path = cp.decide(_features(), 2, timings, requested="bfloat16")
    assert path.dtype == "bfloat16"
    assert "no native bf16" in path.warning and "5.0x slower than float32" in path.warning
    assert "set model.dtype to auto or float32" in path.warning
    assert cp.decide(_features(), 2, timings, requested="float32").warning is None


def test_real_probe_measures_every_eligible_kernel_and_is_cached_and_rebuilt_when_corrupt(cache, monkeypatch):
    monkeypatch.delenv(cp.OVERRIDE_ENV, raising=False)
    first = cp.cpu_path(threads=1)
    assert first.source == "probe" and first.threads == 1
    fp32 = first.timings["float32"]
    assert "native" in fp32 and ("onednn" in fp32) == first.features.onednn
    assert all(t > 0 for kernel in fp32.values() for t in kernel.values())
    assert ("onednn" in first.timings["bfloat16"]) == first.features.onednn_bf16
    if not first.features.bf16_eligible:
        assert first.dtype == "float32"
    files = list((cache / "cpu-probe").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["timings"]

    calls = []
    monkeypatch.setattr(cp, "measure_linears", lambda *a, **k: calls.append(1) or first.timings)
    monkeypatch.setattr(cp, "_MEASURED", {})
    again = cp.cpu_path(threads=1)
    assert again.source == "cache" and not calls and again.name == first.name
    files[0].write_text('{"version": 2, "timi')  # a write cut short
    monkeypatch.setattr(cp, "_MEASURED", {})
    rebuilt = cp.cpu_path(threads=1)
    assert rebuilt.source == "probe" and calls == [1]
    assert json.loads(files[0].read_text())["version"] == cp.PROBE_VERSION


def test_auto_dtype_loads_the_precision_the_path_chose(cache):
    from agent_runtime.model.model_loader import load_for_cpu

    loaded = load_for_cpu("tiny:llama", threads=1, tokenizer=False, announce=False)
    assert next(loaded.model.parameters()).dtype == {"float32": torch.float32, "bfloat16": torch.bfloat16}[loaded.cpu.dtype]
    assert torch.get_num_threads() == 1
    summary = loaded.cpu.summary()
    assert summary["cpu_path"] == loaded.cpu.name and summary["threads"] == 1 and summary["requested_dtype"] == "auto"
