"""View attention through the model runner equals a plain transformers forward over the concatenated tokens."""

from __future__ import annotations

import random

import pytest
import torch

from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.model_loader import load_model
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View
from tests.oracle import HFOracle

pytestmark = pytest.mark.cpu_sensitive  # `make test` runs it again on the forced AVX2 path

ARCHS = ["llama", "llama3", "qwen2", "qwen3"]
TOL = 1e-4


@pytest.fixture(scope="module", params=ARCHS)
def rig(request):
    loaded = load_model(f"tiny:{request.param}", dtype="float32", tokenizer=False, seed=1)
    oracle = HFOracle(loaded.model)
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=4096, page_size=4)
    return ModelRunner(loaded, store), oracle


def toks(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(100, 40000) for _ in range(n)]


def isolated_block(runner: ModelRunner, tokens: list[int], label: str):
    """A block prefilled in a view of its own (its tokens saw only themselves)."""
    block = runner.store.create(label)
    view = View(runner.store, own=block)
    runner.prefill(view, tokens, chunk_size=5)
    view.close()
    return block


def assert_close(ours: torch.Tensor, ref: torch.Tensor):
    assert ours.shape == ref.shape
    assert ref.std() > 1e-3, "oracle logits are degenerate; the comparison would prove nothing"
    diff = (ours - ref).abs().max().item()
    assert diff <= TOL, f"max |logit diff| {diff:.2e} > {TOL}"


def segments(view: View):
    return [(b.token_ids, True) for b in view.blocks] + [(view.own.token_ids, False)]


def test_chained_prefill_and_decode_equal_plain_forward(rig):
    runner, oracle = rig
    rng = random.Random(0)
    store = runner.store
    a, b, c = store.create("a"), store.create("b"), store.create("c")
    runner.prefill(View(store, own=a), toks(rng, 7), chunk_size=3)
    runner.prefill(View(store, [a], own=b), toks(rng, 9), chunk_size=4)
    view = View(store, [a, b], own=c)
    step = runner.forward([StreamInput(view, toks(rng, 6), logits="all")])
    ref = oracle.logits([(view.token_ids(), False)])
    assert_close(step.logits[0], ref[-6:])
    for _ in range(3):
        nxt = int(step.logits[0].reshape(-1, step.logits[0].shape[-1])[-1].argmax())
        step = runner.forward([StreamInput(view, [nxt])])
        assert_close(step.logits[0], oracle.logits([(view.token_ids(), False)])[-1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_views_shared_reordered_dropped_mixed_batch(rig, seed):
    runner, oracle = rig
    rng = random.Random(seed)
    store = runner.store
    blocks = [isolated_block(runner, toks(rng, rng.randint(1, 11)), f"x{i}") for i in range(5)]
    views = []
    for s in range(3):
        chosen = rng.sample(blocks, rng.randint(3, 5))  # shared by several views, in different orders
        views.append(View(store, chosen, own=store.create(f"own{s}"), name=f"s{s}"))
    # mixed prefill and decode in one forward
    new = [toks(rng, 5), toks(rng, 3), toks(rng, 1)]
    step = runner.forward([StreamInput(v, t, logits="all") for v, t in zip(views, new)])
    assert step.batch == [("s0", 5), ("s1", 3), ("s2", 1)]
    for v, t, logits in zip(views, new, step.logits):
        assert_close(logits, oracle.logits(segments(v))[-len(t):])
    # drop a middle block from view 0 (no recompute) and start its next paragraph; others keep decoding
    views[0].drop(views[0].blocks[1])
    views[0].set_own(store.create("own0b"))
    step = runner.forward([StreamInput(v, toks(rng, 1)) for v in views])
    for v, logits in zip(views, step.logits):
        assert_close(logits, oracle.logits(segments(v))[-1])
    for v in views:
        v.close()
    for b in blocks:
        store.release(b)
    assert store.used_pages == sum(len(b.pages) for b in store.blocks.values())


def test_streams_see_each_others_tokens_of_the_same_step(rig):
    runner, oracle = rig
    rng = random.Random(5)
    store = runner.store
    x1, x2 = isolated_block(runner, toks(rng, 6), "x1"), isolated_block(runner, toks(rng, 4), "x2")
    own_a, own_b = store.create("a"), store.create("b")
    view_a = View(store, [x1, x2], own=own_a, name="a")
    view_b = View(store, [x1, x2, own_a], own=own_b, name="b")
    step = runner.forward([StreamInput(view_a, toks(rng, 4), "all"), StreamInput(view_b, toks(rng, 2), "all")])
    ref_b = oracle.logits([(x1.token_ids, True), (x2.token_ids, True), (own_a.token_ids, False), (own_b.token_ids, False)])
    assert_close(step.logits[1], ref_b[-2:])
    blind = oracle.logits([(x1.token_ids, True), (x2.token_ids, True), (own_b.token_ids, False)])
    assert (step.logits[1] - blind[-2:]).abs().max() > 1e-3, "stream b did not see stream a's new tokens"


@pytest.mark.slow
def test_embedded_smollm2_views_equal_plain_forward():
    loaded = load_model(None, dtype="float32", tokenizer=False)
    oracle = HFOracle(loaded.model)
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=1024, page_size=16)
    runner = ModelRunner(loaded, store)
    rng = random.Random(3)
    x = [isolated_block(runner, toks(rng, n), f"x{i}") for i, n in enumerate((12, 20, 9))]
    view = View(store, [x[2], x[0], x[1]], own=store.create("own"))
    step = runner.forward([StreamInput(view, toks(rng, 8), "all")])
    assert_close(step.logits[0], oracle.logits(segments(view))[-8:])
    view.drop(x[0])
    view.set_own(store.create("own2"))
    step = runner.forward([StreamInput(view, toks(rng, 3), "all")])
    assert_close(step.logits[0], oracle.logits(segments(view))[-3:])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_lean_forward_is_bit_identical_to_the_transformers_forward(arch, dtype):
    """Reruns keep their decisions only if the lean forward's arithmetic is the transformers forward's, op for op."""
    loaded = load_model(f"tiny:{arch}", dtype=dtype, tokenizer=False, seed=2)
    logits = {}
    for impl in ("lean", "transformers"):
        store = KVBlockStore.for_model(loaded.config, capacity_tokens=2048, page_size=4,
                                       dtype=getattr(torch, dtype))
        runner = ModelRunner(loaded, store, forward_impl=impl)
        assert (runner.lean is not None) == (impl == "lean")
        rng = random.Random(3)
        shared = isolated_block(runner, toks(rng, 23), "shared")
        views = [View(store, [shared], name=f"s{i}") for i in range(3)]
        for v in views:
            v.start_own(v.name)
        out = [runner.forward([StreamInput(views[0], toks(rng, 9), logits="all"),  # a prefill beside two decodes
                               StreamInput(views[1], toks(rng, 1)), StreamInput(views[2], toks(rng, 1))])]
        out.append(runner.forward([StreamInput(v, toks(rng, 1)) for v in views]))  # three decodes
        logits[impl] = [t for result in out for t in result.logits]
    assert all(torch.equal(a, b) for a, b in zip(logits["lean"], logits["transformers"]))
    assert logits["lean"][0].std() > 1e-3


def test_an_unknown_forward_impl_is_refused():
    loaded = load_model("tiny:llama", dtype="float32", tokenizer=False)
    with pytest.raises(ValueError, match="forward_impl"):
        ModelRunner(loaded, KVBlockStore.for_model(loaded.config, capacity_tokens=64), forward_impl="fast")
