"""The scheduler: which rows go into this engine step's one batched forward, in what order.

1. stale work first: every stream drops what has gone stale (frames past the age bound, a decision or a
   remark of an older generation) before anything is scheduled;
2. the newest frame first (with its status when that changed), whatever the budget: reactions start there;
3. then user text, then heard commentary, prefilled in chunks within the step's prefill token budget
   (at least MIN_PREFILL_CHUNK a step, so a long text always advances), so a flood never delays a reaction;
4. the new blocks join the views (sync_views, also run after step 1 so what left is freed at once), so
   decisions in this same forward already see them;
5. one row per decoding stream: the action decision (with its command branches), the Thinker, commentary.
"""

from __future__ import annotations

from agent_runtime.streams.stream import StepPlan, Stream
from agent_runtime.streams.text_in import TextInStream

MIN_PREFILL_CHUNK = 8  # a long text advances at least this much per step, even with the budget spent


class Scheduler:
    def __init__(self, prefill_tokens_per_step: int):
        self.prefill_tokens_per_step = prefill_tokens_per_step

    def schedule(self, now_ms: float, generation: int, *, frames: Stream, texts: list[TextInStream],
                 decoders: list[Stream], sync_views) -> StepPlan:
        plan = StepPlan(now_ms, generation, budget=self.prefill_tokens_per_step)
        for stream in (frames, *texts, *decoders):
            stream.expire(now_ms, generation)
        sync_views()
        frames.schedule(plan)
        for stream in texts:
            while stream.waiting and plan.budget > 0:
                if not stream.schedule_chunk(plan, max(plan.budget, MIN_PREFILL_CHUNK)):
                    break  # continued next step
        sync_views()
        for stream in decoders:
            stream.schedule(plan)
        return plan
