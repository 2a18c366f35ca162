"""The GPU kernel benchmark's set-up is right: under the Triton interpreter it matches SDPA on the copy."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import torch
from agent_runtime.benchmarks.kv_bench import kernel_vs_sdpa
r = kernel_vs_sdpa(views=2, keys=32, chunks=4, q_heads=4, kv_heads=2, device="cpu", repeats=1, dtype=torch.float32)
assert r["max_abs_diff"] < 1e-4, r
assert r["triton_gb_per_s"] > 0 and r["sdpa_gb_per_s"] > 0
print("ok")
"""


def test_kernel_bench_compares_equal_outputs_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
