"""A transformers decoder-only LM's forward as plain tensor ops over its own modules (gpt-fast style).

Why: a decision step runs ~2,000 small ops across 30 layers, and transformers' per-module Python (output
capture, kwargs plumbing, masks built and dropped) cost ~12% of a step on a 2-core CPU. The arithmetic is the
transformers forward's, op for op (RMSNorm in float32, RoPE as rotate_half, SiLU-gated MLP), so the logits are
bit-identical and reruns keep their decisions; tests/test_model_runner_oracle.py holds it to that.
"""

import torch

LEAN_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")  # the families whose layers this reproduces exactly


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderForward:
    """Runs `model` (a transformers causal LM of LEAN_MODEL_TYPES) layer by layer; `attend(layer_index, q, k, v,
    scaling)` gets [T, heads, head_dim] tensors (queries and keys rotated by their positions) and returns the
    attention output in the same shape."""

    def __init__(self, model: torch.nn.Module):
        if model.config.model_type not in LEAN_MODEL_TYPES:
            raise ValueError(f"no lean forward for model type {model.config.model_type!r}")
        self.body, self.lm_head = model.model, model.lm_head
        self.layers = list(self.body.layers[: model.config.num_hidden_layers])
        rotary = self.body.rotary_emb
        self.inv_freq, self.rope_scaling = rotary.inv_freq, rotary.attention_scaling
        self.head_norms = hasattr(self.layers[0].self_attn, "q_norm")  # qwen3: RMSNorm over each head before RoPE

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
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(rows, -1, attn.head_dim)
            k = attn.k_proj(x).view(rows, -1, attn.head_dim)
            v = attn.v_proj(x).view(rows, -1, attn.head_dim)
            if self.head_norms:
                q, k = attn.q_norm(q), attn.k_norm(k)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            h = h + attn.o_proj(attend(index, q, k, v, attn.scaling).reshape(rows, -1))
            x = layer.post_attention_layernorm(h)
            h = h + mlp.down_proj(mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x))
        return self.lm_head(self.body.norm(h[keep]))
