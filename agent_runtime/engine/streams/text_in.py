"""Text coming in: the user's words and the commentary the user heard, each prefilled into a block of its own.

A long text goes in chunks and joins its section when complete. User text is bounded, so a flood of typing or one
endless line cannot fill the KV pool: texts cut to MAX_USER_TOKENS, at most MAX_PENDING_USER_TEXTS waiting, and
the views' newest 2 user blocks bound user text to 3 blocks of MAX_USER_TOKENS; what is cut or
dropped is an event and, once, a line.
"""

from collections import deque
from dataclasses import dataclass

from agent_runtime.session.events import Kind
from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.prompts import USER_PREFIX, encode
from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.engine.view import View

MAX_USER_TOKENS = 256  # a command is a few tokens; a paragraph of instructions still fits
MAX_PENDING_USER_TEXTS = 4  # texts waiting for prefill; older ones are dropped when more arrive
MAX_USER_TEXT_CHARS = 4096  # read or tokenized at most: well over MAX_USER_TOKENS tokens of ordinary text
MAX_PENDING_TYPED_LINES = 16  # typed lines waiting for the engine loop
MIN_PREFILL_CHUNK = 8  # a text chunk is at least this long when any prefill budget is left


@dataclass
class TextPrefill:
    tokens: list[int]
    view: View | None = None  # the block's prefill view, once started
    done: int = 0


class TextInStream(Stream):
    def __init__(self, role: str, section: str, ctx):
        super().__init__(ctx)
        self.role, self.section = role, section
        self.queue: deque[TextPrefill] = deque()

    def push(self, tokens: list[int]) -> None:
        self.queue.append(TextPrefill(tokens))

    def schedule(self, plan: StepPlan) -> None:
        """Waiting texts in chunks within what the frame left of the step's prefill budget (a flood never delays a
        reaction); with any budget left, at least MIN_PREFILL_CHUNK tokens, so a long text keeps advancing."""
        while self.queue and plan.budget > 0:
            if not self._schedule_chunk(plan, max(plan.budget, MIN_PREFILL_CHUNK)):
                break  # continued next step

    def _schedule_chunk(self, plan: StepPlan, size: int) -> bool:
        """Prefill up to `size` tokens of the oldest text; True when that text is complete."""
        job = self.queue[0]
        if job.view is None:  # the view holds the new block until its text is complete
            job.view = View(self.store, name=self.role, own_label=self.section)
        chunk = job.tokens[job.done: job.done + size]
        job.done += len(chunk)
        plan.budget -= len(chunk)
        complete = job.done >= len(job.tokens)  # else continued next step
        plan.add(self, StreamInput(job.view, chunk, logits="none"), scratch=complete)
        if complete:  # the section keeps the block
            self.queue.popleft()
            self.sections.add(self.section, self.store.retain(job.view.own))
        return complete

    def close(self) -> None:
        for job in self.queue:
            if job.view is not None:
                job.view.close()
        self.queue.clear()


class UserTextStream(TextInStream):
    """The user's typed or spoken words, bounded (see the module docstring)."""

    def __init__(self, ctx, *, notice):
        super().__init__("user", "user", ctx)
        self.notice = notice

    def push_text(self, text: str, now_ms: float) -> None:
        chars = len(text)
        tokens = encode(self.tok, USER_PREFIX + text[:MAX_USER_TEXT_CHARS])  # never tokenize an endless text whole
        if len(tokens) > MAX_USER_TOKENS:
            self.emit(Kind.USER_TEXT_TRUNCATED, "user", sim_ms=now_ms, chars=chars, tokens=len(tokens),
                      kept_tokens=MAX_USER_TOKENS)
            self.notice("truncated", f"agent: a user text of {chars} characters was cut to its first "
                                     f"{MAX_USER_TOKENS} tokens (later cuts: user_text_truncated events)")
            tokens = tokens[:MAX_USER_TOKENS]
        waiting = [job for job in self.queue if job.view is None]  # not yet started
        if len(self.queue) >= MAX_PENDING_USER_TEXTS and waiting:
            self.queue.remove(waiting[0])
            self.emit(Kind.USER_TEXT_DROPPED, "user", sim_ms=now_ms, tokens=len(waiting[0].tokens),
                      reason=f"more than {MAX_PENDING_USER_TEXTS} texts waiting")
            self.notice("dropped", f"agent: user texts arrive faster than they can be read; older waiting ones "
                                   f"are dropped (more than {MAX_PENDING_USER_TEXTS}; user_text_dropped events)")
        self.push(tokens)
