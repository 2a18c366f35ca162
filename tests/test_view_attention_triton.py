"""The Triton view attention kernel equals the fp64 oracle and the torch reference.

On a machine without a GPU it runs on CPU tensors through the Triton interpreter (~1000x
slower than torch: tiny shapes). TRITON_INTERPRET must be on when triton itself is imported
(its standard library is @triton.jit code). It is set here; when something in this pytest
process imported triton earlier (torch's native ops, a model loader...), the tests below are
skipped here and this module runs once more in a fresh subprocess instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_TRITON_PREIMPORTED = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
_HAS_CUDA = False
if not _TRITON_PREIMPORTED:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("triton")

_HAS_CUDA = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
IN_PROCESS = _HAS_CUDA or os.environ.get("TRITON_INTERPRET") == "1" and not _TRITON_PREIMPORTED

from attention_kernels import ViewLayout, view_attention, view_attention_torch  # noqa: E402

if IN_PROCESS:
    from attention_kernels.view_attention_triton import view_attention_triton  # noqa: E402

from test_view_attention_torch import hf_rotate64, make_case, make_inv_freq  # noqa: E402


CPU_ONLY = {"test_triton_rows_without_keys_are_zero", "test_triton_large_offsets_stay_accurate",
            "test_dispatcher_routes_to_triton", "test_triton_rejects_bad_head_dim"}


@pytest.fixture(autouse=True)
def _needs_in_process(request):
    if request.node.name != "test_triton_suite_in_fresh_process" and not IN_PROCESS:
        pytest.skip("triton was imported before TRITON_INTERPRET=1; covered by the subprocess run")
    if _HAS_CUDA and request.node.originalname in CPU_ONLY:
        pytest.skip("builds CPU tensors; the parametrized cases cover CUDA")


def _to_cuda(case):
    for name in ("q", "k_cache", "v_cache", "inv_freq"):
        setattr(case, name, getattr(case, name).cuda())
    case.layout = case.layout.to("cuda")
    return case


def test_triton_suite_in_fresh_process():
    if IN_PROCESS:
        pytest.skip("running in this process")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__).resolve())],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]

SMALL = [
    dict(hq=2, hkv=2, d=64, rope_type="default"),
    dict(hq=3, hkv=1, d=64, rope_type="linear"),
    dict(hq=4, hkv=1, d=128, rope_type="llama3"),
    dict(hq=2, hkv=1, d=256, rope_type="default"),
    dict(hq=4, hkv=2, d=64, rope_type="llama3"),
    dict(hq=3, hkv=3, d=128, rope_type="default"),
]


def _run_both(case, **kw):
    tri = view_attention_triton(
        case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale, **kw
    )
    ref = view_attention_torch(case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
    return tri, ref


@pytest.mark.parametrize("block_n", [4, 16])
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("params", SMALL, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_triton_matches_torch_and_oracle(params, seed, block_n):
    case = make_case(seed, max_block=7, n_views=2, **params)
    if _HAS_CUDA:
        case = _to_cuda(case)
    tri, ref = _run_both(case, block_n=block_n)
    assert tri.shape == case.q.shape and tri.dtype == case.q.dtype
    assert torch.isfinite(tri).all()
    torch.testing.assert_close(tri, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(tri.double().cpu(), case.expected, atol=1e-5, rtol=0)


def test_triton_gqa9_3_three_views():
    case = make_case(4, hq=9, hkv=3, d=64, max_block=8, n_views=3)
    if _HAS_CUDA:
        case = _to_cuda(case)
    tri, ref = _run_both(case)
    torch.testing.assert_close(tri, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(tri.double().cpu(), case.expected, atol=1e-5, rtol=0)


def test_triton_rows_without_keys_are_zero():
    d = 64
    inv_freq = make_inv_freq("default", d)
    k, v = torch.randn(8, 1, d), torch.randn(8, 1, d)
    layout = ViewLayout.build([[(0, 4, 4, 4)], []], [(0, 1, 0), (1, 3, 0), (0, 5, 0)])
    out = view_attention_triton(torch.randn(3, 2, d), k, v, layout, inv_freq, 0.125)
    assert torch.isfinite(out).all()
    assert out[0].abs().max() == 0 and out[1].abs().max() == 0 and out[2].abs().max() > 0


def test_triton_large_offsets_stay_accurate():
    """Offsets in the thousands: the kernel reduces angles in fp64, so fp32 stays within 1e-5."""
    torch.manual_seed(1)
    d, n, base = 64, 6, 5000
    inv_freq = make_inv_freq("default", d)
    k_raw = torch.randn(n, 1, d, dtype=torch.float64)
    v = torch.randn(n, 1, d, dtype=torch.float64)
    q_raw = torch.randn(1, 1, d, dtype=torch.float64)
    k_cache = hf_rotate64(k_raw, torch.arange(n), inv_freq)
    q = hf_rotate64(q_raw, torch.tensor([n - 1]), inv_freq)
    layout = ViewLayout.build([[(0, n, base, base)]], [(0, base + n - 1, base)])
    out = view_attention_triton(q.float(), k_cache.float(), v.float(), layout, inv_freq, d**-0.5)
    kg = hf_rotate64(k_raw, torch.arange(n) + base, inv_freq)
    qg = hf_rotate64(q_raw, torch.tensor([base + n - 1]), inv_freq)
    ref = torch.softmax(d**-0.5 * (kg[:, 0] @ qg[0, 0]), 0) @ v[:, 0]
    torch.testing.assert_close(out[0, 0].double(), ref, atol=1e-5, rtol=0)


def test_dispatcher_routes_to_triton():
    case = make_case(0, hq=2, hkv=1, max_block=5, n_views=2)
    args = (case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
    tri = view_attention(*args, backend="triton")
    ref = view_attention(*args, backend="torch")
    torch.testing.assert_close(tri, ref, atol=1e-5, rtol=0)


def test_dispatcher_errors(monkeypatch):
    case = make_case(0, hq=2, hkv=1, max_block=5, n_views=2)
    args = (case.q, case.k_cache, case.v_cache, case.layout, case.inv_freq, case.scale)
    with pytest.raises(ValueError, match="backend"):
        view_attention(*args, backend="cuda")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        view_attention(*args, backend="triton")


def test_triton_rejects_bad_head_dim():
    inv_freq = torch.ones(24)
    layout = ViewLayout.build([[(0, 1, 0, 0)]], [(0, 0, 0)])
    with pytest.raises(ValueError, match="head_dim"):
        view_attention_triton(torch.randn(1, 1, 48), torch.randn(1, 1, 48), torch.randn(1, 1, 48), layout, inv_freq, 1.0)
