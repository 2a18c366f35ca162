"""`agent-runtime live` headless (in this process): plays in real time and records; no sound device is a clear
error."""

import json

import pytest
from pathlib import Path

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def live(*args):
    return run_cli("live", "--model", "tiny:llama", "--no-window", *args, cwd=REPO)


def test_live_plays_in_real_time_and_leaves_a_replayable_recording(tmp_path):
    proc = live("--seconds", "2", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert 1.9 < result["seconds"] < 4 and result["actions_executed"] > 5
    (recording,) = tmp_path.iterdir()
    assert result["recordings"] == [str(recording)] and f"recording: {recording}" in proc.stderr
    manifest = json.loads((recording / "manifest.json").read_text())  # the bound it ran under, not "auto"
    assert isinstance(manifest["config"]["budgets"]["max_action_age_ms"], float)
    check = run_cli("replay", str(recording), "--json", cwd=REPO)
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["check"]["n_mismatched"] == 0


def test_live_voice_without_a_sound_device_is_one_clear_line(tmp_path):
    from agent_runtime.voice.audio_io import _devices

    if any(d.get("max_input_channels", 0) > 0 for d in _devices()):
        pytest.skip("this machine has a microphone")
    proc = live("--voice", "--seconds", "1", "--out", str(tmp_path / "rec"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "audio device" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "rec").exists()  # nothing written before the devices were checked
