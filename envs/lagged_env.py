"""A DoomEnv whose frames arrive late: what a slower player sees, to measure what each tic of reaction is worth.

`read_frame` returns what the game showed `lag_tics` tics ago (objects, screen, variables), stamped with the
current tic, so a player acts on the present game from a stale picture of it and nothing downstream can tell.
Everything else passes through. Sync worlds only: the frames of the tics in between are read as they pass.
"""

from collections import deque
from dataclasses import replace

from envs.frame import Frame


class LaggedEnv:
    def __init__(self, env, lag_tics: int):
        if lag_tics < 0:
            raise ValueError(f"lag_tics must be >= 0, not {lag_tics}")
        self._env, self.lag_tics = env, lag_tics
        self._seen: deque[Frame] = deque(maxlen=lag_tics + 1)  # one frame a tic, newest last

    def __getattr__(self, name):
        return getattr(self._env, name)

    def new_episode(self, *args, **kwargs) -> Frame:
        frame = self._env.new_episode(*args, **kwargs)
        self._seen.clear()
        self._seen.append(frame)
        return frame

    def act(self, buttons, tics: int = 1) -> float:
        return sum(self._tic(lambda: self._env.act(buttons, 1)) for _ in range(tics))

    def advance(self, tics: int) -> float:
        return sum(self._tic(lambda: self._env.advance(1)) for _ in range(tics))

    def _tic(self, play) -> float:
        """One tic played, and the frame it ends on remembered (none once the episode is over)."""
        reward = play()
        if not self._env.episode_finished:
            frame = self._env.read_frame()
            if frame is not None:
                self._seen.append(frame)
        return reward

    def read_frame(self) -> Frame | None:
        """The frame of `lag_tics` tics ago (the oldest remembered, early in an episode), stamped as now."""
        now = self._env.read_frame()
        if now is None or not self._seen:
            return now
        return replace(self._seen[0], tic=now.tic, t_read=now.t_read)
