"""Rotary position embedding in the Hugging Face non-interleaved convention.

R(θ)x = x*cos(θ f) + rotate_half(x)*sin(θ f), f = cat(inv_freq, inv_freq). ``inv_freq``
already carries any frequency scaling; magnitude scaling (attention_scaling) is never
applied here, because offset rotations must stay pure rotations.
"""

from __future__ import annotations

import torch


def cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype | None = None):
    """cos and sin of ``positions * inv_freq`` as [..., D/2] tables.

    The angles are formed in float64 so that large positions lose no precision; the tables
    are then cast to ``dtype`` (default: inv_freq's dtype).
    """
    positions = torch.as_tensor(positions, device=inv_freq.device)
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq.to(torch.float64)
    dtype = dtype or inv_freq.dtype
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [..., D] with half-size tables cos/sin [..., D/2] (broadcastable)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rotate(x: torch.Tensor, positions, inv_freq: torch.Tensor) -> torch.Tensor:
    """R(positions) x; ``positions`` broadcasts against x.shape[:-1]. Keeps x's dtype."""
    cos, sin = cos_sin(positions, inv_freq, dtype=x.dtype)
    return rotate_half_tables(x, cos, sin)
