"""Clocks: session time, and what an engine step costs on it. Time lives here.

Headless, SessionClock charges each step its measured compute time (the world moves while the model thinks, in
the same order of events on any machine), a FixedCost (deterministic) or a recording's costs (a rerun moves the
world exactly as it moved). Live, WallClock: ViZDoom runs at 35 tics/s by itself. An empty step costs one tic.
"""

import time
from dataclasses import dataclass

TICS_PER_SECOND = 35
MS_PER_TIC = 1000.0 / TICS_PER_SECOND
TIC_ROUNDING = 1e-6  # of a tic: 29 ns, far below any cost measured


def measured(fn, *args):
    """(fn(*args), seconds it took): the compute time a step is charged on the compute clock."""
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


@dataclass
class FixedCost:
    """Cost model for deterministic tests: step = base + per decode row + per prefill token."""

    base_ms: float = 10.0
    per_decode_token_ms: float = 20.0
    per_prefill_token_ms: float = 1.0

    def step_ms(self, decode_rows: int, prefill_tokens: int) -> float:
        return self.base_ms + self.per_decode_token_ms * decode_rows + self.per_prefill_token_ms * prefill_tokens


class RecordedCostsEnded(Exception):
    """A replayed run has used every recorded step cost: the recorded run ended here."""


class SessionClock:
    """Session time in ms for a synchronous world. charge() returns how many tics the world must advance."""

    def __init__(self, cost: FixedCost | None = None, *, replay_costs: list[float] | None = None,
                 replay_encode_ms: list[float] | None = None):
        """replay_encode_ms: a recording's frame encoding times, in order (frame_encode_ms gives them back)."""
        self.cost, self.replay_costs = cost, replay_costs
        self._replay_encode = iter(replay_encode_ms or ())
        self.name = "fixed_cost" if cost else "compute"
        self.now_ms = 0.0
        self.tics_released = 0  # whole tics the world was told to play
        self._steps = 0

    def cost_of(self, outcome) -> float:
        """What one engine step (a StepOutcome) costs: replayed, idle (one tic) or its computation's cost."""
        step, self._steps = self._steps, self._steps + 1
        if self.replay_costs is not None:
            if step >= len(self.replay_costs):
                raise RecordedCostsEnded()
            return self.replay_costs[step]
        if not outcome.batch:  # no forward: wait for the next frame (after a frame dropped once encoded, that long)
            return MS_PER_TIC if self.cost is not None else max(MS_PER_TIC, outcome.measured_s * 1000.0)
        if self.cost is not None:
            return self.cost.step_ms(outcome.decode_rows, outcome.prefill_tokens)
        return outcome.measured_s * 1000.0

    def frame_encode_ms(self, measured_ms: float) -> float:
        """What encoding a frame took on this clock, for its age bound: the recorded time when replaying (none for
        recordings made before it was recorded), nothing on the fixed-cost clock, else the measured time."""
        if self.replay_costs is not None:
            return next(self._replay_encode, 0.0)
        return 0.0 if self.cost is not None else measured_ms

    def charge(self, ms: float) -> int:
        """Advance session time by ms; return the whole tics that became due."""
        self.now_ms += ms
        # whole tics up to now, a float's rounding short of one counted as reached: idle steps of MS_PER_TIC from a
        # tic's moment release exactly one tic each (not 0, then 2)
        due = int(self.now_ms / MS_PER_TIC + TIC_ROUNDING) - self.tics_released
        self.tics_released += due
        return due


class WallClock:
    """Session time for a real-time world: wall-clock ms since t0 (the first frame's read)."""

    name = "realtime"

    def __init__(self):
        self.t0 = time.monotonic()

    @property
    def now_ms(self) -> float:
        return self.ms(time.monotonic())

    def ms(self, monotonic_t: float) -> float:
        return (monotonic_t - self.t0) * 1000.0
