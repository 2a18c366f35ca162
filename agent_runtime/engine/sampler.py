"""Token sampling, one way for every stream and agent: softmax at a temperature, drawn from a seeded generator."""

import torch

MIN_TEMPERATURE = 1e-4  # 0 means greedy in spirit; dividing by it must not overflow


def sampler(temperature: float, seed: int = 0):
    """sample(logits) -> token id (streams that share one draw from its generator in turn: runs repeat with the seed)."""
    temperature, rng = max(temperature, MIN_TEMPERATURE), torch.Generator().manual_seed(seed)
    return lambda logits: int(torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=rng))
