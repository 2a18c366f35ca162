"""The Stream type: one producer or consumer of tokens in the engine's shared forward.

A role, a view (the blocks it reads) and an own-block policy (a fresh block per item, a block rolled over every
few items, or a scratch block no other view reads); per step expire, schedule, then postprocess its logits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from agent_runtime.engine.block_sections import BlockSections
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.engine.model_runner import StreamInput


@dataclass
class StreamContext:
    """What the agent shares with every stream: the pool and its sections, the counters, events, the tokenizer."""

    store: KVBlockStore
    sections: BlockSections
    stats: object  # the agent's AgentStats
    emit: Callable  # emit(kind, stream, generation=, tic=, sim_ms=, **payload)
    tok: object  # the tokenizer
    on_change: Callable[[], None]  # a section changed: the views follow it


@dataclass
class Row:
    stream: "Stream"
    role: str
    input: StreamInput
    scratch: bool  # its view closes after the forward


@dataclass
class StepPlan:
    """One engine step's batch as the scheduler builds it: rows in forward order and the prefill budget left."""

    now_ms: float
    generation: int
    budget: int = 0
    rows: list[Row] = field(default_factory=list)
    deciding: bool = False  # the action stream decides (or walks a command) in this step; it schedules first

    def add(self, stream: "Stream", inp: StreamInput, *, role: str | None = None, scratch: bool = False) -> None:
        self.rows.append(Row(stream, role or stream.role, inp, scratch))


class Stream:
    """Base: a stream without work. Subclasses override what they do."""

    role = "stream"
    view = None  # the view it reads and writes through, for streams that keep one

    def __init__(self, ctx: StreamContext):
        self.store, self.sections, self.stats, self.emit = ctx.store, ctx.sections, ctx.stats, ctx.emit
        self.tok, self.on_change = ctx.tok, ctx.on_change

    def expire(self, now_ms: float, generation: int) -> None:
        """Drop stale work before anything is scheduled (the scheduler calls this first)."""

    def schedule(self, plan: StepPlan) -> None:
        """Add this step's rows to the plan."""

    def postprocess(self, logits: list, plan: StepPlan):
        """Take the logits of this stream's rows (in order); may return an Action."""

    def close(self) -> None:
        """Release every block this stream holds."""
        if self.view is not None:
            self.view.close()
