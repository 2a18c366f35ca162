"""The live audio path as one object: mic → VAD/ASR → barge-in and commands; commentary → TTS → playback.

The microphone callback only queues blocks; a listener thread runs VAD, recognition and the barge-in
controller, so an interruption silences playback at the next audio block without waiting for the
engine. Recognized commands and heard commentary are queued for the engine loop, which takes them
between steps. A device-free mode pumps an array microphone and a recording speaker in real time.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from agent_runtime.events import EventBus
from agent_runtime.generation import SessionGeneration
from agent_runtime.voice.audio_io import BLOCK_FRAMES as MIC_BLOCK
from agent_runtime.voice.audio_io import SAMPLE_RATE as MIC_RATE
from agent_runtime.voice.audio_io import (ArrayMicrophone, RecordingSpeaker, open_input_stream,
                                          open_output_stream)
from agent_runtime.voice.barge_in import BargeInController
from agent_runtime.voice.playback import PlaybackBuffer
from agent_runtime.voice.recognizer import Hypothesis, ListeningPipeline
from agent_runtime.voice.tts import EspeakTts, SpeechChunk, SynthesisResult, TtsWorker
from agent_runtime.voice.vad import SpeechStarted, SpeechStopped

SPEAKER_RATE, SPEAKER_BLOCK = 22_050, 1024


@dataclass
class VoiceCommand:
    command: str  # e.g. "TURN_LEFT" (see voice_commands.PHRASES)
    text: str
    hypothesis: Hypothesis
    t_mono: float  # when the listener produced it


class VoiceIO:
    def __init__(self, session: SessionGeneration, *, mode: str = "pause_confirm", input_device=None,
                 output_device=None, mic_samples: np.ndarray | None = None, device_free: bool = False,
                 bus: EventBus | None = None, recording=None):
        """bus: voice events (VAD, ASR partial/final with audio age, TTS chunks, playback, barge-ins);
        recording: a RecordingWriter to keep mic_in.wav and speech_out.wav."""
        self.session = session
        self.bus, self.mic_wav, self.speech_wav = None, None, None
        self.attach(bus, recording)
        self._utterance_first_partial: set[int] = set()
        self._playing = False
        self.pipeline = ListeningPipeline()
        self.playback = PlaybackBuffer(session, sample_rate=SPEAKER_RATE)
        self.tts = TtsWorker(EspeakTts(session), sink=self._tts_sink, on_result=self._on_synthesis)
        self.commands: deque[VoiceCommand] = deque()
        self.controller = BargeInController(session, self.playback, tts=self.tts, mode=mode,
                                            on_interrupt=self._on_interrupt, on_command=self._on_command)
        self._blocks: "queue.Queue[tuple[np.ndarray, float] | None]" = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.device_free = device_free or mic_samples is not None
        if self.device_free:
            samples = np.zeros(0, np.float32) if mic_samples is None else mic_samples
            self.mic = ArrayMicrophone(samples, self._on_mic, blocksize=MIC_BLOCK)
            self.speaker = RecordingSpeaker(self._speaker_callback, SPEAKER_BLOCK, SPEAKER_RATE)
        else:
            self.mic = open_input_stream(self._on_mic, device=input_device, samplerate=MIC_RATE, blocksize=MIC_BLOCK)
            self.speaker = open_output_stream(self._speaker_callback, SPEAKER_RATE, device=output_device,
                                              blocksize=SPEAKER_BLOCK)
        self.t_start: float | None = None

    def attach(self, bus: EventBus | None, recording=None) -> None:
        """Where voice events and audio go (before start(); the devices are already open)."""
        self.bus = bus
        if recording is not None:
            self.mic_wav = recording.wav("mic_in", MIC_RATE)
            self.speech_wav = recording.wav("speech_out", SPEAKER_RATE)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.t_start = time.monotonic()
        self._threads.append(threading.Thread(target=self._listen, name="voice-listener", daemon=True))
        if self.device_free:
            self._threads.append(threading.Thread(target=self._pump, args=(self.mic.pump, MIC_BLOCK / MIC_RATE),
                                                  name="array-mic", daemon=True))
            self._threads.append(threading.Thread(target=self._pump, args=(self.speaker.pull, SPEAKER_BLOCK / SPEAKER_RATE),
                                                  name="array-speaker", daemon=True))
        self.mic.start()
        self.speaker.start()
        for t in self._threads:
            t.start()

    def close(self) -> None:
        self._stop.set()
        self._blocks.put(None)
        for stream in (self.mic, self.speaker):
            try:
                stream.stop()
                stream.close()
            except Exception:
                pass
        self.playback.close()  # before the TTS worker: a worker blocked on a full buffer must be released
        self.tts.close()
        for t in self._threads:
            t.join(timeout=2)
        stats = self.playback.stats
        self._emit("playback_stats", "playback", underruns=stats.underruns, max_depth_ms=stats.max_depth_ms,
                   discarded_stale=stats.discarded_stale, discarded_late=stats.discarded_late,
                   interruptions=stats.interruptions)
        for wav in (self.mic_wav, self.speech_wav):
            if wav is not None:
                wav.close()

    # -- engine side -----------------------------------------------------------------------------
    def say(self, text: str, generation: int) -> None:
        """Speak a commentary sentence stamped with its generation (stale ones are skipped)."""
        self.tts.say(text, generation)

    def take_commands(self) -> list[VoiceCommand]:
        out = []
        while self.commands:
            out.append(self.commands.popleft())
        return out

    def take_heard(self) -> list[str]:
        """Commentary text the user actually heard (only this may enter history)."""
        return [h.heard for h in self.playback.drain_heard() if h.heard.strip()]

    # -- audio side ------------------------------------------------------------------------------
    def _on_mic(self, indata, frames, time_info, status) -> None:
        block = np.asarray(indata, np.float32).reshape(-1).copy()
        if self.mic_wav is not None:
            self.mic_wav.write(block)
        self._blocks.put((block, time.monotonic()))

    def _speaker_callback(self, outdata, frames, time_info, status) -> None:
        """The output callback: the playback buffer fills the block; we note starts/stops and keep the audio."""
        self.playback.callback(outdata, frames, time_info, status)
        if self.speech_wav is not None:
            self.speech_wav.write(np.asarray(outdata, np.float32).reshape(-1))
        playing = bool(np.any(outdata))
        if playing != self._playing:
            self._playing = playing
            self._emit("playback_start" if playing else "playback_stop", "playback",
                       depth_ms=self.playback.stats.depth_ms)

    def _tts_sink(self, chunk: SpeechChunk) -> bool:
        self._emit("tts_chunk", "tts", generation=chunk.generation, text=chunk.text,
                   duration_ms=chunk.samples.size * 1000.0 / chunk.sample_rate)
        return self.playback.push(chunk)

    def _on_synthesis(self, result: SynthesisResult) -> None:
        self._emit("tts_done", "tts", first_audio_ms=result.first_chunk_ms, aborted=result.aborted,
                   real_time_factor=result.real_time_factor, chunks=result.chunks)

    def _observe(self, frames: list) -> None:
        """Voice events with the latencies the issue asks for, stamped as they happen."""
        for f in frames:
            if isinstance(f, SpeechStarted):
                self._emit("vad_speech_start", "asr", t_ms=f.t_ms, detected_ms=f.detected_ms)
            elif isinstance(f, SpeechStopped):
                self._emit("vad_speech_end", "asr", t_ms=f.t_ms, detected_ms=f.detected_ms)
            elif isinstance(f, Hypothesis):
                extra = {}
                if f.final and f.speech_end_ms is not None:
                    extra["speech_end_to_final_ms"] = f.t_ms - f.speech_end_ms
                if not f.final and f.utterance not in self._utterance_first_partial and f.speech_start_ms is not None:
                    self._utterance_first_partial.add(f.utterance)
                    extra["speech_start_to_first_partial_ms"] = f.t_ms - f.speech_start_ms
                self._emit("asr_final" if f.final else "asr_partial", "asr", text=f.text, command=f.command,
                           t_ms=f.t_ms, audio_age_ms=f.audio_age_ms, **extra)

    def _emit(self, kind: str, stream: str, generation: int | None = None, **payload) -> None:
        if self.bus is not None:
            self.bus.emit(kind, stream, generation=self.session.current if generation is None else generation,
                          **payload)

    def _listen(self) -> None:
        while not self._stop.is_set():
            item = self._blocks.get()
            if item is None:
                return
            block, arrival = item
            if not self.controller.listening:
                continue
            frames = self.pipeline.push(block, arrival)
            self._observe(frames)
            self.controller.feed(frames, self.pipeline.stream_ms)

    def _pump(self, step, period: float) -> None:
        """Drive a device-free stream in real time: one block per period of audio."""
        next_t = time.monotonic()
        while not self._stop.is_set():
            step(1)
            next_t += period
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _on_interrupt(self, generation: int, reason: str) -> None:
        record = self.controller.records[-1] if self.controller.records else None
        self._emit("generation_bump", "playback", generation=generation, reason=f"barge-in:{reason}", to=generation)
        self._emit("barge_in", "playback", generation=generation, reason=reason,
                   detection_to_interrupt_ms=(time.monotonic() - record.detected_wall) * 1000.0 if record else None)

    def _on_command(self, command: str, hyp: Hypothesis) -> None:
        self.commands.append(VoiceCommand(command, hyp.text, hyp, time.monotonic()))
