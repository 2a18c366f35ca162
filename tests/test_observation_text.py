"""The text observation: exact output on a known game state, plus geometry and formatting properties."""

from __future__ import annotations

import time

import pytest

from envs.doom_env import DoomEnv
from envs.frame import Frame, ObjectLabel
from envs.observation_text import bearing_degrees, encode_observation, short_name


def make_frame(objects, *, angle=0.0, x=0.0, y=0.0, offscreen=()):
    variables = {"HEALTH": 87.0, "AMMO2": 12.0, "KILLCOUNT": 2.0, "POSITION_X": x, "POSITION_Y": y, "ANGLE": angle}
    return Frame(tic=100, t_read=time.monotonic(), screen=None, labels=tuple(objects), variables=variables,
                 episode=0, objects=tuple(offscreen))


def label(i, name, ox, oy, category="Monster", box=(70, 50, 10, 20)):
    return ObjectLabel(object_id=i, name=name, category=category, box=box, x=ox, y=oy)


def test_known_game_state_gives_exact_text():
    with DoomEnv("defend_the_center", seed=0, privileged_objects=True) as env:
        first = env.new_episode()
        assert encode_observation(first) == "hp 100 ammo 26 | marine ahead 0 far"
        env.act({"TURN_LEFT": 1}, tics=40)
        frame = env.read_frame()
    assert frame.tic == 50
    assert encode_observation(frame) == "hp 100 ammo 26 | marine left 13 far"
    assert encode_observation(frame, privileged=True) == (
        "hp 100 ammo 26 | demon left 81 mid; demon right 50 mid; marine left 13 far; marine left 153 far"
    )


def test_bearing_is_positive_to_the_left_in_doom_angles():
    # Facing east (angle 0): +y is to the left (Doom angles grow counter-clockwise).
    frame = make_frame([], angle=0.0)
    assert bearing_degrees(frame, label(1, "DoomImp", 0, 100)) == pytest.approx(90)
    assert bearing_degrees(frame, label(1, "DoomImp", 0, -100)) == pytest.approx(-90)
    facing_north = make_frame([], angle=90.0)
    assert bearing_degrees(facing_north, label(1, "DoomImp", 100, 0)) == pytest.approx(-90)
    assert bearing_degrees(facing_north, label(1, "DoomImp", 0, -100)) == pytest.approx(180)


def test_sides_distances_order_and_self_skipped():
    frame = make_frame(
        [
            label(1, "DoomImp", 300, 300),  # 424u, 45° left
            label(2, "Zombieman", 180, -5),  # 180u, ~2° right -> ahead
            label(3, "DoomPlayer", 0, 0, category="Self"),
            label(4, "ShotgunGuy", 100, -100),  # 141u, 45° right
        ],
        x=0.0,
        y=0.0,
    )
    assert encode_observation(frame) == (
        "hp 87 ammo 12 | shotgunner right 45 near; zombieman ahead 2 near; imp left 45 mid"
    )


def test_at_most_four_objects_nearest_first():
    frame = make_frame([label(i, "Demon", 100.0 * i, 0) for i in range(1, 8)])
    text = encode_observation(frame)
    assert text.count("demon") == 4
    assert text.endswith("demon ahead 0 mid")
    assert len(text) < 160


def test_empty_view_and_privileged_offscreen_objects():
    hidden = ObjectLabel(object_id=9, name="DoomImp", category="Monster", box=None, x=-200, y=0)
    frame = make_frame([], offscreen=[hidden])
    assert encode_observation(frame) == "hp 87 ammo 12 | nothing in view"
    assert encode_observation(frame, privileged=True) == "hp 87 ammo 12 | imp left 180 near"


def test_distance_bands_bound_at_near_and_mid():
    frame = make_frame([label(1, "Demon", 256, 0), label(2, "DoomImp", 257, 100), label(3, "Zombieman", 640, -300),
                        label(4, "ShotgunGuy", 700, 0)])
    assert encode_observation(frame) == (
        "hp 87 ammo 12 | demon ahead 0 near; imp left 21 mid; shotgunner ahead 0 far; zombieman right 25 far"
    )


def test_short_names():
    assert short_name("DoomImp") == "imp"
    assert short_name("MarineChainsawVzd") == "marine"
    assert short_name("HellKnight") == "hell knight"
    assert short_name("BFG9000") == "bfg 9000"


def test_signed_bearings_give_every_bearing_a_side():
    from tests.test_expert_policy import frame_with_monster

    assert encode_observation(frame_with_monster(3.2)) == "hp 0 ammo 20 | imp ahead 3 mid"
    assert encode_observation(frame_with_monster(3.2), signed=True) == "hp 0 ammo 20 | imp left 3 mid"
    assert encode_observation(frame_with_monster(-3.2), signed=True) == "hp 0 ammo 20 | imp right 3 mid"
    assert encode_observation(frame_with_monster(0.3), signed=True) == "hp 0 ammo 20 | imp ahead 0 mid"
