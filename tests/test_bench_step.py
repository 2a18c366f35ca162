"""`bench step` on a tiny model: the floor follows from the model's shapes and the measured machine, the step's
parts add up to it, the printed report is the JSON's, and the engine is left unpatched."""

import json
import re

import pytest

from agent_runtime.control.action_grammar import CommandScorer
from agent_runtime.engine import model_runner
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.model.model_loader import tiny_config
from tests.cli_runner import run_cli

ORIGINALS = (MultiStreamAgent.step, model_runner.ModelRunner.forward, model_runner.view_attention,
             CommandScorer.scores)


def config_params() -> tuple[int, int]:
    """(the decoder layers' linear weights, the LM head's), from tiny:llama's config alone."""
    c = tiny_config("llama")
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    per_layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size
    return c.num_hidden_layers * per_layer, c.vocab_size * c.hidden_size


def test_bench_step_floor_follows_from_shapes_and_machine_and_the_parts_add_up(tmp_path):
    done = run_cli("bench", "step", "--model", "tiny:llama", "--max-tics", "60", "--json", "--out", tmp_path,
                   "--threads", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    layers, head = config_params()
    element = 2 if result["dtype"] == "bfloat16" else 4
    c = tiny_config("llama")
    kv_per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * element
    for name in ("decision", "decode"):
        if name not in result:
            assert name == "decode"  # a short game may have no one-row step; it always has decisions
            continue
        step = result[name]
        assert step["steps"] > 0 and step["rows"] >= 1 and step["kept_rows"] >= 1
        assert step["bytes_read"] == pytest.approx((layers + head) * element + step["kv_tokens"] * kv_per_token)
        assert step["flops"] == pytest.approx(2 * step["rows"] * layers + 2 * step["kept_rows"] * head)
        assert step["memory_ms"] == pytest.approx(step["bytes_read"] / (result["bandwidth_gb_s"] * 1e6))
        assert step["compute_ms"] == pytest.approx(step["flops"] / (result["throughput_gflop_s"] * 1e6))
        assert step["floor_ms"] == max(step["memory_ms"], step["compute_ms"])
        assert step["step_vs_floor"] == pytest.approx(step["step_ms"] / step["floor_ms"])
        parts = ("linears_ms", "attention_ms", "forward_rest_ms", "scoring_ms", "engine_python_ms")
        assert all(step[p] >= 0 for p in parts)
        assert sum(step[p] for p in parts) >= step["step_ms"] * (1 - 1e-9)  # only a clamp at 0 adds
        assert step["attention_ms"] + step["scoring_ms"] <= step["step_ms"]  # timed in place, inside the step
    assert result["decision"]["scoring_ms"] > 0  # decisions score commands; one-row Thinker steps don't
    rows = sorted({"1", str(result["decision"]["rows"])})
    assert sorted(result["kernels"]) == rows  # the linears on other kernels at a decode's and a decision's rows
    for timings in result["kernels"].values():
        assert set(timings) == {"this_path", "float32", "int8_dynamic"} and min(timings.values()) > 0
    assert set(result["forwards"]) == {"lean", "lean_separate_linears", "transformers"} and min(result["forwards"].values()) > 0
    printed = run_cli("bench", "step", "--model", "tiny:llama", "--max-tics", "60", "--out", tmp_path / "again",
                      "--threads", "1")
    assert printed.returncode == 0, printed.stderr
    assert re.search(r"decision step \(\d+ rows, \d+ with logits, \d+ KV tokens read\): [\d.]+ ms; floor [\d.]+ ms",
                     printed.stdout)
    assert re.search(r"the linears alone at 1 row\(s\), other kernels side by side: this path [\d.]+ ms, float32 "
                     r"[\d.]+ ms \([\d.]+x\), int8 weights [\d.]+ ms", printed.stdout)
    assert re.search(r"a decision's forward, side by side: lean [\d.]+ ms, lean with each linear alone [\d.]+ ms "
                     r"\([\d.]+x\), transformers' own forward [\d.]+ ms \([\d.]+x; the same arithmetic\)", printed.stdout)
    assert (tmp_path / "step.png").read_bytes()[:4] == b"\x89PNG"
    assert (MultiStreamAgent.step, model_runner.ModelRunner.forward, model_runner.view_attention,
            CommandScorer.scores) == ORIGINALS


def test_bench_step_refuses_a_gpu_and_too_few_tics():
    for args, message in ((["--device", "cuda"], "--device"), (["--max-tics", "5"], "--max-tics must be at least 30")):
        done = run_cli("bench", "step", "--model", "tiny:llama", *args)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
