"""Model loading: the supported sources, clear errors for the rest, threads that never oversubscribe."""

import copy
import os

import pytest

from agent_runtime.errors import UserError
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.cpu_path import free_cores
from agent_runtime.model.model_loader import load_model
from agent_runtime.engine.model_runner import ModelRunner


def test_missing_path_non_gguf_file_and_directory_without_config_are_clear_errors(tmp_path):
    with pytest.raises(UserError, match="model path does not exist"):
        load_model(str(tmp_path / "nope"), tokenizer=False)
    text = tmp_path / "weights.bin"
    text.write_bytes(b"\0" * 16)
    with pytest.raises(UserError, match="is not a .gguf file"):
        load_model(str(text), tokenizer=False)
    with pytest.raises(UserError, match="has no config.json"):
        load_model(str(tmp_path), tokenizer=False)
    with pytest.raises(UserError, match="unknown tiny model"):
        load_model("tiny:gpt9", tokenizer=False)
    with pytest.raises(UserError, match="unknown dtype 'fp16': use auto or one of float32, bfloat16"):
        load_model("tiny:llama", dtype="fp16", tokenizer=False)


def test_a_saved_safetensors_directory_loads_with_the_same_weights(tmp_path):
    tiny = load_model("tiny:qwen3", dtype="float32", tokenizer=False, seed=4)
    tiny.model.save_pretrained(tmp_path)
    from agent_runtime.model.model_loader import load_tokenizer

    load_tokenizer().save_pretrained(tmp_path)
    again = load_model(str(tmp_path), dtype="float32")
    assert again.weight_hash == tiny.weight_hash
    assert again.tokenizer is not None


def test_a_hugging_face_id_loads_from_the_local_cache_offline_and_a_missing_one_is_one_line(tmp_path, monkeypatch):
    import socket

    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # the library reads the variable once, at import

    def no_network(*args):
        raise AssertionError("the model hub was contacted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    tiny = load_model("tiny:llama", dtype="float32", seed=5)
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--owner--name"  # the hub cache's layout: refs/main names the snapshot
    tiny.model.save_pretrained(repo / "snapshots" / commit)
    tiny.tokenizer.save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    loaded = load_model("owner/name", dtype="float32")
    assert (loaded.model_id, loaded.weight_hash) == ("owner/name", tiny.weight_hash) and loaded.tokenizer is not None
    with pytest.raises(UserError) as missing:
        load_model("owner/absent", tokenizer=False)
    message = str(missing.value)
    assert "\n" not in message and "owner/absent" in message and str(tmp_path) in message, message
    assert "`hf download owner/absent`" in message and "pass a local directory" in message


def test_gemma3_is_refused_with_a_clear_unsupported_error():
    from transformers import AutoModelForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=16)
    from agent_runtime.model.model_loader import LoadedModel

    loaded = LoadedModel(AutoModelForCausalLM.from_config(config), None, "tiny-gemma3", "")
    store = KVBlockStore.for_model(config, capacity_tokens=256)
    with pytest.raises(UserError, match="unsupported"):
        ModelRunner(loaded, store)


def test_threads_default_to_the_free_cores_and_never_below_one(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    assert 1 <= free_cores() <= cores
    import psutil

    monkeypatch.setattr(psutil, "cpu_percent", lambda **kw: [100.0] * cores)  # every core busy elsewhere
    assert free_cores() == 1


def test_tiny_weights_are_the_same_with_and_without_simd():
    """Tiny random weights come from numpy's generator: a CPU without AVX (ATEN_CPU_CAPABILITY=default here)
    gets the same weight hash, so a recording made on a tiny model can be rerun anywhere."""
    import subprocess
    import sys

    here = load_model("tiny:llama", dtype="bfloat16", tokenizer=False, seed=3).weight_hash
    assert load_model("tiny:llama", dtype="bfloat16", tokenizer=False, seed=4).weight_hash != here
    code = ("from agent_runtime.model.model_loader import load_model; "
            "print(load_model('tiny:llama', dtype='bfloat16', tokenizer=False, seed=3).weight_hash)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ATEN_CPU_CAPABILITY": "default"}, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == here


@pytest.mark.parametrize("kind", ["smolvlm", "llava"])
def test_a_saved_vision_language_directory_loads_with_its_image_side(tmp_path, kind):
    """A local Idefics3/SmolVLM or LLaVA directory (weights, image processor, tokenizer) loads as the tiny model it
    was saved from: the same weights and the same image embeddings; SmolVLM's image wrapping comes from its
    tokenizer."""
    import numpy as np
    import torch

    tiny = load_model(f"tiny:{kind}", dtype="float32", seed=6)
    tiny.vision.vlm.save_pretrained(tmp_path)
    tiny.vision.processor.save_pretrained(tmp_path)
    tokenizer = copy.deepcopy(tiny.tokenizer)  # the process's shared tokenizer stays as it was
    if kind == "smolvlm":  # SmolVLM's tokenizer has the tokens its prompts wrap a global image in
        tokenizer.add_tokens(["<fake_token_around_image>", "<global-img>"], special_tokens=True)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), dtype="float32")
    assert loaded.weight_hash == tiny.weight_hash and loaded.vision.family == tiny.vision.family
    screen = np.random.default_rng(0).integers(0, 256, size=(120, 160, 3), dtype=np.uint8)
    torch.testing.assert_close(loaded.vision.encode([screen])[0], tiny.vision.encode([screen])[0])
    image = [loaded.vision.image_token_id] * 16
    if kind == "smolvlm":
        around, tag = (tokenizer.convert_tokens_to_ids(t) for t in ("<fake_token_around_image>", "<global-img>"))
        assert loaded.vision.frame_tokens() == [around, tag, *image, around]
    else:
        assert loaded.vision.frame_tokens() == image


def test_multi_axis_rotary_models_are_refused_in_one_line_before_loading(tmp_path):
    import json

    from tests.cli_runner import run_cli

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_vl", "rope_scaling": {
        "type": "mrope", "mrope_section": [16, 24, 24]}}))
    done = run_cli("episode", "--model", tmp_path, "--max-tics", "5", "--no-record")
    assert done.returncode == 2 and "multi-axis rotary positions" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2  # the loading line, the error


def test_tiny_models_share_one_embedded_tokenizer_read_once_a_process():
    first, second = load_model("tiny:llama", dtype="float32"), load_model("tiny:qwen2", dtype="float32", seed=3)
    assert first.tokenizer is second.tokenizer
    assert first.tokenizer.encode("turn left", add_special_tokens=False) == [20589, 2049]
