"""`bench play`: every agent on the same seeds, kills/reward/tics mean and std, reaction p50, a bar chart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
AGENTS = {"llm", "llm_untrained", "sequential", "no_think", "scripted", "expert", "view_expert", "view_expert_noted",
          "random"}


def _after_first_start(stderr: str) -> str:
    """stderr without the one-time line of a machine's first start (the embedded model converted to its cache:
    tiny:llama uses its tokenizer)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("converting the embedded model"))


def _bench(*args: str) -> subprocess.CompletedProcess:
    return run_cli("bench", "play", *args, cwd=REPO)


def test_bench_play_reports_every_agent_on_the_same_seeds(tmp_path):
    proc = _bench("--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--episodes", "2", "--seed", "3",
                  "--max-tics", "100", "--think-tokens", "4", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert _after_first_start(proc.stderr).startswith("machine: ")
    result = json.loads(proc.stdout)
    assert set(result["agents"]) == AGENTS and result["seeds"] == [3, 4]
    for name, agent in result["agents"].items():
        assert {"kills_mean", "kills_std", "reward_mean", "tics_mean"} <= set(agent), name
        assert agent["episodes"] == 2 and 0 < agent["tics_mean"] <= 100 + 35  # a model step may overrun by a few tics
    expert, random_ = result["agents"]["expert"], result["agents"]["random"]
    assert expert["kills_mean"] > random_["kills_mean"]  # the expert plays; the untrained tiny model does not
    assert result["agents"]["llm"]["reaction_ms_p50"] > 0 and result["agents"]["expert"]["reaction_ms_p50"] is None
    # the model agents say how much their Thinker wrote notes (the untrained tiny model: noise, none)
    assert result["agents"]["llm"]["notes_per_minute"] == 0 and result["agents"]["no_think"]["notes_per_minute"] == 0
    assert "notes_per_minute" not in result["agents"]["expert"]
    assert result["cpu_path"] and result["adapter"] is None
    assert (tmp_path / "play_kills.png").stat().st_size > 0 and json.loads((tmp_path / "play.json").read_text())


def test_bench_play_agent_subset_and_bad_agent_name(tmp_path):
    proc = _bench("--agents", "expert,random", "--episodes", "1", "--max-tics", "100", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)["agents"]) == {"expert", "random"}
    bad = _bench("--agents", "expert,wizard", "--out", str(tmp_path))
    assert bad.returncode == 2 and "unknown agent(s) wizard" in bad.stderr and "Traceback" not in bad.stderr


def test_the_std_shown_with_plus_minus_is_the_sample_std():
    from agent_runtime.benchmarks.play_bench import _agent_summary

    s = _agent_summary([{"kills": k, "reward": 2 * k, "tics": 100} for k in (1, 2, 3, 6)])
    assert s["kills_mean"] == 3.0 and abs(s["kills_std"] - (14 / 3) ** 0.5) < 1e-12  # n - 1, not n
    assert abs(s["reward_std"] - 2 * s["kills_std"]) < 1e-12 and s["tics_std"] == 0.0
    assert _agent_summary([{"kills": 4, "reward": 1, "tics": 9}])["kills_std"] == 0.0


def test_frame_sources_and_lags_play_in_one_run_and_give_kills_against_lag(tmp_path):
    """`--frame-sources labels,pixels` adds the model agents on pixels; `--lag-tics` every agent seeing the game late;
    the lag curve is the agents' own kills, lag 0 first, and the expert (who plays) does worse seeing 8 tics late."""
    proc = _bench("--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--agents", "llm,expert",
                  "--frame-sources", "labels,pixels", "--lag-tics", "0,8", "--episodes", "2", "--max-tics", "200",
                  "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    agents = result["agents"]
    assert list(agents) == ["llm", "expert", "llm_pixels", "llm_lag8", "expert_lag8"]
    curve = result["lag_curve"]
    assert set(curve) == {"llm", "expert"}
    for agent, points in curve.items():
        assert [p["lag_tics"] for p in points] == [0, 8] and points[1]["lag_ms"] == round(8 * 1000 / 35, 1)
        assert [p["kills_mean"] for p in points] == [agents[agent]["kills_mean"], agents[f"{agent}_lag8"]["kills_mean"]]
    assert agents["expert"]["kills_mean"] > agents["expert_lag8"]["kills_mean"]
    assert (tmp_path / "lag_curve.png").read_bytes()[:4] == b"\x89PNG" and result["lag_curve_plot"].endswith("lag_curve.png")
    for flag, value in (("--lag-tics", "0,x"), ("--frame-sources", "labels,screen"), ("--lag-tics", "99")):
        bad = _bench(flag, value, "--agents", "expert", "--out", str(tmp_path))
        assert bad.returncode == 2 and flag in bad.stderr and "Traceback" not in bad.stderr
