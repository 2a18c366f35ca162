"""A recordings disk that fills up mid-run: one line, the play goes on (or stops cleanly), the recording replays.

The write failures are real: an `agent-runtime episode` whose file-size limit (RLIMIT_FSIZE, set while it plays)
cuts events.jsonl mid-line (EFBIG), the same limit on its ViZDoom engine, which cuts the episode.lmp it writes
itself, and a live session's event log and a WAV switched onto /dev/full (ENOSPC).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from agent_runtime.config import load_config
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.live_session import run_live
from agent_runtime.session.runtime import Runtime
from agent_runtime.recording.episode_recorder import episode_manifest
from agent_runtime.recording.live_recordings import LiveRecordings
from agent_runtime.recording.recording import Recording
from agent_runtime.recording.replay_check import check_replay
from agent_runtime.recording.wav_writer import WavWriter
from agent_runtime.recording.write_guard import RecordingStopped, WriteGuard
from agent_runtime.voice.audio_io import read_wav
from envs.doom_env import DoomEnv
from tests.cli_runner import run_cli
from tests.engine_rig import tiny_loaded

REPO = Path(__file__).resolve().parent.parent
PLAYING = ".. tic"  # the progress line model policies print while they play
HEADROOM = 16 * 1024  # bytes events.jsonl may still grow once the limit is set


def _start_episode(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    return _start_episode_of("llm", tmp_path, "--model", "tiny:llama", "--fixed-cost", "--max-tics", "300", *extra)


def _start_episode_of(policy: str, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "stderr.txt"
    cmd = [sys.executable, "-m", "agent_runtime.cli", "episode", "--policy", policy, "--out", str(tmp_path / "out"),
           *extra]
    with err.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=f, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc, err


def _wait_for(proc: subprocess.Popen, err: Path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in err.read_text():
        assert proc.poll() is None, f"exited before {text!r}: {err.read_text()}"
        assert time.monotonic() < deadline, f"no {text!r} in {timeout} s"
        time.sleep(0.01)


def _limit_file_size(proc: subprocess.Popen, tmp_path: Path) -> tuple[Path, int]:
    """The running process may grow no file past the event log's size + HEADROOM (Python ignores SIGXFSZ, so a
    write past it fails with EFBIG). Set on the process only: its running ViZDoom engine keeps writing its .lmp."""
    (directory,) = _recordings(tmp_path)
    limit = (directory / "events.jsonl").stat().st_size + HEADROOM
    process = psutil.Process(proc.pid)
    process.rlimit(resource.RLIMIT_FSIZE, (limit, process.rlimit(resource.RLIMIT_FSIZE)[1]))  # the soft limit
    return directory, limit


def _recordings(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "out").iterdir() if p.is_dir())


def _assert_cut_log_reads_back_and_replays(directory: Path, limit: int) -> None:
    """events.jsonl stops at the limit, inside a line (or, when the limit happens to fall on a line's end, after it);
    the reader keeps every whole line, says the last was cut, and the .lmp replays them."""
    raw = (directory / "events.jsonl").read_bytes()
    cut = not raw.endswith(b"\n")  # the usual case; a line ending exactly at the limit leaves no partial line
    assert len(raw) == limit
    recording = Recording.open(directory)
    assert len(recording.events) == raw.count(b"\n") > 50
    assert [e.seq for e in recording.events] == list(range(len(recording.events)))  # no gap before the cut
    assert len(recording.warnings) == cut and all("truncated" in w for w in recording.warnings)
    extra = recording.manifest.extra
    assert extra["complete"] is False and extra["end_reason"] == "write_failed"
    assert "File too large (EFBIG)" in extra["write_error"]
    report = check_replay(recording)  # what `agent-runtime replay DIR` runs
    assert report.ok and report.n_checked == len(recording.of_kind("frame_read")) > 5, report.describe()


def _stopped_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "recording stopped" in line]


def test_a_demo_the_engine_cannot_write_whole_is_marked_and_refused_by_replay_not_replayed_into_a_crash(tmp_path):
    """The engine writes episode.lmp itself, in one go at the episode's end: limited to 300 bytes (ViZDoom
    inherits Python's ignored SIGXFSZ, so its write fails with EFBIG) it leaves a cut demo and says nothing."""
    proc, err = _start_episode_of("random", tmp_path, "--clock", "realtime", "--max-tics", "70", "--json")
    out = tmp_path / "out"
    deadline = time.monotonic() + 60
    while not (engines := [p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "vizdoom"]) \
            or not any(log.stat().st_size for log in out.glob("*/events.jsonl")):  # the engine plays, recorded
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.01)
    for engine in engines:
        engine.rlimit(resource.RLIMIT_FSIZE, (300, engine.rlimit(resource.RLIMIT_FSIZE)[1]))
    stdout, _ = proc.communicate(timeout=60)
    stderr = err.read_text()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    (line,) = _stopped_lines(stderr)
    assert "episode.lmp: ViZDoom left its demo cut short: 300 of" in line and "play goes on" in line
    assert json.loads(stdout)["tics"] >= 70  # the episode played to its end
    (directory,) = _recordings(tmp_path)
    assert (directory / "episode.lmp").stat().st_size == 300
    recording = Recording.open(directory)  # every event stays readable
    frames = recording.of_kind("frame_read")
    assert recording.warnings == [] and len(frames) > 15 and frames[-1].tic >= 60  # to the episode's end
    assert recording.manifest.extra["complete"] is False and recording.manifest.extra["end_reason"] == "write_failed"
    assert recording.manifest.lmp["complete"] is False and recording.manifest.lmp["problem"].startswith("cut short")
    t0 = time.monotonic()
    replay = run_cli("replay", str(directory), cwd=REPO)
    assert replay.returncode == 2 and "Traceback" not in replay.stderr, replay.stderr
    assert "cut short: 300 of" in replay.stderr and "cannot replay a cut demo" in replay.stderr
    assert time.monotonic() - t0 < 30  # refused before the engine starts (a cut demo crashes it, slowly)


@pytest.mark.slow  # two episodes in a subprocess: ~15-30 s on 2 busy cores
def test_a_full_disk_mid_episode_stops_the_recording_with_one_line_and_play_goes_on(tmp_path):
    proc, err = _start_episode(tmp_path, "--episodes", "2", "--json")
    _wait_for(proc, err, PLAYING)
    directory, limit = _limit_file_size(proc, tmp_path)
    _wait_for(proc, err, "recording stopped")
    # space comes back (a fresh engine needs its shared memory): the run still records nothing more
    process = psutil.Process(proc.pid)
    process.rlimit(resource.RLIMIT_FSIZE, (process.rlimit(resource.RLIMIT_FSIZE)[1],) * 2)
    stdout, _ = proc.communicate(timeout=180)
    stderr = err.read_text()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    (line,) = _stopped_lines(stderr)
    assert "events.jsonl: File too large" in line and "play goes on" in line
    first, second = [json.loads(line) for line in stdout.splitlines()]  # both episodes played to their end
    assert first["actions_executed"] > 20 and second["actions_executed"] > 20
    assert first["recording"] == str(directory) and "recording" not in second  # nothing recorded after the failure
    assert _recordings(tmp_path) == [directory]  # the second one unrecorded: the run stopped writing
    _assert_cut_log_reads_back_and_replays(directory, limit)


def test_on_disk_full_stop_ends_the_run_cleanly_with_exit_1(tmp_path):
    proc, err = _start_episode(tmp_path, "--episodes", "2", "--on-disk-full", "stop", "--json")
    _wait_for(proc, err, PLAYING)
    directory, limit = _limit_file_size(proc, tmp_path)
    stdout, _ = proc.communicate(timeout=60)
    stderr = err.read_text()
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr
    (line,) = _stopped_lines(stderr)
    assert "stopping the run (--on-disk-full stop)" in line
    assert stdout == ""  # the first episode ended early: no result, no second episode
    assert _recordings(tmp_path) == [directory]
    _assert_cut_log_reads_back_and_replays(directory, limit)


class FillDiskAfter:
    """A bus sink: after the n-th event of `kind` is written, the event log's descriptor writes to /dev/full, so
    every later write fails with ENOSPC from the kernel."""

    def __init__(self, writer, kind: str, n: int):
        self.writer, self.kind, self.left = writer, kind, n
        self.at: float | None = None

    def write(self, event) -> None:
        if event.kind == self.kind and self.at is None:
            self.left -= 1
            if self.left == 0:
                full = os.open("/dev/full", os.O_WRONLY)
                with self.writer.events._lock:  # between two events, never inside one
                    os.dup2(full, self.writer.events._file.fileno())
                os.close(full)
                self.at = time.monotonic()


@pytest.mark.parametrize("policy", ["continue", "stop"])
def test_a_live_session_whose_disk_fills_plays_on_or_stops_cleanly(tmp_path, policy):
    config = load_config(None, scenario="defend_the_center", clock="realtime")
    loaded = tiny_loaded()
    lines: list[str] = []

    def manifest_for(index):
        return episode_manifest(config, policy="live", env_seed=config.seed + index, agent_seed=0, index=index,
                                model_spec="tiny:llama", loaded=loaded, clock="realtime")

    recordings = LiveRecordings(tmp_path, manifest_for, scenario=config.scenario,
                                guard=WriteGuard(policy, notify=lines.append))
    fill = FillDiskAfter(recordings.current, "action_executed", 3)
    recordings.bus.sinks.append(fill)
    result, stopped_at = None, None
    try:
        with DoomEnv(config.scenario, clock="realtime", seed=config.seed) as env:
            runtime = Runtime.build(loaded, config, env.buttons, scenario=env.scenario)
            try:
                result = run_live(env, runtime, seconds=3.0, generation=SessionGeneration(), recordings=recordings)
            except RecordingStopped:
                stopped_at = time.monotonic()
    finally:
        recordings.close()
    (line,) = lines
    assert "events.jsonl: No space left on device (ENOSPC)" in line
    recording = Recording.open(recordings.dirs[0])
    logged = recording.of_kind("action_executed")
    assert recording.manifest.extra["complete"] is False and "ENOSPC" in recording.manifest.extra["write_error"]
    assert recording.warnings == [] and len(logged) == 3  # whole lines only: /dev/full took no byte of the next
    if policy == "continue":
        assert result is not None and result["seconds"] >= 3.0
        assert result["actions_executed"] > len(logged) + 5  # the play went on after the recording stopped
    else:
        assert result is None and 0 < stopped_at - fill.at < 1.0, stopped_at - fill.at  # at the next step
    report = check_replay(recording)
    assert report.ok and report.n_checked == len(recording.of_kind("frame_read")) >= 3, report.describe()


def test_a_wav_whose_disk_fills_keeps_a_header_that_counts_what_was_written(tmp_path):
    lines: list[str] = []
    guard = WriteGuard(notify=lines.append)
    wav = WavWriter(tmp_path / "mic_in.wav", 16000, guard=guard)
    blocks = [np.full(512, k / 100, np.float32) for k in range(20)]
    for block in blocks[:10]:
        wav.write(block)
    full = os.open("/dev/full", os.O_WRONLY)  # from here on every write fails with ENOSPC
    os.dup2(full, wav._file.fileno())
    os.close(full)
    for block in blocks[10:]:
        wav.write(block)  # never raises into the audio thread
    wav.close()
    samples, rate = read_wav(tmp_path / "mic_in.wav")
    assert rate == 16000 and samples.size == 10 * 512
    assert np.allclose(samples, np.concatenate(blocks[:10]), atol=1e-4)
    assert len(lines) == 1 and "mic_in.wav: No space left on device (ENOSPC)" in lines[0]
