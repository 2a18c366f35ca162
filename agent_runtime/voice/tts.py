"""Streaming text-to-speech through libespeak-ng (ctypes), one ~60 ms chunk at a time, abortable per chunk.

Each SpeechChunk carries its generation and the span of text whose words start in it, so playback can drop stale
chunks and say what was heard. libespeak-ng keeps global state and is not thread-safe: every `speak` holds a
process-wide lock and re-applies its instance's settings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.generation import SessionGeneration

AUDIO_OUTPUT_SYNCHRONOUS = 2
POS_CHARACTER = 1
ESPEAK_CHARS_UTF8 = 1
EE_OK = 0
EVENT_WORD = 1
EVENT_LIST_TERMINATED = 0
PARAM_RATE = 1


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint), ("text_position", ctypes.c_int),
                ("length", ctypes.c_int), ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _EventId)]


_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


@dataclass(frozen=True)
class SpeechChunk:
    """~60 ms of speech for one utterance of one generation; text_span: the character offsets of the words that
    start in it (None: none does)."""

    samples: np.ndarray  # float32 mono at sample_rate
    sample_rate: int
    generation: int
    utterance: int
    index: int
    text: str  # the whole utterance text, so a span can be resolved
    text_span: tuple[int, int] | None
    created: float
    last: bool = False  # the final chunk of its utterance

    @property
    def duration_ms(self) -> float:
        return self.samples.size * 1000.0 / self.sample_rate


@dataclass
class SynthesisResult:
    utterance: int
    chunks: int
    samples: int
    aborted: bool
    first_chunk_ms: float | None  # synthesis start -> first chunk handed on
    synth_seconds: float
    audio_seconds: float

    @property
    def real_time_factor(self) -> float:
        """Synthesis time / audio time (below 1 means faster than real time)."""
        return self.synth_seconds / self.audio_seconds if self.samples else 0.0


def _load_library() -> ctypes.CDLL:
    for name in filter(None, ("libespeak-ng.so.1", ctypes.util.find_library("espeak-ng"), "libespeak-ng.so")):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise UserError("libespeak-ng is not installed; install the Debian packages espeak-ng and libespeak-ng1")


class EspeakTts:
    """Speak text as a stream of SpeechChunks handed to `on_chunk` (which returns False to stop); `speak` blocks
    while a full playback buffer does, so live use runs it on a worker thread."""

    _library_lock = threading.Lock()  # libespeak-ng has global state
    _initialized_rate = 0

    def __init__(self, session: SessionGeneration, voice: str = "en-us", words_per_minute: int = 170,
                 chunk_ms: int = 60):
        self.session = session
        self.lib = _load_library()
        lib = self.lib
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        with EspeakTts._library_lock:
            if not EspeakTts._initialized_rate:
                EspeakTts._initialized_rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, chunk_ms, None, 0)
            rate = EspeakTts._initialized_rate
            if rate <= 0:
                raise UserError("libespeak-ng failed to initialize (is the espeak-ng-data package installed?)")
            if lib.espeak_SetVoiceByName(voice.encode()) != EE_OK:
                raise UserError(f"espeak-ng has no voice {voice!r}; list them with `espeak-ng --voices`")
        self.sample_rate = rate
        self.voice = voice
        self.words_per_minute = words_per_minute
        self._callback = _SYNTH_CALLBACK(self._on_synth)  # keep a reference: C holds only a pointer
        self._lock = EspeakTts._library_lock
        self._abort = threading.Event()
        self._utterances = 0
        self._job: dict | None = None

    def abort(self) -> None:
        """Stop the current synthesis at its next chunk (the callback returns 1)."""
        self._abort.set()

    def speak(self, text: str, generation: int | None = None,
              on_chunk: Callable[[SpeechChunk], bool] | None = None) -> SynthesisResult:
        """Synthesize `text` for `generation` (default: current); aborted when `abort()` is called, the generation
        moves on or `on_chunk` returns False."""
        generation = self.session.current if generation is None else generation
        with self._lock:
            self._abort.clear()
            self._utterances += 1
            encoded = text.encode("utf-8")
            # byte offset -> character offset, since espeak reports positions in bytes of UTF-8
            char_of_byte = np.cumsum([0] + [len(ch.encode("utf-8")) for ch in text])
            job = self._job = {
                "text": text, "generation": generation, "utterance": self._utterances, "on_chunk": on_chunk,
                "index": 0, "samples": 0, "aborted": False, "first": None, "start": time.perf_counter(),
                "char_of_byte": char_of_byte, "pending": [],
            }
            buf = ctypes.create_string_buffer(encoded)
            self.lib.espeak_SetSynthCallback(self._callback)
            self.lib.espeak_SetVoiceByName(self.voice.encode())
            self.lib.espeak_SetParameter(PARAM_RATE, self.words_per_minute, 0)
            self.lib.espeak_Synth(buf, len(encoded) + 1, 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None, None)
            if not job["aborted"]:
                self._emit(np.zeros(0, np.float32), None, last=True)
            self._job = None
            return SynthesisResult(job["utterance"], job["index"], job["samples"], job["aborted"],
                                   job["first"], time.perf_counter() - job["start"], job["samples"] / self.sample_rate)

    def synthesize(self, text: str) -> np.ndarray:
        """The whole utterance as one array (tests, files)."""
        parts: list[np.ndarray] = []
        self.speak(text, on_chunk=lambda c: parts.append(c.samples) or True)
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def _on_synth(self, wav, numsamples, events) -> int:
        job = self._job
        if job is None:
            return 1
        if job["aborted"] or self._abort.is_set() or not self.session.is_current(job["generation"]):
            job["aborted"] = True
            return 1
        span = None
        i = 0
        while events and events[i].type != EVENT_LIST_TERMINATED:
            e = events[i]
            if e.type == EVENT_WORD and e.length > 0:
                start_byte = e.text_position - 1  # espeak positions are 1-based
                cob = job["char_of_byte"]
                s = int(np.searchsorted(cob, max(0, start_byte)))
                end = int(np.searchsorted(cob, max(0, start_byte + e.length)))
                span = (s, end) if span is None else (span[0], end)
            i += 1
        if numsamples <= 0 and span is None:
            return 0
        samples = (np.ctypeslib.as_array(wav, shape=(numsamples,)).astype(np.float32) / 32768.0
                   if numsamples > 0 else np.zeros(0, np.float32))
        return 0 if self._emit(samples, span) else 1

    def _emit(self, samples: np.ndarray, span: tuple[int, int] | None, last: bool = False) -> bool:
        job = self._job
        chunk = SpeechChunk(samples, self.sample_rate, job["generation"], job["utterance"], job["index"],
                            job["text"], span, time.monotonic(), last)
        job["index"] += 1
        job["samples"] += samples.size
        if job["first"] is None and samples.size:
            job["first"] = (time.perf_counter() - job["start"]) * 1000.0
        keep_going = True
        if job["on_chunk"] is not None:
            keep_going = job["on_chunk"](chunk) is not False
        if not keep_going or self._abort.is_set() or not self.session.is_current(job["generation"]):
            job["aborted"] = True
            return False
        return True


class TtsWorker:
    """A thread that speaks queued texts, stamped with their generation (stale ones are skipped), into a sink
    (usually `PlaybackBuffer.push`); every interruption reaches it as the "tts" consumer: `abort_and_clear()`."""

    def __init__(self, tts: EspeakTts, sink: Callable[[SpeechChunk], bool],
                 on_result: Callable[[SynthesisResult], None] | None = None):
        self.tts = tts
        self.sink = sink
        self.on_result = on_result
        self._queue: "queue.Queue[tuple[str, int] | None]" = queue.Queue()
        self.results: list[SynthesisResult] = []
        self._pending = 0  # texts queued or being spoken
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="tts-worker", daemon=True)
        self._thread.start()
        tts.session.subscribe("tts", self.abort_and_clear)  # every interruption; after the engine, before playback

    def say(self, text: str, generation: int | None = None) -> None:
        with self._pending_lock:
            self._pending += 1
        self._queue.put((text, self.tts.session.current if generation is None else generation))

    def abort_and_clear(self, interruption=None) -> int:
        """Abort the chunk being synthesized and drop every queued text (at every interruption, too); returns how
        many were dropped."""
        dropped = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                dropped += 1
                with self._pending_lock:
                    self._pending -= 1
            else:
                self._queue.put(None)
                break
        self.tts.abort()
        return dropped

    @property
    def idle(self) -> bool:
        return self._pending == 0

    def wait_idle(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.idle:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        self.tts.session.unsubscribe(self.abort_and_clear)
        self.abort_and_clear()
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                text, generation = item
                if not self.tts.session.is_current(generation):
                    continue
                result = self.tts.speak(text, generation, on_chunk=self.sink)
                self.results.append(result)
                if self.on_result is not None:
                    self.on_result(result)
            finally:
                with self._pending_lock:
                    self._pending -= 1
