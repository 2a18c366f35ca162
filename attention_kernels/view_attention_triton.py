"""View attention as one Triton kernel: same interface and semantics as view_attention_torch.

One program per (query row, query head) walks the chunks of its view; per chunk it rotates q
in-kernel by delta = q_offset - chunk_offset (cos/sin of delta * inv_freq), then loops over
BLOCK_N keys of the chunk, limited to the causal range, merging blocks with an
online softmax in fp32. Runs on CUDA tensors, or on CPU tensors under TRITON_INTERPRET=1.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .view_layout import ViewLayout, check_attention_args


TWO_PI = tl.constexpr(6.283185307179586)
INV_TWO_PI = tl.constexpr(0.15915494309189535)


@triton.jit
def _view_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, inv_freq_ptr,
    q_view_ptr, q_pos_ptr, q_offset_ptr,
    view_chunk_ptr, chunk_slot_ptr, chunk_len_ptr, chunk_pos_ptr, chunk_offset_ptr,
    stride_qt, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_ot, stride_oh,
    scale,
    GROUPS: tl.constexpr, HALF: tl.constexpr, BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUPS
    half = tl.arange(0, HALF)
    keys = tl.arange(0, BLOCK_N)

    view = tl.load(q_view_ptr + row)
    q_pos = tl.load(q_pos_ptr + row)
    q_offset = tl.load(q_offset_ptr + row)
    inv_freq = tl.load(inv_freq_ptr + half).to(tl.float64)
    q_base = q_ptr + row * stride_qt + head * stride_qh
    q1 = tl.load(q_base + half).to(tl.float32)
    q2 = tl.load(q_base + HALF + half).to(tl.float32)

    m_i = tl.full([], -1.0e30, tl.float32)  # running max (finite: empty blocks never give inf - inf)
    l_i = tl.full([], 0.0, tl.float32)  # running sum of exp
    acc1 = tl.zeros([HALF], dtype=tl.float32)
    acc2 = tl.zeros([HALF], dtype=tl.float32)

    c_begin = tl.load(view_chunk_ptr + view)
    c_end = tl.load(view_chunk_ptr + view + 1)
    for c in range(c_begin, c_end):
        slot0 = tl.load(chunk_slot_ptr + c)
        n_keys = tl.load(chunk_len_ptr + c)
        pos0 = tl.load(chunk_pos_ptr + c)
        # Angle in fp64, reduced mod 2*pi, so offsets in the thousands keep fp32 accuracy.
        angle = (q_offset - tl.load(chunk_offset_ptr + c)).to(tl.float64) * inv_freq
        angle = (angle - tl.floor(angle * INV_TWO_PI) * TWO_PI).to(tl.float32)
        cos = tl.cos(angle)
        sin = tl.sin(angle)
        r1 = (q1 * cos - q2 * sin) * scale
        r2 = (q2 * cos + q1 * sin) * scale
        # Only keys with key_pos <= q_pos can matter.
        hi = tl.minimum(n_keys, q_pos - pos0 + 1)
        for start in range(0, hi, BLOCK_N):
            idx = start + keys
            valid = idx < hi
            slot = slot0 + idx
            k_off = slot[:, None] * stride_kn + kv_head * stride_kh + half[None, :]
            k1 = tl.load(k_ptr + k_off, mask=valid[:, None], other=0.0).to(tl.float32)
            k2 = tl.load(k_ptr + k_off + HALF, mask=valid[:, None], other=0.0).to(tl.float32)
            s = tl.sum(k1 * r1[None, :] + k2 * r2[None, :], axis=1)
            s = tl.where(valid, s, -1.0e30)
            m_new = tl.maximum(m_i, tl.max(s, axis=0))
            alpha = tl.exp(m_i - m_new)
            p = tl.where(valid, tl.exp(s - m_new), 0.0)
            v_off = slot[:, None] * stride_vn + kv_head * stride_vh + half[None, :]
            v1 = tl.load(v_ptr + v_off, mask=valid[:, None], other=0.0).to(tl.float32)
            v2 = tl.load(v_ptr + v_off + HALF, mask=valid[:, None], other=0.0).to(tl.float32)
            acc1 = acc1 * alpha + tl.sum(p[:, None] * v1, axis=0)
            acc2 = acc2 * alpha + tl.sum(p[:, None] * v2, axis=0)
            l_i = l_i * alpha + tl.sum(p, axis=0)
            m_i = m_new

    inv_l = tl.where(l_i > 0.0, 1.0 / tl.maximum(l_i, 1.0e-30), 0.0)  # no key: zeros
    o_base = out_ptr + row * stride_ot + head * stride_oh
    tl.store(o_base + half, (acc1 * inv_l).to(out_ptr.dtype.element_ty))
    tl.store(o_base + HALF + half, (acc2 * inv_l).to(out_ptr.dtype.element_ty))


def view_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    layout: ViewLayout,
    inv_freq: torch.Tensor,
    scale: float,
    *,
    prepared=None,
    block_n: int = 32,
) -> torch.Tensor:
    """Attention of q [T, Hq, D] over the chunks of each row's view; ``prepared`` is ignored."""
    del prepared  # the kernel reads the layout directly
    t, hq, d, hkv = check_attention_args(q, k_cache, v_cache, layout)
    if d % 2 or (d // 2) & (d // 2 - 1):
        raise ValueError(f"head_dim must be twice a power of two (64, 128, 256), got {d}")
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("k_cache and v_cache need a contiguous last dimension")
    q = q if q.stride(-1) == 1 else q.contiguous()
    out = torch.empty_like(q)
    if t == 0:
        return out
    inv_freq = inv_freq.to(device=q.device, dtype=torch.float32).contiguous()
    _view_attention_kernel[(t, hq)](
        q, k_cache, v_cache, out, inv_freq,
        layout.q_view, layout.q_pos, layout.q_offset,
        layout.view_chunk_ptr, layout.chunk_slot, layout.chunk_len, layout.chunk_pos, layout.chunk_offset,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), v_cache.stride(0), v_cache.stride(1),
        out.stride(0), out.stride(1),
        float(scale),
        GROUPS=hq // hkv, HALF=d // 2, BLOCK_N=block_n,
    )
    return out
