"""Engine calls that cannot hang: a dead or stuck ViZDoom process becomes a clear exception within 2 s.

ViZDoom talks to its engine process over shared-memory message queues. When the engine is killed at the
wrong moment (SIGKILL, a crash), the waiting call never returns: it sleeps in a futex on a queue the dead
process left locked, and Python cannot interrupt it. So every call that waits for the engine runs on a
worker thread; the caller waits in short slices and checks the engine process. A dead engine raises
EngineDied at once, one that does not answer within HANG_S (plus the call's own duration) is killed and
raises EngineHung. The stuck worker and its game are abandoned, never closed (closing would wait on the
same dead queue), and never freed (the game's destructor would too).

ViZDoom also installs its own SIGINT/SIGTERM handlers (boost::asio) on init and resets them to the default
on close, which made Ctrl-C close the engine instead of stopping the run: python_signal_handlers() puts the
Python handlers back after both.
"""

from __future__ import annotations

import ctypes
import queue
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

HANG_S = 1.2  # an engine call that takes this much longer than it should is a hung engine (reported in < 2 s)
POLL_S = 0.05  # how often a waiting caller looks at the engine process
GRACE_S = 0.5  # after the engine is gone, how long ViZDoom gets to notice and clean up by itself
GUARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SHM_DIR = Path("/dev/shm")

_ABANDONED: list = []  # games whose engine died: never closed, never freed


class EngineDied(RuntimeError):
    """The engine process is gone (killed, crashed, or it exited): the game cannot go on."""


class EngineHung(EngineDied):
    """The engine process is alive but stopped answering; it has been killed."""


class _Job:
    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn, args):
        self.fn, self.args = fn, args
        self.done = threading.Event()
        self.result = self.error = None

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # handed to the waiting caller
            self.error = e
        self.done.set()


def _worker(jobs: queue.SimpleQueue) -> None:
    while (job := jobs.get()) is not None:
        job.run()


def _dead(pid: int) -> str | None:
    """Why `pid` is no longer a running engine, or None while it runs."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return "died"
    except psutil.NoSuchProcess:
        return "died"
    return None


class EngineGuard:
    """Runs one game's blocking calls; `pids` are its engine processes (set after each init)."""

    def __init__(self, name: str):
        self.name = name
        self.pids: list[int] = []
        self._instances: list[str] = []  # ViZDoom instance ids: they name the engines' /dev/shm files
        self.failure: EngineDied | None = None
        self._stuck = False  # the worker waits forever in an abandoned call
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=_worker, args=(self._jobs,), name=f"engine-{name}", daemon=True)
        self._thread.start()

    def call(self, what: str, fn, *args, expected_s: float = 0.0):
        """fn(*args) on the worker; EngineDied/EngineHung instead of waiting forever on a dead engine."""
        if self.failure is not None:
            raise EngineDied(str(self.failure))
        job = _Job(fn, args)
        self._jobs.put(job)
        try:
            self._wait(job, what, expected_s)
        except EngineDied as e:
            # ViZDoom often notices a lost engine itself and closes its side; a call that returns is not abandoned
            if not job.done.wait(GRACE_S):
                self._abandon(fn)
            self.failure = e
            self._release_shared_memory()
            raise
        except BaseException:  # interrupted while waiting: let the call finish so the game stays consistent
            job.done.wait(HANG_S + expected_s)
            raise
        if job.error is not None:
            raise self._translate(job.error, what) from job.error
        return job.result

    def _wait(self, job: _Job, what: str, expected_s: float) -> None:
        deadline = time.monotonic() + HANG_S + expected_s
        while not job.done.wait(POLL_S):
            gone = next(((pid, why) for pid in self.pids if (why := _dead(pid))), None)
            if gone is not None:
                raise EngineDied(f"the ViZDoom engine ({self.name}, pid {gone[0]}) {gone[1]} during {what}")
            if time.monotonic() > deadline:
                self.kill()
                pids = ", ".join(map(str, self.pids))
                raise EngineHung(f"the ViZDoom engine ({self.name}, pid {pids}) stopped answering during {what} "
                                 f"(no reply in {HANG_S + expected_s:.1f} s); killed it")

    def _translate(self, error: BaseException, what: str) -> BaseException:
        """ViZDoom's own errors for a lost engine become EngineDied; anything else is passed on."""
        kind = type(error).__name__
        if kind == "SignalException":  # a signal reached ViZDoom's handler: the engine is closed; deliver it to ours
            self.failure = EngineDied(f"the ViZDoom engine ({self.name}, pid {', '.join(map(str, self.pids))}) "
                                      f"was closed by a signal during {what}")
            sig = signal.SIGTERM if "TERM" in str(error) else signal.SIGINT
            if threading.current_thread() is threading.main_thread():
                signal.raise_signal(sig)
            return self.failure
        if kind in ("ViZDoomUnexpectedExitException", "ViZDoomErrorException", "ViZDoomIsNotRunningException") \
                and self.pids and what != "init":
            pids = ", ".join(map(str, self.pids))
            self.failure = EngineDied(f"the ViZDoom engine ({self.name}, pid {pids}) died during {what}: "
                                      f"{str(error).strip()}")
            return self.failure
        return error

    def _abandon(self, fn) -> None:
        self._stuck = True
        owner = getattr(fn, "__self__", None)
        if owner is not None and all(o is not owner for o in _ABANDONED):
            _ABANDONED.append(owner)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(owner))  # not even interpreter shutdown may free it

    def watch(self, pids: list[int]) -> None:
        """The engine processes of the game just started (and their ViZDoom instance ids, for clean-up)."""
        self.pids = pids
        self._instances = []
        for pid in pids:
            try:
                args = psutil.Process(pid).cmdline()
            except psutil.Error:
                continue
            if "+viz_instance_id" in args[:-1]:
                self._instances.append(args[args.index("+viz_instance_id") + 1])

    def _release_shared_memory(self) -> None:
        """A lost engine leaves its message queues and screen buffers in /dev/shm: remove them (mappings stay valid)."""
        for instance in self._instances:
            for path in SHM_DIR.glob(f"ViZDoom*{instance}"):
                path.unlink(missing_ok=True)

    def kill(self) -> None:
        for pid in self.pids:
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass

    def stop(self) -> None:
        """End the worker (a stuck one is left where it is)."""
        if not self._stuck:
            self._jobs.put(None)


@contextmanager
def python_signal_handlers():
    """Around a game's init or close: re-install the Python SIGINT/SIGTERM handlers afterwards (ViZDoom
    replaces them on init and resets them to the default on close). Main thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in GUARDED_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)
