"""The multi-stream agent: frames in, Thinker and action streams out, all in one batched forward a step.

Per engine step:
1. stale work goes first: frames older than max_frame_age leave the views and are freed; pending frames
   that aged past the bound are dropped (counted), never prefilled; a decision begun in an older
   generation is abandoned;
2. the newest pending frame is prefilled into its own block (what is in view; the own status, which
   changes rarely, gets a block of its own only when it changed), and in the same forward the action
   stream starts a decision on it (the frame's KV is written before attention, so the decision sees it);
3. the action stream decodes its command under the grammar, the Thinker decodes its next thought token,
   user text is prefilled, all in the same forward (prefill capped per step so reactions never wait long).
Blocks leave the views in whole units (frames, thought paragraphs, action-log segments), so the pool and
process memory stay flat however long the episode runs.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import torch

from envs.observation_text import encode_seen, encode_status

from agent_runtime.action_executor import Action
from agent_runtime.action_grammar import ActionGrammar, Command, CommandDecoder, CommandScorer
from agent_runtime.commentary_stream import CommentaryStream
from agent_runtime.config import BudgetConfig
from agent_runtime.events import EventBus
from agent_runtime.generation import SessionGeneration
from agent_runtime.kv_block_store import Block
from agent_runtime.model_runner import ModelRunner, StreamInput
from agent_runtime.notices import OncePerKind, stderr_line
from agent_runtime.recording.recording import screen_hash
from agent_runtime.prompts import (ACTION_PROMPT, COMMENTARY_PROMPT, FRAME_PREFIX, HEARD_PREFIX, STATUS_PREFIX,
                                   THOUGHT_PROMPT, USER_PREFIX, system_prompt)
from agent_runtime.sync_world import TimedFrame
from agent_runtime.user_text_limits import MAX_PENDING_USER_TEXTS, MAX_USER_TEXT_CHARS, MAX_USER_TOKENS
from agent_runtime.view import View
from agent_runtime.view_sections import ViewSections


@dataclass
class AgentStats:
    steps: int = 0
    frames_prefilled: int = 0
    frames_dropped: int = 0
    frames_evicted: int = 0
    thinker_tokens: int = 0
    thinker_paragraphs: int = 0
    decisions: int = 0
    decisions_abandoned: int = 0
    joint_decode_steps: int = 0  # steps in which Thinker and action stream decoded in the same forward
    remarks_started: int = 0
    remarks_stopped: int = 0  # cut off by a generation bump (barge-in)
    commentary_tokens: int = 0
    heard_commits: int = 0
    user_texts_truncated: int = 0  # cut to max_user_tokens
    user_texts_dropped: int = 0  # more were waiting than max_pending_user


@dataclass
class StepOutcome:
    actions: list[Action]
    measured_s: float
    decode_rows: int
    prefill_tokens: int
    batch: list[tuple[str, int]]


@dataclass
class _FrameEntry:
    block: Block
    timed: TimedFrame


MIN_PREFILL_CHUNK = 8  # a long text advances at least this much per step, even with the budget spent


@dataclass
class _TextPrefill:
    """A user or heard text waiting to be prefilled into its own block, in chunks when it exceeds a step's budget."""

    tokens: list[int]
    view: View | None = None  # the block's prefill view, once started
    done: int = 0


class _ActionState:
    def __init__(self, view: View):
        self.view = view
        self.decoder: CommandDecoder | None = None
        self.unfed: list[int] = []
        self.frame: TimedFrame | None = None
        self.generation = 0
        self.decisions_in_block = 0
        self.last_frame_tic = -1


class _ThinkerState:
    def __init__(self, view: View, prompt: list[int]):
        self.view = view
        self.pending = list(prompt)
        self.paragraph_tokens = 0


def engine_options(engine) -> dict:
    """MultiStreamAgent keyword arguments from the config's `engine` section."""
    return dict(decision_mode=engine.decision_mode, think=engine.think, temperature=engine.temperature,
                prefill_tokens_per_step=engine.prefill_tokens_per_step,
                commentary_interval_ms=engine.commentary_interval_ms, commentary_max_tokens=engine.commentary_max_tokens)


class MultiStreamAgent:
    def __init__(self, runner: ModelRunner, tokenizer, grammar: ActionGrammar, budgets: BudgetConfig,
                 generation: SessionGeneration, *, scenario: str, bus: EventBus | None = None, seed: int = 0,
                 think: bool = True, temperature: float = 0.8, prefill_tokens_per_step: int = 96,
                 decisions_per_block: int = 8, action_history_blocks: int = 1, user_blocks: int = 2,
                 decision_mode: str = "score", commentary: bool = False, on_sentence=None,
                 commentary_interval_ms: float = 4000.0, commentary_max_tokens: int = 24, on_decision=None,
                 max_user_tokens: int = MAX_USER_TOKENS, max_pending_user: int = MAX_PENDING_USER_TEXTS,
                 notify=stderr_line):
        """decision_mode: "score" decides a command in ONE forward by scoring every command's tokens as
        parallel branches over the same view (exact: the prompt's KV is written before the branches attend);
        "decode" walks the grammar token by token and also lets the model choose a tic count.
        on_decision(view_tokens, timed_frame, command): called at every decision with the tokens the action
        stream's view read (data collection). max_user_tokens / max_pending_user bound what user text holds of
        the pool (user_text_limits); notify(line): where the once-a-session line about a cut or drop goes
        (None: events only)."""
        self.on_decision = on_decision
        self.max_user_tokens, self.max_pending_user = max_user_tokens, max_pending_user
        self._notice = OncePerKind(notify)
        if decision_mode not in ("score", "decode"):
            raise ValueError(f"decision_mode must be 'score' or 'decode', not {decision_mode!r}")
        self.decision_mode = decision_mode
        self.commentary_enabled = commentary
        self.pending_heard: deque[_TextPrefill] = deque()
        self.runner = runner
        self.store = runner.store
        self.tok = tokenizer
        self.grammar = grammar
        self.budgets = budgets
        self.generation = generation
        self.bus = bus
        self.think = think
        self.temperature = temperature
        self.prefill_tokens_per_step = prefill_tokens_per_step
        self.decisions_per_block = decisions_per_block
        self.caps = {"actions": action_history_blocks, "user": user_blocks, "commentary": 2, "status": 1,
                     "thoughts": budgets.thinker_paragraphs_in_view, "frames": budgets.frames_in_view}
        self.rng = torch.Generator().manual_seed(seed)
        self.stats = AgentStats()
        self.now_ms = 0.0
        self.thought_prompt = self._encode(THOUGHT_PROMPT)
        self.action_prompt = self._encode(ACTION_PROMPT)
        self.end_tokens = {t for t in (tokenizer.eos_token_id,) if t is not None}
        self.commentary = CommentaryStream(self.store, tokenizer, self._encode(COMMENTARY_PROMPT), stats=self.stats,
                                           emit=self._emit, on_sentence=on_sentence, interval_ms=commentary_interval_ms,
                                           max_tokens=commentary_max_tokens, end_tokens=self.end_tokens)
        self.scorer = CommandScorer(grammar, tokenizer)

        self.sections: dict[str, list[Block]] = {
            k: [] for k in ("system", "user", "commentary", "thoughts", "actions", "status", "frames")}
        self.status_text: str | None = None  # what the newest status block says
        self.frames: deque[_FrameEntry] = deque()
        self.pending_frames: deque[TimedFrame] = deque()
        self.pending_user: deque[_TextPrefill] = deque()

        system = self.store.create("system")
        prefill_view = View(self.store, own=system)
        self.runner.prefill(prefill_view, self._encode(system_prompt(scenario, grammar.describe())))
        prefill_view.close()
        self.sections["system"] = [system]

        action_view = View(self.store, name="action")
        action_view.start_own("actions")
        self.action = _ActionState(action_view)
        self.action_sections = ViewSections(self.action.view, [("system", None), ("user", None), ("commentary", 1),
                                                               ("thoughts", 1),
                                                               ("actions", None), ("status", None), ("frames", None)])
        thinker_view = View(self.store, name="thinker")
        thinker_view.start_own("thought")
        self.thinker = _ThinkerState(thinker_view, self.thought_prompt)
        self.thinker_sections = ViewSections(self.thinker.view, [("system", None), ("user", None),
                                                                 ("commentary", None), ("thoughts", None),
                                                                 ("actions", None), ("status", None),
                                                                 ("frames", None)])
        self._sync_views()

    # -- inputs from the world and the user ------------------------------------------------------
    def push_frame(self, timed: TimedFrame) -> None:
        self.pending_frames.append(timed)
        if self.bus is not None:  # the hash is for recordings: skip it when nobody listens
            self._emit("frame_read", "frames", tic=timed.frame.tic, sim_ms=timed.read_ms, read_ms=timed.read_ms,
                       screen_hash=screen_hash(timed.frame.screen) if timed.frame.screen is not None else None)

    def push_user_text(self, text: str, now_ms: float, command: Command | None = None) -> Action | None:
        """A user command: bump the generation first, queue its text for the views; a button command acts directly."""
        gen = self.generation.bump("user_command")
        self._emit("generation_bump", "user", generation=gen, sim_ms=now_ms, reason="user_command", text=text)
        self._queue_user_text(text, now_ms)
        if command is None:
            return None
        newest = self.newest_frame()
        if newest is None:
            return None
        return Action(command, gen, newest.frame.tic, max(newest.read_ms, now_ms), now_ms, source="user")

    def _queue_user_text(self, text: str, now_ms: float) -> None:
        """The text's tokens, cut to max_user_tokens, wait for prefill; past max_pending_user the oldest waiting
        one that has not started is dropped. Both are events (and, once, a line): the pool share stays bounded."""
        tokens = self._encode(USER_PREFIX + text[:MAX_USER_TEXT_CHARS])  # never tokenize an endless text whole
        if len(tokens) > self.max_user_tokens:
            self.stats.user_texts_truncated += 1
            self._emit("user_text_truncated", "user", sim_ms=now_ms, chars=len(text), tokens=len(tokens),
                       kept_tokens=self.max_user_tokens)
            self._notice("truncated", f"agent: a user text of {len(text)} characters was cut to its first "
                                      f"{self.max_user_tokens} tokens (later cuts: user_text_truncated events)")
            tokens = tokens[: self.max_user_tokens]
        waiting = [job for job in self.pending_user if job.view is None]  # not yet started
        if len(self.pending_user) >= self.max_pending_user and waiting:
            self.pending_user.remove(waiting[0])
            self.stats.user_texts_dropped += 1
            self._emit("user_text_dropped", "user", sim_ms=now_ms, tokens=len(waiting[0].tokens),
                       reason=f"more than {self.max_pending_user} texts waiting")
            self._notice("dropped", f"agent: user texts arrive faster than they can be read; older waiting ones "
                                    f"are dropped (more than {self.max_pending_user}; user_text_dropped events)")
        self.pending_user.append(_TextPrefill(tokens))

    def new_episode(self) -> None:
        """The game restarted: old frames leave the views (tics start over); thoughts and history stay."""
        while self.frames:
            self._evict_oldest_frame()
        self.pending_frames.clear()
        self.action.last_frame_tic = -1
        self._sync_views()

    def newest_frame(self) -> TimedFrame | None:
        if self.pending_frames:
            return self.pending_frames[-1]
        return self.frames[-1].timed if self.frames else None

    # -- one engine step ---------------------------------------------------------------------------
    def step(self, now_ms: float) -> StepOutcome:
        self.now_ms = now_ms
        gen = self.generation.current
        self._expire(now_ms, gen)
        inputs: list[StreamInput] = []
        roles: list[str] = []
        scratch_views: list[View] = []
        budget = self.prefill_tokens_per_step

        if self.pending_frames:
            timed = self.pending_frames.pop()  # the newest; older pending frames age out and are dropped
            status_tokens = self._status_input(timed, inputs, roles, scratch_views)
            tokens = self._encode(FRAME_PREFIX + encode_seen(timed.frame))
            block = self.store.create(f"frame{timed.frame.tic}")  # prefilled on its own: it sees only itself
            view = View(self.store, own=block, name="frame")
            scratch_views.append(view)
            inputs.append(StreamInput(view, tokens, logits="none"))
            roles.append("frame")
            budget -= len(tokens) + status_tokens
            self.frames.append(_FrameEntry(block, timed))
            self.stats.frames_prefilled += 1
            self._emit("frame_prefilled", "frames", tic=timed.frame.tic, sim_ms=now_ms,
                       age_ms=now_ms - timed.read_ms, tokens=len(tokens), status_tokens=status_tokens)
            self._cap_frames()
        for queue, section, role in ((self.pending_user, "user", "user"),
                                     (self.pending_heard, "commentary", "heard")):  # heard speech only
            while queue and budget > 0:
                job = queue[0]
                if job.view is None:  # the view holds the new block until its text is complete
                    block = self.store.create(section)
                    job.view = View(self.store, own=block, name=role)
                    self.store.release(block)
                chunk = job.tokens[job.done : job.done + max(budget, MIN_PREFILL_CHUNK)]
                job.done += len(chunk)
                inputs.append(StreamInput(job.view, chunk, logits="none"))
                roles.append(role)
                budget -= len(chunk)
                if job.done < len(job.tokens):
                    break  # continued next step
                queue.popleft()
                scratch_views.append(job.view)  # closed after the forward; the section keeps the block
                self.sections[section].append(self.store.retain(job.view.own))
                self._cap(section)
        self._sync_views()

        for role, inp in self._action_inputs(gen):
            inputs.append(inp)
            roles.append(role)
            if role.startswith("branch"):
                scratch_views.append(inp.view)
        if self.think:
            inputs.append(StreamInput(self.thinker.view, self.thinker.pending, logits="last"))
            roles.append("thinker")
        commentary_input = None
        if self.commentary_enabled:
            context = self.action.view.blocks[:] if self.frames else []
            commentary_input = self.commentary.next_input(now_ms, gen, context)
        if commentary_input is not None:
            inputs.append(commentary_input)
            roles.append("commentary")
        if not inputs:
            return StepOutcome([], 0.0, 0, 0, [])

        t0 = time.perf_counter()
        result = self.runner.forward(inputs)
        measured = time.perf_counter() - t0

        actions: list[Action] = []
        branch_logits = {role: logits for role, logits in zip(roles, result.logits) if role.startswith("branch")}
        for role, inp, logits in zip(roles, inputs, result.logits):
            if role == "action":
                act = self._action_consume(logits, branch_logits)
                if act is not None:
                    actions.append(act)
            elif role == "thinker":
                self._thinker_consume(logits)
            elif role == "commentary":
                self.commentary.consume(self._sample(logits), now_ms)
        for v in scratch_views:
            v.close()

        decode_rows = sum(1 for r, i in zip(roles, inputs)
                          if r in ("action", "thinker", "commentary") and len(i.tokens) == 1)
        prefill_tokens = sum(len(i.tokens) for i in inputs) - decode_rows
        batch = [(r, len(i.tokens)) for r, i in zip(roles, inputs)]
        self.stats.steps += 1
        if "action" in roles and "thinker" in roles:
            self.stats.joint_decode_steps += 1
        self._emit("engine_step", "engine", generation=gen, sim_ms=now_ms, batch=batch,
                   compute_ms=measured * 1000.0, pool_used_pages=self.store.used_pages)
        return StepOutcome(actions, measured, decode_rows, prefill_tokens, batch)

    def _status_input(self, timed: TimedFrame, inputs: list, roles: list, scratch_views: list) -> int:
        """A new status block when the frame's status differs from the newest one (most frames: no tokens)."""
        text = encode_status(timed.frame)
        if text == self.status_text:
            return 0
        tokens = self._encode(STATUS_PREFIX + text)
        block = self.store.create("status")  # prefilled on its own, like a frame
        view = View(self.store, own=block, name="status")
        scratch_views.append(view)
        inputs.append(StreamInput(view, tokens, logits="none"))
        roles.append("status")
        self.status_text = text
        self.sections["status"].append(block)
        self._cap("status")
        return len(tokens)

    # -- action stream -----------------------------------------------------------------------------
    def _action_inputs(self, gen: int) -> list[tuple[str, StreamInput]]:
        a = self.action
        if a.decoder is not None:  # decode mode, mid-command: feed the chosen tokens, get the next branch
            tokens, a.unfed = a.unfed, []
            return [("action", StreamInput(a.view, tokens, logits="last"))]
        newest = self.frames[-1].timed if self.frames else None
        if newest is None or newest.frame.tic <= a.last_frame_tic:
            if a.unfed:  # the tail of the last command, so other streams see it whole
                tokens, a.unfed = a.unfed, []
                return [("action", StreamInput(a.view, tokens, logits="none"))]
            return []
        if a.decisions_in_block >= self.decisions_per_block:
            self._rollover_action_block()
        a.frame, a.generation, a.last_frame_tic = newest, gen, newest.frame.tic
        if self.decision_mode == "decode":
            a.decoder = self.grammar.start()
            tokens = a.unfed + self.action_prompt + a.decoder.forced_prefix()
            a.unfed = []
            return [("action", StreamInput(a.view, tokens, logits="last"))]
        tokens, a.unfed = a.unfed + self.action_prompt, []
        out = [("action", StreamInput(a.view, tokens, logits="last"))]
        out += [(branch.view.name, branch) for branch in self.scorer.branch_inputs(a.view)]
        return out

    def _action_consume(self, logits, branch_logits: dict) -> Action | None:
        a = self.action
        if logits is None:
            return None
        if self.decision_mode == "score":
            rows = [branch_logits[f"branch{i}"] for i in range(len(self.scorer.branches))]
            command, a.unfed = self.scorer.best(logits, rows)
        else:
            if a.decoder is None:
                return None
            a.unfed = a.decoder.choose(logits)
            command = a.decoder.done
            if command is None:
                return None
            a.decoder = None
        a.decisions_in_block += 1
        self.stats.decisions += 1
        if self.on_decision is not None:
            self.on_decision(a.view.token_ids(), a.frame, command)
        action = Action(command, a.generation, a.frame.frame.tic, a.frame.read_ms, self.now_ms)
        self._emit("action_emitted", "action", generation=a.generation, tic=a.frame.frame.tic, sim_ms=self.now_ms,
                   command=command.text, frame_tic=a.frame.frame.tic)
        return action

    def _rollover_action_block(self) -> None:
        a = self.action
        self.sections["actions"].append(a.view.detach_own())
        a.view.start_own("actions")
        self._cap("actions")
        a.decisions_in_block = 0
        self._sync_views()

    # -- thinker -------------------------------------------------------------------------------------
    def _thinker_consume(self, logits) -> None:
        t = self.thinker
        self.stats.thinker_tokens += 1
        token = self._sample(logits)
        t.paragraph_tokens += 1
        text = self.tok.decode([token])
        ended = token in self.end_tokens or "\n" in text
        if ended or t.paragraph_tokens >= self.budgets.thinker_tokens_per_paragraph:
            block = t.view.detach_own()
            block.sealed = True
            self.sections["thoughts"].append(block)
            t.view.start_own("thought")
            self._cap("thoughts")
            self.stats.thinker_paragraphs += 1
            self._emit("thinker_paragraph", "thinker", sim_ms=self.now_ms, text=self.tok.decode(block.token_ids))
            t.pending = list(self.thought_prompt)
            t.paragraph_tokens = 0
            self._sync_views()
        else:
            t.pending = [token]
            self._emit("token", "thinker", sim_ms=self.now_ms, token=token, text=text)

    # -- commentary ----------------------------------------------------------------------------------
    def commit_heard(self, text: str) -> None:
        """Speech the user actually heard: it enters the commentary block other streams read."""
        text = text.strip()
        if text:
            self.pending_heard.append(_TextPrefill(self._encode(HEARD_PREFIX + text)))
            self.stats.heard_commits += 1
            self._emit("commentary_heard", "commentary", sim_ms=self.now_ms, text=text)

    def stop_commentary(self, reason: str = "interrupted") -> None:
        """Stop the remark being decoded (the barge-in hook)."""
        self.commentary.stop(reason, self.now_ms)

    # -- bounds --------------------------------------------------------------------------------------
    def _expire(self, now_ms: float, gen: int) -> None:
        bound = self.budgets.max_frame_age_ms
        kept = deque()
        for timed in self.pending_frames:
            if now_ms - timed.read_ms > bound:
                self.stats.frames_dropped += 1
                self._emit("frame_dropped", "frames", tic=timed.frame.tic, sim_ms=now_ms,
                           age_ms=now_ms - timed.read_ms, reason="stale")
            else:
                kept.append(timed)
        # only the newest pending frame is worth prefilling; older ones are superseded
        while len(kept) > 1:
            timed = kept.popleft()
            self.stats.frames_dropped += 1
            self._emit("frame_dropped", "frames", tic=timed.frame.tic, sim_ms=now_ms,
                       age_ms=now_ms - timed.read_ms, reason="superseded")
        self.pending_frames = kept
        changed = False
        while self.frames and now_ms - self.frames[0].timed.read_ms > bound:
            self._evict_oldest_frame()
            changed = True
        if changed:
            self._sync_views()
        a = self.action
        if a.decoder is not None and a.generation != gen:
            a.decoder = None
            a.unfed = []
            self.stats.decisions_abandoned += 1

    def _cap_frames(self) -> None:
        while len(self.frames) > self.caps["frames"]:
            self._evict_oldest_frame()

    def _evict_oldest_frame(self) -> None:
        entry = self.frames.popleft()
        self.store.release(entry.block)
        self.stats.frames_evicted += 1

    def _cap(self, section: str) -> None:
        blocks = self.sections[section]
        while len(blocks) > self.caps[section]:
            self.store.release(blocks.pop(0))

    def _sync_views(self) -> None:
        self.sections["frames"] = [e.block for e in self.frames]
        # retain/release happen inside sync; a section's own holds are the agent's
        self.action_sections.sync(self.sections)
        self.thinker_sections.sync(self.sections)

    # -- helpers -------------------------------------------------------------------------------------
    def _sample(self, logits) -> int:
        probs = torch.softmax(logits / max(self.temperature, 1e-4), dim=-1)
        return int(torch.multinomial(probs, 1, generator=self.rng))

    def _encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def _emit(self, kind: str, stream: str, *, generation: int | None = None, tic: int | None = None,
              sim_ms: float | None = None, **payload) -> None:
        if self.bus is not None:
            self.bus.emit(kind, stream, generation=self.generation.current if generation is None else generation,
                          tic=tic, sim_ms=sim_ms, **payload)

    def close(self) -> None:
        self.stop_commentary("closed")
        for queue in (self.pending_user, self.pending_heard):
            for job in queue:
                if job.view is not None:
                    job.view.close()
            queue.clear()
        self.action.view.close()
        self.thinker.view.close()
        for entry in self.frames:
            self.store.release(entry.block)
        self.frames.clear()
        for name in ("system", "user", "commentary", "thoughts", "actions", "status"):
            for b in self.sections[name]:
                self.store.release(b)
            self.sections[name] = []
        self.sections["frames"] = []
