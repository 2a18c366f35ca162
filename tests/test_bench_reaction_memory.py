"""`bench reaction` and `bench memory` end to end on a tiny model with the deterministic clock."""

import json
from pathlib import Path

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def run(*args):
    return run_cli("bench", *args, cwd=REPO)


def test_bench_reaction_measures_three_agents_side_by_side(tmp_path):
    proc = run("reaction", "--episodes", "1", "--max-tics", "70", "--model", "tiny:llama", "--fixed-cost",
               "--think-tokens", "16", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    agents = result["agents"]
    assert set(agents) == {"llm", "sequential", "no_think"}
    for summary in agents.values():
        assert {"reaction_ms_p50", "reaction_ms_p95", "kills", "actions_fenced"} <= set(summary)
    assert result["frame_source"] == "labels"
    assert result["adapters"] == {"llm": None, "sequential": None, "no_think": None}  # tiny weights: none shipped
    assert 0 < result["frame_encode_ms_p50"] <= result["frame_encode_ms_p95"]  # writing each frame line
    # the read-think-act loop waits for 16 thought tokens; the multi-stream agent decides in one forward
    assert agents["sequential"]["reaction_ms_p50"] > 3 * agents["llm"]["reaction_ms_p50"]
    assert result["ratios"]["reaction_p50_seq_over_multi"] > 3
    assert (tmp_path / "reaction_cdf.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "reaction.json").read_text())["ratios"] == result["ratios"]


def test_bench_memory_stays_flat_on_a_short_soak(tmp_path):
    proc = run("memory", "--frames", "200", "--model", "tiny:llama", "--fixed-cost", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["frames"] >= 200 and result["pool_peak_pages"] < result["pool_capacity_pages"]
    assert (tmp_path / "memory.png").is_file()
