"""The age bounds, in one place: how old a frame may be to be read, and how old an action's frame may be
when the action would run (older ones are fenced by the ActionExecutor)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent_runtime.clocks import MS_PER_TIC


@dataclass(frozen=True)
class TimeBounds:
    max_frame_age_ms: float = 250.0
    max_action_age_ms: float = math.inf  # inf: never fenced for age (the ordinary read-think-act loop)

    @classmethod
    def from_budgets(cls, budgets) -> "TimeBounds":
        return cls(budgets.max_frame_age_ms, budgets.max_action_age_ms)

    def frame_stale(self, read_ms: float, now_ms: float) -> bool:
        return now_ms - read_ms > self.max_frame_age_ms

    def action_stale(self, frame_read_ms: float, now_ms: float) -> bool:
        return now_ms - frame_read_ms > self.max_action_age_ms

    @property
    def frame_window_tics(self) -> int:
        """How many of the newest tics a synchronous world reads frames of (older ones would be stale)."""
        return max(1, int(self.max_frame_age_ms / MS_PER_TIC) + 1)
