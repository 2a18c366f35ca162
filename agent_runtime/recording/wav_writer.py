"""A PCM WAV file written block by block whose header is kept true after every block.

If the process dies the file must still open with all the audio written so far, so the RIFF and data sizes are
patched after each block instead of only on close.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from agent_runtime.recording.write_guard import GuardedFile, WriteGuard


class WavWriter(GuardedFile):
    """16-bit PCM, interleaved channels. write() takes int16, or float in [-1, 1] (clipped)."""

    def __init__(self, path: str | Path, rate: int, channels: int = 1, *, guard: WriteGuard | None = None):
        super().__init__(path, "wb", "audio file", guard)
        self.rate = int(rate)
        self.channels = int(channels)
        self.n_frames = 0
        self._write_all(self._header(0))

    def _header(self, data_bytes: int) -> bytes:
        block_align = 2 * self.channels
        return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_bytes, b"WAVE", b"fmt ", 16, 1, self.channels,
                           self.rate, self.rate * block_align, block_align, 16, b"data", data_bytes)

    def write(self, samples: np.ndarray) -> None:
        x = np.asarray(samples)
        x = (np.round(np.clip(x, -1.0, 1.0) * 32767.0) if x.dtype.kind == "f" else x).astype("<i2", copy=False)
        if x.ndim == 1 and self.channels > 1:
            raise ValueError(f"expected shape (frames, {self.channels}) for {self.channels} channels")
        if x.ndim == 2 and x.shape[1] != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {x.shape[1]}")
        data = np.ascontiguousarray(x).tobytes()
        self._guarded(lambda: self._append(data, len(x)))  # on failure the header counts only the blocks before

    def _append(self, data: bytes, frames: int) -> None:
        """The block, then the header sizes: a failure in between leaves a header that is still true."""
        self._file.seek(0, 2)
        self._write_all(data)
        self.n_frames += frames
        self._file.seek(0)
        self._write_all(self._header(self.n_frames * 2 * self.channels))
