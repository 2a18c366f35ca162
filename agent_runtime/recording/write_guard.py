"""A recordings disk that fills up or turns unwritable mid-run stops the recording, never the play.

Every recorded file reports its first failed write here instead of raising into the engine or an audio thread:
one line names the file, then nothing more is written, so what is on disk stays readable. Policy "continue"
plays on unrecorded; "stop" also stops the run cleanly at its next step (`signals.request_stop`): exit 1.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

from agent_runtime import signals
from agent_runtime.errors import first_line
from agent_runtime.notices import Notify, stderr_line

ON_DISK_FULL = ("continue", "stop")
END_REASON = "write_failed"  # a recording's manifest extra.end_reason once its writes stopped


class RecordingStopped(Exception):
    """`--on-disk-full stop`: the run ended because its recording could not be written; exit code 1."""

    exit_code = 1


def describe_error(error: BaseException) -> str:
    """"No space left on device (ENOSPC)" for an OSError; the first line of anything else."""
    if isinstance(error, OSError) and error.errno is not None:
        name = errno.errorcode.get(error.errno, str(error.errno))
        return f"{error.strerror or first_line(error)} ({name})"
    return first_line(error)


class WriteGuard:
    """Shared by every recording of one run: the first write failure stops them all (thread-safe)."""

    def __init__(self, policy: str = "continue", notify: Notify | None = None):
        if policy not in ON_DISK_FULL:
            raise ValueError(f"on-disk-full policy must be one of {ON_DISK_FULL}, not {policy!r}")
        self.policy = policy
        self.notify = notify or stderr_line
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
            # an OSError is named with its path here; other errors (a UserError) already name theirs
            self.error = (f"cannot write {path}: {describe_error(error)}" if isinstance(error, OSError)
                          else first_line(error))
        said = f"recording stopped: {self.error}; what was written stays readable; "
        if self.policy == "stop":
            self.notify(said + "stopping the run (--on-disk-full stop)")
            signals.request_stop(RecordingStopped(self.error))
        else:
            self.notify(said + "play goes on without recording (free space or record elsewhere with --out)")
