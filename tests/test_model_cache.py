"""The converted model cache is sealed with a manifest and verified at every start: a partial or corrupt one
(a conversion killed half-way, a full disk) is rebuilt with one line, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from agent_runtime.model.model_loader import CACHE_MANIFEST, _seal_cache, cache_problem, embedded_model_dir, load_model

REPO = Path(__file__).resolve().parent.parent


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
def test_a_truncated_real_cache_is_rebuilt_with_one_line_and_the_same_weights(tmp_path):
    good = embedded_model_dir()
    assert cache_problem(good) is None
    copy = tmp_path / good.name
    shutil.copytree(good, copy)
    weights = copy / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    code = ("from agent_runtime.model.model_loader import load_model; "
            "print(load_model(None, dtype='float32', tokenizer=False).weight_hash)")
    env = {**os.environ, "DOOM_AGENT_CACHE": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "cannot be used" in line]
    assert lines == [f"the model cache {copy} cannot be used: model.safetensors is missing or truncated; rebuilding it"]
    assert cache_problem(copy) is None
    again = load_model(None, dtype="float32", tokenizer=False).weight_hash  # the machine's own, good cache
    assert proc.stdout.strip() == again
