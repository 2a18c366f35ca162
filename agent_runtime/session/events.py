"""Session events: what happened, when, in which stream and generation.

Sinks (a list for tests and metrics, the recording's JSONL log) receive them in order. Every kind is a
constant of `Kind`, documented there; the bus refuses any other.
"""

import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


class Kind:
    """Every event kind, and what it means (the payload keys it carries)."""

    # the world and the engine
    FRAME_READ = "frame_read"  # a frame came from the world (read_ms, screen_hash)
    FRAME_PREFILLED = "frame_prefilled"  # a frame entered its block (age_ms, tokens, status_tokens, encode_ms)
    FRAME_DROPPED = "frame_dropped"  # a frame was never prefilled (reason: stale | superseded | encoded_late, age_ms)
    ENGINE_STEP = "engine_step"  # one batched forward (batch: [(role, tokens)], compute_ms, pool_used_pages)
    CLOCK_ADVANCE = "clock_advance"  # a synchronous world moved by a step's cost (step, cost_ms)
    TOKEN = "token"  # a Thinker token (token, text)
    THINKER_PARAGRAPH = "thinker_paragraph"  # a finished thought paragraph (text); tic: the newest frame in view
    THINKER_NOTE = "thinker_note"  # that paragraph makes claims in the notes' vocabulary (text, claims, noise)
    ACTION_EMITTED = "action_emitted"  # a decision (command, frame_tic, note_in_view)
    ACTION_EXECUTED = "action_executed"  # an action ran (command, frame_tic, frame_age_ms)
    ACTION_FENCED = "action_fenced"  # an action was dropped unrun (reason: generation | frame_age)
    SESSION_END = "session_end"  # the last event of a recording (reason, detail)
    # the user and interruptions
    USER_INPUT = "user_input"  # typed or spoken text reached the agent (text, command, step in headless runs)
    GENERATION_BUMP = "generation_bump"  # an interruption (reason, to, text)
    USER_TEXT_TRUNCATED = "user_text_truncated"  # a user text was cut to the token bound (chars, tokens, kept_tokens)
    USER_TEXT_DROPPED = "user_text_dropped"  # a waiting user text was dropped (tokens, reason)
    # commentary
    COMMENTARY_SENTENCE = "commentary_sentence"  # a finished remark sentence, handed to speech or print (text; answers)
    COMMENTARY_STOPPED = "commentary_stopped"  # a remark cut off unheard (reason, text)
    COMMENTARY_HEARD = "commentary_heard"  # what the user heard (or read) entered history (text)
    # the audio path
    VAD_SPEECH_START = "vad_speech_start"
    VAD_SPEECH_END = "vad_speech_end"
    ASR_PARTIAL = "asr_partial"  # a hypothesis while the user still speaks (text, command)
    ASR_FINAL = "asr_final"  # a recognized utterance (text, command)
    ASR_UTTERANCE_CUT = "asr_utterance_cut"  # an utterance cut at the length bound
    MIC_OVERRUN = "mic_overrun"  # microphone blocks dropped: the listener fell behind
    BARGE_IN = "barge_in"  # user speech interrupted playback (reason, detection_to_interrupt_ms)
    TTS_CHUNK = "tts_chunk"
    TTS_DONE = "tts_done"
    PLAYBACK_START = "playback_start"
    PLAYBACK_STOP = "playback_stop"
    PLAYBACK_STATS = "playback_stats"
    AUDIO_DEVICE_LOST = "audio_device_lost"  # (device, error)
    AUDIO_DEVICE_RESTORED = "audio_device_restored"  # (device)


KINDS = frozenset(v for k, v in vars(Kind).items() if k.isupper())


@dataclass
class Event:
    seq: int
    session: str
    stream: str
    generation: int
    kind: str
    tic: int | None
    t_mono: float  # time.monotonic() when emitted
    t_wall: float  # time.time() when emitted
    clock: str  # which clock 'sim_ms' follows: "compute", "fixed_cost" or "realtime"
    sim_ms: float | None  # session time on that clock (game time in headless runs)
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


class EventSink(Protocol):
    def write(self, event: Event) -> None: ...


class EventBus:
    """Numbers events and hands them to every sink; keeps them in memory when asked."""

    def __init__(self, session: str = "session", *, clock: str = "compute", keep: bool = True):
        self.session, self.clock, self.keep = session, clock, keep
        self.sinks: list[EventSink] = []
        self.events: list[Event] = []
        self._seq = itertools.count()

    def emit(self, kind: str, stream: str, *, generation: int = 0, tic: int | None = None,
             sim_ms: float | None = None, **payload) -> Event:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}: add it to events.Kind, with what it means")
        event = Event(
            seq=next(self._seq), session=self.session, stream=stream, generation=generation, kind=kind,
            tic=tic, t_mono=time.monotonic(), t_wall=time.time(), clock=self.clock, sim_ms=sim_ms, payload=payload,
        )
        if self.keep:
            self.events.append(event)
        for sink in self.sinks:
            sink.write(event)
        return event

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


class BusRelay:
    """A bus that forwards to the bus of the episode under way. Built into the session's objects once, as observers
    are given to a pipeline when it is built; a timed live session switches it to each episode's own recording."""

    def __init__(self, target: EventBus):
        self.target = target

    @property
    def clock(self) -> str:
        return self.target.clock

    @clock.setter
    def clock(self, name: str) -> None:
        self.target.clock = name

    def switch(self, target: EventBus) -> None:
        """Events from here on go to `target`, on the same clock."""
        target.clock, self.target = self.target.clock, target

    def emit(self, kind: str, stream: str, **fields) -> Event:
        return self.target.emit(kind, stream, **fields)
