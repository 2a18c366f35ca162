"""Barge-in end to end on the device-free backend: commentary plays, the user speaks, the agent goes silent.

Lockstep simulation: each 32 ms microphone block goes through the listening pipeline and the
controller, then the speaker pulls one 32 ms output block, as a full-duplex sound card would.
"""

from __future__ import annotations


import numpy as np
import pytest

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.voice.audio_io import RecordingSpeaker
from agent_runtime.voice.barge_in import BargeInController
from agent_runtime.voice.playback import PlaybackBuffer
from agent_runtime.voice.recognizer import Hypothesis, ListeningPipeline
from agent_runtime.voice.tts import EspeakTts, TtsWorker
from agent_runtime.voice.vad import SpeechStarted
from agent_runtime.voice.voice_commands import command_for
from voice_synth import COMMENTARY, pull_one_block, start_commentary, synthesize

MIC_BLOCK = 512  # 32 ms at 16 kHz
SPEAKER_BLOCK = 706  # 32 ms at 22.05 kHz


@pytest.fixture(scope="module")
def pipeline():
    return ListeningPipeline()


def run_session(pipeline, mode, user_audio, n_blocks=None):
    pipeline.vad.reset()
    session = SessionGeneration()
    tts = EspeakTts(session)
    playback = PlaybackBuffer(session, tts.sample_rate, max_depth_ms=1000)
    pushed, results = [], []
    worker = TtsWorker(tts, lambda c: pushed.append(c) or playback.push(c), on_result=results.append)
    interrupts, commands = [], []
    controller = BargeInController(session, playback, mode=mode,
                                   on_interrupt=lambda g, r: interrupts.append((g, r)),
                                   on_command=lambda c, h: commands.append(c))
    speaker = RecordingSpeaker(playback.callback, blocksize=SPEAKER_BLOCK, samplerate=tts.sample_rate)
    start_commentary(worker, playback)
    detected_at = None
    n_blocks = n_blocks or len(user_audio) // MIC_BLOCK
    for i in range(n_blocks):
        block = user_audio[i * MIC_BLOCK : (i + 1) * MIC_BLOCK]
        frames = pipeline.push(block) if controller.listening else []
        controller.feed(frames, pipeline.vad.stream_ms)
        if detected_at is None and any(isinstance(f, SpeechStarted) for f in frames):
            detected_at = i
        pull_one_block(speaker, playback, worker)  # pace the speaker as a sound card would
    playback.close()
    worker.close()
    return dict(session=session, playback=playback, controller=controller, speaker=speaker, pushed=pushed,
                detected_at=detected_at, interrupts=interrupts, commands=commands, results=results)


def expected_heard(pushed, played_samples):
    """The text whose chunks were fully played within the first `played_samples` output samples."""
    end, total = 0, 0
    for c in pushed:
        total += c.samples.size
        if total > played_samples:
            break
        if c.text_span:
            end = max(end, c.text_span[1])
    return COMMENTARY[:end].strip()


def _user(phrase_or_audio, start_s=1.0, after_s=1.2):
    x = synthesize(phrase_or_audio) if isinstance(phrase_or_audio, str) else phrase_or_audio
    return np.concatenate([np.zeros(int(start_s * 16_000), np.float32), x,
                           np.zeros(int(after_s * 16_000), np.float32)])


def _assert_silent_from(blocks, k):
    assert all(np.all(b == 0.0) for b in blocks[k:]), "audio after the barge-in"


@pytest.mark.parametrize("mode", ["immediate", "pause_confirm"])
def test_barge_in_silences_next_block_bumps_generation_and_commits_only_heard_text(pipeline, mode):
    r = run_session(pipeline, mode, _user("stop"))
    blocks, k = r["speaker"].blocks, r["detected_at"]
    assert k is not None and k > 20  # the user spoke ~1 s into the commentary
    assert np.any(blocks[k - 1] != 0.0)  # commentary was playing right up to the detection
    _assert_silent_from(blocks, k + 1 - 1)  # the block pulled right after detection is already silent
    session, playback, controller = r["session"], r["playback"], r["controller"]
    assert session.current == 1 and session.history[0].reason.startswith("barge-in")
    assert len(r["interrupts"]) == 1 and r["interrupts"][0][0] == 1
    if mode == "pause_confirm":
        assert r["interrupts"][0][1] == "command:STOP" and r["commands"] == ["STOP"]
    assert playback.stats.discarded_stale >= 1  # the queued (late) chunks were dropped, counted
    assert playback.stats.interruptions[0]["silent_after_blocks"] == 0
    assert r["results"][0].aborted  # synthesis stopped mid-utterance
    heard = playback.drain_heard()
    assert len(heard) == 1 and heard[0].interrupted
    played = k * SPEAKER_BLOCK
    assert heard[0].heard == expected_heard(r["pushed"], played)
    assert heard[0].heard and COMMENTARY.startswith(heard[0].heard) and len(heard[0].heard) < len(COMMENTARY) // 2
    assert all(r["silent_after_blocks"] == 0 for r in playback.stats.interruptions)
    assert [r.outcome for r in controller.records].count("interrupted") == 1


def test_pause_confirm_resumes_after_a_false_trigger(pipeline):
    speech = synthesize("shoot")
    onset = int(np.nonzero(np.abs(speech) > 0.01)[0][0])
    blip = speech[onset : onset + int(0.15 * 16_000)]  # too short to be a command
    r = run_session(pipeline, "pause_confirm", _user(blip, after_s=0.8))
    blocks, k = r["speaker"].blocks, r["detected_at"]
    assert k is not None
    assert np.all(blocks[k] == 0.0)  # paused at once ...
    assert r["session"].current == 0 and r["interrupts"] == []  # ... but never interrupted
    assert r["controller"].records[0].outcome == "resumed"
    assert any(np.any(b != 0.0) for b in blocks[k + 1 :])  # ... and it resumed
    assert r["playback"].stats.discarded_stale == 0


def test_half_duplex_ignores_the_microphone_while_talking(pipeline):
    r = run_session(pipeline, "half_duplex", _user("stop"))
    assert r["detected_at"] is None and r["session"].current == 0 and r["interrupts"] == []
    assert r["playback"].stats.underruns == 0 and r["playback"].active  # talked straight through, not done yet
    with pytest.raises(ValueError):
        BargeInController(r["session"], r["playback"], mode="full_duplex")


def test_a_settled_whole_phrase_commands_once_per_utterance_before_its_final():

    session, commands = SessionGeneration(), []
    controller = BargeInController(session, PlaybackBuffer(session, 22_050), mode="immediate",
                                   on_command=lambda c, h: commands.append((c, h.t_ms)))

    def hyp(text, t_ms, utterance, *, final=False, settled=False):
        return Hypothesis(text, command_for(text), final, t_ms, 0.0, utterance, 1000.0, t_ms - 256 if final else None,
                          settled)

    controller.feed([hyp("turn", 1200, 1, settled=True)], 1200)  # a pause inside "turn left": no command yet
    controller.feed([hyp("turn left", 1400, 1)], 1400)  # an unsettled partial: not yet
    assert commands == []
    controller.feed([hyp("turn left", 1500, 1, settled=True)], 1500)
    controller.feed([hyp("turn left", 1700, 1, final=True)], 1700)  # the final of the same utterance: no second act
    assert commands == [("TURN_LEFT", 1500)]
    controller.feed([hyp("stop", 2500, 2, final=True)], 2500)  # a later utterance still commits on its final
    assert commands == [("TURN_LEFT", 1500), ("STOP", 2500)]
    rejected = Hypothesis("shoot", None, True, 3500, 0.0, 3, 3000.0, 3244.0, coverage=0.3)  # a sentence, not "shoot"
    controller.feed([rejected], 3500)
    assert commands == [("TURN_LEFT", 1500), ("STOP", 2500)]
