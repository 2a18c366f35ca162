"""A watchdog that ends ViZDoom engine processes when the Python process that owns them dies.

ViZDoom runs the game in a child process. If the owner is killed (SIGKILL, OOM), the engine is orphaned
and keeps spinning a core. The watchdog is a tiny child process of the owner: when it finds itself
reparented (the owner is gone) it kills the engines it was given; it exits by itself once they are gone.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

_WATCH = """
import os, sys, time, signal
owner, pids = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
def alive(p):
    try:
        os.kill(p, 0)
        return True
    except OSError:
        return False
while any(alive(p) for p in pids):
    if os.getppid() != owner:
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        break
    time.sleep(0.5)
"""


def engine_children(owner: int | None = None) -> list[int]:
    """Engine processes started by `owner` (default: this process)."""
    return [p.pid for p in psutil.Process(owner).children() if p.name() == "vizdoom"]


def watch(pids: list[int]) -> subprocess.Popen | None:
    """Start a watchdog for these engine pids (no-op when there are none)."""
    if not pids:
        return None
    return subprocess.Popen([sys.executable, "-c", _WATCH, str(os.getpid()), *map(str, pids)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_later(pids: list[int], seconds: float) -> subprocess.Popen | None:
    """Kill these engines in `seconds` unless the returned timer is killed first (see DoomEnv close).

    A shell, not a Python thread: the call it guards may hold the GIL while it waits for the engine.
    """
    if not pids:
        return None
    return subprocess.Popen(["sh", "-c", f"sleep {seconds:g} && kill -9 {' '.join(map(str, pids))}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
