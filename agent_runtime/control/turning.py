"""Turning: the engine's turn rate, and the body's copy of its own turn, how far the view still turns after a frame.

A frame read while a turn is held shows the view before that turn's last tics; a command decided on it starts only
when they are done. The world keeps this copy of the hold it was given (start tic, tics, direction), so a frame
line can give every bearing as it will be once the turn already commanded has happened (engine.frame_line:
aimed), from the same arithmetic the view expert labels with: what a model reads is what its labeller read.
"""

from dataclasses import dataclass

MAX_HOLD_TICS = 8  # the grammar's longest hold
TURN_SIGN = {"TURN_LEFT": 1.0, "TURN_RIGHT": -1.0}  # bearings are positive to the left


@dataclass(frozen=True)
class TurnModel:
    """Degrees a held TURN_LEFT/TURN_RIGHT turns per tic: slow for the first tics of a hold, fast after."""

    slow_deg: float = 320 * 360 / 65536  # Doom angleturn[2]: the first tics of a held turn
    fast_deg: float = 640 * 360 / 65536  # angleturn[0]: once the turn has been held longer
    slow_tics: int = 5

    def step(self, held: int) -> float:
        """Degrees turned on the `held`-th consecutive tic of a turn (1-based)."""
        return self.slow_deg if held <= self.slow_tics else self.fast_deg

    def degrees(self, tics: int, held_before: int = 0) -> float:
        """Degrees turned by holding `tics` more tics after `held_before` tics of turning."""
        return sum(self.step(held_before + k) for k in range(1, tics + 1))

    def nearest_hold(self, degrees: float, held_before: int = 0, *, shortest: int = 0) -> int:
        """The hold in shortest..MAX_HOLD_TICS whose turn lands nearest `degrees` (ties: the shorter)."""
        return min(range(shortest, MAX_HOLD_TICS + 1),
                   key=lambda n: (abs(abs(degrees) - self.degrees(n, held_before)), n))


class TurnInFlight:
    """record(buttons, tics, start_tic) for every hold the world is given; degrees_after(tic) for a frame."""

    def __init__(self):
        self.turn = TurnModel()
        self.clear()

    def clear(self) -> None:
        self.sign, self.tics, self.start = 0.0, 0, 0

    def record(self, buttons: dict, tics: int, start_tic: int) -> None:
        """A hold replacing the one before it; turning only when exactly one turn button is pressed."""
        pressed = [name for name, value in buttons.items() if value and name in TURN_SIGN]
        self.sign = TURN_SIGN[pressed[0]] if len(pressed) == 1 else 0.0
        self.tics, self.start = tics, start_tic

    def degrees_after(self, tic: int) -> float:
        """Degrees (positive = left) the held turn still makes after `tic` (its slow-turn ramp from its first tic)."""
        if not self.sign:
            return 0.0
        done = min(max(tic - self.start, 0), self.tics)
        return self.sign * (self.turn.degrees(self.tics) - self.turn.degrees(done))
