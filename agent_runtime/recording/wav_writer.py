"""A PCM WAV file written block by block whose header is kept true after every block.

If the process dies the file must still open with all the audio written so far, so the RIFF and data sizes are
patched after each block instead of only on close.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import numpy as np

from agent_runtime.errors import UserError

_HEADER_BYTES = 44


class WavWriter:
    """16-bit PCM, interleaved channels. write() takes int16, or float in [-1, 1] (clipped)."""

    def __init__(self, path: str | Path, rate: int, channels: int = 1, *, guard=None):
        """guard: a WriteGuard that a failed write is reported to (the file then stops growing); None: raise."""
        if rate < 1 or channels < 1:
            raise ValueError("rate and channels must be >= 1")
        self.path = Path(path)
        self.guard = guard
        self.rate = int(rate)
        self.channels = int(channels)
        self.n_frames = 0
        self._lock = threading.Lock()
        try:
            self._file = open(self.path, "wb")
        except OSError as e:
            raise UserError(f"cannot write audio file {self.path}: {e.strerror or e}") from None
        self._file.write(self._header(0))
        self._file.flush()

    def _header(self, data_bytes: int) -> bytes:
        block_align = 2 * self.channels
        return (
            b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, self.channels, self.rate, self.rate * block_align, block_align, 16)
            + b"data" + struct.pack("<I", data_bytes)
        )

    def write(self, samples: np.ndarray) -> None:
        x = np.asarray(samples)
        if x.dtype.kind == "f":
            x = np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype("<i2")
        else:
            x = x.astype("<i2", copy=False)
        if x.ndim == 1 and self.channels > 1:
            raise ValueError(f"expected shape (frames, {self.channels}) for {self.channels} channels")
        if x.ndim == 2 and x.shape[1] != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {x.shape[1]}")
        data = np.ascontiguousarray(x).tobytes()
        with self._lock:
            if self._file.closed or (self.guard is not None and self.guard.failed):
                return
            try:
                self._append(data, len(x))
            except OSError as e:
                if self.guard is None:
                    raise
                self.guard.report(self.path, e)  # the header still counts only the blocks written before

    def _append(self, data: bytes, frames: int) -> None:
        """The block, then the header sizes: a failure in between leaves a header that is still true."""
        self._file.seek(0, 2)
        self._file.write(data)
        self._file.flush()
        self.n_frames += frames
        self._file.seek(0)
        self._file.write(self._header(self.n_frames * 2 * self.channels))
        self._file.flush()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()
                except OSError:  # a full disk: what was flushed stays, with a header that counts it
                    pass
