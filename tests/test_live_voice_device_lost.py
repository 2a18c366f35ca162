"""Issue #14, point 4: the real `agent-runtime live --voice` whose sound devices vanish mid-session and come back.

The session runs (in this process) on the device-free backend (DOOM_AGENT_AUDIO, docs/voice.md), told to lose both
devices 1.5 s into the session's audio and let them be reopened a second later; the microphone hears "turn left" once
it is back. The run must end normally (exit 0), say each loss and each return in one line, play on while voice is
out, record the losses, and leave recordings that read back to their last event and replay frame-exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agent_runtime.recording.recording import Recording
from tests.cli_runner import run_cli
from tests.voice_synth import synthesize, write_wav

REPO = Path(__file__).resolve().parent.parent
FAIL_AT_S, BACK_AFTER_S = 1.5, 1.0  # reopened at the guard's first retry, 3 s after the loss


def _events(directory: Path) -> list:
    """The recording's events, after checking that it reads back to its last line and replays."""
    lines = (directory / "events.jsonl").read_text().splitlines()
    recording = Recording.open(directory)
    assert len(recording.events) == len(lines) and recording.events[-1].seq == json.loads(lines[-1])["seq"]
    assert not recording.warnings, recording.warnings
    replay = run_cli("replay", str(directory), "--json", cwd=REPO)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["check"]["n_mismatched"] == 0
    return recording.events


@pytest.mark.slow  # an 8 s real-time voice session, then the replay of its recordings: ~30 s
def test_live_voice_plays_on_when_the_sound_devices_vanish_and_hears_again_when_they_are_back(tmp_path, monkeypatch):
    mic = tmp_path / "mic.wav"  # the microphone stops while it is gone: "turn left" comes ~0.5 s after it is back
    write_wav(mic, np.concatenate([np.zeros(int(2.0 * 16000), np.float32), synthesize("turn left")]), 16000)
    audio = f"device-free:mic={mic},fail-at={FAIL_AT_S},back-after={BACK_AFTER_S}"
    with monkeypatch.context() as m:  # read when the session opens its devices
        m.setenv("DOOM_AGENT_AUDIO", audio)
        proc = run_cli("live", "--voice", "--barge-in", "immediate", "--model", "tiny:llama", "--no-window",
                       "--seconds", "8", "--json", "--out", str(tmp_path / "rec"), cwd=REPO)

    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    voice_lines = [line for line in proc.stderr.splitlines() if line.startswith("voice: ")]
    assert sorted(voice_lines) == sorted([
        *(f"voice: the {label} failed (DOOM_AGENT_AUDIO fail-at={FAIL_AT_S:g} removed the device-free {kind} "
          f"device); play goes on without {what}; trying to reopen it every 3 s"
          for label, kind, what in (("microphone", "input", "listening"), ("speaker", "output", "speech"))),
        "voice: the microphone is back; listening again", "voice: the speaker is back; speech again"]), proc.stderr
    result = json.loads(proc.stdout)
    assert result["voice_device_losses"] == 2

    events = [e for directory in result["recordings"] for e in _events(Path(directory))]
    lost = {e.payload["device"]: e.t_mono for e in events if e.kind == "audio_device_lost"}
    back = {e.payload["device"]: e.t_mono for e in events if e.kind == "audio_device_restored"}
    assert sorted(lost) == sorted(back) == ["input", "output"]
    assert all(2.5 < back[d] - lost[d] < 4.0 for d in lost), (lost, back)  # the first retry, 3 s after the loss
    played = [e.t_mono for e in events if e.kind == "action_executed" and e.stream != "user"]
    assert sum(lost["input"] < t < back["input"] for t in played) >= 3  # the game went on while voice was out
    assert any(t > back["input"] for t in played)
    said = [e for e in events if e.kind == "user_input"]  # heard through the reopened microphone
    assert [e.payload["command"] for e in said] == ["TURN_LEFT 4"] and said[0].t_mono > back["input"]
