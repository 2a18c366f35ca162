"""`bench kv`'s image rows: what one frame costs as a vision-language model's image block, and the frame rate that
allows: tokens a frame, the vision tower's encoding (one frame, and per frame in a batch of four), the frame
block's prefill through the runner.

Rows for the tiny models (what the tests run) and for a model with SmolVLM-256M's shapes and random weights
(timings depend on shapes only; no such weights ship).
"""

import numpy as np
import torch

from agent_runtime.benchmarks.measure import interleaved, progress
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View
from agent_runtime.model.cpu_path import DTYPES
from agent_runtime.model.model_loader import LoadedModel, load_model
from agent_runtime.model.vision_language import VisionEncoder, language_model, smolvlm_256m_shaped
from agent_runtime.session.clocks import measured

SHAPED = "smolvlm-256m-shapes"
IMAGE_MODELS = ("tiny:smolvlm", "tiny:llava", SHAPED)
BATCH = 4


def _loaded(spec: str, dtype: str) -> LoadedModel:
    if spec != SHAPED:
        return load_model(spec, dtype=dtype, tokenizer=False)
    vlm, processor = smolvlm_256m_shaped(DTYPES[dtype])
    return LoadedModel(model=language_model(vlm.requires_grad_(False)), tokenizer=None, model_id=SHAPED,
                       weight_hash="random", vision=VisionEncoder(vlm, processor))


def image_row(spec: str, *, dtype: str, device: str, repeats: int, timer=measured) -> dict:
    """One model's row: the median of `repeats` (after a warm-up) of each cost, interleaved."""
    loaded = _loaded(spec, dtype)
    loaded.model.to(device)
    vision = loaded.vision.to(device)
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=4096, page_size=16,
                                   dtype=next(loaded.model.parameters()).dtype, device=device)
    runner = ModelRunner(loaded, store, device=device, backend="triton" if device == "cuda" else "torch")
    rng = np.random.default_rng(0)
    screens = [rng.integers(0, 256, size=(120, 160, 3), dtype=np.uint8) for _ in range(BATCH)]
    tokens = [198] + vision.frame_tokens()  # the line prefix ("\n"), then the image, as the frame stream writes

    def prefill():
        view = View(store, own_label="frame")
        runner.forward([StreamInput(view, tokens, logits="none", images=features)])
        view.close()

    features = vision.encode(screens[:1])[0]
    timings = interleaved({"encode": lambda: vision.encode(screens[:1]), "encode_batch": lambda: vision.encode(screens),
                           "prefill": prefill}, repeats, timer=timer)
    ms = {key: t.median * 1e3 for key, t in timings.items()}
    ms["encode_batch"] /= BATCH
    row = {"model": spec, "tokens_per_frame": vision.tokens_per_frame, "encode_ms": ms["encode"],
           f"encode_ms_per_frame_batch{BATCH}": ms["encode_batch"], "prefill_ms": ms["prefill"],
           "frames_per_s": 1000.0 / (ms["encode"] + ms["prefill"])}
    progress(f"(e) {spec}: {row['tokens_per_frame']} tokens a frame, encode {ms['encode']:.1f} ms "
             f"({ms['encode_batch']:.1f} ms a frame in a batch of {BATCH}), prefill {ms['prefill']:.1f} ms: "
             f"{row['frames_per_s']:.1f} frames/s")
    del runner, store, loaded
    if device == "cuda":
        torch.cuda.empty_cache()
    return row
