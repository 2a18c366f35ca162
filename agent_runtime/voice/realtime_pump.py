"""Pacing at the real audio rate, as a sound card does: one call per block period, on a fixed schedule.

Device-free streams must not run faster than real time, or latencies measured on them mean nothing. The schedule
is absolute, so a late call does not push later ones back: the pump catches up, as a device's clock would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def run_paced(tick: Callable[[float], None], period_s: float, stop: threading.Event, first_slot: int = 0) -> None:
    """Call `tick(late_s)` once per `period_s`, at slots first_slot, first_slot + 1, ... from now (late_s: how far
    behind its slot), until `stop` is set; blocks (the target of the caller's thread)."""
    if period_s <= 0:
        raise ValueError(f"period_s must be positive, got {period_s}")
    start = time.monotonic()
    slot = first_slot
    while not stop.is_set():
        due = start + slot * period_s
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if stop.is_set():
            return
        tick(max(0.0, time.monotonic() - due))
        slot += 1
