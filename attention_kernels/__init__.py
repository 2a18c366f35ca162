"""View attention kernels: a torch reference and a Triton kernel. Knows nothing of agent_runtime."""

from __future__ import annotations

import os

import torch

from .rope import cos_sin, rotate
from .view_attention_torch import PreparedViewAttention, prepare_view_attention, view_attention_torch
from .view_layout import ViewLayout

__all__ = [
    "PreparedViewAttention",
    "ViewLayout",
    "cos_sin",
    "prepare_view_attention",
    "rotate",
    "view_attention",
    "view_attention_torch",
]


def view_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    layout: ViewLayout,
    inv_freq: torch.Tensor,
    scale: float,
    *,
    prepared: PreparedViewAttention | None = None,
    backend: str = "torch",
) -> torch.Tensor:
    """Dispatch to the torch reference or the Triton kernel (same semantics)."""
    if backend == "torch":
        return view_attention_torch(q, k_cache, v_cache, layout, inv_freq, scale, prepared=prepared)
    if backend == "triton":
        if q.device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError(
                "backend='triton' needs CUDA tensors, or TRITON_INTERPRET=1 set before triton is imported "
                "to run on CPU tensors (slow; for tests only). Use backend='torch' on CPU."
            )
        from .view_attention_triton import view_attention_triton

        return view_attention_triton(q, k_cache, v_cache, layout, inv_freq, scale, prepared=prepared)
    raise ValueError(f"unknown view attention backend {backend!r}; expected 'torch' or 'triton'")
