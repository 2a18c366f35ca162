"""The Ray actor: loads the model once (its job's setup), then plays the episodes the driver hands it.

Every ending comes back as an Outcome, never an exception, so the driver tells a dead worker (Ray raises) from an
engine that died or a stop. max_concurrency=2: stop() must reach a play() in the middle of an episode.
"""

import fcntl
import logging
import os
import socket
import traceback

from envs.engine_guard import EngineDied

from agent_runtime import notices, signals
from agent_runtime.errors import UserError, first_line
from agent_runtime.model.cpu_path import cache_dir, cpu_path
from agent_runtime.fanout.outcome import ENGINE_DIED, ERROR, INTERRUPTED, OK, RUN_STOPPED, USER_ERROR, Outcome, Task


class EpisodeWorker:
    """Holds one job (what to load, how to play one task) for the lifetime of the actor."""

    def __init__(self, job, threads: int):
        self.job, self.threads = job, threads
        self._stop_signum: int | None = None
        notices.log.setLevel(getattr(job.args, "log_level", logging.INFO))  # the driver's -q / -v

    def ready(self) -> Outcome:
        """Load what every episode needs; the description names the worker in the driver's lines."""
        try:
            description = self.job.setup(self.threads) or {}
        except BaseException as e:  # noqa: BLE001 - reported to the driver, which decides
            return _failed(e)
        return Outcome(OK, result={"pid": os.getpid(), "host": socket.gethostname(), "threads": self.threads,
                                   **description})

    def play(self, task: Task) -> Outcome:
        if self._stop_signum is not None:
            return Outcome(INTERRUPTED, detail="stopped before it started")
        try:
            return Outcome(OK, result=self.job.play(task))
        except signals.Interrupted as e:
            return Outcome(INTERRUPTED, detail=str(e), recording=_recording_of(e))
        except BaseException as e:  # noqa: BLE001
            return _failed(e)

    def stop(self, signum: int) -> None:
        """Ask the episode in progress to stop at its next step (its recording is closed as interrupted)."""
        self._stop_signum = signum
        signals.request_stop(signals.Interrupted(signum))


def decide_once(threads: int) -> None:
    """One CPU-path decision per machine for all its workers, so they all run the same kernels: workers measuring
    at once could pick different ones (fp32 sums in another order: not the same game). Under a machine-wide file
    lock the first worker measures and caches; the others read the cache, and load_for_cpu then reuses it."""
    lock = cache_dir() / "cpu-probe" / ".fanout.lock"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a")
    except OSError:  # no writable cache: each worker measures (what a single process would do too)
        cpu_path(threads=threads)
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        cpu_path(threads=threads)  # memoized in this process for the load that follows


def _recording_of(e: BaseException) -> str | None:
    where = getattr(e, "recording_dir", None)
    return str(where) if where is not None else None


def _failed(e: BaseException) -> Outcome:
    if isinstance(e, EngineDied):
        return Outcome(ENGINE_DIED, detail=str(e), recording=_recording_of(e))
    if isinstance(e, UserError):
        return Outcome(USER_ERROR, detail=str(e))
    if type(e).__name__ == "RecordingStopped":  # --on-disk-full stop (recording/write_guard.py)
        return Outcome(RUN_STOPPED, detail=str(e))
    return Outcome(ERROR, detail=f"{first_line(e)}\n{''.join(traceback.format_exception(e))}")
