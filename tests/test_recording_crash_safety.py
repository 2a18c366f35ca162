"""A process killed with SIGKILL mid-episode leaves an event log whose prefix reads back intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from agent_runtime.recording.event_log import read_event_log

REPO = Path(__file__).resolve().parent.parent

WRITER = """
import sys, time
from agent_runtime.session.events import EventBus
from agent_runtime.recording.event_log import EventLogWriter
from agent_runtime.recording.wav_writer import WavWriter
import numpy as np
bus = EventBus("crash", clock="compute")
bus.sinks.append(EventLogWriter(sys.argv[1]))
wav = WavWriter(sys.argv[2], 16000)
i = 0
while True:
    bus.emit("frame_read", "engine", tic=i, sim_ms=i * 1000 / 35, screen_hash="%016x" % i, text="y" * (i % 700))
    if i % 10 == 0:
        wav.write(np.zeros(160, np.int16))
    if i == 200:
        print("ready", flush=True)
    i += 1
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_mid_run_leaves_a_readable_prefix(tmp_path):
    import wave

    log, audio = tmp_path / "events.jsonl", tmp_path / "mic_in.wav"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), str(audio)], cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a cut-off last line is allowed and warned about
        events, problems = read_event_log(log)
    assert len(events) > 200 and len(problems) <= 1
    assert [e.tic for e in events] == list(range(len(events)))  # a gap-free prefix
    assert [e.seq for e in events] == list(range(len(events)))
    with wave.open(str(audio), "rb") as w:
        assert w.getnframes() >= 160 * 20 and w.getnframes() % 160 == 0
