"""`DOOM_AGENT_AUDIO`: `live --voice` without a sound card, and sound devices that fail on cue.

    DOOM_AGENT_AUDIO=device-free[:mic=FILE.wav,fail-at=SECONDS,back-after=SECONDS]

The microphone hears FILE.wav (else silence), the speaker feeds only the recording; with fail-at both devices
vanish that long after the first audio block, as a pulled USB headset, and come back back-after seconds later.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.voice.audio_io import ArrayMicrophone, NoAudioDeviceError, RecordingSpeaker, load_audio_16k

ENV = "DOOM_AGENT_AUDIO"
FORM = f"{ENV}=device-free[:mic=FILE.wav,fail-at=SECONDS,back-after=SECONDS]"


class Outage:
    """Both device-free devices are gone from fail_at seconds after the first audio block until back_at."""

    def __init__(self, fail_at: float, back_after: float | None):
        self.fail_at = fail_at
        self.back_at = fail_at + (math.inf if back_after is None else back_after)
        self.t0: float | None = None  # the first audio block

    def check(self, kind: str, started: bool = True) -> None:
        """Raise as PortAudio does for a vanished device while it is gone (started: audio flows, the clock runs)."""
        if started and self.t0 is None:
            self.t0 = time.monotonic()
        if self.t0 is not None and self.fail_at <= time.monotonic() - self.t0 < self.back_at:
            raise NoAudioDeviceError(f"{ENV} fail-at={self.fail_at:g} removed the device-free {kind} device")


class _Microphone(ArrayMicrophone):
    outage: Outage

    def pump(self, n_blocks=None):
        self.outage.check("input")
        return super().pump(n_blocks)


class _Speaker(RecordingSpeaker):
    outage: Outage

    def pull(self, n_blocks=1):
        self.outage.check("output")
        new = super().pull(n_blocks)
        self.blocks.clear()  # speech_out.wav keeps the audio: a long session must not hold it twice
        return new


def voice_options(environ=os.environ) -> dict:
    """VoiceIO's keyword arguments for DOOM_AGENT_AUDIO ({} when it is unset: the sound devices)."""
    value = environ.get(ENV, "").strip()
    if not value:
        return {}
    mic, fail_at, back_after = _parse(value)
    outage = Outage(math.inf if fail_at is None else fail_at, back_after)
    return {"device_free": True, **device_free_openers(None if mic is None else load_audio_16k(mic), outage)}


def _parse(value: str) -> tuple[str | None, float | None, float | None]:
    """mic, fail-at and back-after of a DOOM_AGENT_AUDIO value; anything else is a UserError that shows the form."""
    kind, _, rest = value.partition(":")
    try:
        options = dict(item.split("=", 1) for item in rest.split(",") if item)
        mic = options.pop("mic", None)
        fail_at, back_after = (float(options.pop(k)) if k in options else None for k in ("fail-at", "back-after"))
    except ValueError:
        options = None
    if kind != "device-free" or options != {}:
        raise UserError(f"cannot read {ENV}={value!r}; the form is {FORM}")
    return mic, fail_at, back_after


def device_free_openers(samples: np.ndarray | None = None, outage: Outage | None = None) -> dict:
    """VoiceIO's open_input/open_output for an array microphone (`samples`, or silence) and a speaker that only feeds
    the recording. Each is made once and reopened while present (the microphone goes on where it stopped); with an
    outage both fail together."""
    outage = outage or Outage(math.inf, None)
    samples = np.zeros(0, np.float32) if samples is None else samples
    made: dict = {}

    def opener(kind: str, make):
        def open_stream(callback):
            outage.check(kind, started=False)
            if kind not in made:
                made[kind] = make(callback)
                made[kind].outage = outage
            return made[kind]
        return open_stream

    return {"open_input": opener("input", lambda cb: _Microphone(samples, cb)),
            "open_output": opener("output", lambda cb: _Speaker(cb))}
