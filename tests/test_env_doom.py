"""DoomEnv against the real ViZDoom engine: scenarios, both clocks, button release, the 1.3.2 freeze workaround."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

from envs.doom_env import DoomEnv
from envs.scenarios import ScenarioError, list_scenarios, resolve_scenario


def screen_hash(frame) -> str:
    return hashlib.sha1(frame.screen.tobytes()).hexdigest()


# --- scenarios ---------------------------------------------------------------------------------


def test_bundled_scenarios_resolve_by_name_and_path():
    names = list_scenarios()
    assert {"basic", "defend_the_center", "deadly_corridor"} <= set(names)
    path = resolve_scenario("defend_the_center")
    assert path.is_file() and path.suffix == ".cfg"
    assert resolve_scenario(str(path)) == path
    assert resolve_scenario("basic.cfg") == resolve_scenario("basic")


def test_unknown_scenario_names_the_available_ones():
    with pytest.raises(ScenarioError) as err:
        resolve_scenario("defend_the_moon")
    message = str(err.value)
    assert "\n" not in message and "defend_the_moon" in message and "defend_the_center" in message


def test_missing_cfg_file_is_a_clear_error(tmp_path):
    with pytest.raises(ScenarioError, match="not found") as err:
        resolve_scenario(str(tmp_path / "nothing.cfg"))
    assert "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


def test_bad_constructor_values_are_rejected():
    with pytest.raises(ValueError, match="clock"):
        DoomEnv(clock="warp")
    with pytest.raises(ValueError, match="resolution"):
        DoomEnv(resolution="123x45")


# --- sync clock --------------------------------------------------------------------------------


@pytest.fixture
def sync_env():
    with DoomEnv("defend_the_center", seed=5, episode_timeout_tics=400) as env:
        yield env


def test_first_frame_has_screen_labels_and_variables(sync_env):
    assert sync_env.buttons == ("TURN_LEFT", "TURN_RIGHT", "ATTACK")
    before = time.monotonic()
    frame = sync_env.new_episode()
    assert frame.tic == 10 and frame.episode == 0
    assert frame.screen.shape == (120, 160, 3) and frame.screen.dtype == np.uint8
    for name in ("HEALTH", "AMMO2", "KILLCOUNT", "POSITION_X", "POSITION_Y", "ANGLE"):
        assert name in frame.variables
    assert frame.health == 100 and frame.ammo == 26
    assert any(lab.category == "Monster" and lab.on_screen for lab in frame.labels)
    assert before <= frame.t_read <= time.monotonic()
    assert 0 <= frame.age_ms() < 1000 and frame.age_ms(frame.t_read + 0.25) == pytest.approx(250)
    assert frame.objects == ()  # privileged info is off by default


def test_sync_clock_moves_exactly_the_requested_tics(sync_env):
    sync_env.new_episode()
    sync_env.act({"TURN_LEFT": 1}, tics=5)
    assert sync_env.tic == 15
    angle = sync_env.read_frame().variables["ANGLE"]
    assert angle > 0  # turning left raises the Doom angle
    sync_env.advance(7)
    frame = sync_env.read_frame()
    assert frame.tic == 22 and sync_env.tic == 22
    assert frame.variables["ANGLE"] == angle  # advance presses nothing
    sync_env.act([0.0, 1.0, 0.0], tics=1)  # a full vector works too
    assert sync_env.read_frame().variables["ANGLE"] < angle


def test_unknown_button_and_bad_vector_name_the_allowed_buttons(sync_env):
    sync_env.new_episode()
    with pytest.raises(ValueError, match="TURN_LEFT, TURN_RIGHT, ATTACK"):
        sync_env.act({"JUMP": 1})
    with pytest.raises(ValueError, match="3 buttons"):
        sync_env.act([1, 0])


def test_episode_timeout_ends_the_episode_and_acting_after_is_harmless():
    with DoomEnv("defend_the_center", seed=5, episode_timeout_tics=100) as env:
        env.new_episode()
        while env.read_frame() is not None:
            env.act({}, tics=30)
        # the timeout counts from the scenario's start tic (10 here)
        assert env.episode_finished and env.timed_out and env.tic == 110
        assert env.act({"ATTACK": 1}) == 0.0 and env.advance(5) == 0.0
        assert env.new_episode().tic == 10  # and the next one starts


def test_same_seed_same_game_different_seed_differs(sync_env):
    def play(seed):
        sync_env.new_episode(seed=seed)
        sync_env.advance(120)
        return screen_hash(sync_env.read_frame())

    assert play(11) == play(11)
    assert play(11) != play(12)


def test_constructor_seed_gives_each_episode_its_own_reproducible_seed():
    hashes = []
    for _ in range(2):
        with DoomEnv("defend_the_center", seed=40) as env:
            seeds = []
            for _ in range(2):
                env.new_episode()
                seeds.append(env.episode_seed)
                env.advance(100)
            hashes.append(screen_hash(env.read_frame()))
            assert seeds == [40, 41]
    assert hashes[0] == hashes[1]


def test_reward_and_kills_accumulate(sync_env):
    sync_env.new_episode()
    total = 0.0
    while sync_env.read_frame() is not None:
        total += sync_env.act({"ATTACK": 1, "TURN_LEFT": 1}, tics=2)
    assert total == pytest.approx(sync_env.total_reward)
    # spinning and firing kills some (the fixture's seed: 2 or more); the reward is +1 a kill, -1 for dying
    assert sync_env.kills >= 1 and total in (sync_env.kills, sync_env.kills - 1)


def test_an_episode_ended_by_a_kill_counts_the_tics_it_lasted():
    """ViZDoom resets its clock when basic ends by a kill (it read -14 tics played); the count must stay true."""
    from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode

    with DoomEnv("basic", seed=0) as env:
        result = run_baseline_episode(env, make_policy("expert", env.buttons))
    assert result["kills"] == 1 and result["finished"]  # ended by the kill, well before basic's 300-tic timeout
    assert 0 < result["tics"] < 200 and result["end_tic"] > 0



# --- recordings and the 1.3.2 freeze ------------------------------------------------------------


def test_plain_episode_after_recording_and_replay_does_not_freeze(tmp_path):
    """ViZDoom 1.3.2 freezes a plain new_episode after a recorded episode or a replay; DoomEnv re-inits."""
    lmp = tmp_path / "run" / "ep.lmp"
    with DoomEnv("defend_the_center", seed=3) as env:
        env.new_episode(lmp)
        recorded = {}
        for _ in range(30):
            env.act({"TURN_LEFT": 1, "ATTACK": 1})
            frame = env.read_frame()
            recorded[frame.tic] = screen_hash(frame)

        env.new_episode()  # the freeze would keep the tic at 10 from here on
        env.act({"TURN_RIGHT": 1}, tics=5)
        assert env.tic == 15

        replayed = {f.tic: screen_hash(f) for f in env.replay(lmp)}
        common = sorted(set(recorded) & set(replayed))
        assert len(common) >= 25
        assert all(recorded[t] == replayed[t] for t in common)  # frame-exact replay

        env.new_episode()
        env.advance(6)
        assert env.tic == 16


def test_recording_every_episode_keeps_working(tmp_path):
    with DoomEnv("defend_the_center", seed=1, episode_timeout_tics=60) as env:
        for i in range(3):
            env.new_episode(tmp_path / f"ep{i}.lmp")
            env.advance(20)
            assert env.tic == 30
    assert all((tmp_path / f"ep{i}.lmp").stat().st_size > 0 for i in range(3))


# --- realtime clock -----------------------------------------------------------------------------


@pytest.fixture
def realtime_env():
    with DoomEnv("defend_the_center", clock="realtime", seed=2) as env:
        yield env


def test_realtime_world_advances_while_the_caller_sleeps(realtime_env):
    first = realtime_env.new_episode()
    time.sleep(0.4)  # ~14 tics at 35 tics/s, with no action called
    second = realtime_env.read_frame()
    assert 9 <= second.tic - first.tic <= 22
    assert second.t_read - first.t_read >= 0.4
    assert second.age_ms() < 50  # read_frame waits for a fresh tic, so the frame is new when returned


def test_realtime_act_holds_about_n_tics_then_releases(realtime_env):
    realtime_env.new_episode()
    start = realtime_env.read_frame()
    began = time.monotonic()
    realtime_env.act({"TURN_LEFT": 1}, tics=8)
    held_s = time.monotonic() - began
    assert 0.18 <= held_s <= 0.6  # 8 tics + 1 release tic at 28.6 ms, with scheduling slack
    after = realtime_env.read_frame()
    assert after.variables["ANGLE"] != start.variables["ANGLE"]
    time.sleep(0.25)  # if TURN_LEFT were still held, the view would keep turning
    later = realtime_env.read_frame()
    assert later.tic - after.tic >= 6
    assert later.variables["ANGLE"] == after.variables["ANGLE"]


def test_realtime_advance_is_a_noop(realtime_env):
    realtime_env.new_episode()
    began = time.monotonic()
    assert realtime_env.advance(100) == 0.0
    assert time.monotonic() - began < 0.05
