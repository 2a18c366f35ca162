"""The Thinker's notes as a training target: token cross-entropy of the planner's note after the Thinker's view.

Each example is the view the Thinker read as a paragraph began (notes.jsonl), its prompt and the planner's note: the
model reads view + prompt + note and every note token is predicted from what precedes it, under the same block
masks the engine attends with (the view's isolated spans), as command_scores does for the action stream.
"""

from dataclasses import dataclass

import torch

from agent_runtime.training.command_scores import views_pass


@dataclass
class NoteTarget:
    tokens: list[int]  # the view
    prompt: list[int]
    target: list[int]  # the note, ending in its newline
    episode: tuple[str, int]  # (data set, episode): the unit of the held-out split
    isolated: list[list[int]] | None = None


def note_logits(model, examples: list[NoteTarget], pad_id: int = 0) -> list[torch.Tensor]:
    """Per example, [len(target), V] logits: row k predicts target token k."""
    sequences = [e.tokens + e.prompt + e.target[:-1] for e in examples]
    keep = max(len(e.target) for e in examples)
    logits = views_pass(model, sequences, pad_id, [e.isolated for e in examples], keep=keep)[0]
    if keep == 1:
        logits = logits.unsqueeze(1)
    return [logits[i, keep - len(e.target):] for i, e in enumerate(examples)]


def note_loss(model, examples: list[NoteTarget], pad_id: int = 0) -> torch.Tensor:
    """Mean cross-entropy over every note token of the batch."""
    rows = note_logits(model, examples, pad_id)
    logits = torch.cat(rows).float()
    targets = torch.tensor([t for e in examples for t in e.target], device=logits.device)
    return torch.nn.functional.cross_entropy(logits, targets)


@torch.no_grad()
def evaluate_notes(model, examples: list[NoteTarget], *, batch: int = 8, pad_id: int = 0) -> dict:
    """Held-out notes, teacher-forced: the share of note tokens the model's argmax gets right, and of notes it gets
    wholly right (what greedy decoding would write)."""
    model.eval()
    right = total = whole = 0
    for i in range(0, len(examples), batch):
        chunk = examples[i : i + batch]
        for e, rows in zip(chunk, note_logits(model, chunk, pad_id)):
            hits = (rows.argmax(-1).cpu() == torch.tensor(e.target)).tolist()
            right, total, whole = right + sum(hits), total + len(hits), whole + all(hits)
    return {"notes": len(examples), "token_accuracy": right / total if total else None,
            "exact": whole / len(examples) if examples else None}
