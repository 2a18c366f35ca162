"""DAgger labels: the current model plays, the lag-aware expert says what it would do on each decision's frame.

The labeller watches two things: the agent's decisions (the view tokens the action stream read and the frame
it decided on) and the executor's action_executed events, which it feeds to the expert as commands in
flight, so each label accounts for what was already commanded since the frame, as the expert does in play.
"""

from __future__ import annotations

from agent_runtime.expert_policy import LagAwareExpertPolicy
from agent_runtime.training.decision_log import Decision, DecisionLog
from agent_runtime.events import Kind


class ExpertLabeler:
    """An event sink and a decision hook for one episode at a time."""

    def __init__(self, buttons, log: DecisionLog, *, screen_width: int = 160):
        self.expert = LagAwareExpertPolicy(buttons, screen_width=screen_width)
        self.log = log
        self.episode = 0
        self.decisions = 0
        self.agreed = 0

    def start_episode(self, episode: int) -> None:
        self.expert.reset()
        self.episode = episode
        self.decisions = self.agreed = 0

    def on_decision(self, tokens: list[int], timed, command) -> None:
        """The agent decided `command` on `timed` (a TimedFrame) reading `tokens`: store it with the label."""
        label, tics = self.expert.command_for(timed.frame)
        self.log.add(Decision(self.episode, timed.frame.tic, list(tokens), command.name, label, tics))
        self.decisions += 1
        self.agreed += label == command.name

    def write(self, event) -> None:
        """EventSink: executed commands become the expert's commands in flight."""
        if event.kind == Kind.ACTION_EXECUTED and event.tic is not None:
            name, count = event.payload["command"].split(" ")  # Command.text: "<BUTTON> <tics>"
            self.expert.observe_executed(name, int(count), start_tic=event.tic)
