"""espeak-ng streaming TTS through ctypes and the generation-checked, bounded playback buffer."""

from __future__ import annotations

import time

import numpy as np
import pytest

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.voice.audio_io import RecordingSpeaker
from agent_runtime.voice.playback import PlaybackBuffer
from agent_runtime.voice.tts import EspeakTts, SpeechChunk, TtsWorker

TEXT = "An imp is on the left, about ten meters away. I am turning to face it."


@pytest.fixture(scope="module")
def tts_session():
    session = SessionGeneration()
    return EspeakTts(session), session


def test_tts_streams_small_chunks_fast_with_spans_and_generation(tts_session):
    tts, session = tts_session
    chunks: list[SpeechChunk] = []
    result = tts.speak(TEXT, on_chunk=lambda c: chunks.append(c) or True)
    assert not result.aborted and result.samples > tts.sample_rate  # over a second of speech
    audio = [c for c in chunks if c.samples.size]
    assert 50 <= np.median([c.samples.size * 1000 / c.sample_rate for c in audio]) <= 70  # ~60 ms chunks
    assert result.first_chunk_ms < 50 and result.real_time_factor < 0.2
    assert all(c.generation == session.current and c.utterance == result.utterance for c in chunks)
    assert chunks[-1].last and not any(c.last for c in chunks[:-1])
    words = [TEXT[s:e] for s, e in (c.text_span for c in chunks if c.text_span)]
    assert words[:2] == ["An", "imp"] and words[-1] == "it"
    starts = [c.text_span[0] for c in chunks if c.text_span]
    assert starts == sorted(starts)


def test_tts_aborts_at_the_next_chunk_after_a_bump(tts_session):
    tts, session = tts_session
    chunks = []

    def sink(c):
        chunks.append(c)
        if c.index == 2:
            session.bump("test")
        return True

    result = tts.speak(TEXT, on_chunk=sink)
    assert result.aborted and len(chunks) == 3 and not chunks[-1].last


def test_playback_plays_everything_in_order_and_reports_it_heard(tts_session):
    tts, session = tts_session
    playback = PlaybackBuffer(session, tts.sample_rate, max_depth_ms=500)
    pushed: list[SpeechChunk] = []  # espeak output varies slightly run to run: compare with what was pushed
    results = []
    worker = TtsWorker(tts, lambda c: pushed.append(c) or playback.push(c), on_result=results.append)
    speaker = RecordingSpeaker(playback.callback, blocksize=512, samplerate=tts.sample_rate)
    worker.say(TEXT)
    deadline = time.monotonic() + 5
    while playback.stats.depth_ms < 400 and time.monotonic() < deadline:
        time.sleep(0.002)
    block_ms = 512 * 1000 / tts.sample_rate
    for _ in range(2000):  # the worker refills as the speaker drains: depth stays bounded
        while playback.stats.depth_ms < block_ms and not worker.idle:
            time.sleep(0.0005)  # pace like a sound card would: the test pulls far faster than real time
        speaker.pull(1)
        if not playback.active:
            break
    playback.close()
    worker.close()
    out = np.concatenate(speaker.blocks)
    reference = np.concatenate([c.samples for c in pushed])
    assert np.allclose(out[: reference.size], reference, atol=1e-6)
    assert playback.stats.max_depth_ms <= 500 + 61  # bounded by depth (one chunk of slack)
    assert playback.stats.discarded_stale == 0 and playback.stats.discarded_late == 0
    heard = playback.drain_heard()
    assert len(heard) == 1 and heard[0].heard == TEXT and not heard[0].interrupted
    first_audio_ms = [r.first_chunk_ms for r in results]
    assert first_audio_ms and max(first_audio_ms) < 50 and playback.stats.underruns == 0


def _chunk(session, n, created=None, last=False, utterance=1, span=None, text="x"):
    return SpeechChunk(np.full(n, 0.5, np.float32), 22_050, session.current, utterance, 0, text, span,
                       time.monotonic() if created is None else created, last)


def test_playback_drops_late_chunks_counts_underruns_and_silences_after_a_bump():
    session = SessionGeneration()
    playback = PlaybackBuffer(session, max_age_ms=1000)
    speaker = RecordingSpeaker(playback.callback, blocksize=256)
    assert playback.push(_chunk(session, 256, created=time.monotonic() - 5.0, text="hello world"))  # late
    assert playback.push(_chunk(session, 256, span=(0, 5), text="hello world"))
    b1, b2 = speaker.pull(2)
    assert playback.stats.discarded_late == 1
    assert np.all(b1 == 0.5) and np.all(b2 == 0.0) and playback.stats.underruns == 1  # utterance not finished
    playback.push(_chunk(session, 2048, span=(6, 11), text="hello world"))
    assert np.all(speaker.pull(1)[0] == 0.5)
    session.bump("barge-in")
    assert np.all(speaker.pull(1)[0] == 0.0)  # the very next block
    assert playback.stats.discarded_stale == 1 and not playback.active
    assert playback.stats.interruptions[0]["silent_after_blocks"] == 0
    heard = playback.drain_heard()
    assert [(h.heard, h.interrupted) for h in heard] == [("hello", True)]  # "world" was not fully played
    assert not playback.push(_chunk(SessionGeneration(), 10))  # an old-generation chunk is refused
