"""A recording directory: manifest.json, events.jsonl, episode.lmp and (with voice) mic_in.wav / speech_out.wav.

Recording.create() gives the writer the engine feeds; Recording.open() the reader replay, timelines and videos use.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np

from agent_runtime.errors import UserError
from agent_runtime.events import Event
from agent_runtime.recording.engine_paths import demo_problem, fits_engine, short_temp_dir
from agent_runtime.recording.event_log import EVENTS_FILE, EventLogWriter, read_event_log
from agent_runtime.recording.manifest import MANIFEST_FILE, Manifest, hash_file
from agent_runtime.recording.wav_writer import WavWriter
from agent_runtime.recording.write_guard import END_REASON as WRITE_FAILED
from agent_runtime.recording.write_guard import WriteGuard

LMP_FILE = "episode.lmp"
WAV_FILES = {"mic_in": "mic_in.wav", "speech_out": "speech_out.wav"}


def screen_hash(screen: np.ndarray) -> str:
    """16 hex chars identifying a screen buffer (shape and dtype included), for frame_read payloads."""
    a = np.ascontiguousarray(screen)
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{a.shape}{a.dtype.str}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


class RecordingWriter:
    """The open recording, an EventSink too. Close the DoomEnv first (it finishes the .lmp), then this writer: it
    stores the .lmp's hash (and moves it in from a short staging path when the directory's is too long)."""

    def __init__(self, directory: Path, manifest: Manifest, *, guard: WriteGuard | None = None):
        """guard: shared by the run's recordings; a failed write (a full disk) stops them all, never the play."""
        self.dir = directory
        self.manifest = manifest
        self.manifest_path = directory / MANIFEST_FILE
        self.final_lmp_path = directory / LMP_FILE  # where the finished .lmp lies once the recording is closed
        self.guard = guard or WriteGuard()
        self.events = EventLogWriter(directory / EVENTS_FILE, guard=self.guard)
        self._wavs: dict[str, WavWriter] = {}
        self._staging_dir: Path | None = None
        self.closed = False

    @classmethod
    def create(cls, directory: str | Path, manifest: Manifest, *, guard: WriteGuard | None = None) -> RecordingWriter:
        """Make DIR (and parents), write the manifest, open the event log; never overwrites an existing recording."""
        path = Path(directory).expanduser()
        if (path / MANIFEST_FILE).exists():
            raise UserError(f"{path} already holds a recording; choose a new directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
            manifest.write(path / MANIFEST_FILE)
        except OSError as e:
            raise UserError(f"cannot create recording directory {path}: {e.strerror or e}") from None
        return cls(path, manifest, guard=guard)

    @property
    def lmp_path(self) -> Path:
        """Pass this to DoomEnv.new_episode(record_path=...): the final path, or a short staging one."""
        final = self.final_lmp_path.resolve()
        if self.closed or fits_engine(final):
            return final
        if self._staging_dir is None:
            self._staging_dir = short_temp_dir(final)
        return self._staging_dir / LMP_FILE

    def write(self, event: Event) -> None:
        self.events.write(event)

    def wav(self, name: str, rate: int, channels: int = 1) -> WavWriter:
        """The WAV writer for "mic_in" or "speech_out", opened on first use and closed with the recording."""
        if name not in WAV_FILES:
            raise ValueError(f"unknown audio track '{name}'; use one of: {', '.join(WAV_FILES)}")
        if name not in self._wavs:
            self._wavs[name] = WavWriter(self.dir / WAV_FILES[name], rate, channels, guard=self.guard)
        return self._wavs[name]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.events.close()
        for wav in self._wavs.values():
            wav.close()
        try:
            self._finish_lmp()
        except OSError as e:
            self.guard.report(self.final_lmp_path, e)
        self.manifest.extra["audio"] = sorted(WAV_FILES[n] for n in self._wavs)
        if self.guard.failed:  # the files stop where the disk failed: say so, if the manifest still fits
            self.manifest.extra.update(complete=False, write_error=self.guard.error,
                                       events_written=self.events.n_written)
            self.manifest.extra.setdefault("end_reason", WRITE_FAILED)
        try:
            self.manifest.write(self.manifest_path)  # atomic: on failure the manifest written at the start stays
        except OSError as e:
            self.guard.report(self.manifest_path, e)

    def _finish_lmp(self) -> None:
        """Move a staged .lmp into the directory, hash it into the manifest and check that the engine wrote it whole."""
        if self._staging_dir is not None:
            staged = self._staging_dir / LMP_FILE
            if staged.is_file():
                shutil.move(staged, self.final_lmp_path)
            shutil.rmtree(self._staging_dir, ignore_errors=True)
        if not self.final_lmp_path.is_file():
            return
        self.manifest.lmp = {"file": LMP_FILE, "scenario": self.manifest.scenario,
                             "blake2b": hash_file(self.final_lmp_path)}
        problem = demo_problem(self.final_lmp_path)
        if problem is not None:  # the engine's own write failed (a full disk): say so, as for our own writes
            self.manifest.lmp.update(complete=False, problem=problem)
            if "end_reason" not in self.manifest.extra:  # an episode cut off (engine died, stopped) says why itself
                self.guard.report(self.final_lmp_path, OSError(f"ViZDoom left its demo {problem} (a full disk?)"))


class Recording:
    """A recording read back: manifest, events (with the reader's warnings) and paths."""

    def __init__(self, directory: Path, manifest: Manifest):
        self.dir = directory
        self.manifest = manifest
        self.events_path = directory / EVENTS_FILE
        self.lmp_path = directory / LMP_FILE
        self._events: list[Event] | None = None
        self.warnings: list[str] = []

    create = RecordingWriter.create  # the writer of a new recording directory

    @staticmethod
    def open(directory: str | Path) -> Recording:
        path = Path(directory).expanduser()
        if not path.is_dir():
            raise UserError(f"recording directory not found: {path}")
        return Recording(path, Manifest.read(path / MANIFEST_FILE))

    @property
    def events(self) -> list[Event]:
        """All events in file order; read on first use (UserError on a corrupt line; a cut-off last line goes to .warnings)."""
        if self._events is None:
            self._events, self.warnings = read_event_log(self.events_path)
        return self._events

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]
