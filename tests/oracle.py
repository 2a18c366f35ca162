"""Independent oracle for view attention: a plain transformers eager forward over the concatenated tokens.

Blocks that were computed on their own (their tokens saw only their own block) get a block-diagonal mask;
every other token sees all tokens before it. Positions are ordinary 0..N-1.
"""

from __future__ import annotations

import copy

import torch


class HFOracle:
    def __init__(self, model):
        self.model = copy.deepcopy(model)
        self.model.set_attn_implementation("eager")

    @torch.inference_mode()
    def logits(self, segments: list[tuple[list[int], bool]]) -> torch.Tensor:
        """segments: (tokens, isolated). Isolated segments' tokens attend only within the segment."""
        tokens = [t for seg, _ in segments for t in seg]
        n = len(tokens)
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        start = 0
        for seg, isolated in segments:
            end = start + len(seg)
            if isolated:
                allowed[start:end, :start] = False
            start = end
        dtype = next(self.model.parameters()).dtype
        mask = torch.zeros(1, 1, n, n, dtype=dtype)
        mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        out = self.model(
            input_ids=torch.tensor([tokens]),
            position_ids=torch.arange(n)[None],
            attention_mask=mask,
            use_cache=False,
        )
        return out.logits[0].float()
