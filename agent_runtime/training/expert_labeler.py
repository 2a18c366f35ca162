"""DAgger labels: the current model plays, the lag-aware expert says what it would do on each decision's frame.

Expert "view" (default; ViewExpert below) sees only what the action view holds, so a model can learn its labels;
"full" is the privileged expert of `episode --policy expert`. Executed actions reach the expert as commands in
flight, so each label accounts for what was already commanded since the frame, as the expert does in play.

With probability `expert_acts` a decision executes the expert's command instead of the model's (1.0 in a first
round reaches the states of the expert's good play, which an untrained model never does: it dies in the first
seconds; 0.0 lets the model meet its own mistakes). Every decision is labelled.
"""

import random

from agent_runtime.control.action_grammar import NOOP, Command, parse_command_text
from agent_runtime.engine.prompts import thought_text
from agent_runtime.session.events import Kind
from agent_runtime.policies.expert_policy import FIRE_HOLD_TICS, STRAFE_SIGN, LagAwareExpertPolicy, is_target
from agent_runtime.thinking.vocabulary import parse_claims
from agent_runtime.training.decision_log import Decision, DecisionLog
from agent_runtime.control.turning import MAX_HOLD_TICS, TURN_SIGN, TurnInFlight
from envs.frame import Frame
from envs.observation_text import MAX_OBJECTS, bearing_degrees, distance_band, distance_units, visible_objects

FIRE_WITHIN_DEGREES = {"near": 8, "mid": 4, "far": 3}  # a bearing this small, once turned, is a hit
WALK_WITHIN_DEGREES = 4
STRAFE_DEGREES_PER_TIC = {"near": 6.0, "mid": 2.5, "far": 1.0}  # what a strafe tic moves a bearing by, roughly


class ViewExpert:
    """The labeller a model can imitate: the lag-aware expert restricted to what the action view holds.

    The full expert (policies/expert_policy.py) decides from object tracks, last-seen places and the pistol's cycle, none of
    which the view's text carries, so a model cannot learn its labels from the view (held out: 39% on the command).
    This one reads only the newest frame line as the view has it (the nearest MAX_OBJECTS objects, whole signed
    degrees, distance bands), the ammo, and its own previous command, which the action view reads
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


class ExpertLabeler:
    """An event sink and a decision hook for one episode at a time."""

    def __init__(self, buttons, log: DecisionLog, *, screen_width: int = 160, words: dict | None = None,
                 expert_acts: float = 0.0, expert: str = "view", aimed: bool = True):
        """words: the grammar's word per command (ActionGrammar.words), needed when the expert acts; aimed: the
        runtime writes aimed frame lines (engine.frame_line), which the view expert then reads as written. `collect`
        checks expert ("view" or "full") and expert_acts (a probability) for the user."""
        full = expert == "full"
        self.expert = (LagAwareExpertPolicy(buttons, screen_width=screen_width) if full
                       else ViewExpert(buttons, aimed=aimed))
        self.aimed = aimed and not full
        self.log, self.words, self.expert_acts = log, words or {}, expert_acts
        self.start_episode(0)

    def start_episode(self, episode: int, seed: int = 0) -> None:
        """A new episode; `seed` draws which decisions the expert acts (the same episode, the same draws)."""
        self.expert.reset()
        self.episode, self.rng = episode, random.Random(seed)
        self.decisions = self.agreed = self.expert_acted = 0
        self.note: str | None = None  # the newest Thinker paragraph: the one the action view reads

    def on_decision(self, tokens: list[int], timed, command, isolated: list[list[int]] | None = None,
                    blocks: list[list] | None = None) -> Command | None:
        """The agent decided `command` on `timed` (a TimedFrame) reading `tokens` (`isolated`: the view's isolated
        spans; `blocks`: its block layout): store it with the label; return the expert's command when the expert
        acts this decision."""
        if self.aimed:
            label, tics = self.expert.command_for(timed.frame, timed.turn_in_flight, note=self.note)
        else:
            label, tics = self.expert.command_for(timed.frame)
        self.log.add(Decision(self.episode, timed.frame.tic, command.name, label, tics, list(tokens), isolated, blocks))
        self.decisions += 1
        self.agreed += label == command.name
        if self.expert_acts and self.rng.random() < self.expert_acts:
            self.expert_acted += 1
            return Command(label, {} if label == NOOP else {label: 1.0}, tics, self.words.get(label, label.lower()))
        return None

    def write(self, event) -> None:
        """EventSink: executed commands become the expert's commands in flight; each sealed paragraph is the note
        the action view reads from then on."""
        if event.kind == Kind.THINKER_PARAGRAPH:
            self.note = thought_text(event.payload["text"])
        if event.kind == Kind.ACTION_EXECUTED and event.tic is not None:
            self.expert.observe_executed(*parse_command_text(event.payload["command"]), start_tic=event.tic)
