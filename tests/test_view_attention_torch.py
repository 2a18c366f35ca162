"""view_attention_torch against an independent fp64 oracle: ordinary causal RoPE attention
over the concatenation of each view's chunks, with keys stored once at block-local rotations."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch

from attention_kernels import ViewLayout, prepare_view_attention, view_attention_torch
from attention_kernels.view_attention_torch import PREFILL_ROWS

# ---------------------------------------------------------------------------- oracle helpers


def make_inv_freq(rope_type: str, head_dim: int) -> torch.Tensor:
    """inv_freq as transformers computes it (float32), for default / linear / llama3 RoPE."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = {"rope_type": rope_type, "rope_theta": 10000.0}
    if rope_type == "linear":
        params["factor"] = 2.0
    elif rope_type == "llama3":
        params.update(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16)
    cfg = LlamaConfig(hidden_size=4 * head_dim, num_attention_heads=4, head_dim=head_dim, rope_parameters=params)
    if rope_type == "default":
        inv_freq, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    else:
        inv_freq, _ = ROPE_INIT_FUNCTIONS[rope_type](cfg)
    return inv_freq.float()


def hf_rotate64(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Standard RoPE in fp64 through transformers' apply_rotary_pos_emb. x: [L, H, D], positions: [L]."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    freqs = positions.double()[:, None] * inv_freq.double()[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    rotated, _ = apply_rotary_pos_emb(x.double(), x.double(), emb.cos(), emb.sin(), unsqueeze_dim=1)
    return rotated


@dataclass
class Case:
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    layout: ViewLayout
    inv_freq: torch.Tensor
    scale: float
    expected: torch.Tensor  # fp64 oracle


def make_case(
    seed: int,
    *,
    hq: int = 4,
    hkv: int = 2,
    d: int = 64,
    rope_type: str = "default",
    n_views: int = 3,
    max_block: int = 12,
    max_prefill: int = 5,
    dtype: torch.dtype = torch.float32,
) -> Case:
    """Random blocks in shuffled cache slots, split into chunks, composed into views that
    share chunks in different orders and drop some; rows are prefill runs and decode rows."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    inv_freq = make_inv_freq(rope_type, d)
    g = hq // hkv

    # Blocks: each rotated at its own local positions starting at rot_base.
    blocks = []
    for _ in range(rng.randint(2, 4)):
        blocks.append({"len": rng.randint(1, max_block), "rot_base": rng.randint(0, 3)})
    order = list(range(len(blocks)))
    rng.shuffle(order)
    slot = rng.randint(0, 3)
    for b in order:
        blocks[b]["slot"] = slot
        slot += blocks[b]["len"] + rng.randint(0, 3)  # gaps hold junk that must never be read
    n_slots = slot + 1
    k_raw = torch.randn(n_slots, hkv, d, generator=gen, dtype=torch.float64)
    v_cache64 = torch.randn(n_slots, hkv, d, generator=gen, dtype=torch.float64)
    k_cache64 = torch.randn(n_slots, hkv, d, generator=gen, dtype=torch.float64) * 100  # junk
    for b in blocks:
        s0, n = b["slot"], b["len"]
        local = torch.arange(n) + b["rot_base"]
        k_cache64[s0 : s0 + n] = hf_rotate64(k_raw[s0 : s0 + n], local, inv_freq)

    # Pieces: each block split into 1..3 runs of contiguous slots (sometimes an empty one).
    pieces = []
    for b in blocks:
        cuts = sorted(rng.sample(range(1, b["len"]), min(rng.randint(0, 2), b["len"] - 1)))
        bounds = [0, *cuts, b["len"]]
        for i0, i1 in zip(bounds[:-1], bounds[1:]):
            pieces.append((b, i0, i1 - i0))
    if rng.random() < 0.5:
        pieces.append((blocks[0], 0, 0))

    views, view_keys = [], []
    for _ in range(n_views):
        chosen = [p for p in pieces if rng.random() < 0.8]  # a dropped middle chunk = concat without it
        rng.shuffle(chosen)
        pos = rng.choice([0, 0, 0, 2])
        chunk_list, slots, positions = [], [], []
        for b, i0, n in chosen:
            first_slot = b["slot"] + i0
            chunk_list.append((first_slot, n, pos, pos - (b["rot_base"] + i0)))
            slots += range(first_slot, first_slot + n)
            positions += range(pos, pos + n)
            pos += n
        views.append(chunk_list)
        view_keys.append((torch.tensor(slots, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64), pos))

    # Rows: per view none, a decode row, or a prefill run, plus stray positions; shuffled.
    rows = []
    for v, (_, _, end) in enumerate(view_keys):
        kind = rng.choice(["none", "decode", "prefill", "prefill"])
        if kind == "decode":
            rows.append((v, max(end - 1, 0)))
        elif kind == "prefill":
            n = rng.randint(2, max_prefill)
            rows += [(v, max(end - n, 0) + i) for i in range(n)]
        if rng.random() < 0.3:
            rows.append((v, rng.randint(0, end + 2)))
    if not rows:
        rows.append((0, 0))
    rows.append((rng.randrange(n_views), 0))  # may see no key at all (view starting at 2)
    rng.shuffle(rows)

    q_raw = torch.randn(len(rows), hq, d, generator=gen, dtype=torch.float64)
    model_pos = torch.tensor([rng.randint(0, 5) for _ in rows])
    q_stored = hf_rotate64(q_raw, model_pos, inv_freq)
    queries = [(v, p, p - int(m)) for (v, p), m in zip(rows, model_pos)]
    scale = d**-0.5

    expected = torch.zeros(len(rows), hq, d, dtype=torch.float64)
    for t, (v, p) in enumerate(rows):
        slots, positions, _ = view_keys[v]
        allowed = positions <= p
        if not bool(allowed.any()):
            continue
        kq = hf_rotate64(k_raw[slots], positions, inv_freq)  # [S, Hkv, D] at global positions
        qq = hf_rotate64(q_raw[t : t + 1], torch.tensor([p]), inv_freq)[0]  # [Hq, D]
        for h in range(hq):
            scores = scale * (kq[:, h // g] @ qq[h])
            scores = scores.masked_fill(~allowed, float("-inf"))
            expected[t, h] = torch.softmax(scores, 0) @ v_cache64[slots, h // g]

    layout = ViewLayout.build(views, queries)
    return Case(
        q=q_stored.to(dtype),
        k_cache=k_cache64.to(dtype),
        v_cache=v_cache64.to(dtype),
        layout=layout,
        inv_freq=inv_freq,
        scale=scale,
        expected=expected,
    )


# ---------------------------------------------------------------------------- tests

CASES = [
    dict(hq=4, hkv=4, d=64, rope_type="default"),
    dict(hq=9, hkv=3, d=64, rope_type="default"),
    dict(hq=8, hkv=2, d=128, rope_type="linear"),
    dict(hq=4, hkv=1, d=256, rope_type="llama3"),
    dict(hq=6, hkv=2, d=64, rope_type="llama3"),
    dict(hq=3, hkv=3, d=128, rope_type="default"),
]


def _mixed_case(seed: int, params: dict) -> Case:
    """A case with prefill views (more than PREFILL_ROWS rows) beside decode views, for the split strategy."""
    for s in range(seed * 1000, seed * 1000 + 1000):
        case = make_case(s, **params, n_views=4, max_block=30, max_prefill=20)
        rows = torch.bincount(case.layout.q_view, minlength=4)
        if bool((rows > PREFILL_ROWS).any()) and bool(((rows > 0) & (rows <= PREFILL_ROWS)).any()):
            return case
    raise AssertionError("no mixed case found")


@pytest.mark.parametrize("strategy", ["gather", "direct", "shared", "split"])
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_matches_fp64_oracle(params, seed, strategy):
    case = _mixed_case(seed, params) if strategy == "split" else make_case(seed, **params)
    prepared = prepare_view_attention(case.layout, case.inv_freq, strategy=strategy)
    assert prepared.strategy == strategy
    if strategy == "split":  # prefill rows and decode rows, each row in exactly one part
        assert len(prepared.parts) == 2 and all(rows.numel() for rows, _ in prepared.parts)
        assert torch.cat([rows for rows, _ in prepared.parts]).sort().values.tolist() == list(range(case.layout.num_rows))
    out = view_attention_torch(
        case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale, prepared=prepared,
    )
    assert out.dtype == torch.float32 and out.shape == case.q.shape
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), case.expected, atol=1e-5, rtol=0)


def test_prepared_is_reused_across_layers():
    case = make_case(11, hq=9, hkv=3)
    prepared = prepare_view_attention(case.layout, case.inv_freq)
    for layer in range(3):
        out = view_attention_torch(
            case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale, prepared=prepared
        )
        torch.testing.assert_close(out.double(), case.expected, atol=1e-5, rtol=0)


def test_many_layers_consistent_with_unprepared():
    case = make_case(5, hq=4, hkv=2)
    a = view_attention_torch(case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
    prepared = prepare_view_attention(case.layout, case.inv_freq)
    b = view_attention_torch(
        case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale, prepared=prepared
    )
    torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_auto_strategy_matches_oracle_and_picks_by_sharing():
    case = make_case(7, hq=9, hkv=3)
    out = view_attention_torch(case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
    torch.testing.assert_close(out.double(), case.expected, atol=1e-5, rtol=0)
    inv_freq = make_inv_freq("default", 64)
    shared = ViewLayout.build([[(0, 500, 0, 0), (500, 500, 500, 500)], [(500, 500, 0, 0), (0, 500, 500, 500)]],
                              [(0, 999, 0), (1, 999, 0)])
    assert prepare_view_attention(shared, inv_freq).strategy == "direct"
    # 8 views, each of 8 own blocks rotated at local positions 0..124: nothing shared
    disjoint = ViewLayout.build(
        [[(i * 1000 + j * 125, 125, j * 125, j * 125) for j in range(8)] for i in range(8)], [(i, 999, 0) for i in range(8)]
    )
    assert prepare_view_attention(disjoint, inv_freq).strategy == "gather"


def test_auto_shares_keys_across_decode_views_over_one_context():
    """An engine step: a 26-row frame prefill over its own block beside 5 decode views (action stream and
    command branches) holding one 270-key context of 9 blocks at the same offsets. One padded grid would be
    6 x 26 x 270; each distinct key is gathered once instead, and every row's own view masks what it sees."""
    inv_freq = make_inv_freq("default", 64)
    context = [(0, 30, 0, 0)] + [(40 * b, 30, 30 * b, 30 * b) for b in range(1, 9)]  # blocks at local positions
    views = [[(400, 26, 0, 0)]] + [context + [(600 + 16 * i, 1 + i, 270, 270)] for i in range(5)]
    queries = [(0, p, 0) for p in range(26)] + [(1 + i, 270 + j, 270) for i in range(5) for j in range(1 + i)]
    step = ViewLayout.build(views, queries)
    prepared = prepare_view_attention(step, inv_freq)
    assert prepared.strategy in ("shared", "split")
    decodes = ViewLayout.build(views[1:], [(v - 1, p, o) for v, p, o in queries[26:]])
    shared = prepare_view_attention(decodes, inv_freq)
    assert shared.strategy == "shared" and shared.keys_max == 270 + 15  # context once, plus each own block
    torch.manual_seed(0)
    k, v = torch.randn(700, 2, 64), torch.randn(700, 2, 64)
    q = torch.randn(step.num_rows, 4, 64)
    by_view = view_attention_torch(q, k, v, step, inv_freq, 0.125, prepared=prepare_view_attention(step, inv_freq, strategy="gather"))
    torch.testing.assert_close(view_attention_torch(q, k, v, step, inv_freq, 0.125, prepared=prepared), by_view)


def test_auto_splits_a_prefill_from_decode_views_over_different_contexts():
    """A 40-row prefill over its own block beside 3 one-row views, each over its own 500 keys: one shared
    or padded grid would score every row against everything; apart, each part takes its cheapest strategy."""
    inv_freq = make_inv_freq("default", 64)
    views = [[(0, 40, 0, 0)]] + [[(100 + 600 * i, 500, 0, 0)] for i in range(3)]
    queries = [(0, p, 0) for p in range(40)] + [(1 + i, 499, 0) for i in range(3)]
    step = ViewLayout.build(views, queries)
    prepared = prepare_view_attention(step, inv_freq)
    assert prepared.strategy == "split"
    assert [rows.tolist() for rows, _ in prepared.parts] == [list(range(40)), [40, 41, 42]]


def test_split_leaves_out_views_without_rows():
    """A prefill view, a decode view and a view nobody queries: the split covers exactly the queried rows."""
    inv_freq = make_inv_freq("default", 64)
    views = [[(0, 12, 0, 0)], [(0, 12, 0, 0), (20, 3, 12, 12)], [(40, 5, 0, 0)]]
    layout = ViewLayout.build(views, [(0, p, 0) for p in range(12)] + [(1, 14, 12)])
    prepared = prepare_view_attention(layout, inv_freq, strategy="split")
    assert [rows.tolist() for rows, _ in prepared.parts] == [list(range(12)), [12]]
    torch.manual_seed(0)
    k, v, q = torch.randn(50, 2, 64), torch.randn(50, 2, 64), torch.randn(13, 4, 64)
    expected = view_attention_torch(q, k, v, layout, inv_freq, 0.125,
                                    prepared=prepare_view_attention(layout, inv_freq, strategy="gather"))
    torch.testing.assert_close(view_attention_torch(q, k, v, layout, inv_freq, 0.125, prepared=prepared), expected)
    # only a prefill view has rows: nothing to split
    alone = ViewLayout.build(views, [(0, p, 0) for p in range(12)])
    with pytest.raises(ValueError, match="split"):
        prepare_view_attention(alone, inv_freq, strategy="split")
    assert prepare_view_attention(alone, inv_freq).strategy != "split"


def test_slot_repeated_within_a_view_uses_gather():
    """A view may list one slot twice (same keys at two positions); only 'gather' can do that."""
    torch.manual_seed(2)
    d = 64
    inv_freq = make_inv_freq("default", d)
    k_raw = torch.randn(4, 1, d, dtype=torch.float64)
    v = torch.randn(4, 1, d, dtype=torch.float64)
    k_cache = hf_rotate64(k_raw, torch.arange(4), inv_freq)
    layout = ViewLayout.build([[(0, 4, 0, 0), (0, 4, 4, 4)]], [(0, 7, 7)])
    q_raw = torch.randn(1, 2, d, dtype=torch.float64)
    with pytest.raises(ValueError, match="direct"):
        prepare_view_attention(layout, inv_freq, strategy="direct")
    assert prepare_view_attention(layout, inv_freq).strategy == "gather"
    out = view_attention_torch(q_raw.float(), k_cache.float(), v.float(), layout, inv_freq, d**-0.5)
    kg = hf_rotate64(torch.cat([k_raw, k_raw]), torch.arange(8), inv_freq)
    qg = hf_rotate64(q_raw, torch.tensor([7]), inv_freq)
    vv = torch.cat([v, v])[:, 0]
    for h in range(2):
        ref = torch.softmax(d**-0.5 * (kg[:, 0] @ qg[0, h]), 0) @ vv
        torch.testing.assert_close(out[0, h].double(), ref, atol=1e-5, rtol=0)


def test_direct_scores_only_used_slots_and_rotates_once_per_block():
    """Streams over a shared prompt whose own blocks are split over interleaved pages: the direct strategy
    compacts away the slots no view uses and rotates each row once per block, not once per page run."""
    torch.manual_seed(3)
    d, hkv, hq = 64, 2, 6
    inv_freq = make_inv_freq("default", d)
    prompt, page, streams = 10, 4, 3
    # slots: prompt 0..9, then pages of 4 interleaved: stream s page p at 10 + (p * (streams + 1) + s) * 4;
    # the pages of a 4th stream (s == 3) sit between them and belong to no view here
    own_len = 6
    k_raw = torch.randn(64, hkv, d, dtype=torch.float64)
    v = torch.randn(64, hkv, d, dtype=torch.float64)
    k_cache = k_raw * 100  # junk in every slot no view should read
    k_cache[:prompt] = hf_rotate64(k_raw[:prompt], torch.arange(prompt), inv_freq)
    views, queries, view_slots = [], [], []
    for s in range(streams):
        pages = [10 + (p * (streams + 1) + s) * page for p in range(2)]
        slots = list(range(pages[0], pages[0] + page)) + list(range(pages[1], pages[1] + own_len - page))
        k_cache[slots] = hf_rotate64(k_raw[slots], torch.arange(own_len), inv_freq)
        views.append([(0, prompt, 0, 0), (pages[0], page, prompt, prompt), (pages[1], own_len - page, prompt + page, prompt)])
        queries.append((s, prompt + own_len - 1, prompt))  # decode row rotated at local own_len - 1
        view_slots.append(list(range(prompt)) + slots)
    layout = ViewLayout.build(views, queries)
    prepared = prepare_view_attention(layout, inv_freq, strategy="direct")
    assert prepared.rotations_max == 2  # prompt + own block, though the own block is two page runs
    assert prepared.slot_index.tolist() == sorted(set(sum(view_slots, [])))  # the 4th stream's pages are skipped
    q_raw = torch.randn(streams, hq, d, dtype=torch.float64)
    q = hf_rotate64(q_raw, torch.full((streams,), own_len - 1), inv_freq)
    out = view_attention_torch(q.float(), k_cache.float(), v.float(), layout, inv_freq, d**-0.5, prepared=prepared)
    for s in range(streams):
        n = len(view_slots[s])
        kg = hf_rotate64(k_raw[view_slots[s]], torch.arange(n), inv_freq)
        qg = hf_rotate64(q_raw[s : s + 1], torch.tensor([n - 1]), inv_freq)[0]
        for h in range(hq):
            ref = torch.softmax(d**-0.5 * (kg[:, h // 3] @ qg[h]), 0) @ v[view_slots[s], h // 3]
            torch.testing.assert_close(out[s, h].double(), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("strategy", ["gather", "direct", "shared"])
def test_rows_without_keys_give_zeros_not_nan(strategy):
    torch.manual_seed(0)
    d = 64
    inv_freq = make_inv_freq("default", d)
    k = torch.randn(8, 1, d)
    v = torch.randn(8, 1, d)
    # view 0 starts at position 4; view 1 is empty.
    layout = ViewLayout.build([[(0, 4, 4, 4)], []], [(0, 1, 0), (1, 3, 0), (0, 5, 0)])
    q = torch.randn(3, 2, d)
    prepared = prepare_view_attention(layout, inv_freq, strategy=strategy)
    out = view_attention_torch(q, k, v, layout, inv_freq, 0.125, prepared=prepared)
    assert torch.isfinite(out).all()
    assert out[0].abs().max() == 0 and out[1].abs().max() == 0
    assert out[2].abs().max() > 0


def test_large_positions_stay_accurate():
    """Offsets in the thousands: tables are built from fp64 angles, so fp32 stays within 1e-5."""
    torch.manual_seed(1)
    d, n = 64, 16
    inv_freq = make_inv_freq("default", d)
    k_raw = torch.randn(n, 1, d, dtype=torch.float64)
    v = torch.randn(n, 1, d, dtype=torch.float64)
    q_raw = torch.randn(1, 1, d, dtype=torch.float64)
    base = 3000
    k_cache = hf_rotate64(k_raw, torch.arange(n), inv_freq)  # rotated locally at 0..n-1
    q = hf_rotate64(q_raw, torch.tensor([n - 1]), inv_freq)
    layout = ViewLayout.build([[(0, n, base, base)]], [(0, base + n - 1, base)])
    out = view_attention_torch(q.float(), k_cache.float(), v.float(), layout, inv_freq, d**-0.5)
    kg = hf_rotate64(k_raw, torch.arange(n) + base, inv_freq)
    qg = hf_rotate64(q_raw, torch.tensor([base + n - 1]), inv_freq)
    ref = torch.softmax(d**-0.5 * (kg[:, 0] @ qg[0, 0]), 0) @ v[:, 0]
    torch.testing.assert_close(out[0, 0].double(), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("strategy", ["gather", "direct", "shared"])
def test_bfloat16_runs_close(strategy):
    case = make_case(3, hq=9, hkv=3, dtype=torch.bfloat16)
    prepared = prepare_view_attention(case.layout, case.inv_freq, dtype=torch.bfloat16, strategy=strategy)
    out = view_attention_torch(
        case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale, prepared=prepared
    )
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), case.expected, atol=0.1, rtol=0)


def test_layout_validation_messages():
    with pytest.raises(ValueError, match="negative"):
        ViewLayout.build([[(0, -1, 0, 0)]], [(0, 0, 0)])
    with pytest.raises(ValueError, match="q_view"):
        ViewLayout.build([[(0, 1, 0, 0)]], [(1, 0, 0)])
    with pytest.raises(ValueError, match="chunk"):
        ViewLayout.build([[(0, 1, 0)]], [(0, 0, 0)])
    lay = ViewLayout.build([[(0, 2, 0, 0)]], [(0, 1, 0)])
    with pytest.raises(ValueError, match="rows"):
        ViewLayout(**{**lay.__dict__, "q_pos": torch.zeros(2, dtype=torch.int64)})
    with pytest.raises(ValueError, match="int64"):
        ViewLayout(**{**lay.__dict__, "chunk_len": lay.chunk_len.int()})
    with pytest.raises(ValueError, match="view_chunk_ptr"):
        ViewLayout(**{**lay.__dict__, "view_chunk_ptr": torch.tensor([0, 0], dtype=torch.int64)})
    assert lay.num_views == 1 and lay.num_rows == 1


def test_shape_errors():
    case = make_case(2, hq=4, hkv=2)
    with pytest.raises(ValueError, match="multiple"):
        view_attention_torch(case.q[:, :3], case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
    with pytest.raises(ValueError, match="rows"):
        view_attention_torch(case.q[:1], case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
