"""Voice commands reach the env through the live loop; commentary stops on a bump and only heard text enters history."""

from __future__ import annotations

import time

import numpy as np

from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.live_session import run_live
from agent_runtime.session.sync_world import SyncWorld, TimedFrame
from agent_runtime.session.clocks import SessionClock
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.recording import Recording
from agent_runtime.voice.audio_io import read_wav
from agent_runtime.voice.voice_io import VoiceIO
from envs.doom_env import DoomEnv
from tests.engine_rig import make_agent, make_runtime
from tests.voice_synth import synthesize, with_silence


def test_a_spoken_command_reaches_the_env_as_the_right_action_in_real_time_and_is_recorded(tmp_path):
    speech = with_silence(synthesize("turn left"), before_s=0.6, after_s=1.5)
    generation = SessionGeneration()
    recording = EpisodeRecording.create(tmp_path, Manifest.build({"scenario": "defend_the_center"}),
                                        scenario="defend_the_center", index=0)
    recording.bus.keep = True
    bus = recording.bus
    voice = VoiceIO(generation, mode="immediate", mic_samples=speech.astype(np.float32), bus=bus,
                    recording=recording)
    with DoomEnv("defend_the_center", clock="realtime", seed=1) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0)
        result = run_live(env, runtime, seconds=4.0, voice=voice, bus=bus, record_path=recording.lmp_path)
    recording.close()
    saved = Recording.open(recording.dir)
    kinds = {e.kind for e in saved.events}
    assert {"vad_speech_start", "vad_speech_end", "asr_partial", "asr_final", "user_input", "action_executed",
            "playback_stats"} <= kinds
    (final,) = [e for e in saved.events if e.kind == "asr_final"]
    assert final.payload["text"] == "turn left" and 0 <= final.payload["audio_age_ms"] < 500
    assert 100 < final.payload["speech_end_to_final_ms"] < 1500
    mic, rate = read_wav(recording.dir / "mic_in.wav")
    assert rate == 16000 and len(mic) >= 0.9 * len(speech)
    user = [e for e in bus.of_kind("action_executed") if e.stream == "user"]
    assert result["user_actions"] == 1 and len(user) == 1
    assert user[0].payload["command"].startswith("TURN_LEFT")
    (said,) = bus.of_kind("user_input")
    assert said.payload["command"] == "TURN_LEFT 4" and said.payload["text"] == "turn left"
    assert generation.current >= 1 and user[0].generation == said.generation + 1  # input, then its interruption
    # the model's own actions kept flowing while the user spoke
    assert sum(1 for e in bus.of_kind("action_executed") if e.stream != "user") > 10


def test_commentary_stops_at_the_next_step_after_a_bump_and_only_heard_text_enters_history():
    spoken = []
    with DoomEnv("defend_the_center", seed=2) as env:
        runtime = make_runtime(env)
        generation = SessionGeneration()
        agent = make_agent(runtime, env.scenario, generation, commentary=True, commentary_max_tokens=40,
                           on_sentence=lambda text, gen: spoken.append((text, gen)))
        world = SyncWorld(env, SessionClock(FixedCost()))
        try:
            agent.push_frame(TimedFrame(env.new_episode(), 0.0))
            now = 0.0
            for _ in range(4):
                agent.step(now)
                now += 50.0
                for timed in world.advance_ms(50.0):
                    agent.push_frame(timed)
            assert agent.commentary.view is not None, "a remark should be in progress"
            unheard = agent.commentary.text
            generation.bump("barge-in")
            outcome = agent.step(now)
            assert agent.stats.remarks_stopped == 1 and agent.commentary.view is None
            assert "commentary" not in {role for role, _ in outcome.batch}
            assert all(gen == 0 for _, gen in spoken)  # nothing new was spoken for the old generation

            agent.commit_heard("enemy on the left")
            agent.step(now + 50.0)
            history = runtime.loaded.tokenizer.decode(agent.thinker.view.token_ids())
            assert "Said: enemy on the left" in history
            if unheard.strip():
                assert unheard not in history
        finally:
            agent.close()
    assert runtime.store.used_pages == 0


def test_spoken_commentary_is_recorded_as_tts_chunks_playback_events_and_audio(tmp_path):
    recording = EpisodeRecording.create(tmp_path, Manifest.build({"scenario": "defend_the_center"}),
                                        scenario="defend_the_center", index=0)
    generation = SessionGeneration()
    voice = VoiceIO(generation, device_free=True, bus=recording.bus, recording=recording)
    voice.start()
    voice.say("Two imps on the left.", generation.current)
    time.sleep(2.5)  # real-time playback of ~1.5 s of speech
    heard = voice.take_heard()
    voice.close()
    recording.close()
    kinds = [e.kind for e in Recording.open(recording.dir).events]
    for kind in ("tts_chunk", "tts_done", "playback_start", "playback_stop", "playback_stats"):
        assert kind in kinds
    assert kinds.index("playback_start") < kinds.index("playback_stop")
    assert heard and "imps" in heard[0]
    out, rate = read_wav(recording.dir / "speech_out.wav")
    assert rate == 22050 and np.abs(out).max() > 0.05 and len(out) > 1.0 * rate
