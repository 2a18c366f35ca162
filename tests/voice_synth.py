"""Test helper: speak a phrase with espeak-ng or flite into a 16 kHz float32 array (no sound card)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile

from agent_runtime.voice.audio_io import SAMPLE_RATE, read_wav, resample

VOICES = ("espeak:en-us", "flite:slt", "espeak:en-gb", "flite:rms")


def available_voices() -> list[str]:
    return [v for v in VOICES if shutil.which(v.split(":")[0] if v.startswith("flite") else "espeak-ng")]


def synthesize(text: str, voice: str = "espeak:en-us", rate: int = SAMPLE_RATE) -> np.ndarray:
    """Synthesize `text` with voice "espeak:<name>" or "flite:<name>" as float32 mono at `rate`."""
    engine, name = voice.split(":", 1)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.wav"
        if engine == "espeak":
            cmd = ["espeak-ng", "-v", name, "-s", "150", "-w", str(path), text]
        elif engine == "flite":
            cmd = ["flite", "-voice", name, "-t", text, "-o", str(path)]
        else:
            raise ValueError(voice)
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)
        x, sr = read_wav(path)
    return resample(x, sr, rate)


def write_wav(path: str | Path, samples: np.ndarray, rate: int, subtype: str = "PCM_16") -> None:
    """Write float samples ([frames] or [frames, channels]) as a WAV (16-bit PCM, or "FLOAT": 32-bit float): test
    input files."""
    soundfile.write(path, np.clip(np.asarray(samples, np.float32), -1.0, 1.0), rate, subtype=subtype, format="WAV")


def with_silence(x: np.ndarray, before_s: float = 0.5, after_s: float = 1.0, rate: int = SAMPLE_RATE) -> np.ndarray:
    return np.concatenate([np.zeros(int(before_s * rate), np.float32), x, np.zeros(int(after_s * rate), np.float32)])


def add_noise(x: np.ndarray, snr_db: float = 20.0, seed: int = 0) -> np.ndarray:
    """White noise at the given speech-to-noise ratio (speech power measured on the non-silent part)."""
    rng = np.random.default_rng(seed)
    voiced = x[np.abs(x) > 1e-3]
    p = float(np.mean(voiced**2)) if voiced.size else 1e-4
    noise = rng.normal(0.0, np.sqrt(p / 10 ** (snr_db / 10)), x.size).astype(np.float32)
    return (x + noise).astype(np.float32)


def utterance(text: str, voice: str = "espeak:en-us", snr_db: float | None = None,
              before_s: float = 0.5, after_s: float = 1.0) -> np.ndarray:
    """A phrase padded with silence (and noise over the whole clip when snr_db is given)."""
    x = with_silence(synthesize(text, voice), before_s, after_s)
    return x if snr_db is None else add_noise(x, snr_db)


COMMENTARY = ("Two imps ahead and one on the left. I am turning left to face them, then I will shoot "
              "the nearest one and move back toward the door before they can reach me.")


def start_commentary(worker, playback, text: str = COMMENTARY) -> None:
    """Queue commentary and wait (at most 5 s) until playback holds ~0.9 s of it."""
    import time

    worker.say(text)
    deadline = time.monotonic() + 5
    while playback.stats.depth_ms < 900 and time.monotonic() < deadline:
        time.sleep(0.001)


def pull_one_block(speaker, playback, worker) -> None:
    """The speaker pulls one block once the buffer holds a block's worth, as a sound card paced in lockstep."""
    import time

    wait_until = time.monotonic() + 0.5
    while (playback.stats.depth_ms < 33 and not worker.idle and not playback.paused
           and time.monotonic() < wait_until):
        time.sleep(0.0005)
    speaker.pull(1)
