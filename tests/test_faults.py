"""Faults never hang the runtime or lose a recording: a killed engine, SIGINT and SIGTERM, on real processes.

Each test runs a real `agent-runtime episode` subprocess (tiny random model, fixed cost), waits until it
plays, then kills its real ViZDoom engine or signals it, and checks the exit code, the time it took, the one
stderr line and the recording left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from envs.engine_watchdog import engine_children
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
PLAYING = ".. tic"  # the progress line model policies print while they play


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "stderr.txt"
    cmd = [sys.executable, "-m", "agent_runtime.cli", "episode", "--policy", "llm", "--model", "tiny:llama",
           "--fixed-cost", "--out", str(tmp_path / "out"), *extra]
    with err.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=f, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc, err


def _wait_playing(proc: subprocess.Popen, err: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while PLAYING not in err.read_text():
        assert proc.poll() is None, f"exited before playing: {err.read_text()}"
        assert time.monotonic() < deadline, "never started playing"
        time.sleep(0.05)


def _exit_code_within(proc: subprocess.Popen, seconds: float) -> tuple[int, float]:
    t0 = time.monotonic()
    try:
        code = proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"still running {seconds} s after the fault") from None
    return code, time.monotonic() - t0


def _recordings(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "out").iterdir() if p.is_dir())


def _assert_incomplete(directory: Path, reason: str) -> None:
    """The end event is the log's last line and the manifest says why the recording stops early."""
    last = json.loads((directory / "events.jsonl").read_text().splitlines()[-1])
    assert last["kind"] == "session_end" and last["payload"]["reason"] == reason
    extra = json.loads((directory / "manifest.json").read_text())["extra"]
    assert extra["complete"] is False and extra["end_reason"] == reason


def test_a_killed_engine_ends_the_run_with_one_line_exit_1_and_an_incomplete_recording(tmp_path):
    proc, err = _start(tmp_path, "--episodes", "2")
    _wait_playing(proc, err)
    (engine,) = engine_children(proc.pid)
    os.kill(engine, signal.SIGKILL)
    code, took = _exit_code_within(proc, 10)
    assert code == 1 and took < 5, (code, took, err.read_text())
    errors = [line for line in err.read_text().splitlines() if "error" in line]
    assert len(errors) == 1 and "ViZDoom engine" in errors[0] and f"pid {engine}" in errors[0], err.read_text()
    (directory,) = _recordings(tmp_path)  # exit: no second episode
    _assert_incomplete(directory, "engine_died")
    replay = run_cli("replay", str(directory), cwd=REPO)
    assert replay.returncode in (0, 1, 2) and "Traceback" not in replay.stderr, replay.stderr


def test_a_stuck_engine_is_killed_and_reported_within_a_few_seconds(tmp_path):
    proc, err = _start(tmp_path, "--episodes", "2")
    _wait_playing(proc, err)
    (engine,) = engine_children(proc.pid)
    os.kill(engine, signal.SIGSTOP)  # alive, but it never answers again
    code, took = _exit_code_within(proc, 15)
    assert code == 1 and took < 6, (code, took, err.read_text())
    assert "stopped answering" in err.read_text()
    (directory,) = _recordings(tmp_path)
    _assert_incomplete(directory, "engine_hung")


def test_on_engine_death_continue_plays_the_next_episode_on_a_fresh_engine(tmp_path):
    proc, err = _start(tmp_path, "--episodes", "2", "--max-tics", "200", "--on-engine-death", "continue")
    _wait_playing(proc, err)
    os.kill(engine_children(proc.pid)[0], signal.SIGKILL)
    code, _ = _exit_code_within(proc, 60)
    assert code == 1, err.read_text()  # an episode was lost
    assert "episode 1:" in proc.stdout.read()
    first, second = _recordings(tmp_path)
    _assert_incomplete(first, "engine_died")
    assert json.loads((second / "manifest.json").read_text())["extra"]["complete"] is True


def _signal_stops_the_run(tmp_path: Path, sig: int, expected: int, reason: str) -> None:
    proc, err = _start(tmp_path, "--episodes", "3")
    _wait_playing(proc, err)
    proc.send_signal(sig)
    code, took = _exit_code_within(proc, 10)
    assert code == expected and took < 2, (code, took, err.read_text())
    assert f"{reason} by {signal.Signals(sig).name}" in err.read_text()
    (directory,) = _recordings(tmp_path)  # the run stopped: no second episode
    _assert_incomplete(directory, reason)


def test_sigint_stops_a_three_episode_run_with_exit_130_and_closes_the_recording(tmp_path):
    _signal_stops_the_run(tmp_path, signal.SIGINT, 130, "interrupted")


def test_sigterm_stops_the_run_with_exit_143_and_closes_the_recording(tmp_path):
    _signal_stops_the_run(tmp_path, signal.SIGTERM, 143, "terminated")


SECOND_SIGNAL = """
import os, signal, sys, time
from agent_runtime import signals
with signals.handle_stops(), signals.stoppable():
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.requested() == signal.SIGTERM  # the first one only asks the loop to stop
    print("asked", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
print("not reached", flush=True)
"""


def test_a_second_signal_exits_at_once_when_the_run_does_not_stop():
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", SECOND_SIGNAL], cwd=REPO, capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 143 and proc.stdout == "asked\n", (proc.returncode, proc.stdout, proc.stderr)
    assert "again" in proc.stderr and time.monotonic() - t0 < 4
