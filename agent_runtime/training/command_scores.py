"""Candidate-command scores for a batch of views, as the action stream computes them at run time.

A command's score is the summed log-probability of its tokens after the view (CommandScorer's numbers); a
multi-token command (a word with its hold count) also reads its prefix, run as a continuation from the view's
cache. Views are padded on the left, so all end at the same position and only the scored logits are computed.

The tokens all views of a batch share (the system prompt, about half of them) run once and serve every view, with
gradients: the same numbers for about half the compute. The runtime prefills some blocks (frame line, status, user
text, system prompt) attending only to themselves; views carry them (View.isolated_spans) and are masked to match.
"""

import inspect
import os
from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence
from transformers import DynamicCache


@dataclass(frozen=True)
class Candidates:
    """The commands the action stream chooses among: names, texts ("TURN_LEFT 3") and token ids, in the grammar's
    order. With hold counts a name has a candidate per hold."""

    names: tuple[str, ...]
    tokens: tuple[tuple[int, ...], ...]
    texts: tuple[str, ...]

    @classmethod
    def from_grammar(cls, grammar, tokenizer) -> "Candidates":
        pairs = grammar.candidates(tokenizer)
        return cls(tuple(c.name for c, _ in pairs), tuple(tuple(t) for _, t in pairs), tuple(c.text for c, _ in pairs))

    def index(self, name: str, tics: int) -> int:
        """The candidate for the expert's (command, hold): that exact hold where it is one, else the command's only one."""
        text = f"{name} {tics}"
        return self.texts.index(text) if text in self.texts else self.names.index(name)

    @property
    def branches(self) -> list[tuple[int, ...]]:
        """The distinct multi-token commands' prefixes: the continuations a batch runs after every view."""
        return list(dict.fromkeys(tokens[:-1] for tokens in self.tokens if len(tokens) > 1))


MIN_SHARED = 16  # below this many shared tokens a batch runs whole (the shared pass would not pay for itself)


def shared_prefix_length(sequences: list[list[int]]) -> int:
    """Tokens every sequence starts with, leaving each at least one token of its own."""
    return max(min(len(os.path.commonprefix(sequences)), min(len(s) for s in sequences) - 1), 0)


def _left_padded(sequences: list[list[int]], pad: int, device, *, start: int = 0):
    """ids, attention mask and positions of sequences padded on the left, positions counting from `start`."""
    rows = [torch.tensor(s, dtype=torch.long) for s in sequences]
    ids = pad_sequence(rows, batch_first=True, padding_value=pad, padding_side="left")
    mask = pad_sequence([torch.ones_like(row) for row in rows], batch_first=True, padding_side="left")
    positions = (start + mask.cumsum(-1) - 1).clamp(min=start)
    return ids.to(device), mask.to(device), positions.to(device)


def _shared_length(views: list[list[int]], isolated: list | None, keep: int = 1) -> int:
    """The shared run, stopped where a later isolated span starts (its tokens must not attend what precedes it), and
    leaving each view its last `keep` positions (the ones whose logits are read)."""
    shared = min(shared_prefix_length(views), min(len(v) for v in views) - keep) if len(views) > 1 else 0
    starts = [s for spans in (isolated or []) for s, _ in (spans or []) if s > 0]
    shared = min([shared] + starts)
    return shared if shared >= MIN_SHARED else 0


def _block_mask(key_mask: torch.Tensor, views: list[list[int]], isolated: list, shared: int, dtype) -> torch.Tensor:
    """[B, 1, width, shared + width] additive mask: causal over non-padding keys, and a query inside an isolated span
    sees only that span's keys (a padding query sees itself, so no row is empty)."""
    batch, total = key_mask.shape
    width = total - shared
    query_abs = torch.arange(shared, total).unsqueeze(1)  # query rows, in the padded key coordinates
    key_abs = torch.arange(total).unsqueeze(0)
    keys = key_mask.bool().cpu()
    allowed = (key_abs <= query_abs).unsqueeze(0) & keys.unsqueeze(1)  # [B, width, total]
    for i, (view, spans) in enumerate(zip(views, isolated)):
        offset = total - len(view)  # view token t >= shared sits at key t + offset (left padding)
        for start, end in spans or []:
            if start > 0:  # a span from 0 sees nothing before it anyway; later ones start past the shared run
                allowed[i, start + offset - shared: end + offset - shared, : start + offset] = False
        allowed[i, torch.arange(width), torch.arange(shared, total)] |= ~keys[i, shared:]
    out = torch.zeros(batch, 1, width, total, dtype=dtype)
    return out.masked_fill(~allowed.unsqueeze(1), torch.finfo(dtype).min).to(key_mask.device)


def views_pass(model, views: list[list[int]], pad_id: int, isolated: list | None = None, keep: int = 1):
    """Every view once (the tokens all views share run once), left-padded: the last position's logits [B, V] (keep >
    1: the last `keep` positions', [B, keep, V]), the cache over the views, its attention mask and each view's last
    position."""
    device = next(model.parameters()).device
    cache = DynamicCache(config=model.config)  # filled in place
    as_cache, shared = {_cache_keyword(model): cache}, _shared_length(views, isolated, keep)
    if shared:
        model(input_ids=torch.tensor([views[0][:shared]], device=device), logits_to_keep=1, use_cache=True, **as_cache)
        cache.batch_repeat_interleave(len(views))
    ids, mask, positions = _left_padded([v[shared:] for v in views], pad_id, device, start=shared)
    mask = torch.cat([torch.ones(len(views), shared, dtype=mask.dtype, device=device), mask], dim=1)
    attention = (_block_mask(mask, views, isolated, shared, next(model.parameters()).dtype) if any(isolated or [])
                 else mask)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, logits_to_keep=keep,
                   use_cache=True, **as_cache).logits
    return logits[:, -1] if keep == 1 else logits, cache, mask, positions[:, -1]


def _branches_pass(model, cache, mask, last_positions, branches: list[tuple[int, ...]], pad_id: int) -> torch.Tensor:
    """Each branch (a command's prefix) continued after every view from the views' cache: [B, P, width, V] logits,
    row k predicting the branch's token k + 1 (rows past a short branch are padding)."""
    views, n = mask.shape[0], len(branches)
    width, device = max(len(b) for b in branches), mask.device
    cache.batch_repeat_interleave(n)  # view-major: view 0's branches, then view 1's, ...
    ids = torch.tensor([list(b) + [pad_id] * (width - len(b)) for b in branches] * views, device=device)
    full_mask = torch.cat([mask.repeat_interleave(n, dim=0), torch.ones(views * n, width, dtype=mask.dtype,
                                                                        device=device)], dim=1)
    positions = last_positions.repeat_interleave(n).unsqueeze(1) + 1 + torch.arange(width, device=device)
    return model(input_ids=ids, attention_mask=full_mask, position_ids=positions, logits_to_keep=width,
                 use_cache=True, **{_cache_keyword(model): cache}).logits.view(views, n, width, -1)


def _cache_keyword(model) -> str:
    """transformers 5.x renames past_key_values to cache (the old name warns, then goes in 5.40)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def candidate_scores(model, views: list[list[int]], candidates: Candidates, *, pad_id: int = 0,
                     isolated: list | None = None) -> torch.Tensor:
    """[len(views), len(candidates)] summed log-probabilities of each candidate after each view, the prefixes
    (" left", the space before a hold count) run once per view as the action stream's branches do at run time.
    isolated: per view, its isolated spans (None: a plain causal forward, how data sets before them trained)."""
    view_logits, cache, mask, last = views_pass(model, views, pad_id, isolated)
    first = torch.log_softmax(view_logits.float(), dim=-1)  # [B, V]
    branches = candidates.branches
    rows = (torch.log_softmax(_branches_pass(model, cache, mask, last, branches, pad_id).float(), dim=-1)
            if branches else None)
    columns = []
    for tokens in candidates.tokens:
        score = first[:, tokens[0]]
        if len(tokens) > 1:  # the branch of its prefix: row i - 1 predicts token i
            j = branches.index(tokens[:-1])
            score = score + sum(rows[:, j, i - 1, t] for i, t in enumerate(tokens[1:], start=1))
        columns.append(score)
    return torch.stack(columns, dim=-1)
