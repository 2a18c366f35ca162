"""The lag-aware expert: engine facts it is built on, hold counts on hand-made frames, and real ViZDoom games
where it must keep its kills when it sees the world 4 tics late (the scripted player does not)."""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

from agent_runtime.control.action_grammar import NOOP
from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode
from agent_runtime.policies.expert_policy import (
    FIRE_HOLD_TICS,
    FORWARD_THRUST,
    FRICTION,
    MAX_HOLD_TICS,
    SHOT_VISIBLE_TICS,
    STRAFE_THRUST,
    WEAPON_CYCLE_TICS,
    LagAwareExpertPolicy,
    TurnModel,
    MoveModel,
)
from envs.doom_env import DoomEnv
from envs.frame import Frame, ObjectLabel
from tests.cli_runner import run_cli

TURNERS = ("TURN_LEFT", "TURN_RIGHT", "ATTACK")
WIDTH = 160


def frame_with_monster(bearing_deg: float, distance: float = 300.0, *, box_width: int = 8, tic: int = 100,
                       ammo: float = 20.0) -> Frame:
    """Player at the origin facing +x; one monster `bearing_deg` to the left, its box where the camera draws it."""
    rad = math.radians(bearing_deg)
    centre_px = WIDTH / 2.0 - math.tan(rad) * WIDTH / 2.0  # 90° FOV: tan(45°) = 1
    label = ObjectLabel(object_id=7, name="DoomImp", category="Monster",
                        box=(round(centre_px - box_width / 2.0), 50, box_width, 20),
                        x=distance * math.cos(rad), y=distance * math.sin(rad))
    return Frame(tic=tic, t_read=time.monotonic(), screen=np.zeros((120, WIDTH, 3), np.uint8), labels=(label,),
                 variables={"POSITION_X": 0.0, "POSITION_Y": 0.0, "ANGLE": 0.0, "AMMO2": ammo}, episode=0)


# --- engine facts ----------------------------------------------------------------------------


def measure_turn_model(env, *, tics: int = 8) -> TurnModel:
    """Hold TURN_LEFT from rest and read ANGLE every tic: the slow rate, the fast rate and how long the ramp is."""
    env.act({}, 1)
    angle, steps = env.read_frame().variables["ANGLE"], []
    for _ in range(tics):
        env.act({"TURN_LEFT": 1.0}, 1)
        now = env.read_frame().variables["ANGLE"]
        steps.append((now - angle) % 360.0)
        angle = now
    env.act({}, 1)
    return TurnModel(steps[0], steps[-1], sum(1 for s in steps if abs(s - steps[0]) < 1e-3))


def measure_move_model(env, button: str) -> MoveModel:
    """From rest, thrust one tic and coast one: the first step is the thrust, the second over the first the friction."""
    def position() -> tuple[float, float]:
        v = env.read_frame().variables
        return v["POSITION_X"], v["POSITION_Y"]

    start = position()
    env.act({button: 1.0}, 1)
    after_thrust = position()
    env.act({}, 1)
    after_coast = position()
    first, second = math.dist(start, after_thrust), math.dist(after_thrust, after_coast)
    return MoveModel(first, second / first)


def test_turn_and_move_rates_match_the_engine():
    with DoomEnv("defend_the_center", seed=0) as env:
        env.new_episode()
        measured = measure_turn_model(env)
    assert measured.slow_deg == pytest.approx(TurnModel().slow_deg, abs=0.01)
    assert measured.fast_deg == pytest.approx(TurnModel().fast_deg, abs=0.01)
    assert measured.slow_tics == TurnModel().slow_tics
    for scenario, button, thrust in (("basic", "MOVE_LEFT", STRAFE_THRUST), ("health_gathering", "MOVE_FORWARD",
                                                                             FORWARD_THRUST)):
        with DoomEnv(scenario, seed=0) as env:
            env.new_episode()
            move = measure_move_model(env, button)
        assert move.thrust == pytest.approx(thrust, rel=0.02), scenario
        assert move.friction == pytest.approx(FRICTION, abs=0.01), scenario


def test_pistol_fires_a_fixed_delay_after_the_press_and_then_needs_its_cycle():
    with DoomEnv("defend_the_center", seed=0) as env:
        env.new_episode()
        env.act({}, 30)  # the weapon is raised
        ammo = env.read_frame().ammo
        env.act({"ATTACK": 1.0}, 1)
        env.act({}, SHOT_VISIBLE_TICS - 2)
        assert env.read_frame().ammo == ammo  # not yet at press + 4
        env.act({}, 1)
        assert env.read_frame().ammo == ammo - 1  # the frame of press + 5 shows it
        env.act({}, WEAPON_CYCLE_TICS - SHOT_VISIBLE_TICS - 1)
        env.act({"ATTACK": 1.0}, 1)  # press + 18: ignored
        env.act({}, 10)
        assert env.read_frame().ammo == ammo - 1
        env.act({"ATTACK": 1.0}, 1)  # long after: fires
        env.act({}, 10)
        assert env.read_frame().ammo == ammo - 2


# --- decisions on hand-made frames ------------------------------------------------------------


def test_hold_counts_grow_with_the_bearing_and_clip_at_the_grammar_maximum():
    tics_by_bearing = []
    for bearing in (3.0, 5.0, 8.0, 12.0, 16.0, 25.0, 40.0):
        command, tics = LagAwareExpertPolicy(TURNERS).command_for(frame_with_monster(bearing))
        assert command == "TURN_LEFT"
        tics_by_bearing.append(tics)
    assert tics_by_bearing == sorted(tics_by_bearing) and len(set(tics_by_bearing)) >= 4, tics_by_bearing
    assert tics_by_bearing[0] <= 2 and tics_by_bearing[-1] == MAX_HOLD_TICS
    command, tics = LagAwareExpertPolicy(TURNERS).command_for(frame_with_monster(-12.0))
    assert command == "TURN_RIGHT" and tics == tics_by_bearing[3]
    # the chosen hold lands nearest the bearing: 5 slow tics turn 8.79°, 6 turn 12.3°
    assert TurnModel().degrees(5) == pytest.approx(8.79, abs=0.01)
    assert LagAwareExpertPolicy(TURNERS).command_for(frame_with_monster(9.0)) == ("TURN_LEFT", 5)


def test_fires_when_on_target_and_then_waits_for_the_weapon():
    policy = LagAwareExpertPolicy(TURNERS)
    assert policy.decide(frame_with_monster(0.3, 200.0, box_width=10)) == ({"ATTACK": 1.0}, FIRE_HOLD_TICS)
    # a new target on the crosshair right after the shot: wait out the weapon's cycle, in grammar-sized holds
    later = frame_with_monster(0.3, 200.0, box_width=10, tic=100 + FIRE_HOLD_TICS, ammo=19.0)
    command, tics = policy.command_for(later)
    assert command == NOOP and 1 <= tics <= MAX_HOLD_TICS


def test_turns_still_in_flight_are_subtracted_from_a_stale_frame():
    stale = frame_with_monster(9.0, 120.0, box_width=24)
    assert LagAwareExpertPolicy(TURNERS).command_for(stale) == ("TURN_LEFT", 5)
    policy = LagAwareExpertPolicy(TURNERS)
    policy.command_for(stale)
    policy.observe_executed("TURN_LEFT", 5)  # ran from the frame's tic on, not shown by the frame yet
    assert policy.command_for(stale) == ("ATTACK", FIRE_HOLD_TICS)  # 9° - 8.79° in flight: on target
    policy.observe_executed("TURN_LEFT", 3)  # overshoot in flight: now it must turn back
    assert policy.command_for(stale)[0] == "TURN_RIGHT"
    policy.history.clear()
    assert policy.command_for(stale) == ("TURN_LEFT", 5)


def test_command_for_records_nothing_and_observe_executed_checks_its_input():
    policy = LagAwareExpertPolicy(TURNERS)
    frame = frame_with_monster(12.0)
    assert policy.command_for(frame) == policy.command_for(frame)  # a labeller may ask again and again
    assert policy.history.clock == frame.tic
    with pytest.raises(ValueError, match="unknown command"):
        policy.observe_executed("MOVE_FORWARD", 2)
    with pytest.raises(ValueError, match="tics"):
        policy.observe_executed("TURN_LEFT", 0)
    with pytest.raises(ValueError, match="start tic"):
        LagAwareExpertPolicy(TURNERS).observe_executed("TURN_LEFT", 2)


def test_scans_one_way_when_nothing_is_seen_and_returns_to_a_monster_seen_before():
    policy = LagAwareExpertPolicy(TURNERS)
    empty = Frame(tic=100, t_read=0.0, screen=None, labels=(), variables={"ANGLE": 0.0, "AMMO2": 5.0}, episode=0)
    assert policy.command_for(empty) == ("TURN_RIGHT", MAX_HOLD_TICS)
    seen = frame_with_monster(30.0, 200.0)
    policy.decide(seen)  # turns left toward it
    gone = Frame(tic=130, t_read=0.0, screen=None, labels=(), variables={"ANGLE": 80.0, "AMMO2": 5.0}, episode=0)
    command, _ = policy.command_for(gone)  # it is now 50° to the right of the view: turn back right
    assert command == "TURN_RIGHT"


# --- real games -------------------------------------------------------------------------------


class CommandLog:
    """Wraps a policy and keeps every (command, tics) it returned."""

    def __init__(self, policy):
        self.policy, self.name, self.commands = policy, policy.name, []

    def decide(self, frame):
        buttons, tics = self.policy.decide(frame)
        self.commands.append((next(iter(buttons), NOOP), tics, tuple(buttons)))
        return buttons, tics


@pytest.mark.parametrize("scenario", ["defend_the_center", "basic", "health_gathering"])
def test_commands_use_only_the_scenarios_buttons_in_grammar_holds(scenario):
    with DoomEnv(scenario, seed=0) as env:
        log = CommandLog(make_policy("expert", env.buttons))
        run_baseline_episode(env, log, max_tics=300, lag_tics=4)
    assert log.commands
    assert {name for name, _, _ in log.commands} <= set(env.buttons) | {NOOP}
    assert all(1 <= tics <= MAX_HOLD_TICS and len(pressed) <= 1 for _, tics, pressed in log.commands)
    assert len({name for name, _, _ in log.commands}) >= 2  # it does act


def mean_kills(policy: str, lag: int, seeds=(0, 1)) -> float:
    kills = []
    for seed in seeds:
        with DoomEnv("defend_the_center", seed=seed) as env:
            kills.append(run_baseline_episode(env, make_policy(policy, env.buttons), lag_tics=lag)["kills"])
    return statistics.mean(kills)


def test_expert_keeps_its_kills_on_defend_the_center_when_frames_are_4_tics_old():
    fresh, stale = mean_kills("expert", 0), mean_kills("expert", 4)
    scripted_fresh, scripted_stale = mean_kills("scripted", 0), mean_kills("scripted", 4)
    assert fresh >= scripted_fresh, (fresh, scripted_fresh)
    assert stale >= 0.8 * fresh, (stale, fresh)
    assert stale >= 3 * scripted_stale, (stale, scripted_stale)


def test_expert_kills_on_basic_where_random_rarely_does():
    expert, random = [], []
    with DoomEnv("basic", seed=10) as env:
        for seed in range(3):
            expert.append(run_baseline_episode(env, make_policy("expert", env.buttons), lag_tics=4))
            random.append(run_baseline_episode(env, make_policy("random", env.buttons, seed=seed), lag_tics=4))
    assert all(r["kills"] == 1 and r["ammo"] >= 49 for r in expert), expert  # one shot, one kill
    assert sum(r["kills"] for r in random) < 3, random
    assert statistics.mean(r["reward"] for r in expert) > statistics.mean(r["reward"] for r in random) + 100, (
        expert, random)


def test_expert_outlives_scripted_and_random_on_health_gathering():
    rewards = {}
    for name in ("expert", "scripted", "random"):
        with DoomEnv("health_gathering", seed=3) as env:
            rewards[name] = run_baseline_episode(env, make_policy(name, env.buttons, seed=3), lag_tics=4)["reward"]
    assert rewards["expert"] > 2 * max(rewards["scripted"], rewards["random"]), rewards


def test_cli_plays_the_expert_with_lag():
    repo = Path(__file__).resolve().parent.parent
    proc = run_cli("episode", "--policy", "expert", "--lag-tics", "4", "--scenario", "defend_the_center",
                   "--max-tics", "300", "--no-record", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["policy"] == "expert" and result["lag_tics"] == 4 and result["kills"] >= 3
