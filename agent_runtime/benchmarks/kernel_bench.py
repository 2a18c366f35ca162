"""`bench kv --device cuda` part (d): the Triton view-attention kernel against torch SDPA on a contiguous copy.

SDPA gets the keys already gathered contiguously (its best case); the Triton kernel reads the chunks scattered
over the cache in place. Achieved bandwidth = bytes of K and V read / kernel time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attention_kernels.view_layout import ViewLayout


def _timed(fn, device: str, repeats: int) -> float:
    """Median seconds per call (CUDA events on the GPU, perf_counter elsewhere)."""
    import statistics

    from agent_runtime.clocks import measured

    fn()  # warm-up / compile
    samples = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / 1000.0)
        else:
            samples.append(measured(fn)[1])
    return statistics.median(samples)


def kernel_vs_sdpa(*, views: int = 8, keys: int = 2048, chunks: int = 8, q_heads: int = 9, kv_heads: int = 3,
                   head_dim: int = 64, dtype=torch.bfloat16, device: str = "cuda", repeats: int = 20) -> dict:
    from attention_kernels.view_attention_triton import view_attention_triton

    gen = torch.Generator().manual_seed(0)
    per = keys // chunks
    n_slots = views * keys * 2
    k_cache, v_cache = [torch.randn(n_slots, kv_heads, head_dim, generator=gen).to(device, dtype) for _ in range(2)]
    perm = torch.randperm(n_slots // per, generator=gen)[: views * chunks] * per  # scattered chunk starts
    view_chunks, queries = [], []
    for v in range(views):
        starts = perm[v * chunks : (v + 1) * chunks].tolist()
        # keys stored at their view positions (offset 0), so the result must equal plain SDPA over the copy
        view_chunks.append([(s, per, c * per, 0) for c, s in enumerate(starts)])
        queries.append((v, keys - 1, 0))
    layout = ViewLayout.build(view_chunks, queries, device=device)
    q = torch.randn(views, q_heads, head_dim, generator=gen).to(device, dtype)
    inv_freq = (1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))).to(device)
    idx = torch.cat([torch.arange(s, s + per) for chunks_ in view_chunks for s, _, _, _ in chunks_]).to(device)
    k_contig, v_contig = [c[idx].view(views, keys, kv_heads, head_dim).transpose(1, 2).contiguous()
                          for c in (k_cache, v_cache)]
    q4 = q.view(views, q_heads, 1, head_dim)
    scale = head_dim ** -0.5

    ours = view_attention_triton(q, k_cache, v_cache, layout, inv_freq, scale)
    ref = F.scaled_dot_product_attention(q4, k_contig, v_contig, scale=scale, enable_gqa=True).view_as(ours)
    max_abs_diff = float((ours.float() - ref.float()).abs().max())
    t_triton = _timed(lambda: view_attention_triton(q, k_cache, v_cache, layout, inv_freq, scale), device, repeats)
    t_sdpa = _timed(lambda: F.scaled_dot_product_attention(q4, k_contig, v_contig, scale=scale, enable_gqa=True),
                    device, repeats)
    bytes_read = 2 * views * keys * kv_heads * head_dim * k_cache.element_size()
    return {
        "views": views, "keys_per_view": keys, "chunks_per_view": chunks, "head_dim": head_dim,
        "triton_us": t_triton * 1e6, "sdpa_contiguous_us": t_sdpa * 1e6,
        "triton_vs_sdpa": t_triton / t_sdpa,
        "triton_gb_per_s": bytes_read / t_triton / 1e9, "sdpa_gb_per_s": bytes_read / t_sdpa / 1e9,
        "max_abs_diff": max_abs_diff,
    }
