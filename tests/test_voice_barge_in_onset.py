"""Tentative barge-in onsets: playback pauses one window after speech may have begun, and resumes when it was not.

The VAD confirms speech only after its hysteresis, and silero scores fricatives low, so "stop" is confirmed ~150 ms
after its "s" begins. `SpeechOnset` (the first window at threshold, or a fricative-like rise of the level) lets a
headset barge-in go quiet at once; `OnsetRejected` undoes it. Noise, tones and clicks must never interrupt, and
must pause (if at all) only briefly; open speakers (pause_confirm) keep pausing at SpeechStarted.
"""

from __future__ import annotations


import numpy as np
import pytest

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.voice.audio_io import RecordingSpeaker
from agent_runtime.voice.barge_in import ONSET_CUES, BargeInController
from agent_runtime.voice.playback import PlaybackBuffer
from agent_runtime.voice.recognizer import ListeningPipeline
from agent_runtime.voice.tts import EspeakTts, TtsWorker
from agent_runtime.voice.vad import OnsetRejected, SpeechOnset, SpeechStarted, SpeechStopped, VoiceActivityDetector
from voice_synth import pull_one_block, start_commentary, synthesize

SR = 16_000
WINDOW_MS = 32.0


@pytest.fixture(scope="module")
def vad():
    return VoiceActivityDetector()


def _frames(vad, x, block=512):
    vad.reset()
    out = []
    for i in range(0, len(x), block):
        for w in vad.process(x[i : i + block]):
            out += [f for f in (w.onset, w.event) if f is not None]
    return out


def _floor(seconds, rng, db=-70.0):
    return rng.normal(0.0, 10 ** (db / 20), int(seconds * SR)).astype(np.float32)


def _onset_sample(x):
    return int(np.flatnonzero(np.abs(x) >= 0.02 * np.abs(x).max())[0])


@pytest.mark.parametrize("phrase", ["stop", "shoot", "turn left", "what do you see"])
def test_speech_gets_a_tentative_onset_long_before_speech_is_confirmed(vad, phrase):
    speech = synthesize(phrase)
    x = _floor(2.0 + speech.size / SR, np.random.default_rng(0))
    x[16_000 : 16_000 + speech.size] += speech  # one second in
    onset_ms = (16_000 + _onset_sample(speech)) * 1000.0 / SR
    frames = _frames(vad, x)
    kinds = [type(f) for f in frames]
    assert SpeechStarted in kinds and kinds.index(SpeechOnset) < kinds.index(SpeechStarted), frames
    first = frames[kinds.index(SpeechOnset)]
    started = frames[kinds.index(SpeechStarted)]
    assert onset_ms < first.detected_ms <= onset_ms + 3 * WINDOW_MS, (first, onset_ms)  # "stop": its "s"
    assert started.detected_ms - first.detected_ms >= WINDOW_MS  # the hysteresis still confirms later
    assert not [f for f in frames[: kinds.index(SpeechStarted)] if isinstance(f, OnsetRejected)]  # never undone
    if phrase in ("stop", "shoot"):  # silero scores the fricative low: the fricative cue catches it
        assert first.cue == "fricative" and first.detected_ms <= onset_ms + WINDOW_MS + 1, first


def _stationary(t):
    rng = np.random.default_rng(1)
    return {
        "white_noise": rng.normal(0, 0.1, t.size),
        "brown_noise": np.cumsum(rng.normal(0, 1, t.size)) / 300,
        "tone_440": 0.5 * np.sin(2 * np.pi * 440 * t),
        "tone_1k": 0.5 * np.sin(2 * np.pi * 1000 * t),
        "mains_hum": 0.3 * np.sin(2 * np.pi * 50 * t) + 0.1 * np.sin(2 * np.pi * 150 * t),
        "beeping_880": 0.3 * np.sin(2 * np.pi * 880 * t) * ((t * 2.5).astype(int) % 2),
    }


@pytest.mark.parametrize("switched_on", [False, True])
def test_noise_and_tones_give_no_onset_but_a_noise_switching_on_gives_one_short_rejected_one(vad, switched_on):
    t = np.arange(SR * 4) / SR
    for name, x in _stationary(t).items():
        x = x.astype(np.float32) + _floor(4.0, np.random.default_rng(2))
        if switched_on:  # quiet for a second first: the level jumps
            x[:SR] = _floor(1.0, np.random.default_rng(3))
        frames = _frames(vad, x)
        assert not [f for f in frames if isinstance(f, (SpeechStarted, SpeechStopped))], (name, frames)
        onsets = [f for f in frames if isinstance(f, SpeechOnset)]
        if name == "white_noise" and switched_on:  # noise-like, like an "s": one pause, then it is known
            (onset,) = onsets
            (rejected,) = [f for f in frames if isinstance(f, OnsetRejected)]
            assert onset.cue == "fricative" and rejected.detected_ms - onset.detected_ms <= vad.onset_timeout_ms
        else:
            assert onsets == [], (name, onsets)


def test_clicks_are_rejected_within_about_160_ms_and_never_start_speech(vad):
    rng = np.random.default_rng(4)
    x = _floor(4.0, rng)
    for at in (1.0, 1.7, 2.3, 3.1):  # a loud key click each: 5 ms of decaying noise
        i = int(at * SR)
        x[i : i + 80] += (0.1 * rng.normal(0, 1, 80) * np.exp(-np.arange(80) / 15)).astype(np.float32)
    frames = _frames(vad, x)
    assert not [f for f in frames if isinstance(f, SpeechStarted)]
    onsets = [f for f in frames if isinstance(f, SpeechOnset)]
    rejected = [f for f in frames if isinstance(f, OnsetRejected)]
    assert len(onsets) == len(rejected) >= 1
    for onset, rejection in zip(onsets, rejected):
        assert rejection.reason == "quiet" and rejection.detected_ms - onset.detected_ms <= 5 * WINDOW_MS


# --------------------------------------------------------------------- the controller, lockstep with a speaker


def run_session(mode, user_audio, onset_cues):
    """Each 32 ms microphone block through the pipeline and the controller, then one 32 ms speaker block."""
    pipeline = ListeningPipeline()
    session = SessionGeneration()
    tts = EspeakTts(session)
    playback = PlaybackBuffer(session, tts.sample_rate, max_depth_ms=1000)
    worker = TtsWorker(tts, playback.push)
    interrupts = []
    controller = BargeInController(session, playback, mode=mode, onset_cues=onset_cues,
                                   on_interrupt=lambda g, r: interrupts.append((g, r)))
    speaker = RecordingSpeaker(playback.callback, blocksize=706, samplerate=tts.sample_rate)
    start_commentary(worker, playback)
    at = {}
    for i in range(len(user_audio) // 512):
        frames = pipeline.push(user_audio[i * 512 : (i + 1) * 512]) if controller.listening else []
        controller.feed(frames, pipeline.vad.stream_ms)
        for f in frames:
            at.setdefault(type(f), i)
        pull_one_block(speaker, playback, worker)  # pace the speaker as a sound card would
    playback.close()
    worker.close()
    return dict(session=session, playback=playback, controller=controller, blocks=speaker.blocks, at=at,
                interrupts=interrupts)


def _user(x, start_s=1.0, after_s=1.0):
    rng = np.random.default_rng(5)
    return np.concatenate([_floor(start_s, rng), x, _floor(after_s, rng)]).astype(np.float32)


def test_immediate_with_onset_cues_goes_silent_at_the_s_of_stop_and_interrupts_once_confirmed():
    r = run_session("immediate", _user(synthesize("stop")), ONSET_CUES["immediate"])
    blocks, onset, started = r["blocks"], r["at"][SpeechOnset], r["at"][SpeechStarted]
    assert 20 < onset < started - 1  # ~1 s in, and well before the hysteresis confirmed it
    assert any(np.any(b != 0.0) for b in blocks[onset - 3 : onset])  # commentary played up to the onset (a word
    # gap can be a silent block) ...
    assert all(np.all(b == 0.0) for b in blocks[onset:])  # ... and never again: paused, then interrupted
    (record,) = r["controller"].records
    assert record.cue == "fricative" and record.outcome == "interrupted" and record.reason == "vad"
    assert record.confirmed_wall is not None and record.confirmed_wall >= record.detected_wall
    assert r["session"].current == 1 and r["interrupts"] == [(1, "vad")]
    assert r["playback"].stats.discarded_stale >= 1 and r["playback"].stats.interruptions[0]["silent_after_blocks"] == 0


@pytest.mark.parametrize("noise", ["click", "noise_burst"])
def test_a_click_or_a_noise_burst_pauses_briefly_and_resumes_without_interrupting(noise):
    rng = np.random.default_rng(6)
    n = 80 if noise == "click" else int(0.06 * SR)
    sound = (0.1 * rng.normal(0, 1, n) * (np.exp(-np.arange(n) / 15) if noise == "click" else 1.0)).astype(np.float32)
    r = run_session("immediate", _user(sound, after_s=1.5), ONSET_CUES["immediate"])
    blocks, onset, rejected = r["blocks"], r["at"][SpeechOnset], r["at"][OnsetRejected]
    assert SpeechStarted not in r["at"] and r["session"].current == 0 and r["interrupts"] == []
    loud_windows = -(-n // 512) + 1  # the sound, in windows (it may straddle two)
    assert np.all(blocks[onset] == 0.0)  # paused at once, until 128 ms after the sound
    assert rejected - onset <= loud_windows + 4, (onset, rejected)
    assert any(np.any(b != 0.0) for b in blocks[rejected + 1 :])  # then it went on where it stopped
    (record,) = r["controller"].records
    assert record.outcome == "resumed" and record.reason.startswith("no speech")
    assert r["playback"].stats.discarded_stale == 0


def test_pause_confirm_keeps_pausing_at_speech_start_and_the_fricative_cue_is_for_headsets_only():
    assert ONSET_CUES["pause_confirm"] == () and ONSET_CUES["half_duplex"] == ()
    assert set(ONSET_CUES["immediate"]) == {"fricative", "vad"}
    r = run_session("pause_confirm", _user(synthesize("stop")), ONSET_CUES["pause_confirm"])
    blocks, started = r["blocks"], r["at"][SpeechStarted]
    assert r["at"][SpeechOnset] < started and np.any(blocks[started - 1] != 0.0)  # the onset did not pause it
    assert np.all(blocks[started] == 0.0) and r["controller"].records[0].cue == "speech"
    with pytest.raises(ValueError):
        BargeInController(r["session"], r["playback"], onset_cues=("energy",))


def test_voice_io_pauses_on_onsets_in_immediate_mode_only():
    from agent_runtime.voice.voice_io import VoiceIO

    for mode in ("immediate", "pause_confirm", "half_duplex"):
        voice = VoiceIO(SessionGeneration(), mode=mode, device_free=True)
        try:
            assert voice.controller.onset_cues == ONSET_CUES[mode]
        finally:
            voice.close()
