"""The live audio path as one object: mic → VAD/ASR → barge-in and commands; commentary → TTS → playback.

The mic callback only queues blocks; a listener thread runs VAD, recognition and barge-in, so an interruption
silences the next audio block without waiting for the engine. Failed devices are reopened while play goes on.
"""

import queue
import threading
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from agent_runtime.session.events import EventBus, Kind
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.notices import Notify, OncePerKind, warning_line
from agent_runtime.voice.audio_io import BLOCK_FRAMES as MIC_BLOCK, SAMPLE_RATE as MIC_RATE
from agent_runtime.voice.audio_io import AudioCallback, open_stream, refresh_devices
from agent_runtime.voice.barge_in import ONSET_CUES, BargeInController
from agent_runtime.voice.device_free import device_free_openers
from agent_runtime.voice.device_guard import AudioDeviceGuard
from agent_runtime.voice.playback import PlaybackBuffer
from agent_runtime.voice.recognizer import COMMAND_PAUSE_MS, Hypothesis, ListeningPipeline, UtteranceCut
from agent_runtime.voice.tts import EspeakTts, SpeechChunk, SynthesisResult, TtsWorker
from agent_runtime.voice.vad import SpeechStarted, SpeechStopped

SPEAKER_RATE, SPEAKER_BLOCK = 22_050, 1024
MAX_QUEUED_MIC_BLOCKS = 64  # ~2 s of microphone audio waiting for the listener; older blocks are dropped
StreamOpener = Callable[[AudioCallback], object]  # a callback in, a stream (not yet started) out


def run_paced(tick: Callable[[], None], period_s: float, stop: threading.Event) -> None:
    """Call `tick()` once per `period_s` until `stop` is set, as a sound card would: device-free streams must not
    run faster than real time. The schedule is absolute: after a late tick the next ones catch up."""
    start, slot = time.monotonic(), 0
    while not stop.wait(max(0.0, start + slot * period_s - time.monotonic())):
        tick()
        slot += 1


@dataclass
class VoiceCommand:
    """A command heard, queued for the engine loop: its command string (e.g. "TURN_LEFT") and the words said."""

    command: str
    text: str


class VoiceIO:
    def __init__(self, session: SessionGeneration, *, mode: str = "pause_confirm", input_device=None,
                 output_device=None, mic_samples: np.ndarray | None = None, device_free: bool = False,
                 bus: EventBus | None = None, recording=None, open_input: StreamOpener | None = None,
                 open_output: StreamOpener | None = None, notify: Notify | None = None,
                 retry_s: float = 3.0, stall_s: float = 2.0, command_pause_ms: int = COMMAND_PAUSE_MS):
        """recording: an EpisodeRecording for mic_in.wav and speech_out.wav; open_input/open_output: how to (re)open a
        device; one silent for stall_s counts as failed and is reopened every retry_s; notify: the one-line messages;
        command_pause_ms: the quiet after a whole command phrase that commits it (0: the end of speech)."""
        self.session = session
        self.attach(bus, recording)
        self.notify = notify or warning_line
        self._notice = OncePerKind(self.notify)
        self._utterance_first_partial: set[int] = set()
        self._playing, self.sentences_dropped = False, 0
        self.pipeline = ListeningPipeline(settle_ms=command_pause_ms)
        self.playback = PlaybackBuffer(session, sample_rate=SPEAKER_RATE)
        self.tts = TtsWorker(EspeakTts(session), sink=self._tts_sink, on_result=self._on_synthesis)
        self.commands: deque[VoiceCommand] = deque()
        self.controller = BargeInController(session, self.playback, mode=mode, on_interrupt=self._on_interrupt,
                                            on_command=self._on_command, onset_cues=ONSET_CUES.get(mode, ()))
        self._blocks: "queue.Queue[tuple[np.ndarray, float]]" = queue.Queue(maxsize=MAX_QUEUED_MIC_BLOCKS)
        self.mic_blocks_dropped, self._overrun = 0, False
        self._reset_listening, self._stop = threading.Event(), threading.Event()
        self._threads: list[threading.Thread] = []
        self.device_free = device_free or mic_samples is not None
        if self.device_free:  # how each device is opened, now and after a failure: given, device-free or sounddevice
            free = device_free_openers(mic_samples)
            open_input, open_output = open_input or free["open_input"], open_output or free["open_output"]
        open_input = open_input or partial(open_stream, "input", device=input_device)
        open_output = open_output or partial(open_stream, "output", device=output_device, samplerate=SPEAKER_RATE,
                                             blocksize=SPEAKER_BLOCK)
        openers = {"input": lambda: open_input(self._on_mic), "output": lambda: open_output(self._speaker_callback)}
        self.devices = AudioDeviceGuard(openers, on_change=self._device_changed, emit=self._emit,
                                        notify=self.notify, refresh=None if self.device_free else refresh_devices,
                                        stall_s=stall_s, retry_s=retry_s)
        self.t_start: float | None = None

    def attach(self, bus: EventBus | None, recording=None) -> None:
        """Where voice events and audio go (before start(); the devices are already open); no recording: no audio."""
        self.bus = bus
        self.mic_wav = recording.wav("mic_in", MIC_RATE) if recording is not None else None
        self.speech_wav = recording.wav("speech_out", SPEAKER_RATE) if recording is not None else None

    def start(self) -> None:
        self.t_start = time.monotonic()
        targets = {"voice-listener": self._listen, "voice-devices": partial(self.devices.watch, self._stop)}
        if self.device_free:  # real time, one block per period of audio, as a sound card would
            for kind, period, name in (("input", MIC_BLOCK / MIC_RATE, "array-mic"),
                                       ("output", SPEAKER_BLOCK / SPEAKER_RATE, "array-speaker")):
                targets[name] = partial(run_paced, partial(self._pump_block, kind), period, self._stop)
        self._threads = [threading.Thread(target=target, name=name, daemon=True) for name, target in targets.items()]
        self.devices.start()
        for t in self._threads:
            t.start()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:  # the device watchdog among them: no stream reopens after this
            t.join(timeout=2)
        self.devices.close()
        self.playback.close()  # before the TTS worker: a worker blocked on a full buffer must be released
        self.tts.close()
        stats = self.playback.stats
        self._emit(Kind.PLAYBACK_STATS, "playback", underruns=stats.underruns, max_depth_ms=stats.max_depth_ms,
                   discarded_stale=stats.discarded_stale, discarded_late=stats.discarded_late,
                   interruptions=stats.interruptions, sentences_dropped=self.sentences_dropped,
                   mic_blocks_dropped=self.mic_blocks_dropped, device_losses=self.devices.losses)
        for wav in (self.mic_wav, self.speech_wav):
            if wav is not None:
                wav.close()

    def say(self, text: str, generation: int) -> None:
        """Speak a sentence of `generation` (skipped once stale; dropped while the speaker is lost, not queued)."""
        if self.devices.slots["output"].stream is None:  # the speaker is lost
            self.sentences_dropped += 1
            return
        self.tts.say(text, generation)

    def take_commands(self) -> list[VoiceCommand]:
        return [self.commands.popleft() for _ in range(len(self.commands))]

    def take_heard(self) -> list[str]:
        """Commentary text the user actually heard (only this may enter history)."""
        return [h.heard for h in self.playback.drain_heard() if h.heard.strip()]

    def _on_mic(self, indata, frames, time_info, status) -> None:
        """The input callback (an audio thread): never raises into PortAudio; a failure goes to the device guard."""
        self.devices.alive("input")
        try:
            block = np.asarray(indata, np.float32).reshape(-1).copy()
            if self.mic_wav is not None:
                self.mic_wav.write(block)
            self._queue_block(block, time.monotonic())
        except Exception as e:
            self.devices.fail("input", e)

    def _queue_block(self, block: np.ndarray, arrival: float) -> None:
        """Hand a block to the listener; when it is ~2 s behind, the oldest block goes (counted, one event a run)."""
        if self._blocks.full():
            with suppress(queue.Empty):
                self._blocks.get_nowait()
                self.mic_blocks_dropped += 1
            if not self._overrun:
                self._emit(Kind.MIC_OVERRUN, "asr", queued_ms=MAX_QUEUED_MIC_BLOCKS * MIC_BLOCK * 1000.0 / MIC_RATE,
                           dropped=self.mic_blocks_dropped)
            self._overrun = True
        with suppress(queue.Full):
            self._blocks.put_nowait((block, arrival))
        self._overrun = self._overrun and self._blocks.qsize() >= MAX_QUEUED_MIC_BLOCKS // 2

    def _speaker_callback(self, outdata, frames, time_info, status) -> None:
        """The output callback (an audio thread), filled by the playback buffer; never raises into PortAudio."""
        self.devices.alive("output")
        try:
            self.playback.callback(outdata, frames, time_info, status)
            if self.speech_wav is not None:
                self.speech_wav.write(np.asarray(outdata, np.float32).reshape(-1))
            playing = bool(np.any(outdata))
            if playing != self._playing:
                self._playing = playing
                self._emit(Kind.PLAYBACK_START if playing else "playback_stop", "playback",
                           depth_ms=self.playback.stats.depth_ms)
        except Exception as e:
            outdata.fill(0)
            self.devices.fail("output", e)

    def _tts_sink(self, chunk: SpeechChunk) -> bool:
        self._emit(Kind.TTS_CHUNK, "tts", generation=chunk.generation, text=chunk.text,
                   duration_ms=chunk.samples.size * 1000.0 / chunk.sample_rate)
        return self.playback.push(chunk)

    def _on_synthesis(self, result: SynthesisResult) -> None:
        self._emit(Kind.TTS_DONE, "tts", first_audio_ms=result.first_chunk_ms, aborted=result.aborted,
                   real_time_factor=result.real_time_factor, chunks=result.chunks)

    def _observe(self, frames: list) -> None:
        """Voice events with the latencies the issue asks for, stamped as they happen."""
        for f in frames:
            if isinstance(f, UtteranceCut):
                self._emit(Kind.ASR_UTTERANCE_CUT, "asr", t_ms=f.t_ms, started_ms=f.started_ms, max_ms=f.max_ms)
                self._notice("cut", f"voice: you spoke for over {f.max_ms / 1000:g} s without a pause; the command "
                                    "was taken from the first part and the rest is ignored until you pause")
            elif isinstance(f, (SpeechStarted, SpeechStopped)):
                kind = Kind.VAD_SPEECH_START if isinstance(f, SpeechStarted) else Kind.VAD_SPEECH_END
                self._emit(kind, "asr", t_ms=f.t_ms, detected_ms=f.detected_ms)
            elif isinstance(f, Hypothesis):
                extra = {}
                if f.final:
                    extra["speech_end_to_final_ms"] = f.t_ms - f.speech_end_ms
                elif f.utterance not in self._utterance_first_partial:
                    self._utterance_first_partial.add(f.utterance)
                    extra["speech_start_to_first_partial_ms"] = f.t_ms - f.speech_start_ms
                self._emit(Kind.ASR_FINAL if f.final else Kind.ASR_PARTIAL, "asr", text=f.text, command=f.command,
                           t_ms=f.t_ms, audio_age_ms=f.audio_age_ms, coverage=round(f.coverage, 3), **extra)

    def _emit(self, kind: str, stream: str, generation: int | None = None, **payload) -> None:
        if self.bus is not None:
            self.bus.emit(kind, stream, generation=self.session.current if generation is None else generation,
                          **payload)

    def _listen(self) -> None:
        while not self._stop.is_set():
            if self._reset_listening.is_set():  # the microphone was lost: forget the half-heard utterance
                self._reset_listening.clear()
                self.pipeline.reset()
                self.controller.abandon()
            try:
                block, arrival = self._blocks.get(timeout=0.1)
            except queue.Empty:
                continue
            if not self.controller.listening:
                continue
            frames = self.pipeline.push(block, arrival)
            self._observe(frames)
            self.controller.feed(frames, self.pipeline.vad.stream_ms)

    def _pump_block(self, kind: str) -> None:
        """One block of a device-free stream (none while it is lost); what it raises is a device failure."""
        stream = self.devices.slots[kind].stream
        if stream is None:
            return
        try:
            stream.pump(1) if kind == "input" else stream.pull(1)
            self.devices.alive(kind)  # a finished array is a silent microphone, not a dead one
        except Exception as e:
            self.devices.fail(kind, e, stream)

    def _device_changed(self, kind: str, stream) -> None:
        """The guard lost (stream None) or reopened a device: play goes on; only voice stops or resumes."""
        if kind == "input" and stream is None:
            self._reset_listening.set()
        elif stream is None:  # the speaker: commentary is dropped, not queued, until it is back (say)
            self.tts.abort_and_clear()
            self.playback.clear()  # what was cut off is reported as heard up to where it stopped

    def _on_interrupt(self, generation: int, reason: str) -> None:
        detected = self.controller.records[-1].detected_wall  # the attempt being interrupted
        self._emit(Kind.BARGE_IN, "playback", generation=generation, reason=reason,
                   detection_to_interrupt_ms=(time.monotonic() - detected) * 1000.0)

    def _on_command(self, command: str, hyp: Hypothesis) -> None:
        self.commands.append(VoiceCommand(command, hyp.text))
