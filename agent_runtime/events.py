"""Session events: what happened, when, in which stream and generation.

The engine, the executor and the audio path emit events here; sinks (an in-memory list for tests and
metrics, the recording's append-only JSONL log) receive them in order. Event kinds used by the engine:
frame_read, frame_prefilled, frame_dropped, engine_step, token, action_emitted, action_executed,
action_fenced, generation_bump, thinker_paragraph, user_input. The audio path adds asr_partial,
asr_final, tts_chunk, playback_start, playback_stop, barge_in.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


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
        self.session = session
        self.clock = clock
        self.sinks: list[EventSink] = []
        self.keep = keep
        self.events: list[Event] = []
        self._seq = itertools.count()

    def emit(self, kind: str, stream: str, *, generation: int = 0, tic: int | None = None,
             sim_ms: float | None = None, **payload) -> Event:
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
