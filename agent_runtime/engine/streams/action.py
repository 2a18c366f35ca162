"""The action stream: a command and its hold, decided on the newest frame, over a view of what the agent holds.

"score" decides a command in ONE forward (action_grammar.CommandScorer); "decode" walks the grammar token by token
and lets the model choose a tic count. The chosen command's tokens join the action log, whose own block rolls over
every `decisions_per_block` decisions. A decision begun in an older generation (the user interrupted) is abandoned.

Cadence "hold" decides again on the frame of the tic the chosen hold ends: a command decided on frame f for n tics
starts about one reaction later and ends n tics after that, when the decision made on frame f + n arrives; so the
holds follow each other as the expert's do, each decided on a frame as old as one reaction, and a hold is never cut
short by a decision made on a frame that cannot show it yet. Cadence "frame" decides on every new frame, each
decision replacing the hold under way. An interruption (a new generation) decides on the next frame in both.
"""

from agent_runtime.control.action_executor import Action
from agent_runtime.control.action_grammar import CommandDecoder
from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.engine.view import View
from agent_runtime.session.events import Kind


class ActionStream(Stream):
    role = "action"

    def __init__(self, ctx, grammar, scorer, prompt: list[int], frames, *, mode: str, decisions_per_block: int,
                 on_decision, cadence: str = "hold"):
        super().__init__(ctx)
        self.grammar, self.scorer, self.prompt, self.frames = grammar, scorer, prompt, frames
        self.mode, self.decisions_per_block, self.cadence = mode, decisions_per_block, cadence
        self.on_decision = on_decision
        self.view = View(self.store, name="action", own_label="actions")
        self.decoder = None  # decode mode: the grammar walk under way
        self.unfed: list[int] = []  # the chosen command's tokens, fed with the next row
        self.frame = None
        self.generation = 0
        self.decisions_in_block = 0
        self.last_frame_tic = -1
        self.next_decision_tic = -1  # cadence "hold": no decision on a frame before this tic

    def on_interruption(self, generation: int, now_ms: float) -> None:
        """A decision under way is abandoned, and the hold under way no longer stands: decide on the next frame."""
        if self.decoder is not None:
            self.decoder, self.unfed = None, []
            self.stats.decisions_abandoned += 1
        self.next_decision_tic = -1

    def schedule(self, plan: StepPlan) -> None:
        if self.decoder is not None:  # decode mode, mid-command: feed the chosen tokens, get the next branch
            plan.deciding = True
            plan.add(self, StreamInput(self.view, self._take_unfed(), logits="last"))
            return
        newest = self.frames.newest_in_view()
        if newest is None or newest.frame.tic <= self.last_frame_tic or newest.frame.tic < self.next_decision_tic:
            if self.unfed:  # the tail of the last command, so other streams see it whole
                plan.add(self, StreamInput(self.view, self._take_unfed(), logits="none"))
            return
        tail = self._roll_over() if self.decisions_in_block >= self.decisions_per_block else None
        self.frame, self.generation, self.last_frame_tic = newest, plan.generation, newest.frame.tic
        plan.deciding = True
        if self.mode == "decode":
            self.decoder = CommandDecoder(self.grammar)
            plan.add(self, StreamInput(self.view, self._take_unfed() + self.prompt + self.decoder.forced_prefix()))
        else:
            plan.add(self, StreamInput(self.view, self._take_unfed() + self.prompt, logits="last"))
            for branch in self.scorer.branch_inputs(self.view):
                plan.add(self, branch, role=branch.view.name, scratch=True)
        if tail is not None:  # last, so postprocess reads the prompt's and the branches' logits as before
            plan.add(self, tail, role="action_log", scratch=True)

    def postprocess(self, logits: list, plan: StepPlan) -> Action | None:
        if logits[0] is None:
            return None
        if self.mode == "score":
            command, self.unfed = self.scorer.best(logits[0], logits[1:1 + len(self.scorer.branches)])
        else:
            if self.decoder is None:
                return None
            self.unfed = self.decoder.choose(logits[0])
            command = self.decoder.node.command
            if command is None:
                return None
            self.decoder = None
        self.decisions_in_block += 1
        self.stats.decisions += 1
        self.stats.decisions_with_note += self.stats.note_in_view
        if self.on_decision is not None:  # data collection; a DAgger mix may let the expert act instead
            acted = self.on_decision(self.view.token_ids(), self.frame, command, self.view.isolated_spans(),
                                     self.view.block_layout())
            if acted is not None and acted != command:
                command, self.unfed = acted, self.scorer.tokens_for(acted)
        if self.cadence == "hold":
            self.next_decision_tic = self.frame.frame.tic + command.tics
        tic = self.frame.frame.tic
        self.emit(Kind.ACTION_EMITTED, "action", generation=self.generation, tic=tic, sim_ms=plan.now_ms,
                  command=command.text, frame_tic=tic, note_in_view=self.stats.note_in_view)
        return Action(command, self.generation, tic, self.frame.read_ms, plan.now_ms)

    def restart(self) -> None:
        """A new episode: tics start over."""
        self.last_frame_tic = self.next_decision_tic = -1

    def _take_unfed(self) -> list[int]:
        tokens, self.unfed = self.unfed, []
        return tokens

    def _roll_over(self) -> StreamInput | None:
        """The full block joins the action log and a fresh one starts. The previous command's tokens not fed yet
        (its decision came on the very next step) still go into the block of its prompt, in this same forward: the
        input returned, on a scratch view of the view as it was."""
        tail = None
        if self.unfed:
            tail = StreamInput(View(self.view.store, self.view.blocks, own=self.view.own, name="action_log"),
                               self._take_unfed(), logits="none")
        self.sections.add("actions", self.view.roll_own("actions"))
        self.decisions_in_block = 0
        return tail
