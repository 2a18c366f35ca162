"""Streaming text-to-speech through libespeak-ng (ctypes), one ~60 ms chunk at a time, abortable per chunk.

Chunks carry their generation and text span, so playback can drop stale ones and say what was heard.
libespeak-ng has global state: every `speak` holds a process-wide lock and re-applies its instance's settings.
"""

import ctypes
import ctypes.util
import threading
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from typing import Callable

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.session.generation import SessionGeneration

# libespeak-ng's constants (speak_lib.h)
AUDIO_OUTPUT_SYNCHRONOUS, POS_CHARACTER, ESPEAK_CHARS_UTF8, EE_OK, PARAM_RATE = 2, 1, 1, 0, 1
EVENT_LIST_TERMINATED, EVENT_WORD = 0, 1  # espeak_EVENT_TYPE


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


@dataclass
class SynthesisResult:
    """One utterance's synthesis, for the TTS_DONE event and the latency tests."""

    utterance: int
    chunks: int
    samples: int
    aborted: bool
    first_chunk_ms: float | None  # synthesis start -> first chunk handed on
    real_time_factor: float  # synthesis time / audio time (below 1: faster than real time; 0 without audio)


def _load_library() -> ctypes.CDLL:
    for name in filter(None, ("libespeak-ng.so.1", ctypes.util.find_library("espeak-ng"), "libespeak-ng.so")):
        with suppress(OSError):
            return ctypes.CDLL(name)
    raise UserError("libespeak-ng is not installed; install the Debian packages espeak-ng and libespeak-ng1")


class EspeakTts:
    """Speak text as a stream of SpeechChunks handed to `on_chunk` (which returns False to stop); `speak` blocks
    while a full playback buffer does, so live use runs it on a worker thread."""

    _library_lock = threading.Lock()  # libespeak-ng has global state
    _initialized_rate = 0

    def __init__(self, session: SessionGeneration, voice: str = "en-us", words_per_minute: int = 170):
        self.session = session
        self.lib = lib = _load_library()
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p]
        with EspeakTts._library_lock:
            if not EspeakTts._initialized_rate:
                EspeakTts._initialized_rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 60, None, 0)  # 60 ms
            rate = EspeakTts._initialized_rate
            if rate <= 0:
                raise UserError("libespeak-ng failed to initialize (is the espeak-ng-data package installed?)")
            if lib.espeak_SetVoiceByName(voice.encode()) != EE_OK:
                raise UserError(f"espeak-ng has no voice {voice!r}; list them with `espeak-ng --voices`")
        self.sample_rate, self.voice, self.words_per_minute = rate, voice, words_per_minute
        self._callback = _SYNTH_CALLBACK(self._on_synth)  # keep a reference: C holds only a pointer
        self._abort, self._utterances, self._job = threading.Event(), 0, None

    def abort(self) -> None:
        """Stop the current synthesis at its next chunk (the callback returns 1)."""
        self._abort.set()

    def speak(self, text: str, generation: int | None = None,
              on_chunk: Callable[[SpeechChunk], bool] | None = None) -> SynthesisResult:
        """Synthesize `text` for `generation` (default: current); aborted when `abort()` is called, the generation
        moves on or `on_chunk` returns False."""
        generation = self.session.current if generation is None else generation
        with self._library_lock:
            self._abort.clear()
            self._utterances += 1
            job = self._job = {
                "text": text, "generation": generation, "utterance": self._utterances, "on_chunk": on_chunk,
                "index": 0, "samples": 0, "aborted": False, "first": None, "start": time.perf_counter(),
                # byte offset -> character offset, since espeak reports positions in bytes of UTF-8
                "char_of_byte": np.cumsum([0] + [len(ch.encode("utf-8")) for ch in text]),
            }
            buf = ctypes.create_string_buffer(text.encode("utf-8"))
            self.lib.espeak_SetSynthCallback(self._callback)
            self.lib.espeak_SetVoiceByName(self.voice.encode())
            self.lib.espeak_SetParameter(PARAM_RATE, self.words_per_minute, 0)
            self.lib.espeak_Synth(buf, len(buf), 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None, None)
            if not job["aborted"]:
                self._emit(np.zeros(0, np.float32), None, last=True)
            self._job = None
            rtf = (time.perf_counter() - job["start"]) / (job["samples"] / self.sample_rate) if job["samples"] else 0.0
            return SynthesisResult(job["utterance"], job["index"], job["samples"], job["aborted"], job["first"], rtf)

    def synthesize(self, text: str) -> np.ndarray:
        """The whole utterance as one array (tests, files)."""
        parts: list[np.ndarray] = []
        self.speak(text, on_chunk=lambda c: parts.append(c.samples) or True)
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def _on_synth(self, wav, numsamples, events) -> int:
        job = self._job
        if job is None or self._stopped(job):
            return 1
        i, span = 0, None
        while events and events[i].type != EVENT_LIST_TERMINATED:
            e, i = events[i], i + 1
            if e.type == EVENT_WORD and e.length > 0:
                b = e.text_position - 1  # espeak positions are 1-based
                s, end = (int(c) for c in np.searchsorted(job["char_of_byte"], np.maximum(0, [b, b + e.length])))
                span = (s, end) if span is None else (span[0], end)
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
        if job["on_chunk"] is not None and job["on_chunk"](chunk) is False:
            job["aborted"] = True
        return not self._stopped(job)

    def _stopped(self, job: dict) -> bool:
        """Whether synthesis must stop (marking the job aborted): aborted, or its generation moved on."""
        if job["aborted"] or self._abort.is_set() or not self.session.is_current(job["generation"]):
            job["aborted"] = True
        return job["aborted"]


class TtsWorker:
    """A thread that speaks queued texts, stamped with their generation (stale ones are skipped), into a sink
    (usually `PlaybackBuffer.push`); every interruption reaches it as the "tts" consumer: `abort_and_clear()`."""

    def __init__(self, tts: EspeakTts, sink: Callable[[SpeechChunk], bool],
                 on_result: Callable[[SynthesisResult], None] | None = None):
        self.tts, self.sink, self.on_result = tts, sink, on_result
        self._texts: deque[tuple[str, int]] = deque()
        self._busy = self._closed = False  # _busy: a text is being spoken
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="tts-worker", daemon=True)
        self._thread.start()
        tts.session.subscribe("tts", self.abort_and_clear)  # every interruption; after the engine, before playback

    def say(self, text: str, generation: int | None = None) -> None:
        with self._cond:
            self._texts.append((text, self.tts.session.current if generation is None else generation))
            self._cond.notify_all()

    def abort_and_clear(self, interruption=None) -> None:
        """Abort the chunk being synthesized and drop every queued text (at every interruption, too)."""
        with self._cond:
            self._texts.clear()
            self._cond.notify_all()
        self.tts.abort()

    @property
    def idle(self) -> bool:
        return not (self._texts or self._busy)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.idle, timeout)

    def close(self) -> None:
        self.tts.session.unsubscribe(self.abort_and_clear)
        self.abort_and_clear()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._texts or self._closed)
                if self._closed:
                    return
                text, generation = self._texts.popleft()
                self._busy = True
            try:
                if self.tts.session.is_current(generation):
                    result = self.tts.speak(text, generation, on_chunk=self.sink)
                    if self.on_result is not None:
                        self.on_result(result)
            finally:  # a failed text still ends (wait_idle returns), as the thread dies with the error
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
