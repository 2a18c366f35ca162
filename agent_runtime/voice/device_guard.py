"""Sound devices that fail mid-session: a watchdog thread closes a failed stream, says so once (an event and a line)
and reopens it every `retry_s`. Audio threads only *report* failures: closing a stream from its own callback can
deadlock PortAudio.
"""

import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Callable

from agent_runtime.errors import first_line
from agent_runtime.session.events import Kind
from agent_runtime.notices import Notify

# per direction: the device's name, what stops without it, the stream its events go to
LABELS = {"input": ("microphone", "listening", "asr"), "output": ("speaker", "speech", "playback")}
POLL_S = 0.1  # how often the watchdog looks at the streams


def _close_quietly(stream) -> None:
    """A stream on a vanished device may fail to stop or close; it is dropped either way."""
    for step in (stream.stop, stream.close):
        with suppress(Exception):
            step()


@dataclass
class _Slot:
    """One direction's device: how to open it, the open stream (None while lost) and its health."""

    kind: str  # "input" | "output"
    opener: Callable[[], Any]
    stream: Any = None
    last_alive: float = 0.0
    failure: str | None = None  # reported by an audio thread, acted on by the watchdog
    lost_at: float | None = None
    next_retry: float = 0.0
    losses: int = 0


class AudioDeviceGuard:
    """Owns the input and output streams: opens them (one missing now is the caller's error), watches them, reopens
    them after a failure. on_change(kind, stream): lost (None) or (re)opened; emit(kind, stream, **payload): the
    events; refresh(): before a retry with every device lost (PortAudio rescans then)."""

    def __init__(self, openers: dict[str, Callable[[], Any]], *, on_change: Callable[[str, Any], None],
                 emit: Callable[..., None], notify: Notify, refresh: Callable[[], None] | None, stall_s: float,
                 retry_s: float):
        self.slots = {kind: _Slot(kind, opener, opener()) for kind, opener in openers.items()}
        self.on_change, self.emit, self.notify, self.refresh = on_change, emit, notify, refresh
        self.stall_s, self.retry_s = stall_s, retry_s

    def start(self) -> None:
        now = time.monotonic()
        for slot in self.slots.values():
            slot.stream.start()
            slot.last_alive = now

    def close(self) -> None:
        """Close the open streams (once `watch` has returned: it could reopen one)."""
        for slot in self.slots.values():
            if slot.stream is not None:
                _close_quietly(slot.stream)

    def alive(self, kind: str) -> None:
        """A callback ran: the device is delivering."""
        self.slots[kind].last_alive = time.monotonic()

    def fail(self, kind: str, error: BaseException, stream=None) -> None:
        """A callback or a stream raised; the watchdog closes it at its next poll (`stream`: the one that raised)."""
        slot = self.slots[kind]
        if stream is None or stream is slot.stream:
            slot.failure = first_line(error)

    @property
    def losses(self) -> int:
        return sum(slot.losses for slot in self.slots.values())

    def watch(self, stop: threading.Event) -> None:
        """The watchdog (a thread's target) until `stop` is set: close failed streams, reopen lost ones."""
        while not stop.wait(POLL_S):
            now = time.monotonic()
            for slot in self.slots.values():
                if slot.stream is not None:
                    reason = slot.failure or self._health(slot, now)
                    if reason:
                        self._lose(slot, reason, now)
                elif now >= slot.next_retry:
                    self._retry(slot, now)

    def _health(self, slot: _Slot, now: float) -> str | None:
        """Why a stream that raised nothing is nonetheless dead: inactive (PortAudio stopped it) or silent."""
        try:
            if not getattr(slot.stream, "active", True):
                return "its stream stopped"
        except Exception as e:  # PortAudio cannot even say: the device is gone
            return first_line(e)
        return f"no audio for {self.stall_s:g} s" if now - slot.last_alive > self.stall_s else None

    def _lose(self, slot: _Slot, reason: str, now: float) -> None:
        stream, slot.stream, slot.failure = slot.stream, None, None
        slot.losses += 1
        slot.lost_at, slot.next_retry = now, now + self.retry_s
        self.on_change(slot.kind, None)
        _close_quietly(stream)
        label, what, events = LABELS[slot.kind]
        self.emit(Kind.AUDIO_DEVICE_LOST, events, device=slot.kind, reason=reason, retry_s=self.retry_s)
        self.notify(f"voice: the {label} failed ({reason}); play goes on without {what}; "
                    f"trying to reopen it every {self.retry_s:g} s")

    def _retry(self, slot: _Slot, now: float) -> None:
        if self.refresh is not None and all(s.stream is None for s in self.slots.values()):
            with suppress(Exception):
                self.refresh()
        stream = None
        try:
            stream = slot.opener()
            stream.start()
        except Exception:  # still gone: try again later, quietly (the loss line said we would)
            if stream is not None:
                _close_quietly(stream)
            slot.next_retry = now + self.retry_s
            return
        slot.stream, slot.last_alive, slot.failure = stream, time.monotonic(), None
        self.on_change(slot.kind, stream)
        label, what, events = LABELS[slot.kind]
        self.emit(Kind.AUDIO_DEVICE_RESTORED, events, device=slot.kind, after_s=round(now - slot.lost_at, 3))
        self.notify(f"voice: the {label} is back; {what} again")
