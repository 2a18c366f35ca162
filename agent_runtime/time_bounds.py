"""The age bounds, in one place: how old a frame may be to be read, and how old an action's frame may be
when the action would run (older ones are fenced by the ActionExecutor).

`budgets.max_action_age_ms: auto` (the default) is ACTION_AGE_FLOOR_MS, or two decision steps where this machine's
decision step takes longer than half of that: a decision is never younger than its own step, and its frame may
have waited out the step under way, so a smaller bound fences actions that were as fresh as the machine can make
them (on a slow CPU, nearly all of them: the agent would stand still).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent_runtime.clocks import MS_PER_TIC

AUTO = "auto"
ACTION_AGE_FLOOR_MS = 250.0
DECISION_STEPS_OF_AGE = 2.0


def auto_action_age_ms(decision_step_ms: float) -> float:
    """The bound `auto` gives for a decision step of this cost (whole 10 ms above the floor)."""
    return max(ACTION_AGE_FLOOR_MS, 10.0 * math.ceil(DECISION_STEPS_OF_AGE * decision_step_ms / 10.0))


@dataclass(frozen=True)
class TimeBounds:
    max_frame_age_ms: float = 250.0
    max_action_age_ms: float = math.inf  # inf: never fenced for age (the ordinary read-think-act loop)
    decision_step_ms: float | None = None  # what `auto` was resolved from (None: the bound was a number)

    @classmethod
    def from_budgets(cls, budgets, decision_step_ms: float | None = None) -> "TimeBounds":
        """The config's bounds; decision_step_ms resolves max_action_age_ms auto (Runtime.time_bounds measures it)."""
        age = budgets.max_action_age_ms
        if age != AUTO:
            return cls(budgets.max_frame_age_ms, float(age))
        if decision_step_ms is None:
            raise ValueError("budgets.max_action_age_ms auto needs a decision step's cost: use Runtime.time_bounds()")
        return cls(budgets.max_frame_age_ms, auto_action_age_ms(decision_step_ms), decision_step_ms)

    def frame_stale(self, read_ms: float, now_ms: float) -> bool:
        return now_ms - read_ms > self.max_frame_age_ms

    def action_stale(self, frame_read_ms: float, now_ms: float) -> bool:
        return now_ms - frame_read_ms > self.max_action_age_ms

    @property
    def frame_window_tics(self) -> int:
        """How many of the newest tics a synchronous world reads frames of (older ones would be stale)."""
        return max(1, int(self.max_frame_age_ms / MS_PER_TIC) + 1)

    def describe(self) -> str:
        """One line for the loading output: the action bound and, for auto, what it came from."""
        if self.decision_step_ms is None:
            return f"action age bound {self.max_action_age_ms:g} ms"
        return (f"action age bound {self.max_action_age_ms:g} ms (auto: a decision step here takes "
                f"{self.decision_step_ms:.0f} ms)")
