"""Test-session guards."""

from __future__ import annotations

import os
import sys
import warnings

import psutil

# OpenMP threads that have finished their share of an op spin for a while before they sleep. On a machine running
# more threads than cores (xdist workers beside the timed tests, as `make test` runs them) that spinning is most of
# the CPU: a tiny training test took 38 s of CPU instead of 6 beside two busy processes. PASSIVE makes idle threads
# sleep at once; it must be set before torch loads its OpenMP runtime, and the test subprocesses inherit it.
if "torch" in sys.modules and "OMP_WAIT_POLICY" not in os.environ:
    warnings.warn("torch was imported before tests/conftest.py: its OpenMP threads spin (slower beside other load)")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _orphaned_vizdoom() -> list[psutil.Process]:
    """ViZDoom engine processes whose Python parent died (e.g. a subprocess killed by a test) keep spinning."""
    here = os.getcwd()
    found = []
    for proc in psutil.process_iter(["name", "ppid", "cwd"]):
        try:
            if proc.info["name"] == "vizdoom" and proc.info["ppid"] == 1 and proc.info["cwd"] == here:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def pytest_sessionfinish(session, exitstatus):
    for proc in _orphaned_vizdoom():
        try:
            proc.kill()
        except psutil.Error:
            pass


def pytest_runtest_teardown(item, nextitem):
    # an orphan from one test must not eat the CPU of the next ones
    pytest_sessionfinish(None, None)
