"""Views over image blocks are exact: a vision-language model's frames, prefilled into blocks of their own and read
through views (shared, reordered, dropped), give the logits of the model's own forward over the same sequence.

The oracle is the whole VLM (vision tower, projector, language model; eager attention) fed token ids with image
placeholders and the pixel values its own image processor makes: it merges the images itself, so nothing of the
runtime's image path (VisionEncoder, the runner's embedding rows) is in it.
"""

import copy
import os
import random

import numpy as np
import pytest
import torch

from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View
from agent_runtime.errors import UserError
from agent_runtime.model.model_loader import load_model
from agent_runtime.model.vision_language import refuse_multi_axis_rope

pytestmark = pytest.mark.cpu_sensitive  # `make test` runs it again on the forced AVX2 path

TOL = 1e-4
BACKEND = os.environ.get("VIEW_ATTENTION_BACKEND", "torch")  # triton: tests/test_runner_triton_backend.py


class VLMOracle:
    """The VLM's own forward over a sequence of (tokens, isolated, screens) segments."""

    def __init__(self, loaded):
        self.vision = loaded.vision
        self.vlm = copy.deepcopy(loaded.vision.vlm)
        self.vlm.set_attn_implementation("eager")

    @torch.inference_mode()
    def logits(self, segments) -> torch.Tensor:
        tokens = [t for seg, _, _ in segments for t in seg]
        screens = [s for _, _, shots in segments for s in shots]
        n = len(tokens)
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        start = 0
        for seg, isolated, _ in segments:
            if isolated:
                allowed[start:start + len(seg), :start] = False
            start += len(seg)
        mask = torch.zeros(1, 1, n, n).masked_fill_(~allowed, torch.finfo(torch.float32).min)
        kwargs = {}
        if screens:
            processor = self.vision.processor
            if self.vision.family == "llava":
                kwargs = processor(images=screens, return_tensors="pt")
            else:  # one sample holding every image, in order
                kwargs = processor(images=[screens], return_tensors="pt")
        out = self.vlm(input_ids=torch.tensor([tokens]), position_ids=torch.arange(n)[None], attention_mask=mask,
                       use_cache=False, **kwargs)
        return out.logits[0].float()


@pytest.fixture(scope="module", params=["smolvlm", "llava"])
def rig(request):
    loaded = load_model(f"tiny:{request.param}", dtype="float32", seed=3)
    oracle = VLMOracle(loaded)  # before the runner packs the language model's linears
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=4096, page_size=4)
    return ModelRunner(loaded, store, backend=BACKEND), oracle, loaded.vision


def screens(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(120, 160, 3), dtype=np.uint8) for _ in range(n)]


def toks(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(100, 40000) for _ in range(n)]


class Segments:
    """Blocks made here, with what the oracle needs of each: its tokens, whether isolated, its screens."""

    def __init__(self, runner, vision):
        self.runner, self.vision, self.screens = runner, vision, {}

    def text_block(self, tokens, label):
        block = self.runner.store.create(label)
        view = View(self.runner.store, own=block)
        self.runner.prefill(view, tokens, chunk_size=5)
        view.close()
        return block

    def frame_block(self, rng, screen, label):
        """A frame block as the frame stream writes one: a few text tokens, then the frame's image tokens."""
        block = self.runner.store.create(label)
        view = View(self.runner.store, own=block)
        tokens = toks(rng, 2) + self.vision.frame_tokens()
        self.runner.forward([StreamInput(view, tokens, logits="none", images=self.vision.encode([screen])[0])])
        view.close()
        self.screens[block.id] = [screen]
        return block

    def of(self, view: View):
        return [(b.token_ids, True, self.screens.get(b.id, [])) for b in view.blocks] + [
            (view.own.token_ids, False, self.screens.get(view.own.id, []))]


def assert_close(ours, ref):
    assert ours.shape == ref.shape
    assert ref.std() > 1e-3, "oracle logits are degenerate; the comparison would prove nothing"
    diff = (ours - ref).abs().max().item()
    assert diff <= TOL, f"max |logit diff| {diff:.2e} > {TOL}"


def test_image_blocks_shared_reordered_dropped_equal_the_models_forward(rig):
    runner, oracle, vision = rig
    rng, store = random.Random(0), runner.store
    seg = Segments(runner, vision)
    system = seg.text_block(toks(rng, 9), "system")
    frames = [seg.frame_block(rng, shot, f"frame{i}") for i, shot in enumerate(screens(3, seed=1))]
    thinker = View(store, [system, *frames], own=store.create("thinker"), name="thinker")
    action = View(store, [frames[2], system, frames[0]], own=store.create("action"), name="action")  # reordered
    step = runner.forward([StreamInput(thinker, toks(rng, 4), "all"), StreamInput(action, toks(rng, 3), "all")])
    assert_close(step.logits[0], oracle.logits(seg.of(thinker))[-4:])
    assert_close(step.logits[1], oracle.logits(seg.of(action))[-3:])
    thinker.drop(frames[0])  # an old frame leaves the view: nothing after it is recomputed
    thinker.set_own(store.create("thinker2"))
    step = runner.forward([StreamInput(thinker, toks(rng, 2), "all")])
    assert_close(step.logits[0], oracle.logits(seg.of(thinker))[-2:])
    for view in (thinker, action):
        view.close()


def test_a_frame_prefilled_in_the_same_forward_as_decodes(rig):
    """A new frame's image block is prefilled while two streams decode over the older frames; then they read it."""
    runner, oracle, vision = rig
    rng, store = random.Random(1), runner.store
    seg = Segments(runner, vision)
    system = seg.text_block(toks(rng, 6), "system")
    old = seg.frame_block(rng, screens(1, seed=2)[0], "old")
    decoders = [View(store, [system, old], own=store.create(f"d{i}"), name=f"d{i}") for i in range(2)]
    runner.forward([StreamInput(v, toks(rng, 3), "none") for v in decoders])
    new, shot = store.create("new"), screens(1, seed=3)[0]
    frame_view = View(store, own=new, name="frame")
    frame_tokens = toks(rng, 2) + vision.frame_tokens()
    step = runner.forward([StreamInput(frame_view, frame_tokens, "none", images=vision.encode([shot])[0])] +
                          [StreamInput(v, toks(rng, 1)) for v in decoders])
    frame_view.close()
    seg.screens[new.id] = [shot]
    for view, logits in zip(decoders, step.logits[1:]):
        assert_close(logits, oracle.logits(seg.of(view))[-1])
    reader = View(store, [system, new, old], own=store.create("reader"), name="reader")  # the new frame, read next
    step = runner.forward([StreamInput(reader, toks(rng, 2), "all")])
    assert_close(step.logits[0], oracle.logits(seg.of(reader))[-2:])
    for view in (*decoders, reader):
        view.close()


def test_batched_encoding_equals_one_at_a_time(rig):
    _, _, vision = rig
    shots = screens(3, seed=4)
    together = vision.encode(shots)
    for shot, batched in zip(shots, together):
        assert batched.shape == (vision.tokens_per_frame, batched.shape[1])
        torch.testing.assert_close(batched, vision.encode([shot])[0], atol=1e-5, rtol=1e-5)
    assert (together[0] - together[1]).abs().max() > 1e-4, "different screens gave the same embeddings"


def test_image_rows_need_matching_placeholders(rig):
    runner, _, vision = rig
    view = View(runner.store, own=runner.store.create("bad"))
    with pytest.raises(ValueError, match="image placeholder tokens"):
        runner.forward([StreamInput(view, vision.frame_tokens()[:-3] + [7, 8, 9], "none",
                                    images=vision.encode(screens(1, seed=5))[0])])
    view.close()


@pytest.mark.parametrize("model_type,rope", [("qwen2_vl", None), ("some_vl", {"type": "mrope", "mrope_section": [2]})])
def test_multi_axis_rotary_families_are_refused_in_one_line(model_type, rope):
    with pytest.raises(UserError, match="multi-axis rotary positions") as err:
        refuse_multi_axis_rope(model_type, rope)
    assert "\n" not in str(err.value)
