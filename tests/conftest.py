"""Test-session guards."""

from __future__ import annotations

import os

import psutil


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
