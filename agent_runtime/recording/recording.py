"""A recording directory: manifest.json, events.jsonl, episode.lmp and (with voice) mic_in.wav / speech_out.wav.

EpisodeRecording (episode_recorder.py) writes one; Recording.open() is the reader replay, timelines and videos use.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.session.events import Event
from agent_runtime.recording.event_log import EVENTS_FILE, read_event_log
from agent_runtime.recording.manifest import MANIFEST_FILE, Manifest

LMP_FILE = "episode.lmp"
WAV_FILES = {"mic_in": "mic_in.wav", "speech_out": "speech_out.wav"}


def screen_hash(screen: np.ndarray) -> str:
    """16 hex chars identifying a screen buffer (shape and dtype included), for frame_read payloads."""
    a = np.ascontiguousarray(screen)
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{a.shape}{a.dtype.str}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


class Recording:
    """A recording read back: manifest, events (with the reader's warnings) and paths."""

    def __init__(self, directory: Path, manifest: Manifest):
        self.dir = directory
        self.manifest = manifest
        self.events_path = directory / EVENTS_FILE
        self.lmp_path = directory / LMP_FILE
        self.warnings: list[str] = []

    @staticmethod
    def open(directory: str | Path) -> Recording:
        path = Path(directory).expanduser()
        if not path.is_dir():
            raise UserError(f"recording directory not found: {path}")
        return Recording(path, Manifest.read(path / MANIFEST_FILE))

    @cached_property
    def events(self) -> list[Event]:
        """All events in file order, read on first use (UserError on a corrupt line; a cut-off last line: .warnings)."""
        events, self.warnings = read_event_log(self.events_path)
        return events

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]
