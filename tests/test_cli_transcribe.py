"""`agent-runtime transcribe` as a user runs it (in this process) on WAV files, and clean errors on bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.cli_runner import run_cli
from voice_synth import synthesize, with_silence, write_wav

ROOT = Path(__file__).resolve().parents[1]


def transcribe(*args: str) -> subprocess.CompletedProcess:
    return run_cli("transcribe", *args, cwd=ROOT)


def _phrases(rate: int) -> np.ndarray:
    return np.concatenate([with_silence(synthesize(p, rate=rate), 0.4, 0.8, rate) for p in ("turn right", "shoot")])


@pytest.mark.parametrize("rate,stereo,subtype", [(44_100, True, "PCM_16"), (44_100, False, "FLOAT"),
                                                (16_000, False, "PCM_16")])
def test_transcribe_json_on_44k_stereo_float_and_16k_mono(tmp_path, rate, stereo, subtype):
    x = _phrases(rate)
    path = tmp_path / f"commands_{rate}.wav"
    write_wav(path, np.stack([x, 0.7 * x], axis=1) if stereo else x, rate, subtype)
    proc = transcribe(str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    hyps = [json.loads(line) for line in proc.stdout.splitlines()]
    assert all({"text", "final", "t_ms", "audio_age_ms", "command"} <= h.keys() for h in hyps)
    finals = [h for h in hyps if h["final"]]
    assert [(h["text"], h["command"]) for h in finals] == [("turn right", "TURN_RIGHT"), ("shoot", "ATTACK")]
    assert [h["t_ms"] for h in hyps] == sorted(h["t_ms"] for h in hyps)


def test_transcribe_plain_text_output(tmp_path):
    path = tmp_path / "c.wav"
    write_wav(path, with_silence(synthesize("stop")), 16_000)
    proc = transcribe(str(path))
    assert proc.returncode == 0, proc.stderr
    assert "final" in proc.stdout and "'stop'" in proc.stdout and "STOP" in proc.stdout and "audio age" in proc.stdout


def test_transcribe_bad_input_exits_2_with_one_line(tmp_path):
    not_wav = tmp_path / "notes.wav"
    not_wav.write_text("this is not audio\n" * 20)
    empty = tmp_path / "empty.wav"
    write_wav(empty, np.zeros(0, np.float32), 16_000)
    for path, needle in ((tmp_path / "missing.wav", "no such file"), (not_wav, "not a WAV file"),
                         (empty, "no audio")):
        proc = transcribe(str(path))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr
