"""SIGINT and SIGTERM stop a run cleanly: the first one ends it after the current step, a second one at once.

Inside `with stoppable():` a signal only sets a flag and `check()` between steps raises Interrupted, so the
`finally` blocks close the recording and the CLI exits 130 or 143; outside, it raises where the program is. A
second signal exits at once (events.jsonl is flushed per line). `request_stop(error)` asks for the same clean
stop; once the work is over (`finished()`) a signal changes nothing.
"""

import os
import signal
import sys
import threading
from contextlib import contextmanager, suppress

SIGNALS = (signal.SIGINT, signal.SIGTERM)
REASONS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

_requested: int | None = None  # the first signal received, until handled
_loops = 0  # step loops running that check() between steps
_fault: BaseException | None = None  # a fault elsewhere that asked the run to stop (raised once by check())
_finished = False  # the command's work is over: only its exit is left


class Interrupted(KeyboardInterrupt):
    """A stop was asked for by SIGINT or SIGTERM; exit_code is 128 + the signal number (130, 143)."""

    def __init__(self, signum: int):
        self.signum, self.exit_code = signum, 128 + signum
        self.reason = REASONS.get(signum, "interrupted")
        super().__init__(f"{self.reason} by {signal.Signals(signum).name}")


def requested() -> int | None:
    """The signal that asked to stop, or None."""
    return _requested


def check() -> None:
    """Between two steps of a loop: raise Interrupted when a stop was asked for, or the fault that asked for one."""
    global _fault
    if _requested is not None:
        raise Interrupted(_requested)
    if _fault is not None:
        fault, _fault = _fault, None
        raise fault


def request_stop(fault: BaseException) -> None:
    """A fault noticed off the step loop (a full recordings disk, on any thread) ends the run at its next check()."""
    global _fault
    if _fault is None:
        _fault = fault


def finished() -> None:
    """The command's work is over: a first signal from now on is ignored (no traceback from the exit path)."""
    global _finished
    _finished = True


@contextmanager
def stoppable():
    """A step loop that calls check() between its steps: inside it a signal only sets the flag."""
    global _loops
    _loops += 1
    try:
        yield
    finally:
        _loops -= 1


def _handle(signum: int, frame) -> None:
    global _requested
    if _requested is not None:  # the second signal: out now
        exit_process(128 + signum, f"agent-runtime: {signal.Signals(signum).name} again: exiting at once")
    _requested = signum
    if _loops == 0 and not _finished:
        raise Interrupted(signum)


def exit_process(code: int, last_line: str | None = None) -> None:
    """Flush stdout/stderr (a closed pipe is no error here), write `last_line` to stderr and end the process
    at once with `code`: no cleanup, no interpreter teardown."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    if last_line:
        with suppress(OSError):
            os.write(2, f"{last_line}\n".encode())
    os._exit(code)


@contextmanager
def handle_stops():
    """Install the handlers for the duration of a command (main thread only; elsewhere a no-op)."""
    global _requested, _fault, _finished
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _requested, _fault, _finished = None, None, False
    for sig in SIGNALS:
        signal.signal(sig, _handle)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        _requested, _fault, _finished = None, None, False
