"""View attention in plain torch: the CPU production path and the reference for Triton.

Two batched strategies, each a constant handful of torch ops per layer whatever the number of
views or chunks; ``prepare_view_attention`` picks one from a cost estimate:

- "gather": keys of view v are gathered into row v of a padded [V, Hkv, S_max, D] tensor,
  re-rotated by their chunk offset, and one scaled_dot_product_attention with a boolean mask
  does every view at once. Cost grows with V * S_max: best when views share few slots.
- "direct": no gather at all. Each row's query is rotated once per chunk of its view
  ([T, Cmax] rotations), scored against the whole referenced cache range, and each slot keeps
  the score of the chunk that holds it in the row's view. Cost grows with T * Cmax * N: best
  when views share most slots (Hogwild!: every view sees every block, in its own order).

Query heads of one KV group are folded into the row axis, so GQA needs no key expansion.
Everything that depends only on the layout (indices, mask, cos/sin tables) is built once per
engine step and reused by all layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .rope import cos_sin
from .view_layout import ViewLayout


@dataclass
class PreparedViewAttention:
    """Layout-only tensors shared by every layer of one engine step."""

    num_views: int
    rows_max: int  # R_max: most query rows of one view
    keys_max: int  # S_max: most keys of one view
    key_slot: torch.Tensor  # [V, S_max] cache slot of each view key (0 where padding)
    key_cos: torch.Tensor  # [V, 1, S_max, D/2] rotation by chunk offset
    key_sin: torch.Tensor
    q_cos: torch.Tensor  # [T, 1, 1, D/2] rotation by q offset
    q_sin: torch.Tensor
    row_slot: torch.Tensor  # [T] index of row t in the padded [V * R_max] row grid
    mask: torch.Tensor  # [V, R_max, S_max] allowed keys; empty rows set all-True
    row_has_key: torch.Tensor  # [T, 1, 1] 1.0 where the row sees a key, 0.0 where it sees none
    window: int | None
    _mask_by_group: dict = field(default_factory=dict, repr=False)
    _index_by_heads: dict = field(default_factory=dict, repr=False)

    def grouped_mask(self, groups: int) -> torch.Tensor:
        """Mask [V, 1, G*R_max, S_max] for G query heads per KV head (cached per G)."""
        m = self._mask_by_group.get(groups)
        if m is None:
            v, r, s = self.mask.shape
            m = self.mask[:, None, None].expand(v, 1, groups, r, s).reshape(v, 1, groups * r, s)
            self._mask_by_group[groups] = m
        return m

    def gather_index(self, kv_heads: int) -> torch.Tensor:
        """Row indices into a [N * Hkv, D] view of the cache, laid out [V, Hkv, S_max] (cached)."""
        idx = self._index_by_heads.get(kv_heads)
        if idx is None:
            heads = torch.arange(kv_heads, device=self.key_slot.device)
            idx = (self.key_slot[:, None, :] * kv_heads + heads[None, :, None]).reshape(-1)
            self._index_by_heads[kv_heads] = idx
        return idx


def _rank_within_group(group: torch.Tensor) -> torch.Tensor:
    """For each element, how many earlier elements share its group id (stable order)."""
    n = group.numel()
    if n == 0:
        return group.clone()
    order = torch.sort(group, stable=True).indices
    sorted_group = group[order]
    idx = torch.arange(n, device=group.device)
    is_start = torch.ones(n, dtype=torch.bool, device=group.device)
    is_start[1:] = sorted_group[1:] != sorted_group[:-1]
    start = torch.cummax(torch.where(is_start, idx, torch.zeros_like(idx)), 0).values
    rank = torch.empty_like(group)
    rank[order] = idx - start
    return rank


def prepare_view_attention(
    layout: ViewLayout, inv_freq: torch.Tensor, *, window: int | None = None, dtype: torch.dtype = torch.float32
) -> PreparedViewAttention:
    """Build the per-step tables (indices, mask, cos/sin); cos/sin are cast to ``dtype``."""
    if window is not None and window <= 0:
        raise ValueError(f"window must be positive or None, got {window}")
    dev = layout.device
    inv_freq = inv_freq.to(dev)
    num_views = layout.num_views
    num_chunks = layout.num_chunks

    # Flat per-key arrays, chunks in view order.
    chunk_view = torch.repeat_interleave(
        torch.arange(num_views, device=dev), layout.view_chunk_ptr[1:] - layout.view_chunk_ptr[:-1]
    )
    lens = layout.chunk_len
    total = int(lens.sum()) if num_chunks else 0
    key_chunk = torch.repeat_interleave(torch.arange(num_chunks, device=dev), lens)
    chunk_start = torch.cumsum(lens, 0) - lens  # flat index of each chunk's first key
    within_chunk = torch.arange(total, device=dev) - chunk_start[key_chunk]
    view_len = torch.zeros(num_views, dtype=torch.int64, device=dev).index_add_(0, chunk_view, lens)
    view_start = torch.cumsum(view_len, 0) - view_len
    key_view = chunk_view[key_chunk]
    within_view = torch.arange(total, device=dev) - view_start[key_view]
    keys_max = max(int(view_len.max()) if num_views else 0, 1)

    flat = key_view * keys_max + within_view
    grid = num_views * keys_max
    key_slot = torch.zeros(grid, dtype=torch.int64, device=dev)
    key_slot[flat] = layout.chunk_slot[key_chunk] + within_chunk
    key_pos = torch.zeros(grid, dtype=torch.int64, device=dev)
    key_pos[flat] = layout.chunk_pos[key_chunk] + within_chunk
    key_off = torch.zeros(grid, dtype=torch.int64, device=dev)
    key_off[flat] = layout.chunk_offset[key_chunk]
    key_valid = torch.zeros(grid, dtype=torch.bool, device=dev)
    key_valid[flat] = True
    key_cos, key_sin = cos_sin(key_off.view(num_views, 1, keys_max), inv_freq, dtype)

    # Query rows into a padded [V, R_max] grid.
    rank = _rank_within_group(layout.q_view)
    rows_max = max(int(rank.max()) + 1 if layout.num_rows else 0, 1)
    row_slot = layout.q_view * rows_max + rank
    row_pos = torch.full((num_views * rows_max,), -1, dtype=torch.int64, device=dev)
    row_pos[row_slot] = layout.q_pos
    row_pos = row_pos.view(num_views, rows_max, 1)
    kp = key_pos.view(num_views, 1, keys_max)
    mask = key_valid.view(num_views, 1, keys_max) & (kp <= row_pos)
    if window is not None:
        mask &= row_pos - kp < window
    has_key = mask.any(-1, keepdim=True)
    mask |= ~has_key  # all-True rows keep SDPA finite; their output is zeroed afterwards
    row_has_key = has_key.view(-1)[row_slot].to(dtype).view(-1, 1, 1)
    q_cos, q_sin = cos_sin(layout.q_offset.view(-1, 1, 1), inv_freq, dtype)

    return PreparedViewAttention(
        num_views=num_views,
        rows_max=rows_max,
        keys_max=keys_max,
        key_slot=key_slot.view(num_views, keys_max),
        key_cos=key_cos,
        key_sin=key_sin,
        q_cos=q_cos,
        q_sin=q_sin,
        row_slot=row_slot,
        mask=mask,
        row_has_key=row_has_key,
        window=window,
    )


def _rotate_into(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF rotation with half tables, written with few passes over a large x."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    out = torch.empty_like(x)
    o1, o2 = out[..., :half], out[..., half:]
    torch.mul(x1, cos, out=o1)
    o1.addcmul_(x2, sin, value=-1)
    torch.mul(x2, cos, out=o2)
    o2.addcmul_(x1, sin)
    return out


def view_attention_torch(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    layout: ViewLayout,
    inv_freq: torch.Tensor,
    scale: float,
    *,
    window: int | None = None,
    prepared: PreparedViewAttention | None = None,
) -> torch.Tensor:
    """Attention of q [T, Hq, D] over the chunks of each row's view; returns [T, Hq, D] in q's dtype."""
    t, hq, d = q.shape
    n, hkv, dk = k_cache.shape
    if dk != d or v_cache.shape != k_cache.shape:
        raise ValueError(f"shape mismatch: q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}")
    if hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of kv heads ({hkv})")
    if t != layout.num_rows:
        raise ValueError(f"q has {t} rows, layout has {layout.num_rows}")
    if prepared is None:
        prepared = prepare_view_attention(layout, inv_freq, window=window, dtype=q.dtype)
    elif prepared.window != window:
        raise ValueError(f"prepared for window={prepared.window}, called with window={window}")
    g = hq // hkv
    nv, r, s = prepared.num_views, prepared.rows_max, prepared.keys_max
    dt = q.dtype

    # Queries: rotate by q_offset, scatter into [V, Hkv, G*R, D].
    qr = _rotate_into(q.view(t, hkv, g, d), prepared.q_cos.to(dt), prepared.q_sin.to(dt))
    qgrid = qr.new_zeros(nv * r, hkv, g, d).index_copy_(0, prepared.row_slot, qr)
    qgrid = qgrid.view(nv, r, hkv, g, d).permute(0, 2, 3, 1, 4).reshape(nv, hkv, g * r, d)

    # Keys/values: one gather each, straight into SDPA layout; keys rotated by chunk offset.
    idx = prepared.gather_index(hkv)
    kg = k_cache.reshape(n * hkv, d).index_select(0, idx).view(nv, hkv, s, d)
    vg = v_cache.reshape(n * hkv, d).index_select(0, idx).view(nv, hkv, s, d)
    kg = _rotate_into(kg.to(dt), prepared.key_cos.to(dt), prepared.key_sin.to(dt))

    out = F.scaled_dot_product_attention(
        qgrid, kg, vg.to(dt), attn_mask=prepared.grouped_mask(g), scale=scale
    )  # [V, Hkv, G*R, D]
    out = out.view(nv, hkv, g, r, d).permute(0, 3, 1, 2, 4).reshape(nv * r, hq, d)
    return out.index_select(0, prepared.row_slot) * prepared.row_has_key.to(dt)
