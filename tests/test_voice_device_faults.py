"""Sound devices that fail mid-session: play goes on without voice, one event and one line each, and they reopen.

The devices are the device-free backend made to fail as PortAudio streams do: a headset pulled out (its streams
raise and opening it fails until it is plugged back), a stream PortAudio stopped (inactive), a stalled driver.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.live_session import run_live
from agent_runtime.session.events import EventBus
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.recording import Recording
from agent_runtime.recording.replay_check import check_replay
from agent_runtime.voice.audio_io import ArrayMicrophone, NoAudioDeviceError, RecordingSpeaker, read_wav
from agent_runtime.voice.voice_io import VoiceIO
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime
from tests.voice_synth import synthesize

UNPLUGGED = (1.0, 2.5)  # seconds after the first audio block: the headset is out


class Headset:
    """A USB headset that is pulled out for a while: its open streams raise, and it cannot be opened."""

    def __init__(self, mic_samples: np.ndarray):
        self.samples = mic_samples
        self.position = 0  # the microphone goes on where it stopped when it comes back
        self.t0: float | None = None
        self.opened = {"input": 0, "output": 0}
        self.refused = 0

    @property
    def plugged(self) -> bool:
        return self.t0 is None or not UNPLUGGED[0] <= time.monotonic() - self.t0 < UNPLUGGED[1]

    def _open(self, kind: str) -> None:
        if not self.plugged:
            self.refused += 1
            raise NoAudioDeviceError(f"no {kind} audio device; devices found: no audio devices found")
        self.opened[kind] += 1

    def open_input(self, callback):
        self._open("input")
        return HeadsetMicrophone(self, callback)

    def open_output(self, callback):
        self._open("output")
        return HeadsetSpeaker(self, callback)


HOST_ERROR = "Unanticipated host error [PaErrorCode -9999]: the device was removed"


class HeadsetMicrophone(ArrayMicrophone):
    def __init__(self, headset: Headset, callback):
        super().__init__(headset.samples, callback)
        self.headset, self.position = headset, headset.position

    def pump(self, n_blocks=None):
        if self.headset.t0 is None:  # the session's audio starts: the clock of the outage with it
            self.headset.t0 = time.monotonic()
        if not self.headset.plugged:
            raise OSError(HOST_ERROR)
        sent = super().pump(n_blocks)
        self.headset.position = self.position
        return sent


class HeadsetSpeaker(RecordingSpeaker):
    def __init__(self, headset: Headset, callback):
        super().__init__(callback, 1024, 22_050)
        self.headset = headset

    def pull(self, n_blocks=1):
        if not self.headset.plugged:
            raise OSError(HOST_ERROR)
        return super().pull(n_blocks)


def _between(events, kind_a: str, kind_b: str, device: str) -> tuple[float, float]:
    (lost,) = [e for e in events if e.kind == kind_a and e.payload["device"] == device]
    (back,) = [e for e in events if e.kind == kind_b and e.payload["device"] == device]
    return lost.t_mono, back.t_mono


def test_a_headset_pulled_out_mid_session_play_goes_on_and_it_is_reopened_when_back(tmp_path):
    speech = synthesize("turn left")
    mic = np.concatenate([np.zeros(int(1.6 * 16000), np.float32), speech, np.zeros(3 * 16000, np.float32)])
    headset, lines = Headset(mic), []
    recording = EpisodeRecording.create(tmp_path, Manifest.build({"scenario": "defend_the_center"}),
                                        scenario="defend_the_center", index=0)
    generation = SessionGeneration()
    voice = VoiceIO(generation, mode="immediate", device_free=True, open_input=headset.open_input,
                    open_output=headset.open_output, notify=lines.append, retry_s=0.5,
                    bus=recording.bus, recording=recording)
    with DoomEnv("defend_the_center", clock="realtime", seed=1) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0)
        result = run_live(env, runtime, seconds=6.0, voice=voice, bus=recording.bus, record_path=recording.lmp_path)
    recording.close()

    assert len(lines) == 4, lines  # one line per device lost, one per device back
    assert all(HOST_ERROR in line and "play goes on" in line for line in lines[:2]), lines
    assert sorted(lines[2:]) == ["voice: the microphone is back; listening again",
                                 "voice: the speaker is back; speech again"]
    assert headset.opened == {"input": 2, "output": 2} and headset.refused >= 2  # retried while out, then reopened
    saved = Recording.open(recording.dir)
    events = saved.events
    lost_at, back_at = _between(events, "audio_device_lost", "audio_device_restored", "input")
    assert 1.0 < back_at - lost_at < 2.5
    _between(events, "audio_device_lost", "audio_device_restored", "output")
    model_actions = [e for e in events if e.kind == "action_executed" and e.stream != "user"]
    assert sum(lost_at < e.t_mono < back_at for e in model_actions) >= 3  # the game went on while voice was out
    (said,) = [e for e in events if e.kind == "user_input"]  # heard through the reopened microphone
    assert said.payload["command"] == "TURN_LEFT 4" and said.t_mono > back_at  # held the default 4 tics
    assert result["user_actions"] == 1 and result["voice_device_losses"] == 2
    heard, rate = read_wav(recording.dir / "mic_in.wav")
    assert rate == 16000 and len(heard) >= 16000 * 3  # the audio before and after the outage, readable
    report = check_replay(saved)
    assert report.ok and report.n_checked == len(saved.of_kind("frame_read")) > 5, report.describe()


class StalledMicrophone(ArrayMicrophone):
    """A driver that stops delivering: pump() blocks until the stream is closed (as closing aborts a stuck stream)."""

    def __init__(self, callback):
        super().__init__(np.zeros(16000 * 10, np.float32), callback)
        self.released = threading.Event()
        self.stall = threading.Event()

    def pump(self, n_blocks=None):
        if self.stall.is_set():
            self.released.wait()
        return super().pump(n_blocks)

    def close(self):
        self.released.set()
        super().close()


@pytest.mark.parametrize("fault", ["inactive", "stalled"])
def test_a_stream_that_stops_or_stalls_is_lost_within_the_bound_and_reopened(fault):
    opened: list[StalledMicrophone] = []

    def open_input(callback):
        opened.append(StalledMicrophone(callback))
        return opened[-1]

    bus, lines = EventBus(), []
    voice = VoiceIO(SessionGeneration(), device_free=True, open_input=open_input, notify=lines.append, bus=bus,
                    retry_s=0.3, stall_s=0.5)
    voice.start()
    try:
        time.sleep(0.3)
        t_fault = time.monotonic()
        if fault == "inactive":
            opened[0].active = False  # what PortAudio reports for a stream whose device vanished
        else:
            opened[0].stall.set()
        deadline = time.monotonic() + 5
        while not bus.of_kind("audio_device_restored") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        voice.close()
    (lost,) = bus.of_kind("audio_device_lost")
    (back,) = bus.of_kind("audio_device_restored")
    bound = 0.3 if fault == "inactive" else 0.5 + 0.3  # a poll, or the stall bound and a poll
    assert lost.payload["device"] == "input" and lost.t_mono - t_fault < bound
    assert lost.payload["reason"] == ("its stream stopped" if fault == "inactive" else "no audio for 0.5 s")
    assert 0.3 <= back.t_mono - lost.t_mono < 0.8 and len(opened) == 2
    assert len(lines) == 2 and "microphone failed" in lines[0] and "microphone is back" in lines[1]
