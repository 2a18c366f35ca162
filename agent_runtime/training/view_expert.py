"""The labeller a model can imitate: the lag-aware expert restricted to what the action view holds.

The full expert (expert_policy.py) decides from object tracks, last-seen places and the pistol's cycle, none of
which the view's text carries, so a model cannot learn its labels from the view (held out: 39% on the command).
This one reads only the newest frame line as the view has it (the nearest MAX_OBJECTS objects, whole signed
degrees, distance bands), the ammo, and its own previous command, which the action view reads
(engine.action_log_in_view: 1): the tics of that command still to run after the frame are turned away from
every bearing, and a turn that continues one keeps the engine's fast-turn ramp. Measured with frames 1 and 2 tics
old on defend_the_center (10 seeds): 20.9 and 17.4 kills a game; without its previous command 13.3 and 8.9.
"""

from __future__ import annotations

from agent_runtime.action_grammar import NOOP
from agent_runtime.expert_policy import FIRE_HOLD_TICS, PICKUP_CATEGORIES, STRAFE_SIGN
from agent_runtime.turning import MAX_HOLD_TICS, TURN_SIGN, TurnInFlight, TurnModel
from envs.frame import Frame
from envs.observation_text import MAX_OBJECTS, bearing_degrees, distance_band, distance_units, visible_objects

FIRE_WITHIN_DEGREES = {"near": 8, "mid": 4, "far": 3}  # a bearing this small, once turned, is a hit
WALK_WITHIN_DEGREES = 4
STRAFE_DEGREES_PER_TIC = {"near": 6.0, "mid": 2.5, "far": 1.0}  # what a strafe tic moves a bearing by, roughly


class ViewExpert:
    """command_for(frame) -> (button or NOOP, hold tics); observe_executed() as the executor runs commands."""

    def __init__(self, buttons, *, aimed: bool = False):
        """aimed: the view's frame lines are engine.frame_line "aimed" (bearings after the turn in flight, in aim
        order), so the expert reads them as written; else it turns the frame's bearings away itself."""
        self.aimed = aimed
        present = set(buttons)
        self.can_turn = set(TURN_SIGN) <= present
        self.hunting = "ATTACK" in present and (self.can_turn or set(STRAFE_SIGN) <= present)  # as the expert's
        self.turn = TurnModel()
        self.reset()

    def reset(self) -> None:
        self.previous = TurnInFlight(self.turn)  # the command last executed, as the world keeps its own

    def observe_executed(self, command: str, tics: int, start_tic: int | None = None) -> None:
        self.previous.record({command: 1.0}, tics, start_tic if start_tic is not None else -10**9)

    def command_for(self, frame: Frame, turn_in_flight: float | None = None) -> tuple[str, int]:
        """turn_in_flight: the world's copy of the turn still to run after the frame (TimedFrame.turn_in_flight),
        which an aimed frame line was written with; None: from the previous command observed."""
        rotation, held = self._in_flight(frame.tic)
        if turn_in_flight is not None:
            rotation = turn_in_flight
        wanted = (lambda o: o.category == "Monster") if self.hunting else (lambda o: o.category in PICKUP_CATEGORIES)
        turned = rotation if self.aimed else 0.0
        listed = visible_objects(frame, aim_order=self.aimed, turned=turned)[:MAX_OBJECTS]
        seen = [(self._bearing(frame, o, turned) - (rotation - turned), distance_band(distance_units(frame, o)))
                for o in listed if o.box is not None and wanted(o)]
        if not seen:
            return self._scan()
        near = [s for s in seen if s[1] == "near"]
        bearing, band = min(near or seen, key=lambda s: abs(s[0]))
        if not self.hunting:
            return self._turn(bearing, held) if abs(bearing) > WALK_WITHIN_DEGREES else ("MOVE_FORWARD", MAX_HOLD_TICS)
        if abs(bearing) <= FIRE_WITHIN_DEGREES[band]:
            return (NOOP, MAX_HOLD_TICS) if frame.ammo <= 0 else ("ATTACK", FIRE_HOLD_TICS)
        if self.can_turn:
            return self._turn(bearing, held)
        tics = round(abs(bearing) / STRAFE_DEGREES_PER_TIC[band])
        return ("MOVE_LEFT" if bearing > 0 else "MOVE_RIGHT"), min(max(tics, 1), MAX_HOLD_TICS)

    @staticmethod
    def _bearing(frame: Frame, obj, turned: float) -> float:
        """As the frame line writes it: whole degrees, positive = left."""
        bearing = bearing_degrees(frame, obj, turned)
        return round(abs(bearing)) * (1 if bearing > 0 else -1)

    def _in_flight(self, frame_tic: int) -> tuple[float, int]:
        """Degrees (positive = left) the previous command still turns after `frame_tic`, and the turn's tics held."""
        return self.previous.degrees_after(frame_tic), self.previous.turning_tics

    def _turn(self, bearing: float, held: int) -> tuple[str, int]:
        tics = self.turn.nearest_hold(bearing, held, shortest=1)
        return ("TURN_LEFT" if bearing > 0 else "TURN_RIGHT"), tics

    def _scan(self) -> tuple[str, int]:
        if self.can_turn:
            return "TURN_RIGHT", MAX_HOLD_TICS
        return ("MOVE_FORWARD", MAX_HOLD_TICS) if not self.hunting else (NOOP, 2)
