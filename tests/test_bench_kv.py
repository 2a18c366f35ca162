"""`bench kv` on a tiny model: each ratio agrees with the timings it comes from, as the JSON and the
progress lines report them; the figures obey what batching and views must do; blocks are all released."""

import json
import re
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
TIMING = re.compile(r"(\d+\.\d+) ms \[(\d+\.\d+)\.\.(\d+\.\d+)\]")  # Timing.ms(): median [min..max]
PRINTED = {"abs": 0.006}  # a figure printed with 2 decimals


def _after_first_start(stderr: str) -> str:
    """stderr without the one-time line of a machine's first start (the embedded model converted to its cache:
    tiny:llama uses its tokenizer)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("converting the embedded model"))


def _progress(stderr: str) -> dict[str, str]:
    """The progress lines ("  .. (a) ...") by their first words: "(a)", "(b)", "(c) 1", ..., "(c) bound:"."""
    lines = [line.split(".. ", 1)[1] for line in stderr.splitlines() if line.startswith("  .. ")]
    return {" ".join(line.split()[:2]): line for line in lines}


def _medians_ms(line: str) -> list[float]:
    found = [tuple(map(float, t)) for t in TIMING.findall(line)]
    assert found and all(lo <= med <= hi for med, lo, hi in found), line
    return [med for med, _, _ in found]


def _check_against_progress(result: dict, lines: dict[str, str]) -> None:
    """The JSON medians are the ones the progress lines printed (an independent report of the same run)."""
    view8, plain = _medians_ms(lines["(a) decode"])
    assert f"decode at {result['context_tokens']} tokens" in lines["(a) decode"]
    assert result["view8_step_ms"] == pytest.approx(view8, **PRINTED)
    assert result["contiguous_step_ms"] == pytest.approx(plain, **PRINTED)
    drop_us = float(re.search(r"drop a middle block (\d+\.\d) us", lines["(b) drop"]).group(1))
    assert result["drop_us"] == pytest.approx(drop_us, abs=0.06)
    assert result["recompute_ms"] == pytest.approx(_medians_ms(lines["(b) drop"])[0], **PRINTED)
    for n in (1, 2, 4, 8):
        line = lines[f"(c) {n}"]
        (step_ms,) = _medians_ms(line)
        printed_rate = float(re.search(r"(\d+\.\d) tokens/s", line).group(1))
        assert result[f"tokens_per_s_{n}"] == pytest.approx(printed_rate, abs=0.06)
        assert n * 1000.0 / result[f"tokens_per_s_{n}"] == pytest.approx(step_ms, **PRINTED)  # n tokens a step
    one, four = _medians_ms(lines["(c) bound:"])
    assert result["linears_ms_1"] == pytest.approx(one, **PRINTED)
    assert result["linears_ms_4"] == pytest.approx(four, **PRINTED)


def _check_ratios(result: dict) -> None:
    """Every ratio from the figures it divides, in the units the keys name."""
    r = result
    assert r["view_vs_contiguous"] == pytest.approx(r["view8_step_ms"] / r["contiguous_step_ms"])
    assert r["view8_vs_view1"] == pytest.approx(r["view8_step_ms"] / r["view1_step_ms"])
    assert r["drop_vs_recompute"] == pytest.approx(r["recompute_ms"] * 1000.0 / r["drop_us"])
    for n in (2, 4, 8):
        assert r[f"streams{n}_vs_1"] == pytest.approx(r[f"tokens_per_s_{n}"] / r["tokens_per_s_1"])
    assert r["linears4_vs_1"] == pytest.approx(r["linears_ms_4"] / r["linears_ms_1"])
    step1 = 1000.0 / r["tokens_per_s_1"]  # one stream decodes one token a step
    assert r["streams4_bound"] == pytest.approx(4 * step1 / (step1 + r["linears_ms_4"] - r["linears_ms_1"]))


def _check_physics(result: dict) -> None:
    """What the measured system must do, with room for a noisy shared machine."""
    r = result
    assert r["context_tokens"] == 8 * (512 // 8) and r["suffix_tokens"] == 256  # the bench's default shapes
    for n in (2, 4, 8):  # n rows in one forward never beat n separate steps' worth of tokens by much
        assert r[f"streams{n}_vs_1"] <= 1.2 * n
    assert r["streams2_vs_1"] < r["streams8_vs_1"] and r["streams8_vs_1"] > 2  # batching pays, more with more rows
    assert r["view8_vs_view1"] < 2  # a view over 8 blocks costs about what one block does
    assert r["drop_vs_recompute"] > 10  # dropping is bookkeeping; recompute is a 256-token prefill
    assert r["pool_blocks_left"] == 0


def _check_image_rows(result: dict, lines: dict[str, str]) -> None:
    """A row per image model, as its progress line printed it; the frame rate is what encoding plus prefill allow."""
    rows = {row["model"]: row for row in result["image_blocks"]}
    assert sorted(rows) == ["tiny:llava", "tiny:smolvlm"]
    for model, row in rows.items():
        line = lines[f"(e) {model}:"]
        tokens, encode, batched, prefill, rate = map(float, re.search(
            r"(\d+) tokens a frame, encode (\d+\.\d) ms \((\d+\.\d) ms a frame in a batch of 4\), prefill "
            r"(\d+\.\d) ms: (\d+\.\d) frames/s", line).groups())
        assert row["tokens_per_frame"] == tokens == 16  # the tiny towers: 64 patches, 4 to a token (SmolVLM), or 16 patches (LLaVA)
        for key, printed in (("encode_ms", encode), ("encode_ms_per_frame_batch4", batched),
                             ("prefill_ms", prefill), ("frames_per_s", rate)):
            assert row[key] == pytest.approx(printed, abs=0.06) and row[key] > 0
        assert row["frames_per_s"] == pytest.approx(1000.0 / (row["encode_ms"] + row["prefill_ms"]))


def test_bench_kv_ratios_agree_with_their_timings_and_the_pool_is_left_empty(tmp_path):
    proc = run_cli("bench", "kv", "--model", "tiny:llama", "--repeats", "3", "--json", "--out", str(tmp_path),
                   "--image-models", "tiny:smolvlm,tiny:llava", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert _after_first_start(proc.stderr).startswith("machine: ")
    result = json.loads(proc.stdout)
    _check_against_progress(result, _progress(proc.stderr))
    _check_ratios(result)
    _check_physics(result)
    _check_image_rows(result, _progress(proc.stderr))
    assert json.loads((tmp_path / "kv.json").read_text()) == result
    assert (tmp_path / "kv_streams.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_kv_rejects_a_missing_gpu_and_bad_repeats():
    for args, message in ((["--repeats", "1"], "--repeats must be at least 3"),
                          (["--device", "cuda"], "no CUDA device")):
        proc = run_cli("bench", "kv", *args, cwd=REPO)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_on_a_gpu_each_timed_step_waits_for_the_work_it_queued(monkeypatch):
    """CUDA calls return before their kernels run: the GPU timer synchronizes before the clock starts and before it
    stops, so a step is charged its own kernels, not the previous step's (checked here with a stand-in device)."""
    import time

    import torch

    from agent_runtime.benchmarks import kv_bench

    calls = []

    def synchronize():  # the queued work finishes here: 20 ms of it once the step has queued some
        calls.append("sync")
        if "step" in calls and calls.count("sync") == 2:
            time.sleep(0.02)

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    result, seconds = kv_bench._synced(lambda: calls.append("step") or 7)
    assert result == 7 and calls == ["sync", "step", "sync"]
    assert seconds >= 0.02  # the wait for the queued work is inside the measured time
