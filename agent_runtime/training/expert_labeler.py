"""DAgger labels: the current model plays, the lag-aware expert says what it would do on each decision's frame.

Expert "view" (default; policies/view_expert.py) sees only what the action view holds, so a model can learn its labels;
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
from agent_runtime.policies.expert_policy import LagAwareExpertPolicy
from agent_runtime.policies.view_expert import ViewExpert
from agent_runtime.training.decision_log import Decision, DecisionLog


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
