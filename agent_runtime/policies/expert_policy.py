"""The expert player: grammar commands with hold counts from measured turn/move rates, correct on stale frames.

A command decided on a frame d tics old starts d tics after that frame, so the turns and strafes issued in
those d tics are not in the frame yet. The expert keeps a per-tic history of what was executed and reads
every bearing and offset as "where it will be once everything already commanded has happened": decide() records
the command it returns; a labeller that only calls command_for() feeds what really ran to observe_executed().

Engine facts it relies on, checked against the engine by tests/test_expert_policy.py: Doom's slow-turn ramp
(control/turning.py), MOVE_* thrust with friction (n thrust tics carry the player about 8n units), the pistol's shot delay
and refire cycle (the constants below). Delta buttons are never used: the action grammar cannot say them, and
every bundled scenario that has one also has TURN_LEFT/TURN_RIGHT.
"""

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent_runtime.control.action_grammar import NOOP
from agent_runtime.control.turning import MAX_HOLD_TICS, TURN_SIGN, TurnModel
from envs.frame import Frame, ObjectLabel
from envs.observation_text import bearing_degrees, distance_units

STRAFE_THRUST = 24 * 2048 / 65536  # sidemove[0], map units per tic of velocity gained
FORWARD_THRUST = 25 * 2048 / 65536  # forwardmove[0]
FRICTION = 0.90625  # ORIG_FRICTION: velocity kept per tic
SHOT_DELAY_TICS = 4  # ATTACK pressed on tic t: the bullet flies on tic t + 4 ...
SHOT_VISIBLE_TICS = SHOT_DELAY_TICS + 1  # ... and the frame of tic t + 5 shows ammo spent and the monster gone
FIRE_HOLD_TICS = SHOT_DELAY_TICS + 1  # hold still until the bullet has flown (well before the refire check)
WEAPON_CYCLE_TICS = 19  # a press is ignored until this many tics after the previous one
FIRE_TOLERANCE = 0.7  # fire within this fraction of the target's angular half-width ...
TARGET_DRIFT_UNITS_PER_TIC = 0.25  # ... less how far a monster may stray from its extrapolated path per tic
TRACK_WINDOW_TICS = 16  # velocity from the positions seen over this many tics
MEMORY_TICS = 140  # forget a last-seen place after 4 s
REMEMBER_NEAR_UNITS = 400.0  # turn back only to monsters last seen this near
SKIP_TICS = 35  # a target no hold count can reach is left alone this long
THREAT_UNITS = 160.0  # monsters this near are shot first, however far the turn
SCAN_HOLD_TICS = MAX_HOLD_TICS
PICKUP_CATEGORIES = frozenset({"Health"})
PICKUP_REACH_UNITS = 24.0  # a pickup passed this close sideways is still taken
MIN_ALIGN_DEGREES = 3.0
STRAFE_SIGN = {"MOVE_LEFT": 1.0, "MOVE_RIGHT": -1.0}

Decision = tuple[dict[str, float], int]  # (buttons pressed -> value, tics to hold)
HORIZONTAL_FOV_DEGREES = 90.0  # ViZDoom default


def frame_width(frame: Frame, default: int) -> int:
    """The frame's width in pixels; `default` for a frame without a screen (labels alone)."""
    return frame.screen.shape[1] if frame.screen is not None else default


def pixels_to_degrees(offset_px: float, width: int) -> float:
    """Degrees (positive = right) of a screen column `offset_px` right of the centre, through the 90° lens."""
    half_fov = math.radians(HORIZONTAL_FOV_DEGREES / 2.0)
    return math.degrees(math.atan(offset_px / (width / 2.0) * math.tan(half_fov)))


def is_target(label: ObjectLabel, hunting: bool) -> bool:
    """On screen and what the scenario is about: monsters to shoot (hunting), else health to pick up."""
    return label.box is not None and (label.category == "Monster" if hunting else label.category in PICKUP_CATEGORIES)


@dataclass(frozen=True)
class MoveModel:
    """Doom momentum on one axis: each thrust tic adds `thrust` to the velocity, friction scales it every tic."""

    thrust: float
    friction: float = FRICTION

    @property
    def units_per_thrust_tic(self) -> float:
        """Distance one thrust tic eventually carries the player, coasting included."""
        return self.thrust / (1.0 - self.friction)


@dataclass(frozen=True)
class ExecutedTic:
    """One tic that ran: its command and what it did to the view angle and the velocities."""

    tic: int
    command: str
    turn_left_deg: float
    strafe_left: float  # thrust added this tic, positive = left
    forward: float


class CommandHistory:
    """The executed commands, tic by tic, so a stale frame can be corrected for the motion it does not show yet."""

    def __init__(self):
        self.turn, self.strafe, self.forward = TurnModel(), MoveModel(STRAFE_THRUST), MoveModel(FORWARD_THRUST)
        self._tics: deque[ExecutedTic] = deque(maxlen=256)
        self.clear()

    def clear(self) -> None:
        """Forget the executed commands: the next frame is taken as showing everything commanded."""
        self._tics.clear()
        self.clock: int | None = None  # tic the next command starts on
        self.turn_held = 0  # consecutive turning tics up to the clock (the engine's slow-turn counter)

    def sync(self, frame_tic: int) -> None:
        """A frame newer than anything commanded: nothing is in flight, the next command starts at its tic."""
        if self.clock is None or frame_tic > self.clock:
            if self.clock is not None:
                self.turn_held = 0  # idle tics released the turn keys
            self.clock = frame_tic

    def record(self, command: str, tics: int, start_tic: int | None = None) -> int:
        """Append `tics` tics of `command` starting at `start_tic` (default: the clock); return the start tic."""
        start = self.clock if start_tic is None else start_tic
        if start is None:
            raise ValueError("start tic unknown: call command_for(frame) first or pass start_tic")
        while self._tics and self._tics[-1].tic >= start:
            self._tics.pop()  # re-recorded tics replace what was there
        if self._tics and self._tics[-1].tic < start - 1:
            self.turn_held = 0
        for k in range(tics):
            turn = 0.0
            if command in TURN_SIGN:
                self.turn_held += 1
                turn = TURN_SIGN[command] * self.turn.step(self.turn_held)
            else:
                self.turn_held = 0
            self._tics.append(ExecutedTic(start + k, command, turn, STRAFE_SIGN.get(command, 0.0) * self.strafe.thrust,
                                          self.forward.thrust if command == "MOVE_FORWARD" else 0.0))
        self.clock = start + tics
        return start

    def pressed_at(self, tic: int, command: str) -> bool:
        """Whether `command` ran on `tic` (tells a new ATTACK press from a held one)."""
        return any(e.tic == tic and e.command == command for e in reversed(self._tics))

    def rotation_since(self, tic: int) -> float:
        """Degrees (positive = left) the view turns from the start of `tic` to the clock."""
        return sum(e.turn_left_deg for e in self._tics if e.tic >= tic)

    def shift(self, axis: str, since_tic: int, coast_tics: int | None = None) -> float:
        """Units moved along `axis` ("strafe_left" or "forward") from the start of `since_tic` until `coast_tics`
        idle tics after the clock (None: until the player stops)."""
        friction = (self.strafe if axis == "strafe_left" else self.forward).friction
        x = v = 0.0
        x_since, last = None, None
        for e in self._tics:
            if last is not None and e.tic > last + 1:  # idle gap: coast through it
                gap = e.tic - last - 1
                x, v = x + v * (1 - friction**gap) / (1 - friction), v * friction**gap
            if x_since is None and e.tic >= since_tic:
                x_since = x
            v += getattr(e, axis)
            x += v
            v *= friction
            last = e.tic
        coast = v / (1 - friction) if coast_tics is None else v * (1 - friction**coast_tics) / (1 - friction)
        return x + coast - (x if x_since is None else x_since)


@dataclass(frozen=True)
class Shot:
    """An ATTACK press: which object it was aimed at, and the ammo before it (to tell whether it fired)."""

    press_tic: int
    target_id: int | None
    ammo_before: float
    fired: bool | None = None  # None until a frame SHOT_VISIBLE_TICS after the press says


@dataclass(frozen=True)
class Aim:
    """A target as it will be when a command issued now takes effect (own in-flight motion subtracted)."""

    object_id: int
    bearing: float  # degrees, positive = left, at the moment the bullet would fly
    half_width_deg: float
    distance: float
    lateral: float  # units, positive = left, when the bullet would fly
    lateral_at_rest: float  # once the player has stopped
    half_width_units: float
    drift_deg: float  # how far the target may stray sideways before the bullet flies

    @property
    def fire_tolerance_deg(self) -> float:
        """Largest |bearing| that still hits when the target strays as far as it may (<= 0: do not shoot)."""
        return FIRE_TOLERANCE * self.half_width_deg - self.drift_deg


class LagAwareExpertPolicy:
    """Turn (or strafe) onto a target with the hold count that lands on it, fire once on it; walk to pickups.

    Hunts monsters when the scenario has ATTACK and a way to aim (turns, else strafes); otherwise, with
    MOVE_FORWARD and turns, walks to health pickups. Targets come from the frame's labels (privileged, like
    the scripted player). Nothing in view: turn toward the last place a target was seen (corrected for own
    turns since), else keep turning in one direction.
    """

    name = "expert"

    def __init__(self, buttons: Sequence[str], *, screen_width: int = 160):
        self.buttons = tuple(buttons)
        present = set(self.buttons)
        self.can_turn = set(TURN_SIGN) <= present
        self.can_walk = "MOVE_FORWARD" in present
        self.hunting = "ATTACK" in present and (self.can_turn or set(STRAFE_SIGN) <= present)  # turns, else strafes
        self.screen_width = screen_width
        self.history = CommandHistory()  # and the turn and move models it predicts with
        self.reset()

    # --- the interface --------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything (a new episode); done by itself when the frame's episode changes or tics go back."""
        self.history.clear()
        self._episode: int | None = None
        self._last_tic: int | None = None
        self._tracks: dict[int, deque[tuple[int, float, float]]] = {}
        self._memory: dict[int, tuple[ObjectLabel, int]] = {}  # object id -> (label, tic last seen)
        self._shots: list[Shot] = []
        self._skipped: dict[int, int] = {}  # object id -> tic until which it is not aimed at
        self._unsure: set[int] = set()  # monsters last seen too far to hit: not worth turning back for
        self._aim_id: int | None = None
        self._ammo = 0.0
        self._scan_sign = -1.0  # +1 scans left, -1 right
        self._scanned_deg = 0.0
        self._explore_walks = 0

    def command_for(self, frame: Frame) -> tuple[str, int]:
        """The expert's command for `frame` as (button name or NOOP, hold tics 1..8).

        Records nothing as executed (see observe_executed); it does update what the expert has seen and which
        target it is after, so feed it the frames in order."""
        self._observe(frame)
        if self.hunting:
            return self._hunt(frame)
        if self.can_walk and self.can_turn:
            return self._gather(frame)
        return self._scan()

    def observe_executed(self, command: str, tics: int, start_tic: int | None = None) -> None:
        """Record that `command` ran for `tics` tics from `start_tic` (default: right after the last one)."""
        if command != NOOP and command not in self.buttons:
            raise ValueError(f"unknown command '{command}'; allowed: {', '.join(self.buttons)}, {NOOP}")
        if tics < 1:
            raise ValueError("tics must be >= 1")
        start = self.history.record(command, tics, start_tic)
        if command == "ATTACK" and not self.history.pressed_at(start - 1, "ATTACK"):
            self._shots = self._shots[-3:] + [Shot(start, self._aim_id, self._ammo)]

    def decide(self, frame: Frame) -> Decision:
        """command_for(frame) as buttons, recorded as executed (the caller runs exactly what it returns)."""
        command, tics = self.command_for(frame)
        self.observe_executed(command, tics)
        return ({} if command == NOOP else {command: 1.0}), tics

    # --- what it has seen -----------------------------------------------------------------

    def _observe(self, frame: Frame) -> None:
        if frame.episode != self._episode or (self._last_tic is not None and frame.tic < self._last_tic):
            self.reset()
            self._episode = frame.episode
        self._last_tic = frame.tic
        self.history.sync(frame.tic)
        self._ammo = frame.ammo
        self._shots = [self._settled(s, frame) for s in self._shots]
        self._remember(frame)

    @staticmethod
    def _settled(shot: Shot, frame: Frame) -> Shot:
        """Once a frame can show it, a press that spent no ammo did not fire (the weapon was busy or raising)."""
        if shot.fired is None and frame.tic >= shot.press_tic + SHOT_VISIBLE_TICS:
            return replace(shot, fired=frame.ammo < shot.ammo_before)
        return shot

    def _remember(self, frame: Frame) -> None:
        """Last-seen places and short position tracks; forget places in view that show nothing now."""
        seen = {lab.object_id for lab in frame.labels if is_target(lab, self.hunting)}
        for lab in frame.labels:
            if lab.object_id in seen:
                self._memory[lab.object_id] = (lab, frame.tic)
                track = self._tracks.setdefault(lab.object_id, deque(maxlen=8))
                if not track or track[-1][0] < frame.tic:
                    track.append((frame.tic, lab.x, lab.y))
        in_view = HORIZONTAL_FOV_DEGREES / 2.0 - 5.0
        for object_id, (lab, tic) in list(self._memory.items()):
            if object_id in seen:
                continue
            taken = not self.hunting and distance_units(frame, lab) < PICKUP_REACH_UNITS * 2
            if taken or frame.tic - tic > MEMORY_TICS or abs(bearing_degrees(frame, lab)) < in_view:
                del self._memory[object_id]
                self._tracks.pop(object_id, None)

    def _pending_targets(self) -> set[int]:
        """Targets shot at whose result no frame shows yet: do not shoot them twice."""
        return {s.target_id for s in self._shots if s.fired is None and s.target_id is not None}

    def _weapon_ready_tic(self) -> int:
        """First tic a press fires again: a cycle after the last press that did fire (or may have)."""
        fired = [s.press_tic for s in self._shots if s.fired is not False]
        return max(fired) + WEAPON_CYCLE_TICS if fired else -1

    # --- monsters -------------------------------------------------------------------------

    def _hunt(self, frame: Frame) -> tuple[str, int]:
        """Stay on the current target while it is eligible, even when the stale frame no longer shows it (it
        lies behind a turn still in flight); switch only for a monster about to bite."""
        clock = self.history.clock
        self._skipped = {i: until for i, until in self._skipped.items() if until > clock}
        barred = self._pending_targets() | set(self._skipped)
        aims = [self._aim(frame, lab) for lab in frame.labels
                if is_target(lab, self.hunting) and lab.object_id not in barred]
        sure = [a for a in aims if a.fire_tolerance_deg > 0]
        self._unsure = (self._unsure | {a.object_id for a in aims}) - {a.object_id for a in sure}
        threats = [a for a in sure if a.distance <= THREAT_UNITS]
        current = next((a for a in sure if a.object_id == self._aim_id), None)
        if current is None and not threats and self._aim_id not in barred | self._unsure:
            plan = self._turn_to_remembered(frame, self._aim_id)
            if plan is not None:
                return plan
        if current is None or (threats and current.distance > THREAT_UNITS):
            if not sure:  # too far to hit on this stale a view: look for nearer ones, these come closer meanwhile
                return self._search(frame, barred | self._unsure)
            miss = (lambda a: abs(a.bearing)) if self.can_turn else (lambda a: abs(a.lateral_at_rest))
            current = min(threats or sure, key=lambda a: (miss(a), a.distance, a.object_id))
        self._aim_id = current.object_id
        return self._engage_by_turning(current) if self.can_turn else self._engage_by_strafing(current)

    def _aim(self, frame: Frame, label: ObjectLabel) -> Aim:
        """Where `label` will be when a shot pressed at the clock flies, seen from where the view will be."""
        shot_tic = self.history.clock + SHOT_DELAY_TICS
        target = self._predicted(label, frame.tic, shot_tic)  # moving targets led by their velocity
        seen_bearing = bearing_degrees(frame, target)
        distance = distance_units(frame, target)
        half_width = self._half_width_deg(frame, label, bearing_degrees(frame, label))
        frame_lateral = distance * math.sin(math.radians(seen_bearing))
        return Aim(
            object_id=label.object_id,
            bearing=seen_bearing - self.history.rotation_since(frame.tic),
            half_width_deg=half_width,
            distance=distance,
            lateral=frame_lateral - self.history.shift("strafe_left", frame.tic, SHOT_DELAY_TICS),
            lateral_at_rest=frame_lateral - self.history.shift("strafe_left", frame.tic),
            half_width_units=distance * math.tan(math.radians(half_width)),
            drift_deg=math.degrees(math.atan2(TARGET_DRIFT_UNITS_PER_TIC * (shot_tic - frame.tic), max(distance, 1.0))),
        )

    def _predicted(self, label: ObjectLabel, frame_tic: int, at_tic: int) -> ObjectLabel:
        """`label` moved on to `at_tic` at the velocity its recent track shows (unchanged without one)."""
        track = [p for p in self._tracks.get(label.object_id, ()) if frame_tic - TRACK_WINDOW_TICS <= p[0] <= frame_tic]
        if len(track) < 2 or track[-1][0] - track[0][0] < 3:
            return label
        (t0, x0, y0), (t1, x1, y1) = track[0], track[-1]
        ahead = (at_tic - frame_tic) / (t1 - t0)
        return replace(label, x=label.x + (x1 - x0) * ahead, y=label.y + (y1 - y0) * ahead)

    def _half_width_deg(self, frame: Frame, label: ObjectLabel, bearing: float) -> float:
        """Half the angle the target's box spans; a box cut by the screen edge is measured from its other edge."""
        width = frame_width(frame, self.screen_width)
        x, _, w, _ = label.box
        left = pixels_to_degrees(x - width / 2.0, width)  # degrees, positive = right
        right = pixels_to_degrees(x + w - width / 2.0, width)
        whole = (right - left) / 2.0
        cut_left, cut_right = x <= 0, x + w >= width
        if cut_left and cut_right:
            return HORIZONTAL_FOV_DEGREES / 2.0
        if cut_left:
            return max(whole, right + bearing)
        if cut_right:
            return max(whole, -bearing - left)
        return whole

    def _engage_by_turning(self, aim: Aim) -> tuple[str, int]:
        if abs(aim.bearing) <= aim.fire_tolerance_deg:
            return self._fire_when_ready()
        plan = self.turn_plan(aim.bearing)
        if plan is not None:
            return plan
        # no hold count gets closer (turns come in steps): look elsewhere until it has moved
        self._skipped[aim.object_id] = self.history.clock + SKIP_TICS
        return NOOP, 1

    def _engage_by_strafing(self, aim: Aim) -> tuple[str, int]:
        tolerance = FIRE_TOLERANCE * aim.half_width_units
        if abs(aim.lateral) <= tolerance and self._weapon_ready_tic() <= self.history.clock:
            return self._fire_when_ready()
        if abs(aim.lateral_at_rest) > tolerance / 2.0:
            tics = round(abs(aim.lateral_at_rest) / self.history.strafe.units_per_thrust_tic)
            return ("MOVE_LEFT" if aim.lateral_at_rest > 0 else "MOVE_RIGHT"), min(max(tics, 1), MAX_HOLD_TICS)
        return self._fire_when_ready() if abs(aim.lateral) <= tolerance else (NOOP, 1)

    def _fire_when_ready(self) -> tuple[str, int]:
        """ATTACK held until the bullet has flown; NOOP until the weapon can fire again (or without ammo)."""
        if self._ammo <= 0:
            return NOOP, MAX_HOLD_TICS
        wait = self._weapon_ready_tic() - self.history.clock
        if wait > 0:
            return NOOP, min(wait, MAX_HOLD_TICS)
        return "ATTACK", FIRE_HOLD_TICS

    def _search(self, frame: Frame, barred: set[int]) -> tuple[str, int]:
        """Nothing to aim at: turn toward the near last-seen place needing the least turn, else scan."""
        turned = self.history.rotation_since(frame.tic)
        places = {i: bearing_degrees(frame, lab) - turned for i, (lab, _) in self._memory.items()
                  if i not in barred and distance_units(frame, lab) <= REMEMBER_NEAR_UNITS}
        for object_id in sorted(places, key=lambda i: abs(places[i])):
            plan = self._turn_to_remembered(frame, object_id)
            if plan is not None:
                return plan
        self._aim_id = None
        return self._scan()

    def _turn_to_remembered(self, frame: Frame, object_id: int | None) -> tuple[str, int] | None:
        """Turn toward where `object_id` was last seen and make it the target; None (and forget the place)
        when it is not remembered or no turn gets closer, i.e. the view is on the place and it is not there."""
        if object_id not in self._memory or not self.can_turn:
            return None
        label, _ = self._memory[object_id]
        plan = self.turn_plan(bearing_degrees(frame, label) - self.history.rotation_since(frame.tic))
        if plan is None:
            del self._memory[object_id]
            return None
        self._aim_id = object_id
        return plan

    # --- turning --------------------------------------------------------------------------

    def turn_plan(self, bearing: float) -> tuple[str, int] | None:
        """The turn whose hold count lands nearest `bearing` (degrees, positive = left), or None if none is nearer
        than not turning. Continues the engine's slow-turn ramp from the turns just executed. Callers check can_turn."""
        tics = self.history.turn.nearest_hold(bearing, self.history.turn_held)
        if tics == 0:
            return None
        self._scan_sign = 1.0 if bearing > 0 else -1.0
        return ("TURN_LEFT" if bearing > 0 else "TURN_RIGHT"), tics

    def _scan(self) -> tuple[str, int]:
        if not self.can_turn:
            return NOOP, 2
        return ("TURN_LEFT" if self._scan_sign > 0 else "TURN_RIGHT"), SCAN_HOLD_TICS

    # --- pickups --------------------------------------------------------------------------

    def _gather(self, frame: Frame) -> tuple[str, int]:
        """Walk to a known pickup, turning onto it first; keep the chosen one until it is taken or gone (choosing
        afresh on every stale frame makes the view swing between two). Explore when none is known."""
        if not self._memory:
            return self._explore()
        self._scanned_deg = 0.0
        turned = self.history.rotation_since(frame.tic)
        travelled = self.history.shift("forward", frame.tic)

        def cost(object_id: int) -> float:
            label, _ = self._memory[object_id]
            return distance_units(frame, label) * (1.0 + abs(bearing_degrees(frame, label) - turned) / 45.0)

        if self._aim_id not in self._memory:
            self._aim_id = min(self._memory, key=lambda i: (cost(i), i))
        label, _ = self._memory[self._aim_id]
        return self._walk_to(bearing_degrees(frame, label) - turned, distance_units(frame, label) - travelled)

    def _walk_to(self, bearing: float, distance: float) -> tuple[str, int]:
        tolerance = max(MIN_ALIGN_DEGREES, math.degrees(math.atan2(PICKUP_REACH_UNITS, max(distance, 1.0))))
        if abs(bearing) > tolerance:
            plan = self.turn_plan(bearing)
            if plan is not None:
                return plan
        tics = math.ceil(max(distance, 0.0) / self.history.forward.units_per_thrust_tic)
        return "MOVE_FORWARD", min(max(tics, 2), MAX_HOLD_TICS)

    def _explore(self) -> tuple[str, int]:
        """A full turn without seeing anything: walk a few holds, then look around again."""
        if self._explore_walks > 0 or self._scanned_deg >= 360.0:
            self._scanned_deg = 0.0
            self._explore_walks = self._explore_walks - 1 if self._explore_walks > 0 else 2
            return "MOVE_FORWARD", MAX_HOLD_TICS
        self._scanned_deg += self.history.turn.degrees(SCAN_HOLD_TICS, self.history.turn_held)
        return self._scan()
