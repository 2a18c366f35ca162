"""The multi-stream agent (the engine): frames and words in; thought, actions and remarks out; one forward a step.

A step: expire stale work -> schedule rows -> one batched forward -> postprocess each stream's logits. Blocks
leave the views in whole units, so the pool and process memory stay flat however long the episode runs.
"""

from dataclasses import dataclass, field

from agent_runtime.control.action_executor import Action
from agent_runtime.control.action_grammar import ActionGrammar, Command, CommandScorer
from agent_runtime.control.user_inputs import is_question
from agent_runtime.engine.block_sections import SECTION_NAMES, BlockSections
from agent_runtime.session.clocks import measured
from agent_runtime.config import BudgetConfig, EngineConfig
from agent_runtime.session.events import EventBus, Kind
from agent_runtime.session.generation import Interruption, SessionGeneration
from agent_runtime.engine.model_runner import ModelRunner
from agent_runtime.notices import OncePerKind, warning_line
from agent_runtime.engine.kv_block_store import Block
from agent_runtime.engine.prompts import ACTION_PROMPT, COMMENTARY_PROMPT, HEARD_PREFIX, THOUGHT_PROMPT, encode, system_prompt
from agent_runtime.engine.sampler import sampler
from agent_runtime.engine.scheduler import schedule
from agent_runtime.engine.streams.action import ActionStream
from agent_runtime.engine.streams.commentary import CommentaryStream
from agent_runtime.engine.streams.frames import LABELS, FrameStream
from agent_runtime.engine.streams.stream import StepPlan, StreamContext
from agent_runtime.engine.streams.text_in import TextInStream, UserTextStream
from agent_runtime.engine.streams.thinker import ThinkerStream
from agent_runtime.session.sync_world import TimedFrame
from agent_runtime.session.time_bounds import TimeBounds
from agent_runtime.thinking.phrase_grammar import FREE_TEXT, PhraseGrammar
from agent_runtime.engine.view import View

ACTION_LOG_KEPT = 8  # past decisions (a block each) the actions section keeps for the Thinker


@dataclass
class AgentStats:
    steps: int = 0
    frames_prefilled: int = 0
    frames_dropped: int = 0
    thinker_tokens: int = 0
    thinker_paragraphs: int = 0
    notes: int = 0  # paragraphs that made a claim in the notes' vocabulary (thinking/vocabulary.py)
    note_in_view: bool = False  # the newest paragraph, the one the action view reads, is such a note
    decisions_with_note: int = 0
    decisions: int = 0
    decisions_abandoned: int = 0
    joint_decode_steps: int = 0  # steps in which Thinker and action stream decoded in the same forward
    remarks_started: int = 0
    remarks_stopped: int = 0  # cut off by an interruption (barge-in, a typed message)
    heard_commits: int = 0
    frame_encode_ms: list[float] = field(default_factory=list)  # what writing each prefilled frame line cost


@dataclass
class StepOutcome:
    actions: list[Action]
    measured_s: float
    decode_rows: int
    prefill_tokens: int
    batch: list[tuple[str, int]]


def prefill_system(runner: ModelRunner, tokenizer, grammar: ActionGrammar, scenario: str) -> Block:
    """The system prompt in a block of its own, held once by the caller (the engine and the baselines read it)."""
    system = runner.store.create("system")
    view = View(runner.store, own=system)
    runner.prefill(view, encode(tokenizer, system_prompt(scenario, grammar.describe())))
    view.close()
    return system


class MultiStreamAgent:
    def __init__(self, runner: ModelRunner, tokenizer, grammar: ActionGrammar, generation: SessionGeneration, *,
                 engine: EngineConfig, budgets: BudgetConfig, scenario: str, seed: int = 0, commentary: bool = False,
                 on_sentence=None, on_decision=None, bus: EventBus | None = None, notify=warning_line,
                 frame_encoder=LABELS, vision=None, encode_cost=None, on_paragraph=None, on_remark=None):
        """engine and budgets: the run's config sections, the one source of the engine's options (config.py says
        what each means). on_decision(view_tokens, timed_frame, command, isolated_spans, block_layout): called at
        every decision with the tokens the action view read, its isolated spans and its blocks (data collection); a
        Command it returns is acted (and logged) instead of the model's (DAgger's mix of expert and model).
        on_sentence(text, generation): each finished remark sentence (commentary=True). bus: where events go (None:
        nowhere).
        notify(line): where the once-a-session line about cut or dropped user text goes (None: events only).
        frame_encoder: what writes the frame lines (Runtime.frame_encoder: from the labels or the screen; None: no
        line); vision: a vision-language model's VisionEncoder whose image tokens frame blocks hold (Runtime.vision);
        encode_cost: the clock's time for a frame's encoding (FrameStream). on_paragraph(view): the Thinker's
        teacher at each paragraph's start (ThinkerStream; data collection); on_remark(view): the commentary's at each
        remark's start (CommentaryStream)."""
        whole_log = engine.action_log_in_view is None
        decisions_per_block, kept = (8, 1) if whole_log else (1, max(engine.action_log_in_view, ACTION_LOG_KEPT))
        self.runner, self.store, self.tok, self.generation, self.bus = runner, runner.store, tokenizer, generation, bus
        self.prefill_tokens_per_step = engine.prefill_tokens_per_step
        self.stats = AgentStats()
        self.now_ms = 0.0
        self.seen_generation = generation.current
        self.sections = BlockSections(self.store, {
            "system": 1, "actions": kept, "user": 2, "commentary": 2, "status": 1,
            "thoughts": budgets.thinker_paragraphs_in_view, "frames": budgets.frames_in_view,
            "history": budgets.thinker_frames_in_view or 0})
        self.sections.add("system", prefill_system(runner, tokenizer, grammar, scenario))
        self._build_streams(grammar, engine, budgets, seed, decisions_per_block, commentary, on_sentence,
                            dict(on_decision=on_decision, on_paragraph=on_paragraph, on_remark=on_remark), notify,
                            dict(encoder=frame_encoder, vision=vision, encode_cost=encode_cost))
        # the Thinker reads every section (its frames from the longer history where it keeps one); the action view
        # its own past decisions and the frames only as many as asked (None: all), with the newest remark and thought
        self.sections.follow(self.action.view, [
            ("system", None), ("user", None), ("commentary", 1), ("thoughts", 1),
            ("actions", engine.action_log_in_view), ("status", None), ("frames", engine.action_frames_in_view)])
        skipped = "frames" if budgets.thinker_frames_in_view else "history"
        self.sections.follow(self.thinker.view, [(name, None) for name in SECTION_NAMES if name != skipped])
        generation.subscribe("engine", self._record_interruption)

    def _build_streams(self, grammar, engine: EngineConfig, budgets: BudgetConfig, seed, decisions_per_block,
                       commentary, on_sentence, hooks: dict, notify, frame_options: dict) -> None:
        sample = sampler(engine.temperature, seed)
        end_tokens = {t for t in (self.tok.eos_token_id,) if t is not None}
        ctx = StreamContext(self.store, self.sections, self.stats, self._emit, self.tok)
        self.frames = FrameStream(ctx, TimeBounds(max_frame_age_ms=budgets.max_frame_age_ms),
                                  listened=lambda: self.bus is not None, signed=engine.signed_bearings,
                                  aimed=engine.frame_line == "aimed", **frame_options)
        self.user = UserTextStream(ctx, notice=OncePerKind(notify))
        self.heard = TextInStream("heard", "commentary", ctx)
        self.action = ActionStream(ctx, grammar, CommandScorer(grammar, self.tok), encode(self.tok, ACTION_PROMPT),
                                   self.frames, mode=engine.decision_mode, decisions_per_block=decisions_per_block,
                                   on_decision=hooks["on_decision"], cadence=engine.decision_cadence)
        own = engine.thinker_temperature
        grammar = PhraseGrammar(self.tok) if engine.vocabulary != "free" else FREE_TEXT  # the vocabulary's tokens
        notes, remarks = engine.vocabulary in ("notes", "both"), engine.vocabulary in ("remarks", "both")
        self.thinker = ThinkerStream(ctx, encode(self.tok, THOUGHT_PROMPT), end_tokens=end_tokens,
                                     sample=sample if own is None else sampler(own, seed),
                                     paragraph_tokens=budgets.thinker_tokens_per_paragraph,
                                     while_deciding=engine.think_while_deciding, on_paragraph=hooks["on_paragraph"],
                                     frames=self.frames, grammar=grammar if notes else FREE_TEXT)
        self.commentary = CommentaryStream(
            ctx, encode(self.tok, COMMENTARY_PROMPT), sample=sample, on_sentence=on_sentence, end_tokens=end_tokens,
            context=lambda: self.action.view.blocks[:] if self.frames.in_view else [],
            interval_ms=engine.commentary_interval_ms, max_tokens=engine.commentary_max_tokens,
            on_remark=hooks["on_remark"], text_waiting=lambda: bool(self.user.queue),
            grammar=grammar if remarks else FREE_TEXT)
        decoders = [self.action] + ([self.thinker] if engine.think else []) + ([self.commentary] if commentary else [])
        # the schedule's order: the newest frame first, then text in, then the decoders (action first: it decides)
        self.streams = [self.frames, self.user, self.heard, *decoders]

    def push_frame(self, timed: TimedFrame) -> None:
        self.frames.push(timed)

    def push_user_text(self, text: str, now_ms: float, command: Command | None = None) -> Action | None:
        """A user command: an interruption first (the generation bump), then its text waits for the views; a button
        command acts directly on the newest frame."""
        gen = self.generation.bump("user_command", sim_ms=now_ms, text=text)
        self.user.push_text(text, now_ms)
        if is_question(text):
            self.commentary.ask(text)
        newest = self.frames.newest()
        if command is None or newest is None:
            return None
        return Action(command, gen, newest.frame.tic, max(newest.read_ms, now_ms), now_ms, source="user")

    def _record_interruption(self, interruption: Interruption) -> None:
        """The engine's part of an interruption, at the bump: it is recorded here, first. Each stream hears of it at
        the start of the next step (Stream.on_interruption; the engine may be mid-forward on another thread)."""
        self._emit(Kind.GENERATION_BUMP, "user", generation=interruption.generation, sim_ms=interruption.sim_ms,
                   reason=interruption.reason, to=interruption.generation, **interruption.detail)

    def commit_heard(self, text: str) -> None:
        """Speech (or printed text) the user actually heard: it enters the commentary section other streams read."""
        text = text.strip()
        if text:
            self.heard.push(encode(self.tok, HEARD_PREFIX + text))
            self.stats.heard_commits += 1
            self._emit(Kind.COMMENTARY_HEARD, "commentary", sim_ms=self.now_ms, text=text)

    def new_episode(self) -> None:
        """The game restarted: old frames leave the views (tics start over); thoughts and history stay."""
        self.frames.clear()
        self.action.restart()

    def step(self, now_ms: float) -> StepOutcome:
        self.now_ms = now_ms
        generation = self.generation.current
        if generation != self.seen_generation:  # an interruption: every stream hears it once, before scheduling
            self.seen_generation = generation
            for stream in self.streams:
                stream.on_interruption(generation, now_ms)
        plan = schedule(now_ms, generation, self.prefill_tokens_per_step, self.streams)
        if not plan.rows:  # nothing to compute, unless a frame was encoded and then dropped
            return StepOutcome([], plan.compute_s, 0, 0, [])
        result, seconds = measured(self.runner.forward, [row.input for row in plan.rows])
        seconds += plan.compute_s
        by_stream: dict = {}  # each stream postprocesses the logits of its rows, in order
        for row, row_logits in zip(plan.rows, result.logits):
            by_stream.setdefault(row.stream, []).append(row_logits)
        outputs = [stream.postprocess(stream_logits, plan) for stream, stream_logits in by_stream.items()]
        for row in plan.rows:
            if row.scratch:
                row.input.view.close()
        return self._report(plan, seconds, [out for out in outputs if out is not None])

    def _report(self, plan: StepPlan, seconds: float, actions: list[Action]) -> StepOutcome:
        decoding = ("action", "thinker", "commentary")
        decode_rows = sum(1 for r in plan.rows if r.role in decoding and len(r.input.tokens) == 1)
        prefill_tokens = sum(len(r.input.tokens) for r in plan.rows) - decode_rows
        batch = [(r.role, len(r.input.tokens)) for r in plan.rows]
        self.stats.steps += 1
        if {"action", "thinker"} <= {role for role, _ in batch}:
            self.stats.joint_decode_steps += 1
        self._emit(Kind.ENGINE_STEP, "engine", generation=plan.generation, sim_ms=plan.now_ms, batch=batch,
                   compute_ms=seconds * 1000.0, pool_used_pages=self.store.used_pages)
        return StepOutcome(actions, seconds, decode_rows, prefill_tokens, batch)

    def _emit(self, kind: str, stream: str, *, generation: int | None = None, **fields) -> None:
        if self.bus is not None:
            generation = self.generation.current if generation is None else generation
            self.bus.emit(kind, stream, generation=generation, **fields)

    def close(self) -> None:
        self.generation.unsubscribe(self._record_interruption)
        self.commentary.stop("closed", self.now_ms)
        self.sections.stop_following()
        for stream in (self.user, self.heard, self.action, self.thinker, self.frames):  # the order frees pages in,
            stream.close()  # which the next episode's blocks then take: reruns need it unchanged
        self.sections.release_all()
