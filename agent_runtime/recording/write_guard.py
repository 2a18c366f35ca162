"""A recordings disk that fills up or turns unwritable mid-run stops the recording, never the play.

Every recorded file reports its first failed write here instead of raising into the engine or an audio thread:
one line names the file, then nothing more is written, so what is on disk stays readable. Policy "continue"
plays on unrecorded; "stop" also stops the run cleanly at its next step (`signals.request_stop`): exit 1.
"""

import errno
import os
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from agent_runtime import signals
from agent_runtime.errors import UserError, first_line
from agent_runtime.notices import Notify, warning_line

END_REASON = "write_failed"  # a recording's manifest extra.end_reason once its writes stopped


class RecordingStopped(Exception):
    """`--on-disk-full stop`: the run ended because its recording could not be written; the command exits 1."""


class WriteGuard:
    """Shared by every recording of one run: the first write failure stops them all (thread-safe)."""

    def __init__(self, policy: str = "continue", notify: Notify | None = None):
        """policy: --on-disk-full's "continue" or "stop" (argparse checked it)."""
        self.policy, self.notify = policy, notify or warning_line
        self.error: str | None = None  # "cannot write PATH: REASON", once a write failed
        self._lock = threading.Lock()

    @property
    def failed(self) -> bool:
        return self.error is not None

    def report(self, path: str | Path, error: BaseException) -> None:
        """A write to `path` failed: the first report prints the one line (and asks a "stop" run to stop)."""
        with self._lock:
            if self.error is not None:
                return
            self.error = first_line(error)
            if isinstance(error, OSError):  # named with its path and errno; other errors (a UserError) name theirs
                code = f" ({errno.errorcode.get(error.errno, error.errno)})" if error.errno is not None else ""
                self.error = f"cannot write {path}: {error.strerror or self.error}{code}"
        said = f"recording stopped: {self.error}; what was written stays readable; "
        if self.policy == "stop":
            self.notify(said + "stopping the run (--on-disk-full stop)")
            signals.request_stop(RecordingStopped(self.error))
        else:
            self.notify(said + "play goes on without recording (free space or record elsewhere with --out)")


class GuardedFile:
    """A recorded file, unbuffered (a failed write leaves nothing behind to be flushed later); its first failed
    write goes to the guard (default: its own, "continue") and ends the file there. Thread-safe."""

    def __init__(self, path: str | Path, mode: str, what: str, guard: WriteGuard | None = None):
        self.path, self.guard = Path(path), guard or WriteGuard()
        self.n_written = 0  # the writes that went through whole
        self._lock = threading.Lock()
        try:
            self._file = open(self.path, mode, buffering=0)
        except OSError as e:
            raise UserError(f"cannot write {what} {self.path}: {e.strerror or e}") from None

    def _write_all(self, data: bytes) -> None:
        """In as many write() calls as the OS needs; a failure raises with the part written on disk."""
        view = memoryview(data)
        while view:
            view = view[self._file.write(view):]

    def _guarded(self, write: Callable[[], None]) -> None:
        """write() under the lock, unless the file is closed or the recording stopped (emitted during shutdown or
        after a failed write: dropped)."""
        with self._lock:
            if self._file.closed or self.guard.failed:
                return
            try:
                write()
                self.n_written += 1
            except OSError as e:
                self.guard.report(self.path, e)  # what a cut-short write left stays; nothing more is written

    def close(self) -> None:
        """fsync and close; a full disk leaves what was written."""
        with self._lock:
            if not self._file.closed:
                with suppress(OSError):
                    os.fsync(self._file.fileno())
                self._file.close()
