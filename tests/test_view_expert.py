"""The view expert labels from what the action view holds only (the frame line, the ammo, its previous command),
and still plays: real ViZDoom games with frames 2 tics old, where knowing its previous command matters."""

from __future__ import annotations

import collections
import json
from dataclasses import replace

from agent_runtime.policies.expert_policy import FIRE_HOLD_TICS, TurnModel
from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode
from agent_runtime.policies.view_expert import ViewExpert, ViewExpertPolicy
from envs.doom_env import DoomEnv
from envs.frame import ObjectLabel
from envs.observation_text import encode_observation
from tests.cli_runner import run_cli
from tests.test_expert_policy import TURNERS, frame_with_monster


def test_frames_that_read_the_same_get_the_same_label():
    """Hidden state (a sub-degree difference, an object off screen, a different box) does not change the label."""
    a = frame_with_monster(20.2, box_width=8)
    hidden = ObjectLabel(object_id=9, name="Demon", category="Monster", box=None, x=-200.0, y=0.0)
    b = replace(frame_with_monster(19.8, box_width=14), objects=(hidden,))
    assert encode_observation(a, signed=True) == encode_observation(b, signed=True)
    expert = ViewExpert(TURNERS)
    assert expert.command_for(a) == expert.command_for(b)
    assert expert.command_for(a)[0] == "TURN_LEFT"


def test_signed_bearings_decide_the_side_within_a_few_degrees():
    expert = ViewExpert(TURNERS)
    assert expert.command_for(frame_with_monster(4.6, distance=700.0))[0] == "TURN_LEFT"  # "ahead 5" says no side
    assert expert.command_for(frame_with_monster(-4.6, distance=700.0))[0] == "TURN_RIGHT"
    assert expert.command_for(frame_with_monster(1.0, distance=700.0)) == ("ATTACK", FIRE_HOLD_TICS)


def test_the_previous_turn_still_in_flight_is_turned_away_from_the_bearing():
    expert = ViewExpert(TURNERS)
    frame = frame_with_monster(20.0, tic=100)
    assert expert.command_for(frame) == ("TURN_LEFT", 8)  # 5 slow tics (8.8°) + 3 fast (10.5°) = 19.3°
    expert.observe_executed("TURN_LEFT", 8, start_tic=95)  # its last 3 tics (fast: 10.5°) are after the frame
    assert TurnModel().degrees(8) - TurnModel().degrees(5) > 10
    assert expert.command_for(frame) == ("TURN_LEFT", 3)  # the 9.5° left, at the fast rate the ramp is at
    expert.observe_executed("TURN_RIGHT", 8, start_tic=95)  # the other way: 30.5° to go, fast from the start
    assert expert.command_for(frame) == ("TURN_LEFT", 8)
    expert.reset()
    assert expert.command_for(frame) == ("TURN_LEFT", 8)


def test_no_ammo_no_fire_and_nothing_seen_scans():
    expert = ViewExpert(TURNERS)
    assert expert.command_for(frame_with_monster(0.0, ammo=0.0))[0] == "NOOP"
    empty = replace(frame_with_monster(0.0), labels=())
    assert expert.command_for(empty) == ("TURN_RIGHT", 8)


def _kills(lag: int, seeds, *, previous: bool) -> int:
    """Games where each command is decided on the frame `lag` tics old when the previous hold ends."""
    total = 0
    with DoomEnv("defend_the_center", seed=seeds[0]) as env:
        for _ in seeds:
            frames = collections.deque([env.new_episode()], maxlen=lag + 1)
            expert = ViewExpert(env.buttons)
            while not env.episode_finished:
                command, tics = expert.command_for(frames[0])
                if previous:
                    expert.observe_executed(command, tics, start_tic=env.tic)
                for _ in range(tics):
                    env.act({} if command == "NOOP" else {command: 1.0}, 1)
                    frame = env.read_frame()
                    if frame is None:
                        break
                    frames.append(frame)
            total += env.kills
    return total


def test_plays_defend_the_center_on_stale_frames_and_needs_its_previous_command():
    seeds = (0, 1, 2)
    with_previous, without = _kills(2, seeds, previous=True), _kills(2, seeds, previous=False)
    assert with_previous >= 10 * len(seeds), with_previous  # ~17 a game; random plays ~1
    assert with_previous > 1.3 * without, (with_previous, without)


def test_as_a_player_it_plays_the_games_the_labellers_loop_plays():
    """episode --policy view_expert: the same games, kill for kill, as the loop above deciding on frames as old."""
    seeds = (0, 1)
    played = 0
    for seed in seeds:
        with DoomEnv("defend_the_center", seed=seed) as env:
            played += run_baseline_episode(env, make_policy("view_expert", env.buttons), lag_tics=2)["kills"]
    assert played == _kills(2, seeds, previous=True) and played >= 10 * len(seeds)


def test_the_noted_player_turns_toward_the_monster_its_note_says_was_lost():
    edge = frame_with_monster(40.0, tic=100)  # seen far left, near the screen's edge ...
    empty = replace(frame_with_monster(0.0, tic=108), labels=())  # ... then gone
    plain, noted = ViewExpertPolicy(TURNERS), ViewExpertPolicy(TURNERS, noted=True)
    for policy in (plain, noted):
        policy.decide(edge)
    assert noted.note == "1 imp left, 20 rounds"
    assert plain.decide(empty) == ({"TURN_RIGHT": 1.0}, 8)  # scans right
    assert noted.decide(empty) == ({"TURN_LEFT": 1.0}, 8)
    assert noted.note == "nothing in view, lost imp behind left, 20 rounds"
    assert noted.name == "view_expert_noted" and plain.note is None


def test_the_cli_plays_both_view_experts():
    for policy in ("view_expert", "view_expert_noted"):
        proc = run_cli("episode", "--policy", policy, "--lag-tics", "2", "--max-tics", "300", "--no-record", "--json")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["policy"] == policy and result["kills"] >= 3
