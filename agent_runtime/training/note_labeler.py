"""The Thinker's teacher in DAgger collection: the planner writes the note for each paragraph's view.

At each paragraph's start the planner (thinking/planner.py) reads the Thinker's view from its own blocks, decoded:
its frame lines, its status line and its previous note, the text the model reads, so the note is learnable from the
view. The view's tokens and the note go to the data set (notes.jsonl); with probability `planner_writes` the note is
also the paragraph the other streams read (forced one token a step, as the model would write it), so the action
stream is labelled and trained with true notes in view; otherwise the model writes it and only the label is kept.
"""

import random

from agent_runtime.engine.prompts import THOUGHT_PROMPT, encode, thought_text
from agent_runtime.thinking.planner import note_for
from agent_runtime.training.decision_log import NoteExample


def view_texts(view, tokenizer) -> tuple[list[str], str | None, str | None]:
    """The Thinker's view as the planner reads it: its frame lines (oldest first), its newest status line and its
    newest sealed paragraph after the prompt (None where the view holds none)."""
    def texts(prefix: str) -> list[str]:
        return [tokenizer.decode(b.token_ids) for b in view.blocks if b.label.startswith(prefix)]

    statuses, thoughts = texts("status"), texts("thought")
    previous = thought_text(thoughts[-1]) if thoughts else None
    return texts("frame"), statuses[-1] if statuses else None, previous


def read_view(view) -> tuple[list[int], int]:
    """The tokens a view read, without its own block (which holds the prompt), and the tic of its newest frame."""
    frames = [b.label for b in view.blocks if b.label.startswith("frame")]
    return [t for b in view.blocks for t in b.token_ids], int(frames[-1].removeprefix("frame"))


class NoteLabeler:
    """ThinkerStream's on_paragraph for one episode at a time; examples go to `log` (anything with add())."""

    def __init__(self, tokenizer, log, *, planner_writes: float = 1.0):
        self.tok, self.log, self.planner_writes = tokenizer, log, planner_writes
        self.prompt = encode(tokenizer, THOUGHT_PROMPT)
        self.start_episode(0)

    def start_episode(self, episode: int, seed: int = 0) -> None:
        """A new episode; `seed` draws which paragraphs the planner writes (the same episode, the same draws)."""
        self.episode, self.rng = episode, random.Random(seed)
        self.notes = self.written = 0

    def on_paragraph(self, view) -> list[int] | None:
        lines, status, previous = view_texts(view, self.tok)
        if not lines:  # no frame in view yet: nothing to note
            return None
        note = note_for(lines, status, previous)
        target = encode(self.tok, f" {note}\n")
        forced = self.rng.random() < self.planner_writes
        read, tic = read_view(view)
        self.log.add(NoteExample(self.episode, tic, read, self.prompt, target, note, "planner" if forced else "model",
                                 view.isolated_spans()))
        self.notes += 1
        self.written += forced
        return list(target) if forced else None
