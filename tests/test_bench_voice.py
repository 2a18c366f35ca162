"""`bench voice` end to end on a tiny model: commands are recognized and reach the env."""

import json
from pathlib import Path

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def _after_first_start(stderr: str) -> str:
    """stderr without the one-time line of a machine's first start (the embedded model converted to its cache:
    tiny:llama uses its tokenizer)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("converting the embedded model"))


def test_bench_voice_reports_recognition_and_latency_keys():
    proc = run_cli("bench", "voice", "--commands", "2", "--model", "tiny:llama", "--json", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert _after_first_start(proc.stderr).startswith("machine: ")
    # accuracy itself is measured offline (tests/test_voice_recognizer.py); here the real-time path must work
    assert result["commands"] == 2 and result["recognized_correctly"] >= 1
    assert len(result["samples_ms"]) == result["recognized_correctly"]
    # generous: the endpointer alone waits ~256 ms of silence; a real stall would be seconds
    assert 0 < result["speech_end_to_action_ms_p50"] < 3000
    # from the phrase's onset: its whole length more (the synthesized commands last ~0.3-0.9 s)
    assert result["speech_onset_to_action_ms_p50"] - result["speech_end_to_action_ms_p50"] > 150
    assert result["speech_onset_to_action_ms_max"] >= result["speech_onset_to_action_ms_p50"]
