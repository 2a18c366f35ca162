"""The model runner's GPU path (Triton view attention) equals its CPU path, checked under the Triton interpreter."""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import random, torch
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model.model_loader import load_model
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.engine.view import View

loaded = load_model("tiny:llama", dtype="float32", tokenizer=False, seed=2)
rng = random.Random(0)
outs = {}
for backend in ("torch", "triton"):
    store = KVBlockStore.for_model(loaded.config, capacity_tokens=256, page_size=4)
    runner = ModelRunner(loaded, store, backend=backend)
    a = store.create("a")
    v = View(store, own=a)
    runner.prefill(v, [rng.randrange(100, 9000) for _ in range(6)] if backend == "torch" else toks_a)
    toks_a = list(a.token_ids)
    v.close()
    s1, s2 = View(store, [a]), View(store, [a])
    s1.start_own("s1"); s2.start_own("s2")
    new = [[11, 12, 13], [14]]
    step = runner.forward([StreamInput(s1, new[0], "all"), StreamInput(s2, new[1])])
    outs[backend] = torch.cat([step.logits[0].reshape(-1, step.logits[0].shape[-1]), step.logits[1].reshape(1, -1)])
diff = (outs["torch"] - outs["triton"]).abs().max().item()
assert diff < 1e-4, diff
print("ok", diff)
"""


def test_triton_backend_matches_torch_backend_in_the_runner():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stderr[-3000:]


def test_image_blocks_through_the_triton_kernel_equal_the_vision_language_models_forward():
    """The image-block oracle test (tests/test_image_blocks_oracle.py: shared, reordered, dropped) of the Idefics3
    family, its views read by the Triton kernel (both families run it through the torch kernel there)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "VIEW_ATTENTION_BACKEND": "triton", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_image_blocks_oracle.py", "-k",
                           "equal_the_models_forward and smolvlm"],  # one family, one test: the same kernel
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and re.search(r"\b1 passed", proc.stdout), proc.stdout[-3000:] + proc.stderr[-2000:]
