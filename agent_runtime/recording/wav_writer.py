"""A 16-bit PCM WAV file (soundfile) written block by block whose header is kept true after every block.

If the process dies the file must still open with all the audio written so far, so libsndfile patches the RIFF and
data sizes after each block (SFC_SET_UPDATE_HEADER_AUTO: the block first, then the header) instead of only on close.
"""

from contextlib import suppress
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from agent_runtime.optional import require
from agent_runtime.recording.write_guard import GuardedFile, WriteGuard

SFC_SET_UPDATE_HEADER_AUTO = 0x1061  # libsndfile's sf_command (sndfile.h); soundfile has no method for it


class WavWriter(GuardedFile):
    """write() takes int16, or float in [-1, 1] (clipped); [frames] or [frames, channels]."""

    def __init__(self, path: str | Path, rate: int, channels: int = 1, *, guard: WriteGuard | None = None):
        soundfile = require("soundfile", "voice")
        super().__init__(path, "wb", "audio file", guard)
        self.rate, self.channels, self.n_frames = int(rate), int(channels), 0
        sink = SimpleNamespace(write=self._to_disk, seek=self._file.seek, tell=self._file.tell)  # virtual I/O
        self._sound = soundfile.SoundFile(sink, "w", self.rate, self.channels, "PCM_16", format="WAV")
        soundfile._snd.sf_command(self._sound._file, SFC_SET_UPDATE_HEADER_AUTO, soundfile._ffi.NULL, 1)

    def _to_disk(self, data: bytes) -> int:
        """libsndfile's writes; a failure goes to the guard, not raised through C, and ends the recordings there (the
        header counts only the blocks before)."""
        try:
            if not self.guard.failed:
                self._write_all(data)
                return len(data)
        except OSError as e:
            self.guard.report(self.path, e)
        return 0

    def write(self, samples: np.ndarray) -> None:
        x = np.asarray(samples)
        x = np.clip(x, -1.0, 1.0).astype(np.float32) if x.dtype.kind == "f" else x.astype(np.int16, copy=False)
        self._guarded(lambda: self._append(x))  # soundfile checks the shape: a ValueError

    def _append(self, x: np.ndarray) -> None:
        with suppress(AssertionError):  # soundfile's check of a short write (the guard was told why)
            self._sound.write(x)
        self.n_frames += 0 if self.guard.failed else len(x)

    def close(self) -> None:
        with self._lock, suppress(Exception):  # the final header; after a failed write nothing more goes to disk
            self._sound.close()
        super().close()
