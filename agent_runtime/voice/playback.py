"""The playback buffer between TTS and the speaker: bounded, generation-checked, and honest about what was heard.

TTS outruns playback ~100x: depth is bounded (`push` waits) and so is age (late chunks are dropped). An older
generation's chunks go at a bump: the next block is silence. Only text whose audio was played counts as heard.
"""

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from agent_runtime.session.generation import Interruption, SessionGeneration
from agent_runtime.voice.tts import SpeechChunk


@dataclass(frozen=True)
class HeardSpeech:
    """One utterance's fate: the text the listener actually heard, and whether it was cut off."""

    utterance: int
    generation: int
    heard: str
    interrupted: bool


@dataclass
class PlaybackStats:
    underruns: int = 0  # blocks with an utterance in progress but no audio ready
    discarded_stale: int = 0  # chunks of an old generation dropped
    discarded_late: int = 0  # chunks older than max_age_ms when their turn came
    max_depth_ms: float = 0.0
    depth_ms: float = 0.0
    # interruption -> silence, per bump: blocks started after the bump until a silent one (0 = the next block)
    interruptions: list[dict] = field(default_factory=list)


class PlaybackBuffer:
    """Feeds an output callback (sounddevice signature) block by block from queued SpeechChunks."""

    def __init__(self, session: SessionGeneration, sample_rate: int = 22_050, max_depth_ms: float = 1500.0,
                 max_age_ms: float = 4000.0):
        self.session, self.sample_rate = session, sample_rate
        self.max_depth_ms, self.max_age_ms = max_depth_ms, max_age_ms
        self.stats = PlaybackStats()
        self._queue: deque[SpeechChunk] = deque()
        self._current, self._offset = None, 0  # the SpeechChunk playing, and its samples already played
        self._cond = threading.Condition()
        self.paused = False  # silent from the next block while True, the queue kept (a barge-in not confirmed)
        self._heard_end: dict[int, int] = {}  # utterance -> char offset heard so far
        self._open: dict[int, SpeechChunk] = {}  # utterances started but not finished: a chunk of each
        self._heard_log: list[HeardSpeech] = []
        self._pending_bumps: list[Interruption] = []
        self._closed = False
        session.subscribe("playback", self._on_bump)

    def close(self) -> None:
        """Refuse further chunks and wake a producer blocked in `push` (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.session.unsubscribe(self._on_bump)

    def push(self, chunk: SpeechChunk) -> bool:
        """Queue a chunk; waits while the buffer is full. False when the chunk is (or became) stale."""
        with self._cond:
            while True:
                if self._closed:
                    return False
                if not self.session.is_current(chunk.generation):
                    self.stats.discarded_stale += 1
                    return False
                if self._queued_ms() < self.max_depth_ms or not self._queue:
                    break
                self._cond.wait(0.05)  # polled: a bump or a lost speaker notifies nobody
            self._queue.append(chunk)
            self._open.setdefault(chunk.utterance, chunk)
            self.stats.depth_ms = self._queued_ms()
            self.stats.max_depth_ms = max(self.stats.max_depth_ms, self.stats.depth_ms)
            return True

    def clear(self) -> None:
        """Drop everything queued (the speaker was lost)."""
        with self._cond:
            self._drop_stale(None)

    @property
    def active(self) -> bool:
        """True while speech is queued or playing (the agent is talking)."""
        return self._current is not None or bool(self._queue) or bool(self._open)

    def drain_heard(self) -> list[HeardSpeech]:
        """Utterances that finished or were cut off since the last call, with the text actually heard."""
        with self._cond:
            out, self._heard_log = self._heard_log, []
            return out

    def callback(self, outdata: np.ndarray, frames: int, time_info=None, status=None) -> None:
        """sounddevice output callback: fill one block, checking the generation first."""
        with self._cond:
            block_start, out = time.monotonic(), np.zeros(frames, np.float32)
            self._drop_stale(self.session.current)
            pos = 0
            if not self.paused:
                while pos < frames:
                    if self._current is None and not self._next_chunk(block_start):
                        break
                    chunk = self._current
                    n = min(frames - pos, chunk.samples.size - self._offset)
                    out[pos : pos + n] = chunk.samples[self._offset : self._offset + n]
                    pos += n
                    self._offset += n
                    if self._offset >= chunk.samples.size:
                        self._finish_chunk(chunk)
                if pos < frames and self._open and not self._queue and self._current is None:
                    self.stats.underruns += 1
            self._note_interruptions(silent=pos == 0, t=block_start)
            self.stats.depth_ms = self._queued_ms()
            self._cond.notify_all()
        outdata.fill(0.0)
        outdata[:, 0] = out

    def _queued_ms(self) -> float:
        rest = 0 if self._current is None else self._current.samples.size - self._offset
        return (sum(c.samples.size for c in self._queue) + rest) * 1000.0 / self.sample_rate

    def _next_chunk(self, now: float) -> bool:
        while self._queue:
            chunk = self._queue.popleft()
            if (now - chunk.created) * 1000.0 > self.max_age_ms:
                self.stats.discarded_late += 1  # skipped; the utterance goes on (with a gap)
                if chunk.last:
                    self._close(chunk, interrupted=True)
                continue
            self._current, self._offset = chunk, 0
            return True
        return False

    def _finish_chunk(self, chunk: SpeechChunk) -> None:
        if chunk.text_span is not None:
            self._heard_end[chunk.utterance] = max(self._heard_end.get(chunk.utterance, 0), chunk.text_span[1])
        self._current, self._offset = None, 0
        if chunk.last:
            self._close(chunk, interrupted=False)

    def _drop_stale(self, generation: int | None) -> None:
        """Drop the chunks not of `generation` (None: all; counted as stale) and close their utterances as cut off."""
        stale = (lambda c: True) if generation is None else (lambda c: c.generation != generation)
        gone = [c for c in [self._current, *self._queue] if c is not None and stale(c)]
        if gone and gone[0] is self._current:
            self._current, self._offset = None, 0
        self._queue = deque(c for c in self._queue if not stale(c))
        self.stats.discarded_stale += len(gone)
        for chunk in gone + [c for c in self._open.values() if stale(c)]:  # aborted synthesis sends no last chunk
            self._close(chunk, interrupted=True)

    def _close(self, chunk: SpeechChunk, interrupted: bool) -> None:
        """Record an utterance's heard text once: at its last chunk or when its chunks are dropped."""
        if chunk.utterance not in self._open:
            return
        first = self._open.pop(chunk.utterance)
        end = len(first.text) if not interrupted else self._heard_end.get(chunk.utterance, 0)
        self._heard_end.pop(chunk.utterance, None)
        self._heard_log.append(HeardSpeech(chunk.utterance, chunk.generation, first.text[:end].strip(), interrupted))

    def _on_bump(self, bump: Interruption) -> None:
        """An interruption: older speech goes now (silent from the next block), and the silence is timed."""
        with self._cond:
            self._drop_stale(bump.generation)
            self._pending_bumps.append(bump)

    def _note_interruptions(self, silent: bool, t: float) -> None:
        """Time each bump until the first silent block (a bump's record opens at the block filled after it)."""
        waiting = [rec for rec in self.stats.interruptions if rec["silent_after_blocks"] is None]
        for rec in waiting:
            rec["blocks_seen"] += not silent
        new = [{"generation": bump.generation, "reason": bump.reason, "t": bump.t, "blocks_seen": 0,
                "silent_after_blocks": None, "silence_ms": None} for bump in self._pending_bumps]
        self._pending_bumps.clear()
        self.stats.interruptions.extend(new)
        for rec in waiting + new if silent else ():
            rec["silent_after_blocks"], rec["silence_ms"] = rec["blocks_seen"], (t - rec["t"]) * 1000.0
