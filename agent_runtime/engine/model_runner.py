"""One batched forward for many streams, each reading its own view of the shared KV blocks.

All new tokens become one flat sequence at block-local positions; the attention writes every new KV into the store
first, then runs view attention. The forward is DecoderForward over the transformers model's own modules (the
same arithmetic, less Python), or the transformers forward itself with our attention registered
(forward_impl="transformers": other families, and the side-by-side timing of `bench step`).
"""

import contextlib
import functools
from dataclasses import dataclass, field

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.model_loader import LoadedModel, check_supported
from agent_runtime.model.cpu_path import CpuPath, cpu_path, torch_threads
from agent_runtime.model.decoder_forward import LEAN_MODEL_TYPES, DecoderForward
from agent_runtime.model.linear_kernels import adopt_linears, step_kernels
from agent_runtime.engine.view import View
from attention_kernels import view_attention
from attention_kernels.view_attention_torch import prepare_view_attention
from attention_kernels.view_layout import ViewLayout

ATTENTION_NAME = "doom_view"
FP32_ATTENTION_MAX_ROWS = 8  # steps of at most this many rows (decodes) attend in fp32, on one thread


@dataclass
class StreamInput:
    """New tokens for one stream: appended to view.own, attending over the whole view."""

    view: View
    tokens: list[int]
    logits: str = "last"  # "last", "all" or "none"
    images: torch.Tensor | None = None  # [n, hidden]: the embeddings of its n image placeholder tokens, in order


@dataclass
class StepContext:
    """What the attention function needs for this forward; built once, shared by all layers."""

    store: KVBlockStore
    write_slots: torch.Tensor
    layout: ViewLayout
    inv_freq: torch.Tensor
    backend: str
    prepared: object = None
    compute_dtype: torch.dtype = torch.float32
    single_thread: bool = False  # attention ops too small to split across threads


@dataclass
class StepResult:
    logits: list[torch.Tensor | None]
    batch: list[tuple[str, int]] = field(default_factory=list)  # (view name, new tokens) per stream


def _attend(ctx: StepContext, layer: int, query, key, value, scaling: float | None = None) -> torch.Tensor:
    """Write the new KV of `layer` into the store, then attend over the views; all [T, heads, head_dim]."""
    k_cache, v_cache = ctx.store.k[layer], ctx.store.v[layer]
    k_cache.index_copy_(0, ctx.write_slots, key.to(k_cache.dtype))
    v_cache.index_copy_(0, ctx.write_slots, value.to(v_cache.dtype))
    q = query.to(ctx.compute_dtype)
    with torch_threads(1) if ctx.single_thread else contextlib.nullcontext():
        out = view_attention(q, k_cache, v_cache, ctx.layout, ctx.inv_freq,
                             scaling if scaling is not None else q.shape[-1] ** -0.5, prepared=ctx.prepared,
                             backend=ctx.backend)
    return out.to(query.dtype)


def _view_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention hook: query [1, Hq, T, D], key/value [1, Hkv, T, D] -> [1, T, Hq, D]."""
    out = _attend(kwargs["doom_view_step"], module.layer_idx, query[0].transpose(0, 1), key[0].transpose(0, 1),
                  value[0].transpose(0, 1), scaling)
    return out.unsqueeze(0), None


AttentionInterface.register(ATTENTION_NAME, _view_attention_forward)
AttentionMaskInterface.register(ATTENTION_NAME, lambda *args, **kwargs: None)  # the view layout carries causality


class ModelRunner:
    """Runs batches of StreamInputs over a KVBlockStore with a transformers causal LM."""

    def __init__(self, loaded: LoadedModel, store: KVBlockStore, *, backend: str = "torch", device: str = "cpu",
                 cpu: CpuPath | None = None, packed_linears: bool = True, forward_impl: str = "lean"):
        """cpu: the CPU path whose kernel table the linears follow (default: this machine's, probed once and
        cached); packed_linears=False keeps every linear on the native kernels; forward_impl: "lean"
        (DecoderForward, where the family has one) or "transformers"."""
        check_supported(loaded.model.config)
        self.model, self.store, self.backend, self.device = loaded.model, store, backend, torch.device(device)
        self.model.set_attn_implementation(ATTENTION_NAME)
        config, rope_type = self.model.config, self.model.config.rope_parameters["rope_type"]
        # RoPE frequencies in fp32 (with linear/llama3 frequency scaling, without magnitude scaling)
        inv_freq, _ = (self.model.model.rotary_emb.compute_default_rope_parameters(config) if rope_type == "default"
                       else ROPE_INIT_FUNCTIONS[rope_type](config, "cpu"))
        self.inv_freq = inv_freq.float().to(self.device)
        self.model_dtype = next(self.model.parameters()).dtype
        if forward_impl not in ("lean", "transformers"):
            raise ValueError(f"forward_impl must be 'lean' or 'transformers', not {forward_impl!r}")
        lean = forward_impl == "lean" and config.model_type in LEAN_MODEL_TYPES
        self.lean = DecoderForward(self.model, fuse=self.device.type == "cpu") if lean else None
        self.forwards = self.packed_linears = 0
        self.image_token_id = loaded.vision.image_token_id if loaded.vision is not None else None
        self.kernels = self.cpu = None
        if self.device.type == "cpu":
            cpu = self.cpu = cpu or loaded.cpu or cpu_path(threads=torch.get_num_threads())
            self.kernels = cpu.table(self.model_dtype)
            if packed_linears:
                # the linears the lean forward stacks are packed only if the transformers forward ever runs them
                lean = self.lean
                self.packed_linears = adopt_linears(self.model, self.kernels, cpu.features,
                                                    lazy=lean.fused_away if lean is not None else ())
                if lean is not None and lean.fused:
                    adopt_linears(torch.nn.ModuleList(lean.fused), self.kernels, cpu.features)

    @torch.inference_mode()
    def forward(self, inputs: list[StreamInput]) -> StepResult:
        """One forward for all streams. New KV of every stream is written before any attention reads."""
        if not inputs:
            return StepResult(logits=[])
        owners = [inp.view.own for inp in inputs]
        if any(o is None for o in owners):
            raise ValueError("every stream in a batch needs an own block to write to (View.start_own)")
        if len({id(o) for o in owners}) != len(owners):
            raise ValueError("two streams in one batch write the same block")
        pending = {id(o): len(inp.tokens) for o, inp in zip(owners, inputs)}  # written in this same forward
        rows = _BatchRows()
        views_chunks = [self._add_stream(rows, v_index, inp, pending) for v_index, inp in enumerate(inputs)]
        ctx = self._step_context(ViewLayout.build(views_chunks, rows.queries, device=self.device), rows)
        with step_kernels(self.kernels, len(rows.token_ids)) if self.kernels else contextlib.nullcontext():
            logits = self._logits(ctx, self._token_inputs(rows, inputs), torch.tensor(rows.positions, device=self.device),
                                  torch.tensor(rows.keep or [0], device=self.device))
        self.forwards += 1
        for own, inp in zip(owners, inputs):
            own.isolated = not inp.view.blocks and (own.isolated or own.length == 0)  # training masks such blocks
            self.store.commit(own, inp.tokens)
        return StepResult(logits=_split_logits(logits.float().cpu(), inputs),  # samplers run on the CPU
                          batch=[(inp.view.name, len(inp.tokens)) for inp in inputs])

    def _logits(self, ctx: StepContext, tokens: dict, positions: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """[len(keep), vocab]: the lean forward, or the transformers one with our attention registered."""
        if self.lean is not None:
            return self.lean(functools.partial(_attend, ctx), positions, keep, **{k: t[0] for k, t in tokens.items()})
        out = self.model(**tokens, position_ids=positions[None], use_cache=False, logits_to_keep=keep,
                         doom_view_step=ctx)
        return out.logits[0]

    def _token_inputs(self, rows: "_BatchRows", inputs: list[StreamInput]) -> dict:
        """input_ids; or, when some streams bring images, the embeddings with the images' at their placeholder rows
        (as the vision-language model's own forward merges them; a text stream's rows are never replaced)."""
        ids = torch.tensor([rows.token_ids], device=self.device)
        images = [inp.images for inp in inputs if inp.images is not None]
        if not images:
            return {"input_ids": ids}
        if self.image_token_id is None:
            raise ValueError("image rows need a vision-language model")
        mask = torch.tensor([t == self.image_token_id and inp.images is not None
                             for inp in inputs for t in inp.tokens], device=self.device)
        features = torch.cat(images).to(self.device)
        if int(mask.sum()) != features.shape[0]:
            raise ValueError(f"{int(mask.sum())} image placeholder tokens for {features.shape[0]} image embeddings")
        embeds = self.model.get_input_embeddings()(ids)
        embeds[0, mask] = features.to(embeds.dtype)
        return {"inputs_embeds": embeds}

    def _add_stream(self, rows: "_BatchRows", v_index: int, inp: StreamInput, pending: dict) -> list:
        """The stream's rows (tokens, positions, queries, kept logits) and the chunks its view reads."""
        n = len(inp.tokens)
        if n == 0:
            raise ValueError(f"stream {inp.view.name!r} has no new tokens")
        own = inp.view.own
        start = own.length
        rows.slots.append(self.store.reserve_slots(own, n))
        chunks, own_offset, offset = [], 0, 0
        for block in inp.view.ordered():
            length = block.length + pending.get(id(block), 0)
            if block is own:
                own_offset = offset
            for slot, count, local in self.store.chunks(block, length):
                chunks.append((slot, count, offset + local, offset))
            offset += length
        first_row = len(rows.token_ids)
        rows.token_ids += [int(t) for t in inp.tokens]
        rows.positions += range(start, start + n)
        rows.queries += [(v_index, own_offset + p, own_offset) for p in range(start, start + n)]
        if inp.logits == "last":
            rows.keep.append(first_row + n - 1)
        elif inp.logits == "all":
            rows.keep.extend(range(first_row, first_row + n))
        return chunks

    def _step_context(self, layout: ViewLayout, rows: "_BatchRows") -> StepContext:
        ctx = StepContext(store=self.store, write_slots=torch.cat(rows.slots).to(self.device), layout=layout,
                          inv_freq=self.inv_freq, backend=self.backend,
                          compute_dtype=self.model_dtype)  # the Triton kernel accumulates in fp32 by itself
        if self.backend == "torch":
            # few rows (decode): fp32 attention math beats bf16 elementwise ops on CPU; many rows (prefill):
            # the model dtype, so the gathered keys need no conversion
            # (its small ops on one thread: split over two they ran 1.7x slower in some processes, never faster)
            decode = len(rows.token_ids) <= FP32_ATTENTION_MAX_ROWS
            ctx.compute_dtype = torch.float32 if decode else self.model_dtype
            ctx.single_thread = decode and self.device.type == "cpu"
            ctx.prepared = prepare_view_attention(layout, self.inv_freq, dtype=ctx.compute_dtype)
        return ctx

    def prefill(self, view: View, tokens: list[int], chunk_size: int = 256) -> torch.Tensor | None:
        """Append tokens to view.own in chunks; returns the logits after the last token."""
        logits = None
        for i in range(0, len(tokens), chunk_size):
            logits = self.forward([StreamInput(view, tokens[i : i + chunk_size])]).logits[0]
        return logits


class _BatchRows:
    """The rows of one forward, stream after stream."""

    def __init__(self):
        self.token_ids, self.positions, self.slots, self.queries, self.keep = [], [], [], [], []


def _split_logits(logits_all: torch.Tensor, inputs: list[StreamInput]) -> list:
    """Each stream's kept logits: its last row, all its rows, or None."""
    results, cursor = [], 0
    for inp in inputs:
        if inp.logits == "last":
            results.append(logits_all[cursor])
            cursor += 1
        elif inp.logits == "all":
            results.append(logits_all[cursor: cursor + len(inp.tokens)])
            cursor += len(inp.tokens)
        else:
            results.append(None)
    return results
