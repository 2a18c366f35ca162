"""`bench interrupt`: a few real-time barge-ins go silent within two audio blocks; the CLI writes its JSON keys.

Timing is asserted only generously (the machine is shared): silence within 2 speaker blocks of detection.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_runtime.benchmarks.interrupt_bench import run_interrupt_bench
from tests.cli_runner import run_cli

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("interrupt_to_silence_ms_p50", "interrupt_to_silence_ms_p95", "interrupt_to_silence_ms_max",
        "late_chunks_discarded", "barge_ins")


def test_barge_ins_in_real_time_go_silent_within_two_blocks():
    result = run_interrupt_bench(barge_ins=3, mode="immediate", seed=0, progress=lambda msg: None)
    assert result["barge_ins"] == 3 and result["interrupted"] == 3, result["trials"]
    for trial in result["trials"]:
        assert trial["detection_to_silence_blocks"] is not None and trial["detection_to_silence_blocks"] <= 2
        assert trial["bump_to_silence_blocks"] is not None and trial["bump_to_silence_blocks"] <= 2
    block_ms = result["speaker_block"]["ms"]
    assert result["interrupt_to_silence_ms_max"] <= 3 * block_ms  # two whole blocks plus scheduling slack
    assert result["late_chunks_discarded"] >= 3  # queued commentary was dropped, not played late
    assert result["audible_blocks_after_silence"] == 0
    assert result["tts_first_audio_ms_p50"] is not None


def test_cli_prints_the_json_keys_and_writes_the_file(tmp_path):
    out = tmp_path / "bench"
    proc = run_cli("bench", "interrupt", "--barge-ins", "2", "--json", "--out", str(out), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "machine:" in proc.stderr and "none (audio only)" in proc.stderr
    result = json.loads(proc.stdout)
    for key in KEYS:
        assert key in result, key
    assert result["barge_ins"] == 2
    assert json.loads((out / "interrupt.json").read_text())["barge_ins"] == 2


def test_cli_rejects_zero_barge_ins(tmp_path):
    proc = run_cli("bench", "interrupt", "--barge-ins", "0", "--out", str(tmp_path), cwd=ROOT)
    assert proc.returncode == 2 and "--barge-ins must be at least 1" in proc.stderr
