"""One observation read from the game, stamped with the tic and the wall-clock time it was read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ObjectLabel:
    """A game object: on screen when `box` is set (from the labels buffer), else off-screen (privileged objects info)."""

    object_id: int
    name: str
    category: str
    box: tuple[int, int, int, int] | None  # screen x, y, width, height in pixels
    x: float  # world position, map units
    y: float

    @property
    def on_screen(self) -> bool:
        return self.box is not None

    @property
    def box_center_x(self) -> float | None:
        return None if self.box is None else self.box[0] + self.box[2] / 2.0


@dataclass(frozen=True)
class Frame:
    """The game state at one tic. `t_read` is time.monotonic() right after get_state() returned."""

    tic: int
    t_read: float
    screen: np.ndarray | None
    labels: tuple[ObjectLabel, ...]
    variables: dict[str, float]
    episode: int
    objects: tuple[ObjectLabel, ...] = field(default=())  # privileged: every object in the map, empty unless enabled

    def age_ms(self, now: float | None = None) -> float:
        """Milliseconds since the frame was read (monotonic clock)."""
        return ((time.monotonic() if now is None else now) - self.t_read) * 1000.0

    @property
    def health(self) -> float:
        return self.variables.get("HEALTH", 0.0)

    @property
    def ammo(self) -> float:
        """Ammo of the selected weapon when known, else bullets (AMMO2)."""
        return self.variables.get("SELECTED_WEAPON_AMMO", self.variables.get("AMMO2", 0.0))

    @property
    def kills(self) -> float:
        return self.variables.get("KILLCOUNT", 0.0)
