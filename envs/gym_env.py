"""Gymnasium view of DoomEnv, so standard RL tooling (checkers, wrappers, vector envs) can drive the same game.

Actions are Discrete: 0 = no button, then one entry per button (delta buttons get a + and a - entry).
Observations are the RGB screen (H, W, 3) uint8. observation_mode "labels" (default): `info` carries tic, game
variables and the text encoding the label buffer gives; "screen": the game runs without label and depth buffers, as a
pixel-only environment, and `info` carries only the tic, kills and what the HUD shows (health, armor, ammo).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.doom_env import DoomEnv
from envs.observation_text import encode_observation

NAMESPACE = "doom-agent-runtime"
GENERIC_ID = f"{NAMESPACE}/Doom-v0"
SCENARIO_IDS = {
    f"{NAMESPACE}/Basic-v0": "basic",
    f"{NAMESPACE}/DefendTheCenter-v0": "defend_the_center",
    f"{NAMESPACE}/DefendTheLine-v0": "defend_the_line",
    f"{NAMESPACE}/DeadlyCorridor-v0": "deadly_corridor",
    f"{NAMESPACE}/HealthGathering-v0": "health_gathering",
    f"{NAMESPACE}/MyWayHome-v0": "my_way_home",
    f"{NAMESPACE}/TakeCover-v0": "take_cover",
}
DELTA_STEP = 5.0  # value sent for one discrete step of a *_DELTA button (degrees for turning)
OBSERVATION_MODES = ("labels", "screen")
HUD_VARIABLES = ("HEALTH", "ARMOR", "SELECTED_WEAPON_AMMO", "AMMO2")  # what the status bar shows


def action_table(buttons: tuple[str, ...]) -> list[tuple[str, dict[str, float]]]:
    """Discrete action index -> (name, pressed buttons)."""
    table: list[tuple[str, dict[str, float]]] = [("NOOP", {})]
    for name in buttons:
        if name.endswith("_DELTA"):
            table += [(f"{name}+", {name: DELTA_STEP}), (f"{name}-", {name: -DELTA_STEP})]
        else:
            table.append((name, {name: 1.0}))
    return table


class DoomGymEnv(gym.Env):
    """A synchronous-clock DoomEnv as a gymnasium Env; `frame_skip` tics pass per step."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 35}

    def __init__(
        self,
        scenario: str = "defend_the_center",
        *,
        frame_skip: int = 1,
        resolution: str = "160x120",
        episode_timeout_tics: int | None = None,
        render_mode: str | None = None,
        observation_mode: str = "labels",
    ):
        if frame_skip < 1:
            raise ValueError("frame_skip must be >= 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode '{render_mode}'; use one of {self.metadata['render_modes']}")
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"unknown observation_mode '{observation_mode}'; use one of {OBSERVATION_MODES}")
        self.observation_mode = observation_mode
        self.doom = DoomEnv(scenario, resolution=resolution, clock="sync", episode_timeout_tics=episode_timeout_tics,
                            labels=observation_mode == "labels")
        self.frame_skip = frame_skip
        self.render_mode = render_mode
        self._actions = action_table(self.doom.buttons)
        self.action_names = tuple(name for name, _ in self._actions)
        self.action_space = spaces.Discrete(len(self._actions))
        height, width = self.doom.resolution
        self.observation_space = spaces.Box(0, 255, (height, width, 3), dtype=np.uint8)
        self._last_screen = np.zeros((height, width, 3), dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        # Every episode gets a game seed drawn from np_random, so reset(seed=s) replays exactly.
        episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        frame = self.doom.new_episode(seed=episode_seed)
        return self._observe(frame), self._info(frame)

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} not in {self.action_space}; actions: {', '.join(self.action_names)}")
        reward = self.doom.act(self._actions[int(action)][1], self.frame_skip)
        frame = self.doom.read_frame()
        truncated = self.doom.timed_out
        terminated = frame is None and not truncated
        return self._observe(frame), float(reward), terminated, truncated, self._info(frame)

    def render(self):
        if self.render_mode == "rgb_array":
            return self._last_screen.copy()
        return None

    def close(self):
        self.doom.close()

    def _observe(self, frame) -> np.ndarray:
        if frame is not None and frame.screen is not None:
            self._last_screen = np.ascontiguousarray(frame.screen, dtype=np.uint8)
        return self._last_screen.copy()

    def _info(self, frame) -> dict[str, Any]:
        info: dict[str, Any] = {"tic": self.doom.tic, "kills": self.doom.kills}
        if frame is not None and self.observation_mode == "screen":
            info.update(tic=frame.tic, variables={k: v for k, v in frame.variables.items() if k in HUD_VARIABLES})
        elif frame is not None:
            info.update(tic=frame.tic, variables=dict(frame.variables), text=encode_observation(frame))
        return info


def register_envs() -> list[str]:
    """Register the runtime's gymnasium ids (safe to call many times); returns them."""
    entry = "envs.gym_env:DoomGymEnv"
    ids = [GENERIC_ID, *SCENARIO_IDS]
    if GENERIC_ID not in gym.registry:
        gym.register(id=GENERIC_ID, entry_point=entry)
    for env_id, scenario in SCENARIO_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, kwargs={"scenario": scenario})
    return ids
