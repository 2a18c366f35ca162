"""ViZDoom in real time (ASYNC_PLAYER): the world runs at 35 tics/s by itself while the model computes.

The executor's hold sets the buttons without blocking; they are released (an explicit all-zero action,
as ViZDoom 1.3.2 needs) once their tics have passed. Session time is wall-clock ms since the session began.
"""

from __future__ import annotations

import time

from envs.doom_env import DoomEnv

from agent_runtime.clocks import MS_PER_TIC
from agent_runtime.sync_world import TimedFrame


class RealTimeWorld:
    def __init__(self, env: DoomEnv):
        if env.clock != "realtime":
            raise ValueError("RealTimeWorld needs a DoomEnv with clock='realtime'")
        self.env = env
        self.t0 = time.monotonic()
        self._release_at: float | None = None

    def now_ms(self) -> float:
        return self.ms(time.monotonic())

    def ms(self, monotonic_t: float) -> float:
        return (monotonic_t - self.t0) * 1000.0

    @property
    def tic(self) -> int:
        return self.env.tic

    @property
    def finished(self) -> bool:
        return self.env.episode_finished

    def hold(self, buttons: dict, tics: int) -> None:
        """Press now (applied at the next tic); release after `tics` tics."""
        self.env.game.set_action(self.env.action_vector(buttons))
        self._release_at = self.now_ms() + tics * MS_PER_TIC

    def release_if_due(self) -> None:
        if self._release_at is not None and self.now_ms() >= self._release_at:
            self.env.game.set_action(self.env.action_vector({}))
            self._release_at = None

    def read(self) -> TimedFrame | None:
        """The newest frame (waits at most one tic), stamped with session time when it was read."""
        frame = self.env.read_frame()
        if frame is None:
            return None
        return TimedFrame(frame, self.ms(frame.t_read))
