"""Baseline players: decisions on hand-made frames, and scripted clearly beating random in the real game."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from agent_runtime.policies.baseline_policies import RandomPolicy, ScriptedAimPolicy, make_policy, run_baseline_episode
from envs.doom_env import DoomEnv
from envs.frame import Frame, ObjectLabel

BUTTONS = ("TURN_LEFT", "TURN_RIGHT", "ATTACK")


def frame_with(*boxes, category="Monster"):
    labels = tuple(
        ObjectLabel(object_id=i, name="DoomImp", category=category, box=box, x=0.0, y=0.0) for i, box in enumerate(boxes)
    )
    return Frame(tic=20, t_read=time.monotonic(), screen=np.zeros((120, 160, 3), np.uint8), labels=labels,
                 variables={}, episode=0)


def test_scripted_turns_toward_the_monster_nearest_the_crosshair_and_fires_when_aligned():
    policy = ScriptedAimPolicy(BUTTONS)
    assert policy.decide(frame_with((110, 50, 8, 20))) == ({"TURN_RIGHT": 1.0}, 1)
    assert policy.decide(frame_with((20, 50, 8, 20))) == ({"TURN_LEFT": 1.0}, 1)
    # two monsters: the one whose centre (x=56) is nearer the crosshair (x=80) than x=124 wins
    assert policy.decide(frame_with((120, 50, 8, 20), (52, 50, 8, 20))) == ({"TURN_LEFT": 1.0}, 1)
    assert policy.decide(frame_with((76, 50, 8, 20))) == ({"ATTACK": 1.0}, 1)
    # nothing (or only own weapon) in view: keep scanning in the last direction
    assert policy.decide(frame_with((70, 100, 20, 20), category="Self")) == ({"TURN_LEFT": 1.0}, 1)


def test_scripted_uses_the_delta_button_when_available():
    policy = ScriptedAimPolicy(("TURN_LEFT_RIGHT_DELTA", "ATTACK"))
    pressed, tics = policy.decide(frame_with((120, 50, 8, 20)))  # centre 124: 44 px right of 80
    assert tics == 1 and set(pressed) == {"TURN_LEFT_RIGHT_DELTA"}
    assert pressed["TURN_LEFT_RIGHT_DELTA"] == pytest.approx(28.8, abs=0.5)  # positive = right
    pressed, _ = policy.decide(frame_with((30, 50, 8, 20)))
    assert pressed["TURN_LEFT_RIGHT_DELTA"] < 0


def test_random_policy_is_seeded_and_uses_only_scenario_buttons():
    a, b = RandomPolicy(BUTTONS, seed=4), RandomPolicy(BUTTONS, seed=4)
    frame = frame_with()
    decisions = [a.decide(frame) for _ in range(50)]
    assert decisions == [b.decide(frame) for _ in range(50)]
    assert {name for pressed, _ in decisions for name in pressed} == set(BUTTONS)
    with pytest.raises(ValueError, match="view_expert_noted, random or scripted"):
        make_policy("clever", BUTTONS)


def test_episode_result_respects_max_tics_and_reports_lag():
    with DoomEnv("defend_the_center", seed=0) as env:
        result = run_baseline_episode(env, ScriptedAimPolicy(env.buttons), max_tics=90, lag_tics=4)
    assert result["tics"] == 90 and result["lag_tics"] == 4
    assert {"scenario", "policy", "episode", "seed", "reward", "kills", "tics", "health", "ammo"} <= set(result)
    assert result["scenario"] == "defend_the_center" and result["policy"] == "scripted" and result["seed"] == 0


@pytest.mark.parametrize("lag", [0, 3])
def test_a_lagged_player_decides_on_the_frame_lag_tics_before_the_one_its_command_starts_on(lag):
    """Holds of several tics: the frame decided on is `lag` tics old, not the previous decision's frame."""
    from agent_runtime.session.events import EventBus

    seen: list[int] = []

    class Spy:
        name = "expert"

        def __init__(self, policy):
            self.policy = policy

        def decide(self, frame):
            seen.append(frame.tic)
            return self.policy.decide(frame)

    bus = EventBus()
    with DoomEnv("defend_the_center", seed=0) as env:
        run_baseline_episode(env, Spy(make_policy("expert", env.buttons)), max_tics=200, lag_tics=lag, bus=bus)
    started = [e.tic for e in bus.of_kind("action_executed")]
    assert len(started) == len(seen) > 10 and max(b - a for a, b in zip(started, started[1:])) > lag + 1
    assert [s - t for s, t in zip(started, seen)][1:] == [lag] * (len(seen) - 1)  # the first: the episode's first frame


def test_progress_callback_reports_during_the_episode():
    reports = []
    with DoomEnv("defend_the_center", seed=0) as env:
        run_baseline_episode(env, RandomPolicy(env.buttons, seed=0), max_tics=200, progress=reports.append)
    assert reports and all({"tic", "kills", "reward"} <= set(r) for r in reports)


@pytest.mark.slow
def test_scripted_clearly_beats_random_on_defend_the_center():
    kills = {}
    with DoomEnv("defend_the_center", seed=100) as env:
        for name in ("scripted", "random"):
            kills[name] = [
                run_baseline_episode(env, make_policy(name, env.buttons, seed=i))["kills"] for i in range(3)
            ]
    assert min(kills["scripted"]) > max(kills["random"]), kills
    assert statistics.mean(kills["scripted"]) >= 10, kills
