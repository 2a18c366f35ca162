"""The shipped adapter: small, trained on the embedded weights, used by default, merged once into a cache keyed on
its hash (a damaged cache is rebuilt with one line), and `none` gives the untrained model."""

from __future__ import annotations

import json

import pytest
import torch

from agent_runtime import adapters
from agent_runtime.adapters import SHIPPED_ADAPTER
from agent_runtime.model_loader import cache_dir, load_model


def test_default_means_no_adapter_on_weights_it_was_not_trained_on():
    assert load_model("tiny:llama", dtype="float32", tokenizer=False, adapter="default").adapter is None


def test_the_shipped_adapter_is_small_and_names_the_weights_and_data_it_was_trained_on():
    weights = SHIPPED_ADAPTER / "adapter_model.safetensors"
    assert weights.stat().st_size <= 5 * 1024 * 1024  # float16 matrices: no large files in git
    manifest = json.loads((SHIPPED_ADAPTER / "manifest.json").read_text())
    assert manifest["base_model_id"] == "SmolLM2-135M-Instruct" and len(manifest["data_hash"]) == 16
    assert manifest["train_decisions"] > 1000 and manifest["held_out_decisions"] > 100
    # it scores the expert's exact command and hold, and the command alone, better on held-out episodes than the
    # untrained model does (which, with counts joined to their words, already picks the expert's hold a third of the time)
    trained, untrained = manifest["held_out"], manifest["held_out_untrained"]
    # and it learned from views written as the default config writes them (no warning on `make demo`)
    from agent_runtime.adapters import VIEW_SETTINGS
    from agent_runtime.config import load_config

    engine = load_config().engine
    assert {k: getattr(engine, k) for k in VIEW_SETTINGS} == manifest["engine"]
    assert trained["accuracy"] > untrained["accuracy"] + 0.15
    assert trained["command_accuracy"] > untrained["command_accuracy"] + 0.1


@pytest.mark.slow
def test_the_shipped_adapter_merges_once_into_a_cache_keyed_on_its_hash(tmp_path, monkeypatch, capsys):
    real_base = cache_dir() / "smollm2-135m-instruct-bf16"
    load_model(None, dtype="float32", tokenizer=False)  # make sure the base cache exists
    monkeypatch.setenv("DOOM_AGENT_CACHE", str(tmp_path))
    (tmp_path / real_base.name).symlink_to(real_base)  # the base conversion is not what this test is about

    base = load_model(None, dtype="float32", adapter="none")
    first = load_model(None, dtype="float32", adapter="default")
    assert base.adapter is None and first.adapter.path == str(SHIPPED_ADAPTER)
    assert first.base_weight_hash == base.weight_hash == first.adapter.base_weight_hash != first.weight_hash
    merged_dirs = [p for p in tmp_path.iterdir() if first.adapter.hash in p.name]
    assert len(merged_dirs) == 1 and (merged_dirs[0] / "cache.json").is_file()

    monkeypatch.setattr(adapters, "merge_adapter", lambda *a, **k: pytest.fail("merged again despite the cache"))
    second = load_model(None, dtype="float32", adapter="default")
    assert second.weight_hash == first.weight_hash
    assert all(torch.equal(a, b) for a, b in zip(first.model.parameters(), second.model.parameters()))
    monkeypatch.undo()
    monkeypatch.setenv("DOOM_AGENT_CACHE", str(tmp_path))

    weights = merged_dirs[0] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # a merge cut short
    capsys.readouterr()
    third = load_model(None, dtype="float32", adapter="default")
    assert "cannot be used" in capsys.readouterr().err and third.weight_hash == first.weight_hash
