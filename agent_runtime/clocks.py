"""Clocks: how session time passes, and how a headless world is made to move while the model computes.

- ComputeClock (headless): ViZDoom runs synchronously and is advanced by the compute time each engine
  step really took, so the world keeps moving while the model thinks, yet the run is structurally
  reproducible (same order of events, only durations vary).
- FixedCostClock (tests): the same, but a step costs a fixed amount per token, so runs are deterministic.
- Real time (live play) is ViZDoom's ASYNC_PLAYER mode: the world runs at 35 tics/s by itself.
"""

from __future__ import annotations

from dataclasses import dataclass

TICS_PER_SECOND = 35
MS_PER_TIC = 1000.0 / TICS_PER_SECOND


@dataclass
class FixedCost:
    """Cost model for deterministic tests: step = base + per decode row + per prefill token."""

    base_ms: float = 10.0
    per_decode_token_ms: float = 20.0
    per_prefill_token_ms: float = 1.0

    def step_ms(self, decode_rows: int, prefill_tokens: int) -> float:
        return self.base_ms + self.per_decode_token_ms * decode_rows + self.per_prefill_token_ms * prefill_tokens


class SessionClock:
    """Session time in ms for a synchronous world. charge() returns how many tics the world must advance."""

    def __init__(self, cost: FixedCost | None = None):
        self.cost = cost
        self.name = "fixed_cost" if cost else "compute"
        self.now_ms = 0.0
        self._tics_released = 0

    def step_cost_ms(self, measured_s: float, decode_rows: int, prefill_tokens: int) -> float:
        if self.cost is not None:
            return self.cost.step_ms(decode_rows, prefill_tokens)
        return measured_s * 1000.0

    def charge(self, ms: float) -> int:
        """Advance session time by ms; return the whole tics that became due."""
        self.now_ms += ms
        due = int(self.now_ms / MS_PER_TIC) - self._tics_released
        self._tics_released += due
        return due

    @property
    def tics_released(self) -> int:
        return self._tics_released
