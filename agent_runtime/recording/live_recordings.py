"""A live session's recordings: one directory per episode, so a timed session leaves every episode replayable.

The engine finishes an episode's .lmp when the next one starts, so the next recording starts first and the
previous one closes (with its .lmp's hash) after new_episode. After a failed write, episodes play unrecorded.
"""

from pathlib import Path
from typing import Callable

from agent_runtime.session.events import EventBus
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.write_guard import WriteGuard


class LiveRecordings:
    """The open recording of the current episode of a live session, and the ones already written."""

    def __init__(self, root: str | Path, manifest_for: Callable[[int], Manifest], *, scenario: str, voice=None,
                 announce: Callable[[Path], None] | None = None, guard: WriteGuard | None = None):
        """guard: what a failed write stops (default: continue unrecorded, one line on stderr)."""
        self.root, self.manifest_for, self.scenario = root, manifest_for, scenario
        self.voice, self.announce = voice, announce
        self.guard = guard or WriteGuard()
        self.dirs: list[Path] = []
        self.current: EpisodeRecording | None = None
        self._previous: EpisodeRecording | None = None
        self._unrecorded = EventBus("unrecorded", keep=False)  # the bus once recordings stopped
        self.end_reason: str | None = None  # set when the session ends early: the current recording is incomplete
        self.end_detail: str | None = None
        self.start(0)

    @property
    def bus(self) -> EventBus:
        return self.current.bus if self.current is not None else self._unrecorded

    @property
    def lmp_path(self) -> Path | None:
        return self.current.lmp_path if self.current is not None else None

    def start(self, index: int) -> None:
        """Open episode `index`'s recording; events and voice audio go to it from now on. The first one must open
        (UserError: nothing was played yet); a later one that cannot (a full disk) leaves the episode unrecorded."""
        recording = EpisodeRecording.create(self.root, self.manifest_for(index), scenario=self.scenario, index=index,
                                            guard=self.guard, mid_run=index > 0)
        self._previous, self.current = self.current, recording
        if self.voice is not None:
            self.voice.attach(self.bus, recording)  # an EpisodeRecording writes its own audio (wav())
        if recording is not None:
            self.dirs.append(recording.dir)
            if self.announce is not None:
                self.announce(recording.dir)

    def previous_finished(self) -> None:
        """The env has started the new episode, so the previous .lmp is complete: close its recording."""
        if self._previous is not None:
            self._previous.close()
            self._previous = None

    def close(self) -> None:
        """After the env closed (that completes the current .lmp)."""
        self.previous_finished()
        if self.current is not None:
            self.current.close(self.end_reason, self.end_detail)
