"""Pacing at the real audio rate, as a sound card does: one call per block period, on a fixed schedule.

Device-free streams must not run faster than real time, or latencies measured on them mean nothing. The schedule
is absolute, so a late call does not push later ones back: the pump catches up, as a device's clock would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RealTimePump:
    """Calls `tick(late_s)` once per `period_s`, at slots first_slot, first_slot + 1, ... after `run()` starts
    (late_s: how far behind its slot); `stop()` or a shared `stop_event` ends it before the next call."""

    def __init__(self, tick: Callable[[float], None], period_s: float, *, first_slot: int = 0,
                 stop_event: threading.Event | None = None):
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.tick = tick
        self.period_s = period_s
        self.first_slot = first_slot
        self._stop = stop_event if stop_event is not None else threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Pace `tick` until stopped (blocks: the target of the caller's thread)."""
        start = time.monotonic()
        slot = self.first_slot
        while not self._stop.is_set():
            due = start + slot * self.period_s
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if self._stop.is_set():
                return
            self.tick(max(0.0, time.monotonic() - due))
            slot += 1
