"""Candidate-command scores for a batch of views, as the action stream computes them at run time.

A command's score is the summed log-probability of its tokens after the view (CommandScorer's numbers). For
one-token commands that is one row of the last position's log-softmax; a multi-token command also reads the
rows of a sequence that continues the view with the command's prefix. Views of different lengths are padded
on the left, so every sequence ends at the same position and only the last few logits are computed.

Every view of a data set starts with the same system prompt (about half its tokens). The tokens all sequences of
a batch share are run once, and their keys and values serve every sequence (with gradients, so adapters learn
through them too): the same numbers as running each sequence whole, for about half the compute.
"""

from __future__ import annotations

import inspect
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


MIN_SHARED = 16  # below this many shared tokens a batch runs whole (the shared pass would not pay for itself)


def shared_prefix_length(sequences: list[list[int]]) -> int:
    """Tokens every sequence starts with, leaving each at least one token of its own."""
    n = min(len(s) for s in sequences) - 1
    first = sequences[0]
    for s in sequences[1:]:
        n = next((i for i in range(n) if s[i] != first[i]), n)
    return max(n, 0)


def _left_padded(sequences: list[list[int]], pad: int, device, *, start: int = 0):
    """ids, attention mask and positions of sequences padded on the left, positions counting from `start`."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, width - len(s):] = torch.tensor(s)
        mask[i, width - len(s):] = 1
    positions = (start + mask.cumsum(-1) - 1).clamp(min=start)
    return ids.to(device), mask.to(device), positions.to(device)


def _last_logits(model, sequences: list[list[int]], keep: int, pad_id: int) -> torch.Tensor:
    """The last `keep` logits of every sequence, the shared prefix run once."""
    device = next(model.parameters()).device
    shared = shared_prefix_length(sequences) if len(sequences) > 1 else 0
    if shared < MIN_SHARED:
        ids, mask, positions = _left_padded(sequences, pad_id, device)
        return model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep,
                     use_cache=False).logits
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)  # filled in place by the prefix pass
    as_cache = {_cache_keyword(model): cache}
    model(input_ids=torch.tensor([sequences[0][:shared]], device=device), logits_to_keep=1, use_cache=True, **as_cache)
    cache.batch_repeat_interleave(len(sequences))
    ids, mask, positions = _left_padded([s[shared:] for s in sequences], pad_id, device, start=shared)
    mask = torch.cat([torch.ones(len(sequences), shared, dtype=mask.dtype, device=device), mask], dim=1)
    return model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep, use_cache=True,
                 **as_cache).logits


def _cache_keyword(model) -> str:
    """transformers 5.x renames past_key_values to cache (the old name warns, then goes in 5.40)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def candidate_scores(model, views: list[list[int]], candidates: Candidates, *, pad_id: int = 0) -> torch.Tensor:
    """[len(views), len(candidates)] summed log-probabilities of each candidate after each view."""
    prefixes = candidates.prefixes
    keep = max(len(p) for p in prefixes) + 1
    sequences = [view + list(prefix) for view in views for prefix in prefixes]
    logits = _last_logits(model, sequences, keep, pad_id)
    logprobs = torch.log_softmax(logits.float(), dim=-1).view(len(views), len(prefixes), keep, -1)
    columns = []
    for tokens in candidates.tokens:
        j = prefixes.index(tokens[:-1]) if len(tokens) > 1 else 0
        k = len(tokens) - 1  # sequence j ends with the prefix: row i - k - 1 predicts token i
        score = sum(logprobs[:, j, keep + i - k - 1, t] for i, t in enumerate(tokens))
        columns.append(score)
    return torch.stack(columns, dim=-1)
