"""ViZDoom in real time (ASYNC_PLAYER): the world runs at 35 tics/s by itself while the model computes.

Held buttons are released (an explicit all-zero action, as ViZDoom 1.3.2 needs) once their tics have passed.
"""

from __future__ import annotations

from envs.doom_env import DoomEnv

from agent_runtime.clocks import MS_PER_TIC, WallClock
from agent_runtime.sync_world import TimedFrame
from agent_runtime.turning import TurnInFlight


class RealTimeWorld:
    def __init__(self, env: DoomEnv):
        if env.clock != "realtime":
            raise ValueError("RealTimeWorld needs a DoomEnv with clock='realtime'")
        self.env = env
        self.clock = WallClock()
        self._release_at: float | None = None
        self._started = False
        self.turns = TurnInFlight()

    @property
    def tic(self) -> int:
        return self.env.tic

    @property
    def finished(self) -> bool:
        return self.env.episode_finished

    @property
    def reward(self) -> float:
        return self.env.total_reward

    def start(self, record_path=None, seed=None) -> TimedFrame:
        """A new episode; session time starts at the first one's first frame."""
        first = self.env.new_episode(record_path)
        self.turns.clear()
        if not self._started:
            self.clock.t0, self._started = first.t_read, True
        return TimedFrame(first, self.clock.ms(first.t_read))

    def hold(self, buttons: dict, tics: int) -> None:
        """Press now (applied at the next tic); release after `tics` tics."""
        self.env.game.set_action(self.env.action_vector(buttons))
        self._release_at = self.clock.now_ms + tics * MS_PER_TIC
        self.turns.record(buttons, tics, self.tic)

    def pass_step(self, outcome) -> None:
        """Nothing to charge: the world ran by itself while the step computed."""
        return None

    def take_frames(self) -> list[TimedFrame]:
        """Release buttons that are due, then the newest frame (waits at most one tic), stamped when it was read."""
        if self._release_at is not None and self.clock.now_ms >= self._release_at:
            self.env.game.set_action(self.env.action_vector({}))
            self._release_at = None
        frame = self.env.read_frame()
        if frame is None:
            return []
        return [TimedFrame(frame, self.clock.ms(frame.t_read), self.turns.degrees_after(frame.tic))]
