"""The agent on gymnasium screen observations (#36): the env runs without the label buffer, its info carries no
hidden state, and the multi-stream agent decides actions of the env's action space from screens alone."""

from __future__ import annotations

import gymnasium as gym
import torch

from agent_runtime.config import load_config
from agent_runtime.session.gym_agent import GymAgent
from agent_runtime.session.runtime import Runtime
from envs.detector_training import save_detector
from envs.gym_env import register_envs
from envs.screen_detector import ScreenDetector


def test_the_agent_acts_on_screen_only_observations(tmp_path):
    register_envs()
    weights = tmp_path / "detector.safetensors"
    torch.manual_seed(0)
    save_detector(ScreenDetector(channels=8), weights)
    env = gym.make("doom-agent-runtime/Basic-v0", observation_mode="screen")
    try:
        obs, info = env.reset(seed=0)
        doom = env.unwrapped.doom
        assert not doom.game.is_labels_buffer_enabled()
        assert "text" not in info and set(info["variables"]) <= {"HEALTH", "ARMOR", "SELECTED_WEAPON_AMMO", "AMMO2"}
        config = load_config(None, scenario="basic", engine={"frame_source": "pixels", "detector": str(weights)})
        runtime = Runtime.open(config, model="tiny:llama", env=doom, announce=False)
        agent = GymAgent(runtime, env.unwrapped.action_names, scenario="basic")
        actions = []
        for _ in range(40):
            action = agent.act(obs, info)
            assert env.action_space.contains(action)
            actions.append(action)
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert agent.decisions >= 3 and agent.agent.stats.frames_prefilled >= 20
        assert any(actions)  # the held commands press buttons
        agent.close()
    finally:
        env.close()
