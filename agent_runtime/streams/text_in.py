"""Text coming in: the user's words and the commentary the user heard, each prefilled into a block of its own.

A long text goes in chunks and joins its section when complete. User text is bounded (user_text_limits.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from agent_runtime.model_runner import StreamInput
from agent_runtime.streams.stream import StepPlan, Stream
from agent_runtime.view import View
from agent_runtime.events import Kind


@dataclass
class TextPrefill:
    tokens: list[int]
    view: View | None = None  # the block's prefill view, once started
    done: int = 0


class TextInStream(Stream):
    def __init__(self, role: str, section: str, store, sections):
        self.role, self.section, self.store, self.sections = role, section, store, sections
        self.queue: deque[TextPrefill] = deque()

    @property
    def waiting(self) -> bool:
        return bool(self.queue)

    def push(self, tokens: list[int]) -> None:
        self.queue.append(TextPrefill(tokens))

    def schedule_chunk(self, plan: StepPlan, size: int) -> bool:
        """Prefill up to `size` tokens of the oldest text; True when that text is complete."""
        job = self.queue[0]
        if job.view is None:  # the view holds the new block until its text is complete
            block = self.store.create(self.section)
            job.view = View(self.store, own=block, name=self.role)
            self.store.release(block)
        chunk = job.tokens[job.done: job.done + size]
        job.done += len(chunk)
        plan.budget -= len(chunk)
        if job.done < len(job.tokens):
            plan.add(self, StreamInput(job.view, chunk, logits="none"))
            return False  # continued next step
        self.queue.popleft()
        plan.add(self, StreamInput(job.view, chunk, logits="none"), scratch=True)  # the section keeps the block
        self.sections.add(self.section, self.store.retain(job.view.own))
        return True

    def close(self) -> None:
        for job in self.queue:
            if job.view is not None:
                job.view.close()
        self.queue.clear()


class UserTextStream(TextInStream):
    """The user's typed or spoken words, bounded (see the module docstring)."""

    def __init__(self, store, sections, *, max_tokens: int, max_pending: int, stats, emit, notice):
        super().__init__("user", "user", store, sections)
        self.max_tokens, self.max_pending = max_tokens, max_pending
        self.stats, self.emit, self.notice = stats, emit, notice

    def push_text(self, tokens: list[int], chars: int, now_ms: float) -> None:
        if len(tokens) > self.max_tokens:
            self.stats.user_texts_truncated += 1
            self.emit(Kind.USER_TEXT_TRUNCATED, "user", sim_ms=now_ms, chars=chars, tokens=len(tokens),
                      kept_tokens=self.max_tokens)
            self.notice("truncated", f"agent: a user text of {chars} characters was cut to its first "
                                     f"{self.max_tokens} tokens (later cuts: user_text_truncated events)")
            tokens = tokens[: self.max_tokens]
        waiting = [job for job in self.queue if job.view is None]  # not yet started
        if len(self.queue) >= self.max_pending and waiting:
            self.queue.remove(waiting[0])
            self.stats.user_texts_dropped += 1
            self.emit(Kind.USER_TEXT_DROPPED, "user", sim_ms=now_ms, tokens=len(waiting[0].tokens),
                      reason=f"more than {self.max_pending} texts waiting")
            self.notice("dropped", f"agent: user texts arrive faster than they can be read; older waiting ones "
                                   f"are dropped (more than {self.max_pending}; user_text_dropped events)")
        self.push(tokens)
