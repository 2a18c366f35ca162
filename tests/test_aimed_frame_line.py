"""Aimed frame lines (engine.frame_line: aimed): bearings as they will be once the turn in flight is done, objects
in the order an aimer takes them; the world's copy of its own turn; the view expert reads what the line says."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent_runtime.session.clocks import FixedCost, SessionClock
from agent_runtime.session.sync_world import SyncWorld
from agent_runtime.policies.view_expert import ViewExpert
from agent_runtime.control.turning import TurnInFlight, TurnModel
from envs.doom_env import DoomEnv
from envs.frame import ObjectLabel
from envs.observation_text import encode_seen
from tests.test_expert_policy import TURNERS, frame_with_monster

TURN = TurnModel()


def test_the_turn_in_flight_is_what_the_hold_still_turns_after_the_frame():
    turns = TurnInFlight()
    assert turns.degrees_after(100) == 0.0
    turns.record({"TURN_LEFT": 1.0}, 8, start_tic=95)
    assert turns.degrees_after(100) == pytest.approx(TURN.degrees(8) - TURN.degrees(5))  # its 3 fast tics
    assert turns.degrees_after(94) == pytest.approx(TURN.degrees(8))  # a frame before it started: all of it
    assert turns.degrees_after(103) == 0.0
    turns.record({"TURN_RIGHT": 1.0}, 2, start_tic=100)  # a new hold replaces the old one
    assert turns.degrees_after(100) == pytest.approx(-TURN.degrees(2))
    turns.record({"ATTACK": 1.0}, 5, start_tic=102)
    assert turns.degrees_after(102) == 0.0
    turns.record({"TURN_LEFT": 1.0, "TURN_RIGHT": 1.0}, 4, start_tic=110)  # both keys: no turn
    assert turns.degrees_after(110) == 0.0


def test_an_aimed_line_gives_bearings_after_the_turn_and_targets_in_aim_order():
    frame = frame_with_monster(20.0)
    turned = TURN.degrees(8) - TURN.degrees(5)  # 10.56 degrees still to turn left
    assert encode_seen(frame, signed=True) == "imp left 20 mid"
    assert encode_seen(frame, signed=True, turned=turned) == "imp left 9 mid"
    assert encode_seen(frame, signed=True, turned=-turned) == "imp left 31 mid"
    near_wide = ObjectLabel(object_id=1, name="Demon", category="Monster", box=(0, 0, 4, 4), x=100.0, y=150.0)
    far_centre = ObjectLabel(object_id=2, name="Zombieman", category="Monster", box=(0, 0, 4, 4), x=900.0, y=-20.0)
    crowd = replace(frame, labels=frame.labels + (near_wide, far_centre))
    assert encode_seen(crowd, signed=True) == "demon left 56 near; imp left 20 mid; zombieman right 1 far"
    assert encode_seen(crowd, signed=True, aim_order=True) == "demon left 56 near; zombieman right 1 far; imp left 20 mid"


@pytest.mark.parametrize("in_flight", [("TURN_LEFT", 8, 95), ("TURN_RIGHT", 8, 95), ("TURN_LEFT", 3, 99)])
def test_the_view_expert_labels_what_the_aimed_line_says(in_flight):
    """Whatever turn is in flight, the label on an aimed line equals the label of a fresh frame whose line reads
    the same: what the model reads decides its label."""
    command, tics, start = in_flight
    turns = TurnInFlight()
    turns.record({command: 1.0}, tics, start)
    frame = frame_with_monster(25.0, tic=100)
    turned = turns.degrees_after(frame.tic)
    line = encode_seen(frame, signed=True, aim_order=True, turned=turned)
    expert = ViewExpert(TURNERS, aimed=True)
    expert.observe_executed(command, tics, start_tic=start)
    label = expert.command_for(frame, turn_in_flight=turned)
    fresh_bearing = 25.0 - turned
    fresh = frame_with_monster(fresh_bearing, tic=100)
    assert encode_seen(fresh, signed=True, aim_order=True) == line
    fresh_expert = ViewExpert(TURNERS, aimed=True)
    fresh_expert.observe_executed(command, tics, start_tic=start - 100)  # long over: only its hold length counts
    assert fresh_expert.command_for(fresh) == label
    assert label[0] == ("TURN_LEFT" if fresh_bearing > 0 else "TURN_RIGHT")


def test_the_world_stamps_each_frame_with_the_turn_the_expert_tracks():
    """The synchronous world's copy of its held turn, stamped on every frame it hands over, is the view expert's
    own account of the previous command (the labeller and the frame line agree)."""
    with DoomEnv("defend_the_center", seed=0) as env:
        world = SyncWorld(env, SessionClock(FixedCost()))
        world.start(seed=0)
        expert = ViewExpert(env.buttons, aimed=True)
        checked = 0
        for command, tics, ms in [("TURN_LEFT", 8, 100.0), ("TURN_RIGHT", 3, 30.0), ("ATTACK", 5, 80.0),
                                  ("TURN_LEFT", 6, 200.0), ("TURN_RIGHT", 8, 60.0)]:
            world.hold({command: 1.0}, tics)
            expert.observe_executed(command, tics, start_tic=world.tic)
            world._frames += world.advance_ms(ms)
            for timed in world.take_frames():
                assert timed.turn_in_flight == pytest.approx(expert.previous.degrees_after(timed.frame.tic))
                checked += 1
        assert checked >= 10
