"""The shipped adapter: small, trained on the embedded weights, used by default, merged once into a cache keyed on
its hash (a damaged cache is rebuilt with one line), and `none` gives the untrained model."""

from __future__ import annotations

import json

import pytest
import torch

from agent_runtime.model import adapters

from agent_runtime.model import model_loader
from agent_runtime.model.adapters import SHIPPED_ADAPTER, SHIPPED_BY_SCENARIO, resolve_adapter, shipped_adapter
from agent_runtime.model.cpu_path import cache_dir
from agent_runtime.model.model_loader import load_model

SHIPPED = {"defend_the_center": SHIPPED_ADAPTER, **SHIPPED_BY_SCENARIO}


def test_default_means_no_adapter_on_weights_it_was_not_trained_on():
    assert load_model("tiny:llama", dtype="float32", tokenizer=False, adapter="default").adapter is None


def test_default_is_the_adapter_shipped_for_the_scenario_else_the_defend_the_center_one(tmp_path, monkeypatch):
    for scenario, path in SHIPPED.items():
        assert shipped_adapter(scenario) == path and resolve_adapter("default", None, scenario) == str(path)
        assert shipped_adapter(f"/maps/{scenario}.cfg") == path  # a .cfg path by its name
    assert shipped_adapter("deadly_corridor") == shipped_adapter(None) == SHIPPED_ADAPTER
    assert resolve_adapter("default", "tiny:llama", "basic") is None  # other weights: none
    monkeypatch.setitem(adapters.SHIPPED_BY_SCENARIO, "basic", tmp_path / "not-trained-yet")
    assert shipped_adapter("basic") == SHIPPED_ADAPTER


@pytest.mark.parametrize("scenario", sorted(SHIPPED))
def test_each_shipped_adapter_is_small_and_names_the_weights_data_and_views_it_was_trained_on(scenario):
    path = SHIPPED[scenario]
    weights = path / "adapter_model.safetensors"
    assert weights.stat().st_size <= 5 * 1024 * 1024  # float16 matrices: no large files in git
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["base_model_id"] == "SmolLM2-135M-Instruct" and len(manifest["data_hash"]) == 16
    assert manifest["scenarios"] == [scenario]
    assert manifest["train_decisions"] > 250 and manifest["held_out_decisions"] > 25
    assert manifest["block_masks"] is True  # scored in training as the engine attends (else it plays near chance)
    # it learned from views written as the default config writes them (no warning on `make demo`)
    from agent_runtime.model.adapters import VIEW_SETTINGS
    from agent_runtime.config import load_config

    engine = load_config().engine
    assert {k: getattr(engine, k) for k in VIEW_SETTINGS} == manifest["engine"]
    # it scores the expert's exact command and hold, and the command alone, better on held-out episodes than the
    # untrained model does (which, with counts joined to their words, already picks the expert's hold a third of the time)
    trained, untrained = manifest["held_out"], manifest["held_out_untrained"]
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

    monkeypatch.setattr(model_loader, "merge_adapter", lambda *a, **k: pytest.fail("merged again despite the cache"))
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


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(SHIPPED))
def test_the_shipped_adapters_leave_the_models_language_its_own(scenario):
    """The adapters learned to score commands; the Thinker and commentary decode with the same merged weights, so
    plain sentences must stay about as likely as the untrained model finds them (measured: +5-11% per token)."""
    sentences = ["The imp is to my left, so I should turn left and fire before it reaches me.",
                 "I see two demons ahead. My ammo is low, so I aim at the nearest one first.",
                 "Hello! What a nice day it is today. Let's talk about the weather and the news."]

    def nll(loaded) -> list[float]:
        tok = loaded.tokenizer
        with torch.no_grad():
            return [loaded.model(ids, labels=ids).loss.item()
                    for ids in (torch.tensor([tok.encode(s)]) for s in sentences)]

    base = nll(load_model(None, dtype="float32", adapter="none"))
    merged = load_model(None, dtype="float32", adapter=str(SHIPPED[scenario]))
    assert merged.adapter is not None
    adapted = nll(merged)
    assert all(a < 1.25 * b for a, b in zip(adapted, base)), (adapted, base)
    assert adapted != base  # the adapter was merged
