"""The scheduler: which rows go into this engine step's one batched forward, in what order.

Every stream expires its stale work first; then the streams schedule in the order given: the newest frame first
whatever the budget (reactions start there), then user text and heard commentary in chunks within the prefill
budget, then one row per decoding stream. Sections sync their views as they change, so this forward's decisions
see the blocks prefilled in it.
"""

from agent_runtime.engine.streams.stream import StepPlan, Stream


def schedule(now_ms: float, generation: int, prefill_tokens_per_step: int, streams: list[Stream]) -> StepPlan:
    """This step's plan: every stream expires its stale work, then adds its rows, in `streams`' order."""
    plan = StepPlan(now_ms, generation, budget=prefill_tokens_per_step)
    for stream in streams:
        stream.expire(now_ms)
    for stream in streams:
        stream.schedule(plan)
    return plan
