"""A killed owner does not leave a ViZDoom engine spinning."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent

OWNER = """
import sys, time
from envs.doom_env import DoomEnv
from envs.engine_watchdog import engine_children
env = DoomEnv("basic", seed=0)
print(*engine_children(), flush=True)
time.sleep(60)
"""


def test_the_engine_dies_with_its_owner_even_on_sigkill():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], cwd=REPO, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    engines = [int(p) for p in owner.stdout.readline().split()]
    assert engines and all(psutil.pid_exists(p) for p in engines)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(p) for p in engines):
        time.sleep(0.2)
    assert not any(_running(p) for p in engines)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
