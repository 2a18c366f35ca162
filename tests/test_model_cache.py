"""The converted model cache is sealed with a manifest and verified at every start: a partial or corrupt one
(a conversion killed half-way, a full disk) is rebuilt with one line, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from agent_runtime.model.gguf_once import gguf_parsed_once
from agent_runtime.model.model_loader import CACHE_MANIFEST, _seal_cache, cache_problem, embedded_model_dir, load_model


def _small_cache(directory: Path) -> Path:
    directory.mkdir()
    save_file({"w": torch.arange(4096, dtype=torch.float32)}, str(directory / "model.safetensors"))
    (directory / "config.json").write_text("{}")
    _seal_cache(directory)
    return directory


def test_a_sealed_cache_passes_and_each_kind_of_damage_is_named(tmp_path):
    cache = _small_cache(tmp_path / "c")
    assert cache_problem(cache) is None
    weights = cache / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:16] = b"\xff" * 8  # the header's JSON broken, the size unchanged
    weights.write_bytes(bytes(data))
    assert "model.safetensors is unreadable" in cache_problem(cache)
    with open(weights, "r+b") as f:
        f.truncate(len(data) // 2)
    assert cache_problem(cache) == "model.safetensors is missing or truncated"
    (cache / CACHE_MANIFEST).unlink()
    assert "no complete manifest" in cache_problem(cache)


@pytest.mark.slow
def test_a_truncated_real_cache_is_rebuilt_with_one_line_and_the_same_weights(tmp_path, monkeypatch, capfd):
    good = embedded_model_dir()
    assert cache_problem(good) is None
    expected = load_model(None, dtype="float32", tokenizer=False).weight_hash  # the machine's own, good cache
    copy = tmp_path / good.name
    shutil.copytree(good, copy)
    weights = copy / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    capfd.readouterr()
    monkeypatch.setenv("DOOM_AGENT_CACHE", str(tmp_path))
    rebuilt = load_model(None, dtype="float32", tokenizer=False).weight_hash
    err = capfd.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "cannot be used" in line]
    assert lines == [f"the model cache {copy} cannot be used: model.safetensors is missing or truncated; rebuilding it"]
    assert cache_problem(copy) is None
    assert rebuilt == expected


def test_a_gguf_file_and_its_name_table_are_made_once_within_a_conversion(tmp_path):
    """transformers opens the file three times a conversion and builds the name table once a module; inside the
    block those share one of each."""
    import gguf

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("answer", 42)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    real = gguf.GGUFReader, gguf.get_tensor_name_map
    llama = gguf.MODEL_ARCH.LLAMA
    with gguf_parsed_once():
        first, again = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        writable = gguf.GGUFReader(path, "r+")
        table = gguf.get_tensor_name_map(llama, 2)
        same, other = gguf.get_tensor_name_map(llama, 2), gguf.get_tensor_name_map(llama, 3)
    assert first is again and writable is not first
    assert first.fields["answer"].contents() == 42
    assert table is same and other is not table
    assert table.get_name("model.layers.1.self_attn.q_proj") == "blk.1.attn_q"
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == real and gguf.GGUFReader(path) is not first
