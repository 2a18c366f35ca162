"""What one decision step costs here: the forward that prefills the newest frame line and scores the commands.

A decision can never be younger than its own step, so `budgets.max_action_age_ms: auto` is derived from this cost
(time_bounds.auto_action_age_ms). Measured on the runtime's own model and runner (its CPU path, threads and
kernels), on scratch blocks that are freed afterwards; on the fixed-cost clock it is that clock's price of the
same rows, so a fixed-cost run stays the same on every machine.
"""

from __future__ import annotations

import statistics
import time

from agent_runtime.clocks import FixedCost
from agent_runtime.model_runner import ModelRunner, StreamInput
from agent_runtime.view import View

CONTEXT_TOKENS = 64  # what the views read before the frame (attention is a small share of a step)
FRAME_TOKENS = 32  # a frame line with its status: what a decision prefills ahead of its prompt
PROMPT_TOKENS = 3  # "\nAct:" and the previous command's tail
REPEATS = 3


def fixed_decision_step_ms(cost: FixedCost, branches: int) -> float:
    """The fixed-cost clock's price of a decision step: the frame and the prompt prefilled, one row per branch."""
    return cost.step_ms(decode_rows=branches, prefill_tokens=FRAME_TOKENS + PROMPT_TOKENS)


def measured_decision_step_ms(runner: ModelRunner, branches: int, *, repeats: int = REPEATS) -> float:
    """Median wall time of a decision-shaped forward (after one warm-up) on scratch blocks of the runner's store."""
    store = runner.store
    vocab = runner.model.config.vocab_size
    tokens = [(7 + 31 * i) % vocab for i in range(CONTEXT_TOKENS + FRAME_TOKENS + PROMPT_TOKENS)]
    context = store.create("decision-cost-context")
    prefill = View(store, own=context, name="decision-cost")
    store.release(context)  # the view's hold is the only one: closing it frees the block
    try:
        runner.prefill(prefill, tokens[:CONTEXT_TOKENS])
        times = [_one_decision(runner, context, tokens, branches) for _ in range(repeats + 1)]
    finally:
        prefill.close()
    return statistics.median(times[1:]) * 1000.0


def _one_decision(runner: ModelRunner, context, tokens: list[int], branches: int) -> float:
    store = runner.store
    frame = View(store, [context], name="frame")
    frame.start_own("decision-cost-frame")
    action = View(store, [context, frame.own], name="action")
    action.start_own("decision-cost-action")
    views = [frame, action]
    inputs = [StreamInput(frame, tokens[CONTEXT_TOKENS:CONTEXT_TOKENS + FRAME_TOKENS], logits="none"),
              StreamInput(action, tokens[-PROMPT_TOKENS:], logits="last")]
    for i in range(branches):
        branch = View(store, [context, frame.own, action.own], name=f"branch{i}")
        branch.start_own("decision-cost-branch")
        views.append(branch)
        inputs.append(StreamInput(branch, [tokens[i]], logits="last"))
    try:
        t0 = time.perf_counter()
        runner.forward(inputs)
        return time.perf_counter() - t0
    finally:
        for view in reversed(views):
            view.close()
