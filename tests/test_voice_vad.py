"""Silero VAD: fires on speech, stays quiet on stationary noise and tones; resampling and file input."""

from __future__ import annotations

import numpy as np
import pytest

from agent_runtime.errors import UserError
from agent_runtime.voice.audio_io import ArrayMicrophone, load_audio_16k, read_wav, resample
from agent_runtime.voice.vad import SpeechStarted, SpeechStopped, VoiceActivityDetector
from voice_synth import utterance, write_wav

SR = 16_000


@pytest.fixture(scope="module")
def vad():
    return VoiceActivityDetector()


def _events(vad, x, block=512):
    vad.reset()
    events = []
    for i in range(0, len(x), block):
        events += [w.event for w in vad.process(x[i : i + block]) if w.event]
    return events


def _stationary_signals():
    rng = np.random.default_rng(1)
    t = np.arange(SR * 3) / SR
    return {
        "white_noise": rng.normal(0, 0.1, t.size),
        "brown_noise": np.cumsum(rng.normal(0, 1, t.size)) / 300,
        "tone_440": 0.5 * np.sin(2 * np.pi * 440 * t),
        "tone_1k": 0.5 * np.sin(2 * np.pi * 1000 * t),
        "mains_hum": 0.3 * np.sin(2 * np.pi * 50 * t) + 0.1 * np.sin(2 * np.pi * 150 * t),
    }


@pytest.mark.parametrize("name", list(_stationary_signals()))
def test_vad_ignores_stationary_noise_and_tones(vad, name):
    x = _stationary_signals()[name].astype(np.float32)
    assert _events(vad, x) == []


@pytest.mark.parametrize("snr_db", [None, 10.0])
def test_vad_fires_on_speech_with_start_and_stop(vad, snr_db):
    x = utterance("what do you see", snr_db=snr_db, before_s=0.6, after_s=1.0)
    events = _events(vad, x, block=160)  # odd block size: windows are assembled internally
    assert [type(e) for e in events] == [SpeechStarted, SpeechStopped]
    start, stop = events
    assert 400 <= start.t_ms <= 800  # speech begins at 600 ms
    assert start.detected_ms - start.t_ms <= 100  # onset within ~2 windows
    assert stop.t_ms > start.t_ms + 300 and stop.started_ms == start.t_ms


def test_resample_keeps_a_tone_and_removes_aliases():
    t = np.arange(44_100) / 44_100
    y = resample(np.sin(2 * np.pi * 1000 * t).astype(np.float32), 44_100, SR)
    assert y.size == SR
    ref = np.sin(2 * np.pi * 1000 * np.arange(SR) / SR)
    assert np.abs(y[64:-64] - ref[64:-64]).max() < 0.02
    alias = resample(np.sin(2 * np.pi * 12_000 * t).astype(np.float32), 44_100, SR)  # above 8 kHz
    assert np.sqrt(np.mean(alias[64:-64] ** 2)) < 0.03


@pytest.mark.parametrize("subtype,channels", [("FLOAT", 1), ("FLOAT", 2), ("PCM_16", 2)])
def test_float_and_16_bit_stereo_wavs_at_44k_read_mixed_and_resampled(tmp_path, subtype, channels):
    x = utterance("stop", before_s=0.1, after_s=0.1)
    x44 = resample(x, SR, 44_100)
    path = tmp_path / f"s_{subtype}_{channels}.wav"
    write_wav(path, np.stack([x44, 0.5 * x44], axis=1) if channels == 2 else x44, 44_100, subtype)
    mono, rate = read_wav(path)
    gain = 0.75 if channels == 2 else 1.0
    assert rate == 44_100 and mono.dtype == np.float32 and mono.shape == x44.shape
    assert np.abs(mono - gain * x44).max() < (1e-6 if subtype == "FLOAT" else 1e-4)
    y = load_audio_16k(path)
    assert y.dtype == np.float32 and abs(y.size - x.size) <= 2
    assert np.corrcoef(y[: x.size], gain * x[: y.size])[0, 1] > 0.98


def test_read_wav_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_wav(tmp_path / "missing.wav")
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not a wav at all, just text" * 10)
    with pytest.raises(UserError, match="not a WAV file"):
        read_wav(bad)
    empty = tmp_path / "empty.wav"
    write_wav(empty, np.zeros(0, np.float32), SR)
    with pytest.raises(UserError, match="no audio"):
        read_wav(empty)


def test_array_microphone_drives_a_sounddevice_style_callback():
    seen = []
    mic = ArrayMicrophone(np.arange(1200, dtype=np.float32), lambda indata, frames, t, status: seen.append(
        (indata.shape, frames, t.inputBufferAdcTime)), blocksize=512)
    assert mic.pump() == 3
    assert seen[0] == ((512, 1), 512, 0.0) and seen[2][0] == (512, 1) and mic.finished


def test_no_sound_card_is_a_user_error_listing_devices():
    from agent_runtime.voice.audio_io import NoAudioDeviceError, _devices, open_stream

    if any(d["max_input_channels"] > 0 for d in _devices()):
        pytest.skip("this machine has an input device")
    with pytest.raises(NoAudioDeviceError, match="devices found") as info:
        open_stream("input", lambda *a: None)
    assert isinstance(info.value, UserError)
