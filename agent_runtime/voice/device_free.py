"""`DOOM_AGENT_AUDIO`: `live --voice` without a sound card, and sound devices that fail on cue.

    DOOM_AGENT_AUDIO=device-free[:mic=FILE.wav,fail-at=SECONDS,back-after=SECONDS]

The microphone hears FILE.wav (else silence), the speaker feeds only the recording; with fail-at both devices
vanish that long after the first audio block, as a pulled USB headset, and come back back-after seconds later.
"""

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

    def __init__(self, fail_at: float = math.inf, back_after: float = math.inf):
        self.fail_at, self.back_at = fail_at, fail_at + back_after
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
    """VoiceIO's keyword arguments for DOOM_AGENT_AUDIO ({} when it is unset: the sound devices); a value not of
    the form is a UserError that shows it."""
    value = environ.get(ENV, "").strip()
    if not value:
        return {}
    kind, _, rest = value.partition(":")
    try:
        options = dict(item.split("=", 1) for item in rest.split(",") if item)
        mic = options.pop("mic", None)
        outage = Outage(**{k.replace("-", "_"): float(options.pop(k)) for k in ("fail-at", "back-after")
                           if k in options})
    except ValueError:
        options = None
    if kind != "device-free" or options != {}:
        raise UserError(f"cannot read {ENV}={value!r}; the form is {FORM}")
    return {"device_free": True, **device_free_openers(None if mic is None else load_audio_16k(mic), outage)}


def device_free_openers(samples: np.ndarray | None = None, outage: Outage | None = None) -> dict:
    """VoiceIO's open_input/open_output for an array microphone (`samples`, or silence) and a speaker that only feeds
    the recording. Both are made once and reopened while present (the microphone goes on where it stopped); with an
    outage both fail together."""
    mic = _Microphone(np.zeros(0, np.float32) if samples is None else samples, None)
    speaker = _Speaker(None)
    mic.outage = speaker.outage = outage or Outage()

    def opener(kind: str, stream):
        def open_stream(callback):
            stream.outage.check(kind, started=False)
            return stream.connect(callback)
        return open_stream

    return {"open_input": opener("input", mic), "open_output": opener("output", speaker)}
