"""The device-free audio that `bench interrupt` and `bench soak` drive, and one barge-in measured on it.

VoiceIO pumps a scripted microphone (low noise, user phrases mixed in) and a block-keeping speaker one block per
real audio period, as a sound card would. Times are "block handed to the device"; a real device adds its own
output latency on top.
"""

import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.voice.audio_io import ArrayMicrophone, RecordingSpeaker, resample
from agent_runtime.voice.tts import EspeakTts
from agent_runtime.voice.voice_io import MIC_BLOCK, MIC_RATE, SPEAKER_BLOCK, SPEAKER_RATE, VoiceIO

USER_VOICE = "en"  # British English: a different voice from the agent's en-us commentary
ONSET_FRACTION = 0.02  # speech starts at the first sample above this fraction of the phrase's peak


def wait_until(predicate, timeout: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def synthesize_phrases(phrases) -> dict[str, np.ndarray]:
    """Each phrase once, spoken by espeak-ng in the user's voice, 16 kHz, starting at its speech onset."""
    tts = EspeakTts(SessionGeneration(), voice=USER_VOICE, words_per_minute=150)  # never bumped
    out = {}
    for phrase in dict.fromkeys(phrases):
        x = resample(tts.synthesize(phrase), tts.sample_rate, MIC_RATE) * 0.8
        loud = np.flatnonzero(np.abs(x) >= ONSET_FRACTION * float(np.abs(x).max()))
        out[phrase] = x[int(loud[0]):] if loud.size else x
    return out


class ScriptedMicrophone(ArrayMicrophone):
    """A device-free microphone that streams low noise forever (its `samples`, looped) and mixes phrases in when
    told (VoiceIO's pump calls pump(1) once per 32 ms block)."""

    finished = False

    def __init__(self, seed: int):
        super().__init__(np.random.default_rng(seed).normal(0.0, 3e-4, 32 * MIC_BLOCK), None)  # ~1 s of low noise
        self._pending, self._lock = np.zeros(0, np.float32), threading.Lock()
        self.t_origin: float | None = None  # when block 0 was due on the pump's schedule

    @property
    def injecting(self) -> bool:
        return self._pending.size > 0

    def _next_block(self) -> np.ndarray:
        with self._lock:
            # the pump is never early (an absolute schedule, block j due at origin + j periods), only late
            origin = time.monotonic() - self.position / self.samplerate
            self.t_origin = origin if self.t_origin is None else min(self.t_origin, origin)
            k = self.position % self.samples.size
            block = self.samples[k : k + self.blocksize].copy()
            n = min(self.blocksize, self._pending.size)
            block[:n] += self._pending[:n]
            self._pending = self._pending[n:]
            self.position += self.blocksize
        return block

    def say(self, samples: np.ndarray) -> int:
        """Mix `samples` in from the next block on; returns the stream index of their first sample."""
        with self._lock:
            onset = self.position + self._pending.size
            self._pending = np.concatenate([self._pending, np.asarray(samples, np.float32)])
        return onset

    def sample_time(self, sample: int) -> float:
        """When `sample` was recorded, on the pump's clock: block j is handed over once recorded, at t_origin + j
        periods, so its samples were recorded during the period before."""
        return self.t_origin + (sample - self.blocksize) / self.samplerate


@dataclass
class SpeakerBlock:
    """One output block as the sound card got it: when it was handed over and whether it was silent."""

    t: float  # monotonic time the callback returned
    silent: bool
    late_ms: float  # how far behind its real-time slot the callback ran


class BlockSpeaker(RecordingSpeaker):
    """A device-free speaker that keeps only the times and silence of its last `keep` blocks (None: all), not the
    audio."""

    def __init__(self, keep: int | None = 512):
        super().__init__(None, SPEAKER_BLOCK, SPEAKER_RATE)
        self.blocks: deque[SpeakerBlock] = deque(maxlen=keep)  # 512: ~23 s, more than one trial needs
        self.t_first: float | None = None

    @property
    def audible(self) -> bool:
        return bool(self.blocks) and not self.blocks[-1].silent

    def _keep(self, out: np.ndarray, t: float) -> SpeakerBlock:
        now = time.monotonic()
        if self.t_first is None:
            self.t_first = now
        self.blocks.append(SpeakerBlock(now, not np.any(out), max(0.0, (now - self.t_first - t) * 1000.0)))
        return self.blocks[-1]


def open_voice(phrases: dict, *, mode: str, seed: int, bus=None,
               keep: int | None = 512) -> tuple[VoiceIO, ScriptedMicrophone, BlockSpeaker]:
    """VoiceIO on a scripted microphone and a block speaker (not started), its listener warmed up off the clock."""
    mic, speaker = ScriptedMicrophone(seed), BlockSpeaker(keep=keep)
    voice = VoiceIO(SessionGeneration(), mode=mode, device_free=True, bus=bus,
                    open_input=mic.connect, open_output=speaker.connect)
    voice.pipeline.run(phrases["turn left"])  # warm up ONNX and the recognizer off the clock
    voice.pipeline.reset()
    return voice, mic, speaker


@dataclass
class BargeInTrial:
    """What one injected barge-in did."""

    phrase: str
    offset_s: float  # how far into the audible commentary the phrase was injected
    outcome: str = "missed"  # "interrupted" | "resumed" (pause_confirm false trigger) | "missed"
    reason: str = ""
    detection_to_silence_ms: float | None = None
    detection_to_silence_blocks: int | None = None
    bump_to_silence_ms: float | None = None
    bump_to_silence_blocks: int | None = None
    detection_to_bump_ms: float | None = None
    audible_blocks_after_silence: int = 0
    say_to_first_sound_ms: float | None = None


@dataclass
class Heard:
    """A phrase spoken into the microphone, heard out."""

    onset_sample: int  # its first sample's index in the microphone stream
    onset: float  # when that sample was recorded (monotonic)
    settled: bool  # the listener finished with it before the timeout
    record: object | None  # the BargeInRecord that interrupted, else the first since the onset; None: no barge-in


def speak(voice: VoiceIO, mic: ScriptedMicrophone, audio: np.ndarray, *, timeout: float,
          stopped=lambda: False) -> Heard | None:
    """Say `audio` into the microphone and wait until it is heard out and the barge-in controller settled (None:
    `stopped()` came true first)."""
    controller, pipeline = voice.controller, voice.pipeline
    n_records, onset_sample = len(controller.records), mic.say(audio)
    onset = mic.sample_time(onset_sample)
    settled = wait_until(lambda: stopped() or (
        not mic.injecting and not pipeline.vad.in_speech
        and all(r.outcome != "pending" for r in controller.records[n_records:])), timeout)
    if stopped():
        return None
    time.sleep(2 * SPEAKER_BLOCK / SPEAKER_RATE)  # the silent blocks after the interruption
    records = [r for r in controller.records[n_records:] if r.detected_wall >= onset]
    # the one that interrupted: a tentative pause that was resumed first must not count as the silence
    record = next((r for r in records if r.outcome == "interrupted"), records[0] if records else None)
    return Heard(onset_sample, onset, settled, record)


def measure(trial: BargeInTrial, record, playback, speaker: BlockSpeaker) -> None:
    """Detection -> first silent block, and the generation bump -> silence as the PlaybackBuffer recorded it."""
    trial.outcome, trial.reason = record.outcome, record.reason
    trial.detection_to_bump_ms = record.detection_to_bump_ms
    after = [b for b in list(speaker.blocks) if b.t >= record.detected_wall]
    k = next((j for j, b in enumerate(after) if b.silent), None)
    if k is not None:
        trial.detection_to_silence_blocks = k
        trial.detection_to_silence_ms = (after[k].t - record.detected_wall) * 1000.0
        if trial.outcome == "interrupted":  # stale audio must never come back once silent
            trial.audible_blocks_after_silence = sum(not b.silent for b in after[k + 1:])
    if record.generation is not None:
        bump = next((r for r in playback.stats.interruptions if r["generation"] == record.generation), None)
        if bump is not None:
            trial.bump_to_silence_blocks = bump["silent_after_blocks"]
            trial.bump_to_silence_ms = bump["silence_ms"]
