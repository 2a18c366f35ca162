"""The session generation: one counter, in one place, that every interruption bumps first.

Anything produced for the session (an action, a TTS chunk, a playback buffer, an engine step's output)
is stamped with the generation current when it was started. Consumers compare the stamp with the
current value at consumption time and discard stale work, so an interruption takes effect at the next
consumption point without having to chase down every queue.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GenerationBump:
    generation: int
    reason: str
    t: float


@dataclass
class SessionGeneration:
    _value: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    history: list[GenerationBump] = field(default_factory=list)
    listeners: list = field(default_factory=list, repr=False)

    @property
    def current(self) -> int:
        return self._value

    def bump(self, reason: str) -> int:
        """Start a new generation; everything stamped with an older one is now stale."""
        with self._lock:
            self._value += 1
            bump = GenerationBump(self._value, reason, time.monotonic())
            self.history.append(bump)
        for listener in list(self.listeners):
            listener(bump)
        return bump.generation

    def is_current(self, stamp: int) -> bool:
        return stamp == self._value
