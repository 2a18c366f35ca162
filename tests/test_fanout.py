"""`--workers N` on Ray: the same episodes as a serial run, a killed worker's episode played again, Ctrl-C.

The fanned-out runs are real `agent-runtime` subprocesses (episode; collect and bench play too) with the tiny random
model on the fixed-cost clock; the serial runs they must equal play in this process (tests/cli_runner.py). They connect (--ray-address) to one local Ray this module starts (2 CPUs, no
dashboard); the Ctrl-C test lets the command start and stop its own local Ray, as a user's run does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from envs.engine_watchdog import engine_children
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
TINY = ("--model", "tiny:llama", "--fixed-cost", "--json")
RUN_TIMEOUT = 600  # a loaded 2-core machine starts Ray workers slowly
VARYING = ("wall_s", "recording")  # what may differ between two runs of the same episode


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent_runtime.cli", *args], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _results(out: Path) -> dict[int, dict]:
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_episode = {r["episode"]: r for r in lines}
    assert len(by_episode) == len(lines), "an episode was reported twice"
    return by_episode


def _comparable(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in VARYING}


def _recorded_play(recording: str) -> dict:
    """What makes two recordings the same game: frame hashes tic by tic, commands executed, the .lmp."""
    events = [json.loads(line) for line in Path(recording, "events.jsonl").read_text().splitlines()]
    manifest = json.loads(Path(recording, "manifest.json").read_text())
    return {
        "frames": [(e["tic"], e["payload"]["screen_hash"]) for e in events if e["kind"] == "frame_read"],
        "actions": [(e["tic"], e["payload"]["command"]) for e in events if e["kind"] == "action_executed"],
        "lmp": manifest["lmp"]["blake2b"],
        "complete": manifest["extra"]["complete"],
    }


# --- on a local Ray ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_address():
    """One local Ray for the module (2 CPUs: 2 workers x 1 thread); its auth token mode reaches subprocesses."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def serial_300(tmp_path_factory):
    """Three episodes of 300 tics played in one process on one thread (what a 1-CPU worker runs on)."""
    out = tmp_path_factory.mktemp("serial300")
    proc = run_cli("episode", *TINY, "--episodes", "3", "--max-tics", "300", "--threads", "1", "--out", out, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return _results(out)


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen, err: Path):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert proc.poll() is None, f"exited before {what}: {err.read_text()}"
        assert time.monotonic() < deadline, f"never {what}: {err.read_text()}"
        time.sleep(0.1)


def _start(tmp_path: Path, *args: str, own_group: bool = False) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "stderr.txt"
    with err.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "agent_runtime.cli", "episode", *TINY, *args], cwd=REPO,
                                env=_env(), stdout=subprocess.PIPE, stderr=f, text=True, start_new_session=own_group)
    return proc, err


def _worker_pids(err: Path) -> dict[int, int]:
    return {int(w): int(p) for w, p in re.findall(r"^worker (\d+) \(pid (\d+)\) ready", err.read_text(), re.M)}


@pytest.mark.slow
def test_two_workers_play_the_serial_episodes_exactly_and_a_killed_workers_episode_is_played_again(
        tmp_path, ray_address, serial_300):
    out = tmp_path / "out"
    proc, err = _start(tmp_path, "--episodes", "3", "--max-tics", "300", "--workers", "2",
                       "--ray-address", ray_address, "--out", str(out))
    try:
        victim = _wait_for(lambda: _worker_pids(err).get(0), RUN_TIMEOUT, "loaded worker 0", proc, err)
        _wait_for(lambda: engine_children(victim), 120, "played on worker 0", proc, err)  # an engine: mid-episode
        time.sleep(0.5)
        os.kill(victim, signal.SIGKILL)
        proc.wait(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    assert proc.returncode == 0, text
    assert {0, 1} <= set(_worker_pids(err)), text  # both workers loaded (a third replaced the killed one)
    died = re.search(rf"worker 0 \(pid {victim}\) died during episode (\d+): .*; episode \1 is played again", text)
    assert died, text
    got = _results(out)
    assert sorted(got) == [0, 1, 2]  # the run completed, every episode once
    assert sorted(json.loads(line)["episode"] for line in proc.stdout.read().splitlines()) == [0, 1, 2]
    for index in range(3):  # every episode, the retried one too, is the serial game
        assert set(got[index]) == set(serial_300[index])  # results.jsonl has the serial shape
        assert _comparable(got[index]) == _comparable(serial_300[index])
        assert Path(got[index]["recording"]).parent == out
        assert _recorded_play(got[index]["recording"]) == _recorded_play(serial_300[index]["recording"])
        assert _recorded_play(got[index]["recording"])["complete"] is True
    replay = run_cli("replay", got[int(died.group(1))]["recording"])  # a worker's recording replays like any other
    assert replay.returncode == 0, replay.stdout + replay.stderr


@pytest.mark.slow
def test_ctrl_c_stops_every_worker_closes_their_recordings_and_exits_130(tmp_path):
    """The run starts its own local Ray; Ctrl-C reaches its whole process group, Ray's services included."""
    out = tmp_path / "out"
    proc, err = _start(tmp_path, "--episodes", "50", "--workers", "2", "--out", str(out), own_group=True)
    try:
        pids = _wait_for(lambda: len(_worker_pids(err)) == 2 and _worker_pids(err), RUN_TIMEOUT, "loaded 2 workers",
                         proc, err)
        _wait_for(lambda: all(engine_children(pid) for pid in pids.values()), 120, "played on both workers", proc, err)
        ray_services = [p for p in psutil.Process(proc.pid).children(recursive=True)]
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the command and the Ray services it started
        t0 = time.monotonic()
        code = proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    assert code == 130 and took < 30, (code, took, text)
    assert "interrupted by SIGINT" in text
    finished = {r["recording"] for r in _results(out).values()} if (out / "results.jsonl").exists() else set()
    stopped = sorted(d for d in out.iterdir() if d.is_dir() and str(d) not in finished)
    # the episode in progress on each worker, none started after the stop; tiny episodes last ~1.5 s, so a worker
    # may have just finished one (reported as complete below) when the signal came
    assert 1 <= len(stopped) <= 2, text
    for directory in stopped:
        last = json.loads((directory / "events.jsonl").read_text().splitlines()[-1])
        assert last["kind"] == "session_end" and last["payload"]["reason"] == "interrupted"
        extra = json.loads((directory / "manifest.json").read_text())["extra"]
        assert extra["complete"] is False and extra["end_reason"] == "interrupted"
        assert f"recording (incomplete, interrupted): {directory}" in text
    assert all(_recorded_play(r)["complete"] for r in finished)
    _, alive = psutil.wait_procs(ray_services, timeout=30)  # the local Ray it started is gone with it
    assert not [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], alive


@pytest.mark.slow
def test_collect_on_two_workers_writes_the_serial_data_set_byte_for_byte(tmp_path, ray_address):
    common = ("collect", "--model", "tiny:llama", "--fixed-cost", "--episodes", "3", "--max-tics", "60")
    serial = run_cli(*common, "--threads", "1", "--out", tmp_path / "serial", cwd=REPO)
    assert serial.returncode == 0, serial.stderr
    fanned = _cli(*common, "--workers", "2", "--ray-address", ray_address, "--out", str(tmp_path / "ray"))
    assert fanned.returncode == 0, fanned.stderr
    assert fanned.stdout == serial.stdout.replace(str(tmp_path / "serial"), str(tmp_path / "ray"))
    for name in ("decisions.jsonl", "episodes.jsonl"):  # episodes written in index order, whatever ended first
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes()


@pytest.mark.slow
def test_bench_play_on_two_workers_reports_the_serial_summary(tmp_path, ray_address):
    common = ("bench", "play", "--model", "tiny:llama", "--fixed-cost", "--episodes", "2", "--max-tics", "60",
              "--agents", "llm,no_think,scripted", "--json")
    serial = run_cli(*common, "--threads", "1", "--out", tmp_path / "serial", cwd=REPO)
    assert serial.returncode == 0, serial.stderr
    fanned = _cli(*common, "--workers", "2", "--ray-address", ray_address, "--out", str(tmp_path / "ray"))
    assert fanned.returncode == 0, fanned.stderr
    expected, got = json.loads(serial.stdout), json.loads(fanned.stdout)
    assert got["agents"] == expected["agents"] and got["seeds"] == expected["seeds"] == [0, 1]
    assert got["workers"] == 2 and got["lost"] == []


@pytest.mark.slow
def test_bench_reaction_on_two_workers_reports_the_serial_summary(tmp_path, ray_address):
    common = ("bench", "reaction", "--model", "tiny:llama", "--fixed-cost", "--episodes", "2", "--max-tics", "60",
              "--think-tokens", "4", "--json")  # 4 think tokens: the sequential agent acts within 60 tics too
    serial = run_cli(*common, "--threads", "1", "--out", tmp_path / "serial", cwd=REPO)
    assert serial.returncode == 0, serial.stderr
    fanned = _cli(*common, "--workers", "2", "--ray-address", ray_address, "--out", str(tmp_path / "ray"))
    assert fanned.returncode == 0, fanned.stderr
    expected, got = json.loads(serial.stdout), json.loads(fanned.stdout)
    assert set(got) == set(expected) | {"workers", "lost"}  # the serial shape, plus how it was fanned out
    assert got["workers"] == 2 and got["lost"] == [] and got["machine"]["workers"] == 2
    assert list(got["agents"]) == list(expected["agents"]) == ["llm", "sequential", "no_think"]
    for name, summary in got["agents"].items():
        assert set(summary) == set(expected["agents"][name])
        assert summary["episodes"] == 2 and len(summary["kills_per_episode"]) == 2
        assert summary["actions_executed"] > 0 and 0 < summary["reaction_ms_p50"] <= summary["reaction_ms_p95"]
        assert summary == expected["agents"][name], name  # --fixed-cost: the serial episodes, number for number
    assert got["ratios"] == expected["ratios"] and got["ratios"]["reaction_p50_seq_over_multi"] > 1
    assert got["targets"] == expected["targets"]
    assert Path(got["plot"]).is_file() and (tmp_path / "ray" / "reaction.json").is_file()
