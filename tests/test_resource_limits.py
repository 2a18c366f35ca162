"""Resource limits: a flood of user text, an endless typed line, a 10-minute utterance, a listener that falls behind.

Each is bounded (asserted in numbers), said once (an event, and a line), and the session goes on: on the tiny
random Llama with real ViZDoom, and on synthesized speech through the real VAD and recognizer.
"""

from __future__ import annotations

import io
import math
import time

import numpy as np
import pytest

from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.live_session import TypedCommands, run_live
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.recording import Recording
from agent_runtime.engine.streams.text_in import MAX_PENDING_TYPED_LINES, MAX_USER_TEXT_CHARS, MAX_USER_TOKENS
from agent_runtime.voice.recognizer import Hypothesis, ListeningPipeline, UtteranceCut
from agent_runtime.voice.vad import SpeechStopped
from agent_runtime.voice.voice_io import MAX_QUEUED_MIC_BLOCKS, VoiceIO
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime
from tests.voice_synth import synthesize

FLOOD = "enemies keep coming from the left side and they throw fireballs at me so watch out " * 300


class UserPages:
    """A bus sink that measures, at every engine step, the KV pages user-text blocks hold."""

    def __init__(self, store):
        self.store, self.samples = store, []

    def write(self, event) -> None:
        if event.kind == "engine_step":
            self.samples.append(sum(len(b.pages) for b in self.store.blocks.values() if b.label == "user"))


def test_a_flood_of_long_user_texts_keeps_the_kv_pool_bounded_and_play_going():
    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env, capacity_tokens=4096, max_action_age_ms=1000.0)
        tokens_each = len(runtime.loaded.tokenizer.encode(FLOOD[:MAX_USER_TEXT_CHARS], add_special_tokens=False))
        assert tokens_each > MAX_USER_TOKENS * 3  # a few of these, kept whole, would fill the pool
        bus, probe = EventBus(), UserPages(runtime.store)
        bus.sinks.append(probe)
        script = {step: (f"{step}: {FLOOD}", None) for step in range(30)}  # a new long text every step
        result = run_llm_episode(env, runtime, max_tics=150, fixed_cost=FixedCost(), bus=bus, user_script=script)
    typed = len(bus.of_kind("user_input"))
    bound = (2 + 1) * math.ceil(MAX_USER_TOKENS / runtime.store.page_size)  # the views' 2 user blocks + 1 filling
    assert typed == 30 and 0 < max(probe.samples) <= bound, (typed, max(probe.samples), bound)
    assert result["pool_peak_pages"] < runtime.store.num_pages
    assert len(bus.of_kind("user_text_truncated")) == typed
    assert len(bus.of_kind("user_text_dropped")) > 0  # more arrived than could be read: the oldest waiting went
    first = bus.of_kind("user_input")[0].seq
    acted = [e for e in bus.of_kind("action_executed") if e.seq > first and e.stream == "action"]
    assert len(acted) >= 20  # the model kept playing through the flood
    assert runtime.store.used_pages == 0


def test_an_extremely_long_typed_command_is_cut_with_one_line_and_the_session_goes_on(tmp_path):
    lines: list[str] = []
    endless = "shoot " * 200_000  # 1.2 million characters on one line
    typed = TypedCommands(io.StringIO(endless + "\nturn left\n"), notify=lines.append)
    deadline = time.monotonic() + 10
    while len(typed.lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    recording = EpisodeRecording.create(tmp_path, Manifest.build({"scenario": "defend_the_center"}),
                                        scenario="defend_the_center", index=0)
    with DoomEnv("defend_the_center", clock="realtime", seed=1) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0)
        result = run_live(env, runtime, seconds=2.5, typed=typed, bus=recording.bus,
                          record_path=recording.lmp_path, notify=lines.append)
    recording.close()
    assert typed.cut == 1 and len(lines) == 2, lines  # one line for the typed line, one for the agent's cut
    assert lines[0].startswith(f"typed command too long ({len(endless)} characters)")
    assert f"cut to its first {MAX_USER_TOKENS} tokens" in lines[1]
    saved = Recording.open(recording.dir)
    long_text, turn = saved.of_kind("user_input")
    assert len(long_text.payload["text"]) == MAX_USER_TEXT_CHARS  # the kept part of the line
    assert turn.payload["command"] == "TURN_LEFT 4" and result["user_actions"] == 1  # the grammar's default hold
    (cut,) = saved.of_kind("user_text_truncated")
    assert cut.payload["kept_tokens"] == MAX_USER_TOKENS < cut.payload["tokens"]
    later = [e for e in saved.of_kind("action_executed") if e.stream == "action" and e.seq > turn.seq]
    assert len(later) >= 3  # the model still acts after both texts


def test_a_paste_of_many_lines_keeps_only_the_newest_waiting():
    lines: list[str] = []
    typed = TypedCommands(io.StringIO("".join(f"line {i}\n" for i in range(1000))), notify=lines.append)
    deadline = time.monotonic() + 10
    while typed.dropped < 1000 - MAX_PENDING_TYPED_LINES and time.monotonic() < deadline:
        time.sleep(0.01)
    assert typed.take() == [f"line {i}" for i in range(1000 - MAX_PENDING_TYPED_LINES, 1000)]
    assert len(lines) == 1 and "older ones are dropped" in lines[0]


def _speech_without_pauses(seconds: float) -> np.ndarray:
    """Commands said back to back with no pause the VAD would end an utterance on."""
    x = synthesize("turn left turn right go forward")
    voiced = np.nonzero(np.abs(x) > 0.01)[0]
    x = x[voiced[0] : voiced[-1]]
    return np.tile(x, int(seconds * 16000 / x.size) + 1)[: int(seconds * 16000)]


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), np.float32)


@pytest.mark.slow  # ten minutes of audio through the VAD: ~5 s on an idle 2-core machine
def test_a_ten_minute_utterance_is_cut_at_the_bound_and_the_next_command_is_still_heard():
    audio = np.concatenate([_silence(0.5), _speech_without_pauses(600.0), _silence(1.0), synthesize("shoot"),
                            _silence(1.0)])
    pipeline = ListeningPipeline()
    frames, fed_most = [], 0
    for i in range(0, audio.size, 512):
        frames += pipeline.push(audio[i : i + 512])
        fed_most = max(fed_most, pipeline.recognizer.utterance_samples)
    frames += pipeline.flush()
    (cut,) = [f for f in frames if isinstance(f, UtteranceCut)]
    assert abs(cut.t_ms - cut.started_ms - pipeline.max_utterance_ms) <= 32
    # the decoder heard at most the bound plus its pre-roll, not ten minutes
    assert fed_most <= (pipeline.max_utterance_ms + pipeline.preroll_ms + 64) * 16
    stops = [f for f in frames if isinstance(f, SpeechStopped)]
    assert stops and 600_000 < stops[0].t_ms < 601_500  # the end of the long speech still reaches listeners
    hyps = [f for f in frames if isinstance(f, Hypothesis)]
    assert not [h for h in hyps if cut.t_ms < h.t_ms < stops[0].t_ms]  # nothing decoded past the bound
    assert hyps[-1].final and hyps[-1].command == "ATTACK"  # and the next command is heard


def test_a_live_utterance_past_the_bound_is_one_event_and_one_line_then_commands_work():
    audio = np.concatenate([_silence(0.3), _speech_without_pauses(2.5), _silence(0.8), synthesize("shoot"),
                            _silence(1.0)])
    bus, lines = EventBus(), []
    voice = VoiceIO(SessionGeneration(), mode="immediate", mic_samples=audio, bus=bus, notify=lines.append)
    voice.pipeline.max_utterance_ms = 1000
    voice.start()
    time.sleep(audio.size / 16000 + 0.5)  # real time
    commands = voice.take_commands()
    voice.close()
    (cut,) = bus.of_kind("asr_utterance_cut")
    assert cut.payload["max_ms"] == 1000 and len(lines) == 1 and "over 1 s without a pause" in lines[0]
    assert commands and commands[-1].command == "ATTACK"


def test_a_listener_that_falls_behind_keeps_the_newest_two_seconds():
    blocks = 300
    samples = np.repeat(np.arange(blocks, dtype=np.float32) / 1000.0, 512)  # block k holds the value k/1000
    bus = EventBus()
    voice = VoiceIO(SessionGeneration(), mic_samples=samples, bus=bus)  # not started: nobody drains the queue
    try:
        assert voice.devices.slots["input"].stream.pump(blocks) == blocks
        assert voice._blocks.qsize() == MAX_QUEUED_MIC_BLOCKS
        assert voice.mic_blocks_dropped == blocks - MAX_QUEUED_MIC_BLOCKS
        oldest, _ = voice._blocks.get_nowait()
        assert oldest[0] == np.float32((blocks - MAX_QUEUED_MIC_BLOCKS) / 1000.0)  # the oldest were dropped
        (overrun,) = bus.of_kind("mic_overrun")
        assert overrun.payload["dropped"] == 1
    finally:
        voice.close()
