"""View attention in plain torch: the CPU production path and the reference for Triton.

Batched strategies, each a constant handful of torch ops per layer whatever the number of views
or chunks; ``prepare_view_attention`` picks one per engine step from a cost estimate:

- "gather": keys of view v are gathered into row v of a padded [V, Hkv, S_max, D] tensor,
  re-rotated by their chunk offset, and one scaled_dot_product_attention with a boolean mask
  does every view at once. Cost grows with V * S_max * R_max: best when views share few slots.
- "direct": no per-view gather. Each row's query is rotated once per distinct chunk offset of
  its view (a block split over several cache pages is one rotation: [T, Rmax] rotations), scored
  against every slot some view uses, and each slot keeps the score of the rotation that holds it
  in the row's view. Cost grows with T * Rmax * N: best when views share most slots (Hogwild!:
  every view sees every block, in its own order).
- "shared": every distinct (slot, chunk offset) of all views is gathered and rotated once, and all
  rows attend in one SDPA with a mask of what each row's view holds. Cost grows with K_unique * T:
  best when several decode views hold the same blocks at the same offsets (an action stream and its
  command branches over one context).
- "split": views with many query rows (a prefill) and views with few (decodes) are prepared and
  attended apart, each by its cheapest strategy, so a long prefill does not pad every decode view
  to its row count. "auto" splits when the parts' estimates beat the whole layout's by a margin.

Query heads of one KV group are folded into the row axis, so GQA needs no key expansion.
Everything that depends only on the layout (indices, mask, cos/sin tables) is built once per
engine step and reused by all layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .rope import cos_sin, rotate_half_tables
from .view_layout import ViewLayout, check_attention_args

# Cost estimates count (row, key) scores; gathering and rotating one key costs about this many of them
# (measured on CPU, Hq/Hkv = 3, D = 64).
DIRECT_COST_RATIO = 16.0
# Views with more query rows than this are prefills; "auto" attends them apart from the rest when the
# parts' estimated costs, times SPLIT_WASTE (the extra ops of two passes), beat the whole layout's best.
PREFILL_ROWS = 8
SPLIT_WASTE = 2.0


@dataclass
class PreparedViewAttention:
    """Layout-only tensors shared by every layer of one engine step."""

    strategy: str  # "gather", "direct", "shared" or "split"
    row_has_key: torch.Tensor | None  # [T, 1, 1] 1.0 where the row sees a key, 0.0 where it sees none
    # gather and shared strategies
    num_views: int = 0
    rows_max: int = 0  # R_max: most query rows of one view
    keys_max: int = 0  # S_max: most keys of one view
    key_slot: torch.Tensor | None = None  # [V, S_max] cache slot of each view key (0 where padding)
    key_cos: torch.Tensor | None = None  # [V, 1, S_max, D/2] rotation by chunk offset
    key_sin: torch.Tensor | None = None
    q_cos: torch.Tensor | None = None  # [T, 1, 1, D/2] rotation by q offset
    q_sin: torch.Tensor | None = None
    row_slot: torch.Tensor | None = None  # [T] index of row t in the padded [V * R_max] row grid
    mask: torch.Tensor | None = None  # [V, R_max, S_max] allowed keys; empty rows all-True
    # direct strategy
    slot_lo: int = 0  # attended cache range is slot_lo:slot_hi
    slot_hi: int = 0
    slot_index: torch.Tensor | None = None  # [N] the slots some view uses, when the range has unused ones
    rotations_max: int = 0  # Rmax: most distinct chunk offsets of one view
    row_rotation: torch.Tensor | None = None  # [T, N] rotation (within the row's view) of each slot
    row_blocked: torch.Tensor | None = None  # [T, N] slots the row must not see; empty rows all-False
    qr_cos: torch.Tensor | None = None  # [T, 1, 1, Rmax, D/2] rotation by q_offset - chunk offset
    qr_sin: torch.Tensor | None = None
    # split strategy: (query rows, their views prepared alone) per part
    parts: list[tuple[torch.Tensor, "PreparedViewAttention"]] = field(default_factory=list)
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


@dataclass
class _FlatKeys:
    """Every key of every view, flattened in view order."""

    view: torch.Tensor  # [K] view of the key
    chunk: torch.Tensor  # [K] chunk of the key
    within_view: torch.Tensor  # [K] index of the key among its view's keys
    slot: torch.Tensor  # [K]
    pos: torch.Tensor  # [K] view position
    offset: torch.Tensor  # [K] chunk offset
    view_len: torch.Tensor  # [V] keys per view


def _flatten_keys(layout: ViewLayout) -> _FlatKeys:
    dev = layout.device
    num_views, num_chunks = layout.num_views, layout.num_chunks
    view_chunks = layout.view_chunk_ptr[1:] - layout.view_chunk_ptr[:-1]
    chunk_view = torch.repeat_interleave(torch.arange(num_views, device=dev), view_chunks)
    lens = layout.chunk_len
    total = int(lens.sum()) if num_chunks else 0
    key_chunk = torch.repeat_interleave(torch.arange(num_chunks, device=dev), lens)
    chunk_start = torch.cumsum(lens, 0) - lens  # flat index of each chunk's first key
    within_chunk = torch.arange(total, device=dev) - chunk_start[key_chunk]
    view_len = torch.zeros(num_views, dtype=torch.int64, device=dev).index_add_(0, chunk_view, lens)
    view_start = torch.cumsum(view_len, 0) - view_len
    key_view = chunk_view[key_chunk]
    return _FlatKeys(
        view=key_view,
        chunk=key_chunk,
        within_view=torch.arange(total, device=dev) - view_start[key_view],
        slot=layout.chunk_slot[key_chunk] + within_chunk,
        pos=layout.chunk_pos[key_chunk] + within_chunk,
        offset=layout.chunk_offset[key_chunk],
        view_len=view_len,
    )


def _unique_pairs(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distinct (a, b) pairs sorted by a then b, and each input's pair index (a 1-D unique: far cheaper than dim=)."""
    if a.numel() == 0:
        return a, b, a.clone()
    b_lo = int(b.min())
    width = int(b.max()) - b_lo + 1
    uniq, inverse = torch.unique(a * width + (b - b_lo), return_inverse=True)
    return torch.div(uniq, width, rounding_mode="floor"), uniq % width + b_lo, inverse


@dataclass
class _Rotations:
    """The distinct chunk offsets of each view: chunks with one offset share one query rotation."""

    of_chunk: torch.Tensor  # [C] rank of the chunk's offset among its view's distinct offsets
    offset: torch.Tensor  # [V, Rmax] offset of each rotation (0 where padding)
    most: int  # Rmax


def _rotations(layout: ViewLayout) -> _Rotations:
    dev = layout.device
    num_views = layout.num_views
    if layout.num_chunks == 0:
        return _Rotations(torch.zeros(0, dtype=torch.int64, device=dev), torch.zeros(num_views, 1, dtype=torch.int64, device=dev), 1)
    view_chunks = layout.view_chunk_ptr[1:] - layout.view_chunk_ptr[:-1]
    chunk_view = torch.repeat_interleave(torch.arange(num_views, device=dev), view_chunks)
    pair_view, pair_offset, of_pair = _unique_pairs(chunk_view, layout.chunk_offset)
    rank = _rank_within_group(pair_view)
    most = int(rank.max()) + 1
    offset = torch.zeros(num_views * most, dtype=torch.int64, device=dev)
    offset[pair_view * most + rank] = pair_offset
    return _Rotations(rank[of_pair], offset.view(num_views, most), most)


@dataclass
class _Plan:
    """What every strategy's cost estimate and tables start from, computed once per layout."""

    keys: _FlatKeys
    rotations: _Rotations
    keys_max: int
    slot_lo: int
    slot_hi: int
    used_slots: torch.Tensor  # sorted; other streams' blocks may lie between them
    direct_ok: bool  # no view holds one slot twice (only gather and shared handle that)
    pairs: torch.Tensor  # [2, K] distinct (slot, offset) of all views
    key_pair: torch.Tensor  # [keys] index of each key's pair
    costs: dict  # strategy -> estimated cost, in units of one (row, key) score


def _plan(layout: ViewLayout) -> _Plan:
    keys = _flatten_keys(layout)
    num_views = layout.num_views
    keys_max = max(int(keys.view_len.max()) if num_views else 0, 1)
    rotations = _rotations(layout)
    used_slots = torch.unique(keys.slot)  # sorted
    slot_lo, slot_hi = (int(used_slots[0]), int(used_slots[-1]) + 1) if used_slots.numel() else (0, 1)
    n_range = slot_hi - slot_lo
    slot_key_count = torch.zeros(num_views * n_range, dtype=torch.int64, device=layout.device)
    slot_key_count.index_add_(0, keys.view * n_range + keys.slot - slot_lo, torch.ones_like(keys.slot))
    direct_ok = not bool((slot_key_count > 1).any())
    pair_slot, pair_offset, key_pair = _unique_pairs(keys.slot, keys.offset)
    rows_max = int(torch.bincount(layout.q_view, minlength=num_views).max()) if layout.num_rows else 0
    # gathering and rotating one key costs about DIRECT_COST_RATIO scores
    costs = {
        "direct": layout.num_rows * rotations.most * max(used_slots.numel(), 1) if direct_ok else float("inf"),
        "gather": num_views * keys_max * (DIRECT_COST_RATIO + rows_max),
        "shared": pair_slot.numel() * (DIRECT_COST_RATIO + layout.num_rows),
    }
    return _Plan(keys, rotations, keys_max, slot_lo, slot_hi, used_slots, direct_ok,
                 torch.stack([pair_slot, pair_offset]), key_pair, costs)


def prepare_view_attention(
    layout: ViewLayout,
    inv_freq: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float32,
    strategy: str = "auto",
) -> PreparedViewAttention:
    """Build the per-step tables (indices, mask, cos/sin, cast to ``dtype``) for one layout.

    ``strategy`` is "auto" (cost estimate), "gather", "direct", "shared" or "split" (see the module docstring).
    """
    if strategy not in ("auto", "gather", "direct", "shared", "split"):
        raise ValueError(f"strategy must be 'auto', 'gather', 'direct', 'shared' or 'split', got {strategy!r}")
    inv_freq = inv_freq.to(layout.device)
    groups = _prefill_and_decode_views(layout) if strategy in ("auto", "split") else None
    if groups is None and strategy == "split":
        raise ValueError("strategy='split' needs views with more and views with fewer than PREFILL_ROWS rows")
    subs = []
    for views in groups or ():
        sub, rows = layout.select(views)
        subs.append((sub, rows, _plan(sub)))
    plan = None if strategy == "split" else _plan(layout)  # forced split: the whole layout is never attended
    if subs and (plan is None or SPLIT_WASTE * sum(min(p.costs.values()) for *_, p in subs) < min(plan.costs.values())):
        parts = [(rows, _prepare_planned(sub, sub_plan, "auto", inv_freq, dtype)) for sub, rows, sub_plan in subs]
        return PreparedViewAttention(strategy="split", row_has_key=None, parts=parts)
    return _prepare_planned(layout, plan, strategy, inv_freq, dtype)


def _prepare_planned(layout, plan: _Plan, strategy, inv_freq, dtype) -> PreparedViewAttention:
    if strategy == "direct" and not plan.direct_ok:
        raise ValueError("strategy='direct' needs each slot at most once per view")
    if strategy == "auto":
        strategy = min(plan.costs, key=plan.costs.get)
    if strategy == "direct":
        return _prepare_direct(layout, inv_freq, plan.keys, dtype, plan.slot_lo, plan.slot_hi,
                               plan.used_slots, plan.rotations)
    if strategy == "shared":
        return _prepare_shared(layout, inv_freq, plan.keys, dtype, plan.pairs, plan.key_pair)
    return _prepare_gather(layout, inv_freq, plan.keys, dtype, plan.keys_max)


def _prefill_and_decode_views(layout: ViewLayout) -> list[list[int]] | None:
    """[prefill views, decode views] (more / 1 to PREFILL_ROWS rows), or None unless both kinds exist.
    Views without rows belong to neither: nothing attends through them."""
    if layout.num_views < 2 or layout.num_rows == 0:
        return None
    rows = torch.bincount(layout.q_view, minlength=layout.num_views)
    prefill, decode = rows > PREFILL_ROWS, (rows > 0) & (rows <= PREFILL_ROWS)
    if not bool(prefill.any()) or not bool(decode.any()):
        return None
    return [torch.nonzero(prefill).flatten().tolist(), torch.nonzero(decode).flatten().tolist()]


def _prepare_gather(layout, inv_freq, keys: _FlatKeys, dtype, keys_max) -> PreparedViewAttention:
    dev = layout.device
    num_views = layout.num_views
    flat = keys.view * keys_max + keys.within_view
    grid = num_views * keys_max
    key_slot = torch.zeros(grid, dtype=torch.int64, device=dev)
    key_slot[flat] = keys.slot
    key_pos = torch.zeros(grid, dtype=torch.int64, device=dev)
    key_pos[flat] = keys.pos
    key_off = torch.zeros(grid, dtype=torch.int64, device=dev)
    key_off[flat] = keys.offset
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
    mask = key_valid.view(num_views, 1, keys_max) & (key_pos.view(num_views, 1, keys_max) <= row_pos)
    has_key = mask.any(-1, keepdim=True)
    mask |= ~has_key  # all-True rows keep SDPA finite; their output is zeroed afterwards
    q_cos, q_sin = cos_sin(layout.q_offset.view(-1, 1, 1), inv_freq, dtype)
    return PreparedViewAttention(
        strategy="gather",
        row_has_key=has_key.view(-1)[row_slot].to(dtype).view(-1, 1, 1),
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
    )


def _prepare_shared(layout, inv_freq, keys: _FlatKeys, dtype, pairs, key_pair) -> PreparedViewAttention:
    """The gather tables for one view holding every distinct (slot, offset), masked per row by its own view."""
    dev = layout.device
    num_keys = max(pairs.shape[1], 1)
    key_slot = torch.zeros(num_keys, dtype=torch.int64, device=dev)
    key_off = torch.zeros(num_keys, dtype=torch.int64, device=dev)
    key_pos = torch.zeros(num_keys, dtype=torch.int64, device=dev)
    member = torch.zeros(layout.num_views, num_keys, dtype=torch.bool, device=dev)
    if pairs.shape[1]:
        key_slot[:] = pairs[0]
        key_off[:] = pairs[1]
        key_pos[key_pair] = keys.pos  # one slot at one offset has one view position
        member[keys.view, key_pair] = True
    mask = member[layout.q_view] & (key_pos[None, :] <= layout.q_pos[:, None])  # [T, K]
    has_key = mask.any(-1, keepdim=True)
    mask |= ~has_key
    key_cos, key_sin = cos_sin(key_off.view(1, 1, num_keys), inv_freq, dtype)
    q_cos, q_sin = cos_sin(layout.q_offset.view(-1, 1, 1), inv_freq, dtype)
    return PreparedViewAttention(
        strategy="shared",
        row_has_key=has_key.to(dtype).view(-1, 1, 1),
        num_views=1,
        rows_max=max(layout.num_rows, 1),
        keys_max=num_keys,
        key_slot=key_slot.view(1, num_keys),
        key_cos=key_cos,
        key_sin=key_sin,
        q_cos=q_cos,
        q_sin=q_sin,
        row_slot=torch.arange(layout.num_rows, device=dev),
        mask=mask.view(1, layout.num_rows, num_keys),
    )


def _prepare_direct(layout, inv_freq, keys: _FlatKeys, dtype, slot_lo, slot_hi, used_slots, rotations: _Rotations):
    dev = layout.device
    num_views = layout.num_views
    slot_index = None
    if 0 < used_slots.numel() < slot_hi - slot_lo:
        # score only the used slots: gathering them once is cheaper than scoring every row against the gaps
        slot_index = used_slots
        compact = torch.zeros(slot_hi - slot_lo, dtype=torch.int64, device=dev)
        compact[used_slots - slot_lo] = torch.arange(used_slots.numel(), device=dev)
        n_range = used_slots.numel()
        at = keys.view * n_range + compact[keys.slot - slot_lo]
    else:
        n_range = slot_hi - slot_lo
        at = keys.view * n_range + keys.slot - slot_lo
    slot_rotation = torch.full((num_views * n_range,), -1, dtype=torch.int64, device=dev)
    slot_rotation[at] = rotations.of_chunk[keys.chunk]
    slot_pos = torch.zeros(num_views * n_range, dtype=torch.int64, device=dev)
    slot_pos[at] = keys.pos
    row_rotation = slot_rotation.view(num_views, n_range)[layout.q_view]  # [T, N]
    row_mask = (row_rotation >= 0) & (slot_pos.view(num_views, n_range)[layout.q_view] <= layout.q_pos[:, None])
    has_key = row_mask.any(-1, keepdim=True)
    row_mask |= ~has_key
    delta = layout.q_offset[:, None] - rotations.offset[layout.q_view]
    qr_cos, qr_sin = cos_sin(delta.view(-1, 1, 1, rotations.most), inv_freq, dtype)
    return PreparedViewAttention(
        strategy="direct",
        row_has_key=has_key.to(dtype).view(-1, 1, 1),
        slot_lo=slot_lo,
        slot_hi=slot_hi,
        slot_index=slot_index,
        rotations_max=rotations.most,
        row_rotation=row_rotation.clamp(min=0),
        row_blocked=~row_mask,
        qr_cos=qr_cos,
        qr_sin=qr_sin,
    )


def _rotate_into(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF rotation with half tables, written with few passes over a large x (same shape out)."""
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
    prepared: PreparedViewAttention | None = None,
) -> torch.Tensor:
    """Attention of q [T, Hq, D] over the chunks of each row's view; returns [T, Hq, D] in q's dtype."""
    check_attention_args(q, k_cache, v_cache, layout)
    if prepared is None:
        prepared = prepare_view_attention(layout, inv_freq, dtype=q.dtype)
    return _attend(q, k_cache, v_cache, prepared, scale)


def _attend(q, k_cache, v_cache, prepared: PreparedViewAttention, scale: float) -> torch.Tensor:
    if prepared.strategy == "split":
        out = torch.empty_like(q)
        for rows, part in prepared.parts:
            out.index_copy_(0, rows, _attend(q.index_select(0, rows), k_cache, v_cache, part, scale))
        return out
    if prepared.strategy == "direct":
        out = _attend_direct(q, k_cache, v_cache, prepared, scale)
    else:  # "gather" and "shared" (a gather over one view of all distinct keys)
        out = _attend_gather(q, k_cache, v_cache, prepared, scale)
    return out * prepared.row_has_key.to(q.dtype)


def _attend_gather(q, k_cache, v_cache, prepared: PreparedViewAttention, scale: float) -> torch.Tensor:
    t, hq, d = q.shape
    n, hkv, _ = k_cache.shape
    g = hq // hkv
    nv, r, s = prepared.num_views, prepared.rows_max, prepared.keys_max
    dt = q.dtype
    # Queries: rotate by q_offset, scatter into [V, Hkv, G*R, D].
    qr = _rotate_into(q.reshape(t, hkv, g, d), prepared.q_cos.to(dt), prepared.q_sin.to(dt))  # q may be strided
    qgrid = qr.new_zeros(nv * r, hkv, g, d).index_copy_(0, prepared.row_slot, qr)
    qgrid = qgrid.view(nv, r, hkv, g, d).permute(0, 2, 3, 1, 4).reshape(nv, hkv, g * r, d)
    # Keys/values: one gather each, straight into SDPA layout; keys rotated by chunk offset.
    idx = prepared.gather_index(hkv)
    kg = k_cache.reshape(n * hkv, d).index_select(0, idx).view(nv, hkv, s, d)
    vg = v_cache.reshape(n * hkv, d).index_select(0, idx).view(nv, hkv, s, d)
    kg = _rotate_into(kg.to(dt), prepared.key_cos.to(dt), prepared.key_sin.to(dt))
    out = F.scaled_dot_product_attention(qgrid, kg, vg.to(dt), attn_mask=prepared.grouped_mask(g), scale=scale)
    out = out.view(nv, hkv, g, r, d).permute(0, 3, 1, 2, 4).reshape(nv * r, hq, d)
    return out.index_select(0, prepared.row_slot)


def _attend_direct(q, k_cache, v_cache, prepared: PreparedViewAttention, scale: float) -> torch.Tensor:
    t, hq, d = q.shape
    hkv = k_cache.shape[1]
    g = hq // hkv
    rm = prepared.rotations_max
    dt = q.dtype
    if prepared.slot_index is None:
        keys, values = k_cache[prepared.slot_lo : prepared.slot_hi], v_cache[prepared.slot_lo : prepared.slot_hi]
    else:
        keys, values = k_cache.index_select(0, prepared.slot_index), v_cache.index_select(0, prepared.slot_index)
    n = keys.shape[0]
    # One rotated, pre-scaled query per (row, rotation of its view): [Hkv, T*G*Rmax, D].
    qr = rotate_half_tables((q * scale).view(t, hkv, g, 1, d), prepared.qr_cos.to(dt), prepared.qr_sin.to(dt))
    qr = qr.permute(1, 0, 2, 3, 4).reshape(hkv, t * g * rm, d)
    scores = torch.matmul(qr, keys.to(dt).permute(1, 2, 0))  # [Hkv, T*G*Rmax, N]
    if rm > 1:
        # keep, for each slot, the score under the rotation that holds it in the row's view
        pick = prepared.row_rotation.view(1, t, 1, 1, n).expand(hkv, t, g, 1, n)
        scores = torch.gather(scores.view(hkv, t, g, rm, n), 3, pick)
    scores = scores.view(hkv, t, g, n).float().masked_fill_(prepared.row_blocked.view(1, t, 1, n), float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(dt).view(hkv, t * g, n)
    out = torch.matmul(probs, values.to(dt).transpose(0, 1))  # [Hkv, T*G, D]
    return out.view(hkv, t, g, d).permute(1, 0, 2, 3).reshape(t, hq, d)
