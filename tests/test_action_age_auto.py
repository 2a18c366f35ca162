"""budgets.max_action_age_ms auto: the fence never falls below what a decision step here can deliver.

On a CPU whose decision step costs more than the fixed 250 ms bound, every action used to be fenced and the agent
stood still (health_gathering on a slow 2-core EPYC: 41 of 51 fenced, dead at ~480 tics; with the bound at two
decision steps, 0 fenced and alive at 2100). The fixed-cost clock stands in for such a machine here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime.session.clocks import FixedCost
from agent_runtime.config import BudgetConfig, load_config
from agent_runtime.errors import UserError
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.time_bounds import ACTION_AGE_FLOOR_MS, FRAME_TOKENS, PROMPT_TOKENS, TimeBounds, auto_action_age_ms
from envs.doom_env import DoomEnv
from tests.cli_runner import run_cli
from tests.engine_rig import make_runtime

REPO = Path(__file__).resolve().parent.parent
SLOW_CPU = FixedCost(base_ms=250.0)  # every step costs more than 250 ms, a decision ~380 ms: a slow 2-core CPU


@pytest.fixture
def env():
    with DoomEnv("defend_the_center", seed=3) as e:
        yield e


def test_auto_is_the_floor_or_two_decision_steps():
    assert auto_action_age_ms(50.0) == ACTION_AGE_FLOOR_MS == 250.0
    assert auto_action_age_ms(125.0) == 250.0
    assert auto_action_age_ms(220.0) == 440.0
    assert auto_action_age_ms(221.3) == 450.0  # whole 10 ms, never below two steps
    with pytest.raises(ValueError, match="Runtime.time_bounds"):
        TimeBounds.from_budgets(BudgetConfig())  # auto cannot be read without a decision step's cost
    assert TimeBounds.from_budgets(BudgetConfig(max_action_age_ms=300)).max_action_age_ms == 300.0


def test_the_default_config_says_auto_and_a_bad_bound_names_its_key(tmp_path):
    assert load_config(None).budgets.max_action_age_ms == "auto"
    bad = tmp_path / "bad.yaml"
    bad.write_text("budgets:\n  max_action_age_ms: 0\n")
    with pytest.raises(UserError, match="max_action_age_ms"):
        load_config(str(bad))


def test_fixed_cost_resolves_from_the_clocks_price_of_a_decision_step(env):
    runtime = make_runtime(env)
    branches = len(runtime.grammar.words)
    step = SLOW_CPU.step_ms(decode_rows=branches, prefill_tokens=FRAME_TOKENS + PROMPT_TOKENS)
    bounds = runtime.time_bounds(SLOW_CPU)
    assert step > 250.0 and bounds.decision_step_ms == step
    assert bounds.max_action_age_ms == auto_action_age_ms(step) >= 2 * step
    assert runtime.time_bounds(SLOW_CPU) is bounds  # resolved once per clock
    assert runtime.time_bounds(FixedCost()).max_action_age_ms == 250.0  # the default fixed cost is fast enough


def test_measured_resolution_times_a_decision_on_scratch_blocks_and_frees_them(env):
    runtime = make_runtime(env)
    used = runtime.store.used_pages
    bounds = runtime.time_bounds()
    assert bounds.decision_step_ms is not None and 0.0 < bounds.decision_step_ms < 10_000.0
    assert bounds.max_action_age_ms == auto_action_age_ms(bounds.decision_step_ms)
    assert runtime.store.used_pages == used and not runtime.store.blocks  # nothing of the measurement is left


def test_on_a_slow_cpu_auto_lets_the_agent_act_where_a_fixed_250_ms_bound_fences_everything(env):
    fixed = run_llm_episode(env, make_runtime(env, max_action_age_ms=250.0), max_tics=200, fixed_cost=SLOW_CPU)
    assert fixed["decisions"] > 5 and fixed["actions_executed"] == 0 and fixed["max_action_age_ms"] == 250.0
    auto = run_llm_episode(env, make_runtime(env), max_tics=200, fixed_cost=SLOW_CPU)
    assert auto["max_action_age_ms"] > 500.0
    assert auto["actions_executed"] > 5 and auto["actions_fenced"] == 0, auto


def test_a_recording_names_the_bound_it_resolved_to_and_reruns_to_the_same_actions(tmp_path):
    # the measured clock: auto is resolved from a measurement, which a rerun must not repeat
    proc = run_cli("episode", "--model", "tiny:llama", "--threads", "1", "--json", "--max-tics", "60",
                   "--out", str(tmp_path), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    manifest = json.loads((Path(result["recording"]) / "manifest.json").read_text())
    assert manifest["config"]["budgets"]["max_action_age_ms"] == result["max_action_age_ms"] >= 250.0
    rerun = run_cli("replay", result["recording"], "--rerun", "--json", cwd=REPO)
    assert rerun.returncode == 0, rerun.stderr
    again = json.loads(rerun.stdout)["rerun"]
    assert again["same_actions"] and again["first_divergence"] is None and again["n_actions"] > 5, again
