"""The age bounds, in one place: how old a frame may be to be read, and how old an action's frame may be
when the action would run (older ones are fenced by the ActionExecutor).

`budgets.max_action_age_ms: auto` (the default) is ACTION_AGE_FLOOR_MS, or two decision steps (decision_step_cost_ms)
where this machine's takes longer than half of that: a decision is never younger than its own step, and its frame
may have waited out the step under way, so a smaller bound fences actions that were as fresh as the machine can
make them (on a slow CPU, nearly all of them: the agent would stand still).
"""

import math
import statistics
from dataclasses import dataclass

from agent_runtime.session.clocks import MS_PER_TIC, FixedCost, measured
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View

AUTO = "auto"
ACTION_AGE_FLOOR_MS = 250.0
DECISION_STEPS_OF_AGE = 2.0
CONTEXT_TOKENS = 64  # what the views read before the frame (attention is a small share of a step)
FRAME_TOKENS = 32  # a frame line with its status: what a decision prefills ahead of its prompt
PROMPT_TOKENS = 3  # "\nAct:" and the previous command's tail
REPEATS = 3


def auto_action_age_ms(decision_step_ms: float) -> float:
    """The bound `auto` gives for a decision step of this cost (whole 10 ms above the floor)."""
    return max(ACTION_AGE_FLOOR_MS, 10.0 * math.ceil(DECISION_STEPS_OF_AGE * decision_step_ms / 10.0))


def decision_step_cost_ms(runner: ModelRunner, branches: int, fixed_cost: FixedCost | None = None) -> float:
    """A decision step (the forward that prefills the newest frame line and scores the commands): the fixed-cost
    clock's price of its rows (the same on every machine), or the median wall time of one (after a warm-up) on the
    runtime's own model, on scratch blocks freed afterwards."""
    if fixed_cost is not None:
        return fixed_cost.step_ms(decode_rows=branches, prefill_tokens=FRAME_TOKENS + PROMPT_TOKENS)
    vocab = runner.model.config.vocab_size
    tokens = [(7 + 31 * i) % vocab for i in range(CONTEXT_TOKENS + FRAME_TOKENS + PROMPT_TOKENS)]
    prefill = View(runner.store, name="decision-cost", own_label="decision-cost-context")  # closing it frees it
    try:
        runner.prefill(prefill, tokens[:CONTEXT_TOKENS])
        times = [_one_decision(runner, prefill.own, tokens, branches) for _ in range(REPEATS + 1)]
    finally:
        prefill.close()
    return statistics.median(times[1:]) * 1000.0


def _one_decision(runner: ModelRunner, context, tokens: list[int], branches: int) -> float:
    store = runner.store
    frame = View(store, [context], name="frame", own_label="decision-cost-frame")
    action = View(store, [context, frame.own], name="action", own_label="decision-cost-action")
    views = [frame, action] + [View(store, [context, frame.own, action.own], name=f"branch{i}",
                                    own_label="decision-cost-branch") for i in range(branches)]
    inputs = [StreamInput(frame, tokens[CONTEXT_TOKENS:CONTEXT_TOKENS + FRAME_TOKENS], logits="none"),
              StreamInput(action, tokens[-PROMPT_TOKENS:], logits="last")]
    inputs += [StreamInput(branch, [tokens[i]], logits="last") for i, branch in enumerate(views[2:])]
    try:
        return measured(runner.forward, inputs)[1]
    finally:
        for view in reversed(views):
            view.close()


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
        step = self.decision_step_ms
        auto = "" if step is None else f" (auto: a decision step here takes {step:.0f} ms)"
        return f"action age bound {self.max_action_age_ms:g} ms{auto}"
