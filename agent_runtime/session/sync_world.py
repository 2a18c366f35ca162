"""A synchronous ViZDoom world driven by session time: it moves while the model computes.

Passing a step's cost plays the due tics with the held buttons and reads the frames of the newest tics, each
stamped with the session time at which it was read.
"""

from dataclasses import dataclass

from envs.doom_env import DoomEnv
from envs.frame import Frame

from agent_runtime.session.clocks import MS_PER_TIC, SessionClock
from agent_runtime.session.time_bounds import TimeBounds
from agent_runtime.control.turning import TurnInFlight


@dataclass
class TimedFrame:
    """A frame and the session time (ms) at which the runtime read it."""

    frame: Frame
    read_ms: float
    turn_in_flight: float = 0.0  # degrees (positive = left) the view still turns after this frame (control/turning.py)


class EnvWorld:
    """What every world the session loop drives shares: a DoomEnv, a session clock, the turn in flight."""

    def __init__(self, env: DoomEnv, clock):
        self.env, self.clock, self.turns = env, clock, TurnInFlight()

    @property
    def tic(self) -> int:
        return self.env.tic


class SyncWorld(EnvWorld):
    def __init__(self, env: DoomEnv, clock: SessionClock, bounds: TimeBounds = TimeBounds()):
        super().__init__(env, clock)
        self.frame_window_tics = bounds.frame_window_tics
        self._held: dict = {}
        self._held_tics = 0
        self._frames: list[TimedFrame] = []
        self.reward = 0.0

    def start(self, record_path=None, seed=None) -> TimedFrame:
        """A new episode; its first frame."""
        self.turns.clear()
        return TimedFrame(self.env.new_episode(record_path, seed=seed), self.clock.now_ms)

    def hold(self, buttons: dict, tics: int) -> None:
        self._held, self._held_tics = dict(buttons), tics
        self.turns.record(buttons, tics, self.tic)

    def pass_step(self, outcome) -> float:
        """Charge one engine step's cost (the clock decides it) and let that much time pass; returns the cost."""
        cost = self.clock.cost_of(outcome)
        self._frames += self.advance_ms(cost)
        return cost

    def take_frames(self) -> list[TimedFrame]:
        """The frames read since the last call, each with the turn still in flight after it (taken after the step's
        actions ran, so a decision on them reads what its labeller reads)."""
        frames, self._frames = self._frames, []
        for timed in frames:
            timed.turn_in_flight = self.turns.degrees_after(timed.frame.tic)
        return frames

    def _play(self, tics: int) -> None:
        while tics > 0 and not self.env.episode_finished:
            if self._held_tics > 0 and self._held:
                n = min(tics, self._held_tics)
                self.reward += self.env.act(self._held, n)
                self._held_tics -= n
            else:
                n = tics
                self.reward += self.env.advance(n)
            tics -= n

    def advance_ms(self, ms: float) -> list[TimedFrame]:
        """Let ms of session time pass; return the frames of the last tics (oldest first)."""
        first_tic = self.clock.tics_released
        due = self.clock.charge(ms)
        if due <= 0:
            return []
        skip = max(0, due - self.frame_window_tics)
        self._play(skip)
        frames = []
        for i in range(skip, due):
            self._play(1)
            if self.env.episode_finished:
                break
            frame = self.env.read_frame()
            if frame is not None:
                # the camera delivers each tic's frame at that tic's moment of session time
                frames.append(TimedFrame(frame, (first_tic + i + 1) * MS_PER_TIC))
        return frames
