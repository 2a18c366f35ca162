"""attention_kernels.rope against transformers' RoPE, and the rotation identities view attention relies on."""

from __future__ import annotations

import pytest
import torch

from attention_kernels.rope import cos_sin, rotate

from test_view_attention_torch import hf_rotate64, make_inv_freq


@pytest.mark.parametrize("rope_type", ["default", "linear", "llama3"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_rotate_matches_transformers(rope_type, d):
    inv_freq = make_inv_freq(rope_type, d)
    x = torch.randn(7, 3, d, dtype=torch.float64)
    pos = torch.tensor([0, 1, 5, 17, 100, 2047, 3])
    ours = rotate(x, pos[:, None], inv_freq)
    torch.testing.assert_close(ours, hf_rotate64(x, pos, inv_freq), atol=1e-12, rtol=0)


def test_rotate_keeps_dtype_and_broadcasts():
    inv_freq = make_inv_freq("default", 64)
    x = torch.randn(4, 2, 64)
    out = rotate(x, 3, inv_freq)
    assert out.dtype == torch.float32 and out.shape == x.shape
    torch.testing.assert_close(out, rotate(x, torch.full((4, 2), 3), inv_freq))


def test_rotations_compose_and_relative_dot_product():
    inv_freq = make_inv_freq("llama3", 64)
    q = torch.randn(64, dtype=torch.float64)
    k = torch.randn(64, dtype=torch.float64)
    torch.testing.assert_close(rotate(rotate(q, 5, inv_freq), -12, inv_freq), rotate(q, -7, inv_freq))
    # R(a)q . R(b)k = R(a - b)q . k
    lhs = rotate(q, 30, inv_freq) @ rotate(k, 11, inv_freq)
    rhs = rotate(q, 19, inv_freq) @ k
    torch.testing.assert_close(lhs, rhs)
    # Pure rotation: the norm is kept (no attention_scaling ever).
    torch.testing.assert_close(rotate(q, 1234, inv_freq).norm(), q.norm())


def test_cos_sin_uses_fp64_angles():
    inv_freq = torch.tensor([1.0, 0.1], dtype=torch.float32)
    cos, sin = cos_sin(torch.tensor([100000]), inv_freq)
    assert cos.dtype == torch.float32 and cos.shape == (1, 2)
    exact = torch.tensor([100000.0], dtype=torch.float64)[:, None] * inv_freq.double()
    torch.testing.assert_close(cos.double(), exact.cos(), atol=1e-7, rtol=0)
    torch.testing.assert_close(sin.double(), exact.sin(), atol=1e-7, rtol=0)
