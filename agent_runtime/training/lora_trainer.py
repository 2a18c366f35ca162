"""LoRA imitation of the expert: cross-entropy over the action stream's candidate commands, class-balanced, of the
planner: token cross-entropy of its notes after the Thinker's view, and of the describer: of its remarks after the
commentary's view, in the same adapter.

The model learns to score the expert's command highest among exactly the candidates the action stream compares
at run time (candidate_scores), from exactly the tokens its view read (the DAgger data set). Only the upper layers
get adapters, so backpropagation stops there; batches weigh every expert command (whatever its hold) equally, so
a frequent one (turning while nothing is in view) cannot drown the rare ones. Where the data holds notes (remarks),
every step adds a batch of them (note_scores.py): one adapter serves every stream, and they share the forward.
"""

import random
from collections import Counter
from dataclasses import dataclass, field

import torch

from agent_runtime.model.adapters import peft_quietly
from agent_runtime.training.command_scores import Candidates, candidate_scores
from agent_runtime.training.note_scores import NoteTarget, evaluate_notes, note_loss

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class TrainSettings:
    steps: int = 300
    batch: int = 8
    lr: float = 3e-4
    rank: int = 16
    alpha: int = 32
    layers_from: int | None = None  # adapters on layers [layers_from, n); None: the upper half
    held_out: float = 0.1  # fraction of episodes (of decisions when there is one episode) kept for evaluation
    seed: int = 0
    eval_every: int = 25
    eval_examples: int = 160  # the evaluations along the way score a fixed sample of the held-out set (the last: all)


@dataclass
class Example:
    tokens: list[int]
    label: int  # index into the candidates
    episode: tuple[str, int]  # (data set, episode): the unit of the held-out split
    isolated: list[list[int]] | None = None  # the view's isolated spans (None: data sets from before they were kept)


@dataclass
class TrainHistory:
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    note_losses: list[float] = field(default_factory=list)  # the notes' part of each step's loss (none: no notes)
    remark_losses: list[float] = field(default_factory=list)  # the remarks' part (none: no remarks)
    final: dict | None = None  # evaluate()'s answer on the whole held-out set after the last step
    final_notes: dict | None = None  # evaluate_notes() on the held-out notes after the last step
    final_remarks: dict | None = None  # evaluate_notes() on the held-out remarks after the last step


def split(examples: list[Example], held_out: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Whole episodes go to the held-out set (decisions of one episode are alike); one episode: decisions."""
    keys = [e.episode for e in examples]
    if len(set(keys)) < 2:
        keys = list(range(len(examples)))
    units = sorted(set(keys))
    random.Random(seed).shuffle(units)
    test = set(units[: max(1, round(held_out * len(units)))])
    return [e for e, k in zip(examples, keys) if k not in test], [e for e, k in zip(examples, keys) if k in test]


def eval_sample(test_set: list[Example], size: int, seed: int) -> list[Example]:
    """A fixed sample of the held-out set for the curve: scoring all of it every eval_every steps took more time
    than the training steps themselves (~50 s for 535 decisions on a 2-core CPU, against 1.6 s a step)."""
    return random.Random(seed).sample(test_set, size) if len(test_set) > size else test_set


def balanced_batches(examples: list[Example], batch: int, seed: int, group=lambda e: e.label):
    """Endless batches drawn with equal weight per group (default: per label; each group's examples uniformly)."""
    rng = random.Random(seed)
    by_label: dict = {}
    for e in examples:
        by_label.setdefault(group(e), []).append(e)
    labels = sorted(by_label)
    while True:
        yield [rng.choice(by_label[rng.choice(labels)]) for _ in range(batch)]


def with_adapters(model, settings: TrainSettings):
    """The model wrapped by peft with LoRA on the upper layers' linears; everything else frozen."""
    from peft import LoraConfig, get_peft_model

    layers = model.config.num_hidden_layers
    start = layers // 2 if settings.layers_from is None else settings.layers_from
    torch.manual_seed(settings.seed)  # LoRA's A matrices start random: the seed makes the adapter reproducible
    config = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=0.0, bias="none",
                        target_modules=list(LORA_TARGETS), layers_to_transform=list(range(start, layers)))
    with peft_quietly():
        return get_peft_model(model, config)


@torch.no_grad()
def evaluate(model, examples: list[Example], candidates: Candidates, *, batch: int = 8, pad_id: int = 0) -> dict:
    """Held-out accuracy (the exact candidate, hold included) overall and per expert command, and of the command
    alone (any hold)."""
    model.eval()
    hits, totals, same_command = Counter(), Counter(), 0
    for i in range(0, len(examples), batch):
        chunk = examples[i : i + batch]
        predicted = candidate_scores(model, [e.tokens for e in chunk], candidates, pad_id=pad_id,
                                     isolated=[e.isolated for e in chunk]).argmax(-1)
        for e, p in zip(chunk, predicted.tolist()):
            name = candidates.names[e.label]
            totals[name] += 1
            hits[name] += p == e.label
            same_command += candidates.names[p] == name
    total = sum(totals.values())
    return {"accuracy": sum(hits.values()) / total if total else None, "examples": total,
            "command_accuracy": same_command / total if total else None,
            "per_command": {n: hits[n] / totals[n] for n in sorted(totals)}}


def train(model, train_set: list[Example], test_set: list[Example], candidates: Candidates,
          settings: TrainSettings, *, pad_id: int = 0, progress=None,
          notes: tuple[list[NoteTarget], list[NoteTarget]] = ((), ()),
          remarks: tuple[list[NoteTarget], list[NoteTarget]] = ((), ())) -> TrainHistory:
    """AdamW on the adapters; `progress(step, loss, accuracy_or_None)` after every step. notes: (training, held-out)
    Thinker notes; each step adds the token cross-entropy of a batch of them to the commands'; remarks, the
    describer's remarks after the commentary's view, likewise."""
    torch.manual_seed(settings.seed)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.lr)
    history = TrainHistory()
    batches = balanced_batches(train_set, settings.batch, settings.seed, group=lambda e: candidates.names[e.label])
    texts = [(balanced_batches(part[0], settings.batch, settings.seed, group=lambda e: 0), losses)
             for part, losses in ((notes, history.note_losses), (remarks, history.remark_losses)) if part[0]]
    sample = eval_sample(test_set, settings.eval_examples, settings.seed)
    for step in range(1, settings.steps + 1):
        model.train()
        chunk = next(batches)
        scores = candidate_scores(model, [e.tokens for e in chunk], candidates, pad_id=pad_id,
                                  isolated=[e.isolated for e in chunk])
        loss = torch.nn.functional.cross_entropy(scores, torch.tensor([e.label for e in chunk]))
        for text_batches, losses in texts:  # the notes' and the remarks' token cross-entropy
            part = note_loss(model, next(text_batches), pad_id)
            losses.append(part.item())
            loss = loss + part
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        history.steps.append(step)
        history.losses.append(loss.item())
        accuracy = None
        if test_set and (step % settings.eval_every == 0 or step == settings.steps):
            result = evaluate(model, sample if step < settings.steps else test_set, candidates,
                              batch=settings.batch, pad_id=pad_id)
            accuracy = result["accuracy"]
            if step == settings.steps:
                history.final = result
            history.eval_steps.append(step)
            history.accuracies.append(accuracy)
        if progress is not None:
            progress(step, history.losses[-1], accuracy)
    if notes[1]:
        history.final_notes = evaluate_notes(model, list(notes[1]), batch=settings.batch, pad_id=pad_id)
    if remarks[1]:
        history.final_remarks = evaluate_notes(model, list(remarks[1]), batch=settings.batch, pad_id=pad_id)
    return history
