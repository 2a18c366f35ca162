"""`bench kv`: what views over shared blocks cost and save, measured side by side in one run.

(a) view_vs_contiguous: decode step time over a view of 8 blocks / a plain forward with its own contiguous cache;
(b) drop_vs_recompute: recomputing the tokens after a dropped middle block / dropping it from the view;
(c) streamsN_vs_1: aggregate decode tokens/s of N streams in one forward / 1 stream, beside the bound the linear
    layers set: streams4_bound = 4 * step_1 / (step_1 + linears_4 - linears_1);
(d) with --device cuda, triton_vs_sdpa: the Triton view-attention kernel / torch SDPA on a contiguous copy.
"""

import contextlib
import copy
import functools
import random

import torch
import torch.nn.functional as F

from attention_kernels.view_layout import ViewLayout

from agent_runtime.benchmarks.measure import Timing, interleaved, progress, save_figure, subplots
from agent_runtime.session.clocks import measured
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.model_loader import LoadedModel
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.model.linear_kernels import adopt_linears, step_kernels
from agent_runtime.engine.view import View


def _tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(100, 40000) for _ in range(n)]


def _synced(fn) -> tuple[object, float]:
    """(fn(), seconds) until the GPU work fn queued has run: CUDA calls return before their kernels do."""
    torch.cuda.synchronize()
    return measured(lambda: (fn(), torch.cuda.synchronize())[0])


def _cuda_timed(fn) -> tuple[None, float]:
    """(None, seconds fn took on the GPU) by CUDA events: the kernel's time, not its launch's."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return None, start.elapsed_time(end) / 1000.0


class KVBench:
    """(a), (b) and (c) on one model and one block store."""

    context, blocks, suffix = 512, 8, 256  # (a)'s context tokens in `blocks` blocks; (b)'s tokens to recompute

    def __init__(self, loaded: LoadedModel, *, repeats: int = 15, device: str = "cpu", backend: str = "torch"):
        self.repeats, self.rng = repeats, random.Random(0)
        dtype = next(loaded.model.parameters()).dtype
        self.store = KVBlockStore.for_model(loaded.config, capacity_tokens=16384, page_size=16, dtype=dtype, device=device)
        self.plain = copy.deepcopy(loaded.model)  # same weights, transformers' own sdpa attention and cache
        self.plain.set_attn_implementation("sdpa")
        self.runner = ModelRunner(loaded, self.store, backend=backend, device=device)
        self.kernels = self.runner.kernels
        if self.runner.packed_linears:  # the same linear kernels as the runner: (a) compares attention only
            adopt_linears(self.plain, self.kernels, self.runner.cpu.features)
        self.device = device
        self.steps = 7 + (device == "cuda")  # its progress lines: (a), (b), 4 x (c), the bound, (d) on CUDA
        self.timer = _synced if device == "cuda" else measured

    def _kernels(self, rows: int):
        """The runner's kernel choice for a step of `rows` rows (none off the CPU)."""
        return step_kernels(self.kernels, rows) if self.kernels else contextlib.nullcontext()

    def _block(self, label: str, tokens: list[int], context: list | None = None):
        """A new block prefilled after `context` blocks; the prefill view lets go of everything after."""
        view = View(self.store, context or [], own_label=label)
        self.runner.prefill(view, tokens)
        block = self.store.retain(view.own)
        view.close()
        return block

    # (a) -------------------------------------------------------------------------------------------
    def view_vs_contiguous(self) -> dict:
        from transformers import DynamicCache

        tokens, per = _tokens(self.rng, self.context), self.context // self.blocks
        blocks = []
        for i in range(self.blocks):
            blocks.append(self._block(f"ctx{i}", tokens[i * per : (i + 1) * per], blocks))
        view8 = View(self.store, blocks, own_label="own8")
        one = self._block("ctx-one", tokens[: per * self.blocks])
        view1 = View(self.store, [one], own_label="own1")

        cache = DynamicCache(config=self.plain.config)
        with torch.inference_mode():
            self.plain(input_ids=torch.tensor([tokens[: per * self.blocks]], device=self.device), cache=cache, use_cache=True)

        def plain_step():
            with torch.inference_mode(), self._kernels(1):
                self.plain(input_ids=torch.tensor([[7]], device=self.device), cache=cache, use_cache=True)

        t = interleaved({"plain": plain_step, "view8": lambda: self.runner.forward([StreamInput(view8, [7])]),
                          "view1": lambda: self.runner.forward([StreamInput(view1, [7])])}, self.repeats, warmup=3,
                         timer=self.timer)
        progress(f"(a) decode at {per * self.blocks} tokens: view of {self.blocks} blocks {t['view8'].ms()}, "
                 f"contiguous (transformers cache) {t['plain'].ms()}")
        for v in (view8, view1):
            v.close()
        for b in blocks + [one]:
            self.store.release(b)
        return {"context_tokens": per * self.blocks, "view8_step_ms": t["view8"].median * 1e3,
                "view1_step_ms": t["view1"].median * 1e3, "contiguous_step_ms": t["plain"].median * 1e3,
                "view_vs_contiguous": t["view8"].median / t["plain"].median,
                "view8_vs_view1": t["view8"].median / t["view1"].median}

    # (b) -------------------------------------------------------------------------------------------
    def drop_vs_recompute(self) -> dict:
        head, middle, tail = _tokens(self.rng, 64), _tokens(self.rng, 64), _tokens(self.rng, self.suffix)
        drop_s, recompute_s = [], []
        for _ in range(max(3, self.repeats // 5)):
            a, m, t = self._block("head", head), self._block("middle", middle), self._block("suffix", tail)
            view = View(self.store, [a, m, t], own_label="own")
            for b in (a, m, t):
                self.store.release(b)
            drop_s.append(self.timer(lambda: view.drop(m))[1])
            # the alternative without block-local keys: recompute every token after the dropped block
            redo = View(self.store, [a], own_label="redo")
            recompute_s.append(self.timer(lambda: self.runner.prefill(redo, tail))[1])
            for v in (view, redo):
                v.close()
        d, r = Timing(drop_s), Timing(recompute_s)
        progress(f"(b) drop a middle block {d.median * 1e6:.1f} us vs recompute {self.suffix} tokens {r.ms()}")
        return {"drop_us": d.median * 1e6, "recompute_ms": r.median * 1e3, "suffix_tokens": self.suffix,
                "drop_vs_recompute": r.median / d.median}

    # (c) -------------------------------------------------------------------------------------------
    def streams(self, counts=(1, 2, 4, 8), rounds: int = 20) -> dict:
        """Rounds interleave the stream counts, so machine drift hits every count alike."""
        prompt = self._block("prompt", _tokens(self.rng, 256))
        views = {n: [View(self.store, [prompt], own_label=f"s{n}") for _ in range(n)] for n in counts}
        t = interleaved({n: lambda vs=vs: self.runner.forward([StreamInput(v, [7]) for v in vs])
                          for n, vs in views.items()}, rounds, timer=self.timer)
        rates = {n: n / t[n].median for n in counts}
        for n in counts:
            progress(f"(c) {n} streams: {rates[n]:.1f} tokens/s (step {t[n].ms()})")
            for v in views[n]:
                v.close()
        self.store.release(prompt)
        out = {f"tokens_per_s_{n}": r for n, r in rates.items()}
        out.update({f"streams{n}_vs_1": rates[n] / rates[1] for n in counts if n != 1})
        out.update(self.linears(rounds=rounds))
        step1 = t[1].median * 1e3
        out["streams4_bound"] = 4 * step1 / (step1 + out["linears_ms_4"] - out["linears_ms_1"])
        return out

    def linears(self, rounds: int) -> dict:
        """Every linear layer of one step (as the runner calls them) on 1 row vs 4 rows, interleaved."""
        modules = [m for m in self.runner.model.modules() if isinstance(m, torch.nn.Linear)]
        dtype = self.runner.model_dtype

        def step(rows: int):
            inputs = {m.in_features: torch.randn(1, rows, m.in_features, dtype=dtype, device=self.device) for m in modules}
            with torch.inference_mode(), self._kernels(rows):
                for m in modules:
                    m(inputs[m.in_features])

        t = interleaved({rows: functools.partial(step, rows) for rows in (1, 4)}, rounds, timer=self.timer)
        one, four = t[1], t[4]
        progress(f"(c) bound: the {len(modules)} linear layers alone, 1 row {one.ms()} vs 4 rows {four.ms()}")
        return {"linears_ms_1": one.median * 1e3, "linears_ms_4": four.median * 1e3,
                "linears4_vs_1": four.median / one.median}

    def run(self) -> dict:
        result = {**self.view_vs_contiguous(), **self.drop_vs_recompute(), **self.streams()}
        result["pool_blocks_left"] = len(self.store.blocks)
        if self.device == "cuda":
            k = result["kernel"] = kernel_vs_sdpa(device="cuda")
            progress(f"(d) Triton view attention {k['triton_us']:.0f} us ({k['triton_gb_per_s']:.0f} GB/s) vs SDPA on a "
                     f"contiguous copy {k['sdpa_contiguous_us']:.0f} us ({k['sdpa_gb_per_s']:.0f} GB/s)")
        return result


def kernel_vs_sdpa(*, views: int = 8, keys: int = 2048, chunks: int = 8, q_heads: int = 9, kv_heads: int = 3,
                   head_dim: int = 64, dtype=torch.bfloat16, device: str = "cuda", repeats: int = 20) -> dict:
    """(d): SDPA gets the keys already gathered contiguously (its best case); the Triton kernel reads the chunks
    scattered over the cache in place. Achieved bandwidth = bytes of K and V read / kernel time."""
    from attention_kernels.view_attention_triton import view_attention_triton

    gen, per = torch.Generator().manual_seed(0), keys // chunks
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
    q4, scale = q.view(views, q_heads, 1, head_dim), head_dim ** -0.5

    triton = functools.partial(view_attention_triton, q, k_cache, v_cache, layout, inv_freq, scale)
    sdpa = functools.partial(F.scaled_dot_product_attention, q4, k_contig, v_contig, scale=scale, enable_gqa=True)
    ours = triton()
    max_abs_diff = float((ours.float() - sdpa().view_as(ours).float()).abs().max())
    t = interleaved({"triton": triton, "sdpa": sdpa}, repeats, timer=_cuda_timed if device == "cuda" else measured)
    t_triton, t_sdpa = t["triton"].median, t["sdpa"].median
    bytes_read = 2 * views * keys * kv_heads * head_dim * k_cache.element_size()
    return {
        "views": views, "keys_per_view": keys, "chunks_per_view": chunks, "head_dim": head_dim,
        "triton_us": t_triton * 1e6, "sdpa_contiguous_us": t_sdpa * 1e6, "triton_vs_sdpa": t_triton / t_sdpa,
        "triton_gb_per_s": bytes_read / t_triton / 1e9, "sdpa_gb_per_s": bytes_read / t_sdpa / 1e9,
        "max_abs_diff": max_abs_diff,
    }


def plot_streams(result: dict, path, title: str) -> None:
    """Aggregate decode tokens/s against streams, beside perfect scaling and the linear-layer bound at 4."""
    counts = sorted(int(k.rsplit("_", 1)[1]) for k in result if k.startswith("tokens_per_s_"))
    rates = [result[f"tokens_per_s_{n}"] for n in counts]
    fig, ax = subplots(figsize=(6, 4), dpi=120)
    ax.plot(counts, [rates[0] * n for n in counts], ls=":", color="grey", label="perfect scaling (n x 1 stream)")
    ax.plot(counts, rates, marker="o", label="measured: n streams in one forward")
    for n, r in zip(counts, rates):
        ax.annotate(f"{r / rates[0]:.2f}x", (n, r), textcoords="offset points", xytext=(6, -12), fontsize=8)
    if "streams4_bound" in result:
        ax.scatter([4], [rates[0] * result["streams4_bound"]], marker="_", s=400, color="C3",
                   label=f"bound at 4 from the linear layers alone ({result['streams4_bound']:.2f}x)")
    ax.set(xlabel="decoding streams", ylabel="aggregate tokens/s", xticks=counts, xlim=(0.5, counts[-1] + 1))
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    save_figure(fig, path)

