"""Vision-language models: the language model the runner drives, and the vision side that turns frames into the
embeddings a frame block prefills.

Idefics3/SmolVLM and LLaVA-style models put an image into the language model as embeddings at placeholder tokens,
at 1D rotary positions like any text, so a frame block can hold them and every view reads them like other blocks.
Families whose language model rotates by several axes (Qwen2-VL and later: time, height, width) are refused.
"""

import numpy as np
import torch

from agent_runtime.errors import UserError, first_line

VLM_TYPES = ("idefics3", "smolvlm", "llava")
MULTI_AXIS_ROPE_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen2_5_omni", "qwen3_vl", "qwen3_vl_moe", "qwen3_omni_moe",
                         "glm4v", "glm4v_moe", "ernie4_5_vl", "keye_vl", "paddleocr_vl")
TINY_IMAGE_TOKEN = "<empty_output>"  # tiny models read the embedded tokenizer: a special token it never writes
TINY_TEXT = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True, rope_theta=10000.0)
TINY_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)


def refuse_multi_axis_rope(model_type: str | None, *ropes) -> None:
    """One line for families the views cannot run: their image tokens have several rotary positions each. ropes:
    the config's rotary settings (dicts or None), from the model and its text model."""
    mtype = model_type or "?"
    if mtype in MULTI_AXIS_ROPE_TYPES or any(isinstance(r, dict) and "mrope_section" in r for r in ropes):
        raise UserError(f"model type '{mtype}' uses multi-axis rotary positions (each image token rotated by time, "
                        "height and width): the views rotate a query by one position per token, so its image blocks "
                        "cannot be read exactly; use an Idefics3/SmolVLM or a LLaVA-style (Llama, Qwen2) model")


def tiny_vision_config(kind: str, image_token_id: int):
    """A small random-weight VLM config: tiny:smolvlm (Idefics3, Llama text model, 64x64 images, 16 tokens a frame)
    or tiny:llava (CLIP tower + projector, Qwen2 text model, 32x32 images, 16 tokens a frame)."""
    from transformers import CLIPVisionConfig, Idefics3Config, LlamaConfig, LlavaConfig, Qwen2Config

    if kind == "smolvlm":
        return Idefics3Config(vision_config=dict(**TINY_VISION, image_size=64, patch_size=8),
                              text_config=LlamaConfig(**TINY_TEXT, head_dim=16).to_dict(), scale_factor=2,
                              image_token_id=image_token_id, tie_word_embeddings=True)
    return LlavaConfig(vision_config=CLIPVisionConfig(**TINY_VISION, image_size=32, patch_size=8, projection_dim=32),
                       text_config=Qwen2Config(**TINY_TEXT, use_sliding_window=False).to_dict(),
                       image_token_index=image_token_id, vision_feature_layer=-2,
                       vision_feature_select_strategy="default", tie_word_embeddings=True)


def smolvlm_256m_shaped(torch_dtype) -> tuple:
    """(VLM, image processor) with SmolVLM-256M's shapes and random weights: a SigLIP base-patch16-512 tower (93M),
    4x pixel shuffle (64 tokens an image), SmolLM2-135M. Its weights don't ship; for timings, which only the
    shapes decide."""
    from transformers import AutoModelForImageTextToText, Idefics3Config, Idefics3ImageProcessorPil, LlamaConfig

    text = LlamaConfig(vocab_size=49280, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0, tie_word_embeddings=True,
                       max_position_embeddings=8192)
    config = Idefics3Config(vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                               num_attention_heads=12, image_size=512, patch_size=16),
                            text_config=text.to_dict(), scale_factor=4, image_token_id=49190, tie_word_embeddings=True)
    processor = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 512},
                                          max_image_size={"longest_edge": 512})
    return AutoModelForImageTextToText.from_config(config, dtype=torch_dtype).eval(), processor


def tiny_image_processor(kind: str):
    """The tiny models' image processors: the families' own, at the tiny towers' sizes (one image a frame)."""
    if kind == "smolvlm":
        from transformers import Idefics3ImageProcessorPil

        return Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 64},
                                         max_image_size={"longest_edge": 64})
    from transformers import CLIPImageProcessorPil

    return CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})


class VisionEncoder:
    """A VLM's image processor, vision tower and projector: screens in, one embedding a placeholder token out.

    A frame is one image (SmolVLM's splitting into tiles is off: one global image, the fewest tokens a frame)."""

    def __init__(self, vlm: torch.nn.Module, processor, tokenizer=None):
        self.vlm, self.processor = vlm, processor
        self.family = "llava" if vlm.config.model_type == "llava" else "idefics3"
        self.image_token_id = int(vlm.config.image_token_id)
        self.before, self.after = self._wrap_tokens(tokenizer)
        self.tokens_per_frame = int(self.encode([np.zeros((120, 160, 3), np.uint8)])[0].shape[0])

    def _wrap_tokens(self, tokenizer) -> tuple[list[int], list[int]]:
        """The tokens the family's own prompts put around a global image (SmolVLM's `<fake_token_around_image>
        <global-img>` ... `<fake_token_around_image>`), where the tokenizer has them; LLaVA puts none."""
        if self.family != "idefics3" or tokenizer is None:
            return [], []
        vocab = tokenizer.get_vocab()
        around, global_tag = vocab.get("<fake_token_around_image>"), vocab.get("<global-img>")
        if around is None or global_tag is None:
            return [], []
        return [around, global_tag], [around]

    def frame_tokens(self) -> list[int]:
        """A frame's tokens: the placeholders whose rows take the image embeddings, with the family's wrapping."""
        return self.before + [self.image_token_id] * self.tokens_per_frame + self.after

    @torch.inference_mode()
    def encode(self, screens: list[np.ndarray]) -> list[torch.Tensor]:
        """Each screen (HxWx3 uint8 RGB) as [tokens, hidden] embeddings, all screens in one batch of the tower."""
        weight = next(self.vlm.parameters())  # where the tower is, and in what precision
        dtype, device = weight.dtype, weight.device
        if self.family == "llava":
            pixels = self.processor(images=list(screens), return_tensors="pt")["pixel_values"]
            features = self.vlm.model.get_image_features(
                pixels.to(device, dtype), vision_feature_layer=self.vlm.config.vision_feature_layer,
                vision_feature_select_strategy=self.vlm.config.vision_feature_select_strategy).pooler_output
        else:
            batch = self.processor(images=[[s] for s in screens], return_tensors="pt", do_image_splitting=False)
            features = self.vlm.model.get_image_features(
                batch["pixel_values"].to(device, dtype), batch["pixel_attention_mask"].to(device)).pooler_output
        return [f.reshape(-1, f.shape[-1]) for f in features]

    def to(self, device) -> "VisionEncoder":
        self.vlm.to(device)
        return self


def language_model(vlm: torch.nn.Module) -> torch.nn.Module:
    """The VLM's language model as a causal LM the runner drives (its own modules, shared, not copied): the text
    model and the LM head, in the family's text architecture, so text and image rows run the same code."""
    from transformers import AutoModelForCausalLM

    text = vlm.model.language_model if vlm.config.model_type == "llava" else vlm.model.text_model
    with torch.device("meta"):  # a shell: every module it has is replaced by the VLM's own
        lm = AutoModelForCausalLM.from_config(text.config)
    lm.model, lm.lm_head, lm.config = text, vlm.lm_head, text.config
    return lm


def load_vision_language(path, torch_dtype):
    """(vlm, image processor, tokenizer) of a local Hugging Face VLM directory."""
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    try:
        vlm = AutoModelForImageTextToText.from_pretrained(path, dtype=torch_dtype)
        return vlm, AutoImageProcessor.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UserError(f"could not load the vision-language model from {path}: {first_line(e)}") from None
