"""A DoomEnv seen through a recorder: for players that take no bus or .lmp path (baselines, the sequential agent).

Records the .lmp on new_episode and emits frame_read (with the screen hash `replay` checks) for every frame read
and, when asked, action_executed for every act(); everything else passes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from agent_runtime.clocks import MS_PER_TIC
from agent_runtime.events import EventBus, Kind
from agent_runtime.recording.recording import screen_hash


class RecordedEnv:
    def __init__(self, env, lmp_path: str | Path, bus: EventBus, *, emit_actions: bool = True):
        self._env = env
        self._lmp_path = Path(lmp_path)
        self._bus = bus
        self._emit_actions = emit_actions

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _frame_read(self, frame):
        if frame is not None:
            self._bus.emit(Kind.FRAME_READ, "frames", tic=frame.tic, sim_ms=frame.tic * MS_PER_TIC,
                           screen_hash=screen_hash(frame.screen) if frame.screen is not None else None)
        return frame

    def new_episode(self, record_path: str | Path | None = None, *, seed: int | None = None):
        return self._frame_read(self._env.new_episode(record_path or self._lmp_path, seed=seed))

    def read_frame(self):
        return self._frame_read(self._env.read_frame())

    def act(self, buttons: Mapping[str, float] | Sequence[float], tics: int = 1) -> float:
        if self._emit_actions:
            pressed = ({k: v for k, v in buttons.items() if v} if isinstance(buttons, Mapping)
                       else {name: v for name, v in zip(self._env.buttons, buttons) if v})
            self._bus.emit(Kind.ACTION_EXECUTED, "policy", tic=self._env.tic, sim_ms=self._env.tic * MS_PER_TIC,
                           action=pressed, tics=tics)
        return self._env.act(buttons, tics)
