"""A 16-bit PCM WAV file (soundfile) written block by block whose header is kept true after every block.

If the process dies the file must still open with all the audio written so far, so libsndfile patches the RIFF and
data sizes after each block (SFC_SET_UPDATE_HEADER_AUTO: the block first, then the header) instead of only on close.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

import numpy as np

from agent_runtime.recording.write_guard import GuardedFile, WriteGuard

SFC_SET_UPDATE_HEADER_AUTO = 0x1061  # libsndfile's sf_command (sndfile.h); soundfile has no method for it


class _Sink:
    """The unbuffered file as libsndfile's virtual I/O sees it: a failed write is kept, not raised through C, and
    nothing is written after it (what is on disk, header included, counts only the blocks before)."""

    def __init__(self, owner: GuardedFile):
        self.owner, self.error = owner, None

    def write(self, data: bytes) -> int:
        if self.error is None:
            try:
                self.owner._write_all(data)
                return len(data)
            except OSError as e:
                self.error = e
        return 0

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.owner._file.seek(offset, whence)

    def tell(self) -> int:
        return self.owner._file.tell()


class WavWriter(GuardedFile):
    """Interleaved channels. write() takes int16, or float in [-1, 1] (clipped)."""

    def __init__(self, path: str | Path, rate: int, channels: int = 1, *, guard: WriteGuard | None = None):
        import soundfile

        super().__init__(path, "wb", "audio file", guard)
        self.rate, self.channels, self.n_frames = int(rate), int(channels), 0
        self._sink = _Sink(self)
        self._sound = soundfile.SoundFile(self._sink, "w", self.rate, self.channels, "PCM_16", format="WAV")
        soundfile._snd.sf_command(self._sound._file, SFC_SET_UPDATE_HEADER_AUTO, soundfile._ffi.NULL, 1)
        if self._sink.error is not None:  # the header at the start could not be written
            self.guard.report(self.path, self._sink.error)

    def write(self, samples: np.ndarray) -> None:
        x = np.asarray(samples)
        x = np.clip(x, -1.0, 1.0).astype(np.float32) if x.dtype.kind == "f" else x.astype(np.int16, copy=False)
        if x.ndim == 1 and self.channels > 1:
            raise ValueError(f"expected shape (frames, {self.channels}) for {self.channels} channels")
        if x.ndim == 2 and x.shape[1] != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {x.shape[1]}")
        self._guarded(lambda: self._append(x))  # on failure the header counts only the blocks before

    def _append(self, x: np.ndarray) -> None:
        try:
            self._sound.write(x)
        except Exception:  # soundfile's check of a short write; the sink kept why
            if self._sink.error is None:
                raise
        if self._sink.error is not None:
            raise self._sink.error
        self.n_frames += len(x)

    def close(self) -> None:
        with self._lock, suppress(Exception):  # the final header; a full disk: the one each block left stays
            self._sound.close()
        super().close()
