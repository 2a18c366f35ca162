"""Candidate-command scores for a batch of views, as the action stream computes them at run time.

A command's score is the summed log-probability of its tokens after the view (CommandScorer's numbers). For
one-token commands that is one row of the last position's log-softmax; a multi-token command also reads the
rows of a sequence that continues the view with the command's prefix. Views of different lengths are padded
on the left, so every sequence ends at the same position and only the last few logits are computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Candidates:
    """The commands the action stream chooses among: names and token ids, in the grammar's order."""

    names: tuple[str, ...]
    tokens: tuple[tuple[int, ...], ...]

    @classmethod
    def from_grammar(cls, grammar, tokenizer) -> "Candidates":
        pairs = grammar.candidates(tokenizer)
        return cls(tuple(c.name for c, _ in pairs), tuple(tuple(t) for _, t in pairs))

    @property
    def prefixes(self) -> list[tuple[int, ...]]:
        """Distinct continuations a batch needs: () for the view itself, then each multi-token prefix."""
        out = [()]
        for tokens in self.tokens:
            if len(tokens) > 1 and tokens[:-1] not in out:
                out.append(tokens[:-1])
        return out


def _left_padded(sequences: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, width - len(s):] = torch.tensor(s)
        mask[i, width - len(s):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device)


def candidate_scores(model, views: list[list[int]], candidates: Candidates, *, pad_id: int = 0) -> torch.Tensor:
    """[len(views), len(candidates)] summed log-probabilities of each candidate after each view."""
    device = next(model.parameters()).device
    prefixes = candidates.prefixes
    keep = max(len(p) for p in prefixes) + 1
    sequences = [view + list(prefix) for view in views for prefix in prefixes]
    ids, mask, positions = _left_padded(sequences, pad_id, device)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep, use_cache=False)
    logprobs = torch.log_softmax(out.logits.float(), dim=-1).view(len(views), len(prefixes), keep, -1)
    columns = []
    for tokens in candidates.tokens:
        j = prefixes.index(tokens[:-1]) if len(tokens) > 1 else 0
        k = len(tokens) - 1  # sequence j ends with the prefix: row i - k - 1 predicts token i
        score = sum(logprobs[:, j, keep + i - k - 1, t] for i, t in enumerate(tokens))
        columns.append(score)
    return torch.stack(columns, dim=-1)
