"""The real-time pump keeps an absolute schedule: never early, catching up after a slow block, stoppable."""

from __future__ import annotations

import threading

import pytest

from agent_runtime.voice import voice_io
from agent_runtime.voice.voice_io import run_paced


class FakeTime:
    """A clock that only moves when something sleeps or works, so the schedule is exact."""

    def __init__(self):
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class FakeStop(threading.Event):
    """A stop event whose wait runs on the fake clock (and returns at once once set, as Event.wait does)."""

    def __init__(self, clock: FakeTime):
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout >= 0
        if not self.is_set():
            self.clock.now += timeout
        return self.is_set()


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(voice_io, "time", fake)
    return fake


def _run(clock, work_s: dict[int, float], n: int) -> list[float]:
    """The times of the first n ticks; tick i works for work_s.get(i, 0) seconds."""
    calls, stop = [], FakeStop(clock)

    def tick():
        calls.append(round(clock.now - 100.0, 9))
        clock.now += work_s.get(len(calls) - 1, 0.0)
        if len(calls) == n:
            stop.set()

    run_paced(tick, 0.5, stop)
    return calls


def test_ticks_land_on_their_slots_and_catch_up_after_a_slow_one(clock):
    calls = _run(clock, {1: 1.2}, 6)  # tick 1 overruns two and a half periods
    assert calls == [0.0, 0.5, 1.7, 1.7, 2.0, 2.5]  # slots 2 and 3 run late, back to back


def test_stop_ends_before_the_next_tick(clock):
    assert _run(clock, {}, 2) == [0.0, 0.5]
    assert clock.now == 100.0 + 0.5  # stopped inside the last tick: no wait towards another slot


def test_a_set_stop_event():
    stop = threading.Event()
    stop.set()
    run_paced(lambda: pytest.fail("ticked after stop"), 0.01, stop)
