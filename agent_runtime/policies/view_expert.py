"""The view expert: the lag-aware expert restricted to what the action view holds, so a model can learn its labels.

`collect` labels every decision with it (training/expert_labeler.py); `episode --policy view_expert` and `bench play
--agents view_expert,view_expert_noted` play it without a model: the teacher's level, and what the planner's notes
(thinking/planner.py) are worth to it, the ceiling of what a Thinker's notes can add once a model has learnt both.
"""

from collections import deque

from agent_runtime.control.action_grammar import NOOP
from agent_runtime.control.turning import MAX_HOLD_TICS, TURN_SIGN, TurnInFlight
from agent_runtime.policies.expert_policy import FIRE_HOLD_TICS, STRAFE_SIGN, Decision, is_target
from agent_runtime.thinking.planner import note_for
from agent_runtime.thinking.vocabulary import parse_claims
from envs.frame import Frame
from envs.observation_text import (MAX_OBJECTS, bearing_degrees, distance_band, distance_units, encode_observation,
                                   encode_status, visible_objects)

FIRE_WITHIN_DEGREES = {"near": 8, "mid": 4, "far": 3}  # a bearing this small, once turned, is a hit
WALK_WITHIN_DEGREES = 4
STRAFE_DEGREES_PER_TIC = {"near": 6.0, "mid": 2.5, "far": 1.0}  # what a strafe tic moves a bearing by, roughly


class ViewExpert:
    """The labeller a model can imitate: the lag-aware expert restricted to what the action view holds.

    The full expert (policies/expert_policy.py) decides from object tracks, last-seen places and the pistol's cycle,
    none of which the view's text carries, so a model cannot learn its labels from the view (held out: 39% on the
    command). This one reads only the newest frame line as the view has it (the nearest MAX_OBJECTS objects, whole
    signed degrees, distance bands), the ammo, and its own previous command, which the action view reads
    (engine.action_log_in_view: 1): the tics of that command still to run after the frame are turned away from
    every bearing, and a turn that continues one keeps the engine's fast-turn ramp. Measured with frames 1 and 2 tics
    old on defend_the_center (10 seeds): 20.9 and 17.4 kills a game; without its previous command 13.3 and 8.9.
    It also reads the newest Thinker note the action view holds: with nothing in view it turns toward the side where
    the note says a monster was lost (thinking/planner.py), else it scans right.
    """

    def __init__(self, buttons, *, aimed: bool = False):
        """aimed: the view's frame lines are engine.frame_line "aimed" (bearings after the turn in flight, in aim
        order), so the expert reads them as written; else it turns the frame's bearings away itself."""
        self.aimed = aimed
        present = set(buttons)
        self.can_turn = set(TURN_SIGN) <= present
        self.hunting = "ATTACK" in present and (self.can_turn or set(STRAFE_SIGN) <= present)  # as the expert's
        self.reset()

    def reset(self) -> None:
        self.previous = TurnInFlight()  # the command last executed, as the world keeps its own

    def observe_executed(self, command: str, tics: int, start_tic: int | None = None) -> None:
        self.previous.record({command: 1.0}, tics, start_tic if start_tic is not None else -10**9)

    def command_for(self, frame: Frame, turn_in_flight: float | None = None,
                    note: str | None = None) -> tuple[str, int]:
        """turn_in_flight: the world's copy of the turn still to run after the frame (TimedFrame.turn_in_flight),
        which an aimed frame line was written with; None: from the previous command observed. note: the newest
        Thinker paragraph in the action view: with nothing in view, a monster it says is lost is turned toward."""
        rotation = self.previous.degrees_after(frame.tic) if turn_in_flight is None else turn_in_flight
        held = self.previous.tics if self.previous.sign else 0  # a turn continuing it keeps the slow-turn ramp
        turned = rotation if self.aimed else 0.0
        listed = visible_objects(frame, aim_order=self.aimed, turned=turned)[:MAX_OBJECTS]
        # bearings as the frame line writes them (whole degrees, positive = left), less any turn it leaves out
        seen = [(round(bearing_degrees(frame, o, turned)) - (rotation - turned),
                 distance_band(distance_units(frame, o))) for o in listed if is_target(o, self.hunting)]
        if not seen:
            return self._scan(note)
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

    def _turn(self, bearing: float, held: int) -> tuple[str, int]:
        tics = self.previous.turn.nearest_hold(bearing, held, shortest=1)
        return ("TURN_LEFT" if bearing > 0 else "TURN_RIGHT"), tics

    def _scan(self, note: str | None = None) -> tuple[str, int]:
        if self.can_turn:
            lost = [c.side for c in parse_claims(note or "")[0] if c.kind == "lost"]
            return ("TURN_LEFT" if lost[:1] == ["behind left"] else "TURN_RIGHT"), MAX_HOLD_TICS
        return ("MOVE_FORWARD", MAX_HOLD_TICS) if not self.hunting else (NOOP, 2)


class ViewExpertPolicy:
    """The view expert as a player (baseline_policies.PolicyAgent): each command starts when the previous hold ends,
    as the agent loop runs them, so it knows its previous command as the action view does. `noted`: it also reads
    the note the planner writes at every decision from the frame lines of its last NOTE_FRAMES decisions (as the
    Thinker's view holds its newest frames), its status line and its previous note: the freshest note a Thinker
    could give it."""

    NOTE_FRAMES = 4  # budgets.frames_in_view's default: the frame lines a Thinker's view holds

    def __init__(self, buttons, *, noted: bool = False):
        self.expert, self.noted = ViewExpert(buttons), noted
        self.name = "view_expert_noted" if noted else "view_expert"
        self.lines: deque[str] = deque(maxlen=self.NOTE_FRAMES)
        self.note: str | None = None
        self.episode: int | None = None
        self.clock: int | None = None  # the tic the next command starts on
        self.last_tic = -1

    def decide(self, frame: Frame) -> Decision:
        if frame.episode != self.episode or frame.tic < self.last_tic:  # a new episode: nothing is in flight
            self.expert.reset()
            self.lines.clear()
            self.episode, self.note, self.clock = frame.episode, None, None
        self.last_tic = frame.tic
        if self.noted:
            self.lines.append(encode_observation(frame, signed=True))
            self.note = note_for(list(self.lines), encode_status(frame), self.note)
        command, tics = self.expert.command_for(frame, note=self.note)
        start = frame.tic if self.clock is None else self.clock
        self.expert.observe_executed(command, tics, start_tic=start)
        self.clock = start + tics
        return ({} if command == NOOP else {command: 1.0}), tics
