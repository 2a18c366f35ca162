"""The Stream type: one producer or consumer of tokens in the engine's shared forward.

A role, a view (the blocks it reads) and an own-block policy (a fresh block per item, a block rolled over every
few items, or a scratch block no other view reads). The agent calls every stream the same way: on_interruption
once per new generation, then each step expire, schedule, and postprocess for the logits of its rows.
"""

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
    compute_s: float = 0.0  # compute a stream spent outside the forward (the frame encoder): charged with it

    def add(self, stream: "Stream", inp: StreamInput, *, role: str | None = None, scratch: bool = False) -> None:
        self.rows.append(Row(stream, role or stream.role, inp, scratch))


class Stream:
    """Base: a stream without work. Subclasses override what they do."""

    role = "stream"
    view = None  # the view it reads and writes through, for streams that keep one

    def __init__(self, ctx: StreamContext):
        self.store, self.sections, self.stats, self.emit = ctx.store, ctx.sections, ctx.stats, ctx.emit
        self.tok = ctx.tok

    def on_interruption(self, generation: int, now_ms: float) -> None:
        """The session moved to `generation` (a barge-in, a user command): drop work begun in an older one. Called
        once per new generation, at the start of the first step that sees it (the bump may come from any thread)."""

    def expire(self, now_ms: float) -> None:
        """Drop work too old to be worth doing (the scheduler calls this first)."""

    def schedule(self, plan: StepPlan) -> None:
        """Add this step's rows to the plan."""

    def postprocess(self, logits: list, plan: StepPlan):
        """Take the logits of this stream's rows (in order); may return an Action."""

    def close(self) -> None:
        """Release every block this stream holds."""
        if self.view is not None:
            self.view.close()
