"""The session generation and its interruptions: one counter, in one place, that every interruption bumps first.

Anything produced for the session (an action, a TTS chunk, a playback buffer, an engine step's output) is
stamped with the generation current when it was started. An interruption (a user command, a barge-in) bumps
the counter and is then handed, as one Interruption, to every consumer that subscribed, always in pipeline
order (the engine records it, TTS stops synthesizing, playback goes silent), as Pipecat passes an interruption
frame down its processors. Each consumer also compares stamps with the current value at its consumption point
(the action executor only does that: it fences an older generation's action when it would run), so stale work
is discarded even when it was in flight on another thread.
"""

from __future__ import annotations

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
    _value: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    history: list[Interruption] = field(default_factory=list)
    _consumers: list[tuple[int, object]] = field(default_factory=list, repr=False)

    @property
    def current(self) -> int:
        return self._value

    def bump(self, reason: str, *, sim_ms: float | None = None, **detail) -> int:
        """Start a new generation; everything stamped with an older one is now stale. Consumers hear it in order."""
        with self._lock:
            self._value += 1
            interruption = Interruption(self._value, reason, time.monotonic(), sim_ms, detail)
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
        return stamp == self._value
