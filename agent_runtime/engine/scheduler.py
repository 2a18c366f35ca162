"""The scheduler: which rows go into this engine step's one batched forward, in what order.

Stale work is dropped first; the newest frame goes first whatever the budget (reactions start there); user text
and heard commentary follow in chunks within the prefill budget, so a flood never delays a reaction; the views
are synced so this forward's decisions see the new blocks; then one row per decoding stream.
"""

from __future__ import annotations

from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.engine.streams.text_in import TextInStream

MIN_PREFILL_CHUNK = 8  # a long text advances at least this much per step, even with the budget spent


def schedule(now_ms: float, generation: int, prefill_tokens_per_step: int, *, frames: Stream,
             texts: list[TextInStream], decoders: list[Stream], sync_views) -> StepPlan:
    """This step's plan: every stream expires its stale work, then the rows in the order above."""
    plan = StepPlan(now_ms, generation, budget=prefill_tokens_per_step)
    for stream in (frames, *texts, *decoders):
        stream.expire(now_ms, generation)
    sync_views()
    frames.schedule(plan)
    for stream in texts:
        while stream.queue and plan.budget > 0:
            if not stream.schedule_chunk(plan, max(plan.budget, MIN_PREFILL_CHUNK)):
                break  # continued next step
    sync_views()
    for stream in decoders:
        stream.schedule(plan)
    return plan
