"""The session generation and its interruptions: one counter, in one place, that every interruption bumps first.

Work is stamped with the generation current when it started. A bump is handed, as one Interruption, to every
subscriber in pipeline order (engine, TTS, playback), as Pipecat passes an interruption frame down; each
consumer also compares stamps where it consumes, so stale work in flight on another thread is dropped too.
"""

import threading
import time
from dataclasses import dataclass, field

CONSUMERS = ("engine", "tts", "playback")  # the order interruptions are delivered in


@dataclass(frozen=True)
class Interruption:
    generation: int  # the new generation: everything stamped older is stale
    reason: str
    t: float  # time.monotonic() of the bump
    sim_ms: float | None = None  # session time, when the interrupter knows it
    detail: dict = field(default_factory=dict)


@dataclass
class SessionGeneration:
    current: int = 0  # the generation now; bump() alone moves it
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    history: list[Interruption] = field(default_factory=list)
    _consumers: list[tuple[int, object]] = field(default_factory=list, repr=False)

    def bump(self, reason: str, *, sim_ms: float | None = None, **detail) -> int:
        """Start a new generation; everything stamped with an older one is now stale. Consumers hear it in order."""
        with self._lock:
            self.current += 1
            interruption = Interruption(self.current, reason, time.monotonic(), sim_ms, detail)
            self.history.append(interruption)
            consumers = [listener for _, listener in self._consumers]
        for listener in consumers:
            listener(interruption)
        return interruption.generation

    def subscribe(self, consumer: str, listener) -> None:
        """listener(Interruption) is called at every bump, after the consumers before `consumer` in CONSUMERS."""
        with self._lock:
            self._consumers.append((CONSUMERS.index(consumer), listener))
            self._consumers.sort(key=lambda item: item[0])  # stable: same rank keeps subscription order

    def unsubscribe(self, listener) -> None:
        with self._lock:
            self._consumers = [(rank, fn) for rank, fn in self._consumers if fn != listener]

    def is_current(self, stamp: int) -> bool:
        return stamp == self.current
