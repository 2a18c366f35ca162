"""The gymnasium view of DoomEnv: registration, the standard env checker, episode ends."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from envs.gym_env import GENERIC_ID, SCENARIO_IDS, DoomGymEnv, register_envs


def test_register_envs_is_idempotent():
    first = register_envs()
    second = register_envs()
    assert first == second
    assert GENERIC_ID in gym.registry and "doom-agent-runtime/DefendTheCenter-v0" in gym.registry
    assert set(SCENARIO_IDS) <= set(gym.registry)


def test_env_checker_passes():
    register_envs()
    env = gym.make("doom-agent-runtime/DefendTheCenter-v0", episode_timeout_tics=60, render_mode="rgb_array")
    try:
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_make_by_id_and_generic_id_with_scenario_kwarg():
    register_envs()
    env = gym.make("doom-agent-runtime/DefendTheCenter-v0", episode_timeout_tics=30)
    try:
        assert env.unwrapped.action_names == ("NOOP", "TURN_LEFT", "TURN_RIGHT", "ATTACK")
        obs, info = env.reset(seed=0)
        assert obs.shape == (120, 160, 3) and obs.dtype == np.uint8
        assert info["text"].startswith("hp 100 ammo 26")
    finally:
        env.close()
    basic = gym.make(GENERIC_ID, scenario="basic", frame_skip=4)
    try:
        assert basic.unwrapped.doom.scenario == "basic"
        assert basic.unwrapped.action_names == ("NOOP", "MOVE_LEFT", "MOVE_RIGHT", "ATTACK")
    finally:
        basic.close()


def test_timeout_truncates_and_frame_skip_moves_tics():
    env = DoomGymEnv("defend_the_center", frame_skip=4, episode_timeout_tics=40)
    try:
        env.reset(seed=1)
        steps, terminated, truncated = 0, False, False
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(0)
            steps += 1
        assert truncated and not terminated
        assert steps == 10 and info["tic"] == 50
    finally:
        env.close()
