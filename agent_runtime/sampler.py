"""Token sampling, one way for every stream and agent: softmax at a temperature, drawn from a seeded generator."""

from __future__ import annotations

import torch

MIN_TEMPERATURE = 1e-4  # 0 means greedy in spirit; dividing by it must not overflow


class Sampler:
    def __init__(self, temperature: float, seed: int = 0):
        self.temperature = max(temperature, MIN_TEMPERATURE)
        self.rng = torch.Generator().manual_seed(seed)

    def __call__(self, logits: torch.Tensor) -> int:
        probs = torch.softmax(logits / self.temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=self.rng))
