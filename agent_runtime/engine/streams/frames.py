"""Frames in: each new frame is prefilled into a block of its own, and leaves the views when it is too old.

Only the newest pending frame is worth prefilling; older ones and any past the frame-age bound are dropped,
counted, and so is a frame whose encoding (frame line, vision tower) ends past the bound: never prefilled. A frame
block attends only to itself: its frame line, or a vision-language model's image tokens, or both; the own status
gets a block only when it changed.
"""

from collections import deque

from envs.frame_encoders import LabelEncoder
from envs.observation_text import encode_status

from agent_runtime.engine.kv_block_store import Block
from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.prompts import FRAME_PREFIX, STATUS_PREFIX, encode
from agent_runtime.recording.recording import screen_hash
from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.session.clocks import measured
from agent_runtime.session.sync_world import TimedFrame
from agent_runtime.session.time_bounds import TimeBounds
from agent_runtime.engine.view import View
from agent_runtime.session.events import Kind

LABELS = LabelEncoder()


def frame_line(timed: TimedFrame, signed: bool, aimed: bool, encoder=LABELS) -> str:
    """A frame block's text, as engine.signed_bearings, engine.frame_line and engine.frame_source write it (the
    baselines read the same); encoder: envs/frame_encoders.py's, from the labels or from the screen."""
    return FRAME_PREFIX + encoder.seen(timed.frame, signed=signed, aim_order=aimed,
                                       turned=timed.turn_in_flight if aimed else 0.0)


def status_line(frame) -> str:
    """A status block's text."""
    return STATUS_PREFIX + encode_status(frame)


class FrameStream(Stream):
    role = "frame"

    def __init__(self, ctx, bounds: TimeBounds, *, listened, signed: bool = False, aimed: bool = False,
                 encoder=LABELS, vision=None, encode_cost=None):
        """encoder: what writes the frame line (None: no line); vision: a VisionEncoder whose image tokens the
        block holds (None: text only); encode_cost(measured_ms): the ms the clock says encoding took (the
        measured time, nothing on the fixed-cost clock, the recorded time in a rerun), which the age bound reads."""
        super().__init__(ctx)
        self.bounds, self.listened, self.signed, self.aimed, self.encoder = bounds, listened, signed, aimed, encoder
        self.vision, self.encode_cost = vision, encode_cost or (lambda ms: ms)
        self.pending: deque[TimedFrame] = deque()
        self.in_view: deque[TimedFrame] = deque()  # the frames section's blocks' frames, oldest first
        self.status_text: str | None = None  # what the newest status block says

    def push(self, timed: TimedFrame) -> None:
        self.pending.append(timed)
        if self.listened():  # the hash is for recordings: skip it when nobody listens
            frame = timed.frame
            self.emit(Kind.FRAME_READ, "frames", tic=frame.tic, sim_ms=timed.read_ms, read_ms=timed.read_ms,
                      screen_hash=screen_hash(frame.screen) if frame.screen is not None else None)

    def newest(self) -> TimedFrame | None:
        return self.pending[-1] if self.pending else self.newest_in_view()

    def newest_in_view(self) -> TimedFrame | None:
        return self.in_view[-1] if self.in_view else None

    def expire(self, now_ms: float) -> None:
        kept = deque()
        for timed in self.pending:
            if self.bounds.frame_stale(timed.read_ms, now_ms):
                self._dropped(timed, now_ms, "stale")
            else:
                kept.append(timed)
        while len(kept) > 1:  # only the newest pending frame is worth prefilling; older ones are superseded
            self._dropped(kept.popleft(), now_ms, "superseded")
        self.pending = kept
        while self.in_view and self.bounds.frame_stale(self.in_view[0].read_ms, now_ms):
            self.in_view.popleft()
            self.sections.drop_oldest("frames")

    def schedule(self, plan: StepPlan) -> None:
        """The newest pending frame (and its status when it changed) goes first, whatever the budget."""
        if not self.pending:
            return
        timed = self.pending.pop()
        (tokens, images), encode_s = measured(self._encode, timed)
        plan.compute_s += encode_s  # the detector's or vision tower's forward is reaction time like the model's
        self.stats.frame_encode_ms.append(round(encode_s * 1000.0, 3))
        encode_ms = self.encode_cost(encode_s * 1000.0)
        if self.bounds.frame_stale(timed.read_ms, plan.now_ms + encode_ms):  # too old once encoded: never prefilled
            self._dropped(timed, plan.now_ms + encode_ms, "encoded_late", encode_cost_ms=encode_ms)
            return
        status, status_tokens = status_line(timed.frame), 0
        if status != self.status_text:
            self.status_text = status
            block, status_tokens = self._prefill(plan, "status", encode(self.tok, status), "status")
            self.sections.add("status", block)
        block = self._prefill(plan, f"frame{timed.frame.tic}", tokens, "frame", images)[0]
        plan.budget -= len(tokens) + status_tokens
        self.in_view.append(timed)
        if self.sections.caps.get("history"):  # the Thinker's longer history holds it too, with a hold of its own
            self.store.retain(block)
            self.sections.add("history", block)
        self.sections.add("frames", block)  # past the section's cap the oldest frame leaves it
        while len(self.in_view) > self.sections.caps["frames"]:  # in step with the section, without copying it
            self.in_view.popleft()
        self.stats.frames_prefilled += 1
        self.emit(Kind.FRAME_PREFILLED, "frames", tic=timed.frame.tic, sim_ms=plan.now_ms,
                  age_ms=plan.now_ms - timed.read_ms, tokens=len(tokens), status_tokens=status_tokens,
                  encode_ms=round(encode_s * 1000.0, 3), encode_cost_ms=encode_ms,
                  **({"image_tokens": len(images)} if images is not None else {}))

    def _encode(self, timed: TimedFrame) -> tuple[list[int], object]:
        """The frame block's tokens and its image embeddings (None without a vision tower): the line prefix, the
        image placeholders, then the frame line's words."""
        line = frame_line(timed, self.signed, self.aimed, self.encoder) if self.encoder is not None else None
        if self.vision is None:
            return encode(self.tok, line), None
        images = self.vision.encode([timed.frame.screen])[0]
        words = encode(self.tok, " " + line.removeprefix(FRAME_PREFIX)) if line is not None else []
        return encode(self.tok, FRAME_PREFIX) + self.vision.frame_tokens() + words, images

    def _prefill(self, plan: StepPlan, label: str, tokens: list[int], role: str, images=None) -> tuple[Block, int]:
        """A row prefilling `tokens` into a new block of its own (its creation hold is the caller's); their count."""
        block = self.store.create(label)
        plan.add(self, StreamInput(View(self.store, own=block, name=role), tokens, logits="none", images=images),
                 role=role, scratch=True)
        return block, len(tokens)

    def clear(self) -> None:
        """Every frame leaves the views: the game restarted (tics start over), or the stream closes."""
        self.in_view.clear()
        self.sections.clear("frames")
        self.sections.clear("history")
        self.pending.clear()

    close = clear

    def _dropped(self, timed: TimedFrame, now_ms: float, reason: str, **detail) -> None:
        self.stats.frames_dropped += 1
        self.emit(Kind.FRAME_DROPPED, "frames", tic=timed.frame.tic, sim_ms=now_ms, age_ms=now_ms - timed.read_ms,
                  reason=reason, **detail)
