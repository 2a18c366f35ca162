"""Barge-in: the user talks over the agent's commentary, and the commentary stops at once.

An interruption is one bump of the session generation (session/generation.py). Open speakers let the agent's own voice
reach the microphone, hence the modes: "pause_confirm" pauses on VAD onset and confirms by a command or continued
speech; "half_duplex" does not listen while the agent talks; "immediate" interrupts on VAD onset (headphones).
"""

import time
from dataclasses import dataclass, field
from typing import Callable

from agent_runtime.session.generation import SessionGeneration
from agent_runtime.voice.playback import PlaybackBuffer
from agent_runtime.voice.recognizer import Hypothesis, StablePrefix
from agent_runtime.voice.vad import OnsetRejected, SpeechOnset, SpeechStarted, SpeechStopped

MODES = ("pause_confirm", "half_duplex", "immediate")
CUES = ("fricative", "vad")
# the onset cues a live session pauses on, per mode: a headset has no echo; open speakers keep the pause at
# SpeechStarted (the agent's own voice at the edge of detection gives extra single-window cues)
ONSET_CUES = {"immediate": CUES, "pause_confirm": (), "half_duplex": ()}


@dataclass
class BargeInRecord:
    """One barge-in attempt, for metrics: when it was detected, what happened, how fast."""

    detected_wall: float
    detected_ms: float  # stream time of the VAD onset detection (with onset cues: of the tentative onset)
    outcome: str = "pending"  # "interrupted" | "resumed" (false trigger)
    reason: str = ""
    generation: int | None = None
    bump_wall: float | None = None
    cue: str = "speech"  # what paused or interrupted first: "speech" (SpeechStarted), or an onset cue
    confirmed_wall: float | None = None  # SpeechStarted, after a tentative onset

    @property
    def detection_to_bump_ms(self) -> float | None:
        return None if self.bump_wall is None else (self.bump_wall - self.detected_wall) * 1000.0


@dataclass
class BargeInController:
    """Consumes the listening pipeline's frames (`feed`, once per microphone block, when `listening`); pauses,
    confirms and interrupts. `on_command` fires once per utterance when a command may be committed."""

    session: SessionGeneration
    playback: PlaybackBuffer
    mode: str = "pause_confirm"
    min_speech_ms: float = 800.0  # continued speech that confirms a paused barge-in (longer than "stop" + hangover)
    min_command_ms: float = 200.0  # an utterance shorter than this cannot confirm with a command
    on_interrupt: Callable[[int, str], None] | None = None
    on_command: Callable[[str, Hypothesis], None] | None = None
    records: list[BargeInRecord] = field(default_factory=list)
    onset_cues: tuple[str, ...] = ()  # tentative pause on these SpeechOnset cues (ONSET_CUES[mode] live)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"barge-in mode must be one of {MODES}, not {self.mode!r}")
        if not set(self.onset_cues) <= set(CUES):
            raise ValueError(f"onset cues must be among {CUES}, not {self.onset_cues!r}")
        self._pending: BargeInRecord | None = None
        self._tentative = False  # the pending record is a tentative onset, not yet confirmed by SpeechStarted
        self._speech_start_ms: float | None = None
        self._prefix = StablePrefix()
        self._commanded_utterance: int | None = None

    @property
    def listening(self) -> bool:
        """Whether mic audio should go to the listening pipeline now."""
        return not (self.mode == "half_duplex" and self.playback.active)

    def feed(self, frames: list, stream_ms: float) -> None:
        for frame in frames:
            if isinstance(frame, SpeechOnset) and frame.cue in self.onset_cues:  # may be speech: a reversible pause
                self._begin(frame.detected_ms, frame.cue)
            elif isinstance(frame, OnsetRejected) and self._tentative:
                self._resume(f"no speech ({frame.reason})")
            elif isinstance(frame, SpeechStarted):
                self._on_speech_started(frame)
            elif isinstance(frame, SpeechStopped):
                self._speech_start_ms = None
            elif isinstance(frame, Hypothesis):
                self._on_hypothesis(frame)
        if self._pending is None or self._tentative:  # a tentative pause waits for SpeechStarted or a rejection
            return
        if self._speech_start_ms is not None:
            if stream_ms - self._speech_start_ms >= self.min_speech_ms:
                self._interrupt("speech")
        else:  # speech ended (its final, if any, came in this same batch) without confirming
            self._resume()

    def abandon(self) -> None:
        """The microphone went away mid-speech: nothing stays paused and no speech is in progress."""
        self._speech_start_ms = None
        self._prefix.reset()
        self._resume()

    def _begin(self, detected_ms: float, cue: str = "speech") -> None:
        """A barge-in attempt while the agent talks: pause (silent from the next block, the queue kept), or interrupt
        at once (immediate, on SpeechStarted); a tentative onset's pause waits for SpeechStarted or a rejection."""
        if (self.mode == "half_duplex" or not self.playback.active or self.playback.paused
                or self._pending is not None):  # half_duplex: should not hear anything while talking; ignore
            return
        self._pending = BargeInRecord(time.monotonic(), detected_ms, cue=cue)
        self.records.append(self._pending)
        self._tentative = cue != "speech"
        if self.mode == "immediate" and not self._tentative:
            self._interrupt("vad")
        else:
            self.playback.paused = True

    def _on_speech_started(self, event: SpeechStarted) -> None:
        self._speech_start_ms = event.t_ms
        self._prefix.reset()
        if not self._tentative:
            return self._begin(event.detected_ms)
        self._tentative = False  # confirmed: go on as if the pause had come with SpeechStarted
        self._pending.confirmed_wall = time.monotonic()
        if self.mode == "immediate":
            self._interrupt("vad")

    def _on_hypothesis(self, hyp: Hypothesis) -> None:
        self._prefix.update(hyp.text, hyp.final, hyp.settled)
        # not a command when its words leave much of the speech unaccounted for (hyp.command None)
        command = self._prefix.committable_command if hyp.command is not None else None
        if self._pending is not None and command is not None and hyp.final:
            if hyp.speech_end_ms - hyp.speech_start_ms >= self.min_command_ms:
                self._interrupt(f"command:{command}")
            else:
                self._resume()
        if command is not None and self._commanded_utterance != hyp.utterance and (self._pending is None or hyp.final):
            self._commanded_utterance = hyp.utterance
            if self.on_command is not None:
                self.on_command(command, hyp)

    def _interrupt(self, reason: str) -> None:
        record = self._pending  # every caller has an attempt pending
        generation = self.session.bump(f"barge-in:{reason}")  # TTS and playback drop everything older
        record.generation, record.bump_wall = generation, time.monotonic()
        self.playback.paused = False
        if self.on_interrupt is not None:
            self.on_interrupt(generation, reason)
        record.outcome, record.reason = "interrupted", reason
        self._pending, self._tentative = None, False

    def _resume(self, reason: str = "") -> None:
        if self._pending is not None:
            self._pending.outcome, self._pending.reason = "resumed", reason
        self._pending, self._tentative = None, False
        self.playback.paused = False
