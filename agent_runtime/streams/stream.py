"""The Stream type: one producer or consumer of tokens in the engine's shared forward.

A stream has a role (its name in the batch report and in events), a view (the blocks it reads, in order) and
an own-block policy (where the tokens it writes go): a fresh block per item that then joins a section (frames,
status, user and heard text), a block rolled over every few items (Thinker paragraphs, action-log segments) or
a scratch block no other view reads (a remark being decoded, the command branches). Per engine step the
scheduler asks each stream for its rows (expire, then schedule); after the forward, postprocess() gets the
logits of the stream's rows, in the order it added them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_runtime.model_runner import StreamInput
from agent_runtime.view import View


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

    def add(self, stream: "Stream", inp: StreamInput, *, role: str | None = None, scratch: bool = False) -> None:
        self.rows.append(Row(stream, role or stream.role, inp, scratch))

    def scratch_views(self) -> list[View]:
        return [row.input.view for row in self.rows if row.scratch]


class Stream:
    """Base: a stream without work. Subclasses override what they do."""

    role = "stream"

    def expire(self, now_ms: float, generation: int) -> None:
        """Drop stale work before anything is scheduled (the scheduler calls this first)."""

    def schedule(self, plan: StepPlan) -> None:
        """Add this step's rows to the plan."""

    def postprocess(self, logits: list, plan: StepPlan):
        """Take the logits of this stream's rows (in order); may return an Action."""
        return None

    def close(self) -> None:
        """Release every block this stream holds."""
