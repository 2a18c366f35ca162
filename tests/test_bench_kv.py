"""`bench kv` on a tiny model: every ratio is measured, blocks are all released afterwards."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_bench_kv_json_has_the_ratios_and_leaves_the_pool_empty(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "agent_runtime.cli", "bench", "kv", "--model", "tiny:llama",
                           "--repeats", "3", "--json", "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("machine: ")
    result = json.loads(proc.stdout)
    for key in ("view_vs_contiguous", "drop_vs_recompute", "streams2_vs_1", "streams4_vs_1", "streams8_vs_1",
                "linears4_vs_1"):
        assert result[key] > 0
    assert result["linears4_vs_1"] == result["linears_ms_4"] / result["linears_ms_1"]
    assert result["drop_vs_recompute"] > 10  # dropping is bookkeeping; recompute is a 256-token prefill
    assert result["pool_blocks_left"] == 0
    assert json.loads((tmp_path / "kv.json").read_text())["streams4_vs_1"] == result["streams4_vs_1"]
    assert (tmp_path / "kv_streams.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_kv_rejects_a_missing_gpu_and_bad_repeats():
    for args, message in ((["--repeats", "1"], "--repeats must be at least 3"),
                          (["--device", "cuda"], "no CUDA device")):
        proc = subprocess.run([sys.executable, "-m", "agent_runtime.cli", "bench", "kv", *args],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
