"""ViZDoom environments for the runtime. Knows nothing of agent_runtime."""

from envs.doom_env import DoomEnv
from envs.frame import Frame, ObjectLabel
from envs.observation_text import encode_observation
from envs.scenarios import ScenarioError, list_scenarios, resolve_scenario

__all__ = [
    "DoomEnv",
    "Frame",
    "ObjectLabel",
    "ScenarioError",
    "encode_observation",
    "list_scenarios",
    "resolve_scenario",
]
