"""A transformers decoder-only LM's forward as plain tensor ops over its own modules (gpt-fast style).

Why: a decision step runs ~2,000 small ops across 30 layers, and transformers' per-module Python (output
capture, kwargs plumbing, masks built and dropped) cost ~12% of a step on a 2-core CPU. The arithmetic is the
transformers forward's, op for op (RMSNorm in float32, RoPE as rotate_half, SiLU-gated MLP), so the logits are
bit-identical and reruns keep their decisions; tests/test_model_runner_oracle.py holds it to that.
"""

import torch

from agent_runtime.model.fused_linears import fused_linear

LEAN_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")  # the families whose layers this reproduces exactly


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' apply_rotary_pos_emb, op for op."""
    return x * cos + _rotate_half(x) * sin


class DecoderForward:
    """Runs `model` (a transformers causal LM of LEAN_MODEL_TYPES) layer by layer; `attend(layer_index, q, k, v,
    scaling)` gets [T, heads, head_dim] tensors (queries and keys rotated by their positions) and returns the
    attention output in the same shape. With `fuse`, q/k/v and gate/up run as one stacked linear each
    (model/fused_linears.py: the same products)."""

    def __init__(self, model: torch.nn.Module, *, fuse: bool = False):
        if model.config.model_type not in LEAN_MODEL_TYPES:
            raise ValueError(f"no lean forward for model type {model.config.model_type!r}")
        self.body, self.lm_head = model.model, model.lm_head
        self.layers = list(self.body.layers[: model.config.num_hidden_layers])
        rotary = self.body.rotary_emb
        self.inv_freq, self.rope_scaling = rotary.inv_freq, rotary.attention_scaling
        self.head_norms = hasattr(self.layers[0].self_attn, "q_norm")  # qwen3: RMSNorm over each head before RoPE
        self.qkv, self.gate_up = [None] * len(self.layers), [None] * len(self.layers)
        self._stacked_from = [self._modules_of(layer) for layer in self.layers]  # a module replaced since: unstacked
        if fuse:
            for i, layer in enumerate(self.layers):
                attn, mlp = layer.self_attn, layer.mlp
                self.qkv[i] = fused_linear(model, f"{i}.qkv", (attn.q_proj, attn.k_proj, attn.v_proj))
                self.gate_up[i] = fused_linear(model, f"{i}.gate_up", (mlp.gate_proj, mlp.up_proj))

    @staticmethod
    def _modules_of(layer) -> tuple:
        """The layer's stackable linears, read from the module dicts (cheap enough to ask every layer each step)."""
        attn, mlp = layer._modules["self_attn"]._modules, layer._modules["mlp"]._modules
        return attn["q_proj"], attn["k_proj"], attn["v_proj"], mlp["gate_proj"], mlp["up_proj"]

    @property
    def fused(self) -> list[torch.nn.Linear]:
        """The stacked linears this forward calls instead of the model's own (for the runner's kernels)."""
        return [m for m in self.qkv + self.gate_up if m is not None]

    def linears(self, model_linears) -> list[torch.nn.Linear]:
        """The linears this forward calls, of `model_linears` (the model's own) and its stacked ones."""
        away = {id(m) for m in self.fused_away}
        return [m for m in model_linears if id(m) not in away] + self.fused

    @property
    def fused_away(self) -> list[torch.nn.Linear]:
        """The model's linears this forward never calls (the transformers forward still does)."""
        out = []
        for layer, qkv, gate_up in zip(self.layers, self.qkv, self.gate_up):
            attn, mlp = layer.self_attn, layer.mlp
            out += [attn.q_proj, attn.k_proj, attn.v_proj] if qkv is not None else []
            out += [mlp.gate_proj, mlp.up_proj] if gate_up is not None else []
        return out

    def __call__(self, attend, position_ids: torch.Tensor, keep: torch.Tensor, *, input_ids: torch.Tensor | None = None,
                 inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [len(keep), vocab] of rows `keep`; input_ids [T] or inputs_embeds [T, hidden], position_ids [T]."""
        h = self.body.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        freqs = position_ids[:, None].float() * self.inv_freq.to(device=h.device, dtype=torch.float)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = (angles.cos() * self.rope_scaling).to(h.dtype)[:, None, :]  # [T, 1, head_dim]: broadcast over heads
        sin = (angles.sin() * self.rope_scaling).to(h.dtype)[:, None, :]
        rows = h.shape[0]
        for index, layer in enumerate(self.layers):
            attn, mlp = layer.self_attn, layer.mlp
            qkv, gate_up = (self.qkv[index], self.gate_up[index]) if self._still_stacked(index) else (None, None)
            x = layer.input_layernorm(h)
            q, k, v = self._qkv(attn, x, rows, cos, sin, qkv)
            h = h + attn.o_proj(attend(index, q, k, v, attn.scaling).reshape(rows, -1))
            x = layer.post_attention_layernorm(h)
            if gate_up is None:
                gate, up = mlp.gate_proj(x), mlp.up_proj(x)
            else:
                gate, up = gate_up(x).split(mlp.gate_proj.out_features, dim=-1)
            h = h + mlp.down_proj(mlp.act_fn(gate) * up)
        return self.lm_head(self.body.norm(h[keep]))

    def _still_stacked(self, index: int) -> bool:
        """The layer was stacked and its linears are still the modules stacked (peft wrapping them for training
        replaces them: then the layer runs its own modules)."""
        if self.qkv[index] is None and self.gate_up[index] is None:
            return False
        return all(a is b for a, b in zip(self._modules_of(self.layers[index]), self._stacked_from[index]))

    def _qkv(self, attn, x: torch.Tensor, rows: int, cos: torch.Tensor, sin: torch.Tensor, qkv):
        """[T, heads, head_dim] queries and keys rotated by their positions, and values, of one layer; `qkv`: its
        stacked linear (None: its own three). Stacked, the queries and keys sit side by side and are rotated in one
        pass (elementwise: the same values)."""
        d = attn.head_dim
        if qkv is not None and not self.head_norms:
            q_width, k_width = attn.q_proj.out_features, attn.k_proj.out_features
            out = qkv(x)
            qk = _rope(out[:, : q_width + k_width].view(rows, -1, d), cos, sin)
            return qk[:, : q_width // d], qk[:, q_width // d:], out[:, q_width + k_width:].view(rows, -1, d)
        if qkv is None:
            q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
        else:
            q, k, v = qkv(x).split((attn.q_proj.out_features, attn.k_proj.out_features,
                                    attn.v_proj.out_features), dim=-1)
        q, k, v = q.view(rows, -1, d), k.view(rows, -1, d), v.view(rows, -1, d)
        if self.head_norms:
            q, k = attn.q_norm(q), attn.k_norm(k)
        return _rope(q, cos, sin), _rope(k, cos, sin), v
