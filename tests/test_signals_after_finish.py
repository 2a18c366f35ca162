"""Issue #14, point 2: a SIGINT/SIGTERM that arrives after a command's work is over (while the process exits)
changes nothing: the command's own exit code, no traceback, no "interrupted" line.

The window is short in a real run (the CLI skips the interpreter's teardown once the work is done), so the
subprocess here widens it: a wrapper around `agent_runtime.cli.main` makes `signals.finished()` print a marker
and sleep before the exit goes on. The product code has no test hook.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_runtime.session.events import EventBus
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.manifest import Manifest

REPO = Path(__file__).resolve().parent.parent
MARKER = "work finished"
WRAPPER = f"""
import sys, time
from agent_runtime import cli, signals
finished = signals.finished
def finished_slowly():
    finished()
    print({MARKER!r}, file=sys.stderr, flush=True)
    time.sleep(3)
signals.finished = finished_slowly
sys.argv = ["agent-runtime", *sys.argv[1:]]
sys.exit(cli.main())
"""


def _small_recording(directory: Path) -> Path:
    writer = EpisodeRecording.create_at(directory, Manifest.build({"scenario": "defend_the_center", "clock": "sync"}))
    bus = EventBus("s", keep=False)
    bus.sinks.append(writer.events)
    for tic in range(5):
        bus.emit("frame_read", "frames", tic=tic, sim_ms=tic * 28.6, screen_hash=f"{tic:016x}")
    writer.close()
    return directory


@pytest.mark.parametrize("sig, argv, code", [
    (signal.SIGINT, ["timeline", "{rec}", "-o", "{tmp}/t.png"], 0),
    (signal.SIGTERM, ["replay", "{tmp}/no-such-recording"], 2),
])
def test_a_signal_after_the_work_is_over_keeps_the_commands_exit_code(tmp_path, sig, argv, code):
    rec = _small_recording(tmp_path / "rec")
    args = [a.format(rec=rec, tmp=tmp_path) for a in argv]
    err = tmp_path / "stderr.txt"
    with err.open("w") as e:
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=e, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 60
    while MARKER not in err.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.02)
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == code, err.read_text()
    text = err.read_text()
    assert "Traceback" not in text and "interrupted" not in text and "terminated" not in text, text
