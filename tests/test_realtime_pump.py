"""The real-time pump keeps an absolute schedule: never early, catching up after a slow block, stoppable."""

from __future__ import annotations

import threading

import pytest

from agent_runtime.voice import realtime_pump
from agent_runtime.voice.realtime_pump import run_paced


class FakeTime:
    """A clock that only moves when something sleeps or works, so the schedule is exact."""

    def __init__(self):
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(realtime_pump, "time", fake)
    return fake


def _run(clock, work_s: dict[int, float], n: int, **kw) -> list[tuple[float, float]]:
    """(time, late_s) of the first n ticks; tick i works for work_s.get(i, 0) seconds."""
    calls, stop = [], threading.Event()

    def tick(late_s):
        calls.append((round(clock.now - 100.0, 9), round(late_s, 9)))
        clock.now += work_s.get(len(calls) - 1, 0.0)
        if len(calls) == n:
            stop.set()

    run_paced(tick, 0.5, stop, **kw)
    return calls


def test_ticks_land_on_their_slots_and_catch_up_after_a_slow_one(clock):
    calls = _run(clock, {1: 1.2}, 6)  # tick 1 overruns two and a half periods
    assert [t for t, _ in calls] == [0.0, 0.5, 1.7, 1.7, 2.0, 2.5]  # slots 2 and 3 run late, back to back
    assert [late for _, late in calls] == [0.0, 0.0, 0.7, 0.2, 0.0, 0.0]


def test_first_slot_delays_the_first_tick_and_stop_ends_before_the_next(clock):
    calls = _run(clock, {}, 2, first_slot=1)
    assert [t for t, _ in calls] == [0.5, 1.0]
    assert clock.now == 100.0 + 1.0  # stopped inside the last tick: no sleep towards another slot


def test_a_set_stop_event_and_a_bad_period():
    stop = threading.Event()
    stop.set()
    run_paced(lambda late: pytest.fail("ticked after stop"), 0.01, stop)
    with pytest.raises(ValueError, match="period_s"):
        run_paced(lambda late: None, 0.0, threading.Event())
