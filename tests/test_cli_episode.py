"""`agent-runtime episode` end to end in a subprocess: JSON output, recordings, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RESULT_KEYS = {"scenario", "policy", "episode", "seed", "reward", "kills", "tics"}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "agent_runtime.cli", "episode", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_json_output_one_object_per_episode_and_recordings(tmp_path):
    out = tmp_path / "runs" / "a"
    proc = cli("--scenario", "defend_the_center", "--episodes", "2", "--seed", "7", "--json",
               "--max-tics", "120", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    results = [json.loads(line) for line in lines]
    for index, result in enumerate(results):
        assert RESULT_KEYS <= set(result)
        assert result["episode"] == index and result["seed"] == 7 + index and result["tics"] == 120
        assert result["policy"] == "scripted" and result["scenario"] == "defend_the_center"
        assert Path(result["recording"]).is_file()
    assert len(proc.stderr.strip().splitlines()) >= 2  # a progress line per episode
    saved = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert saved == results


def test_readable_output_with_random_policy():
    proc = cli("--policy", "random", "--episodes", "1", "--max-tics", "60")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("episode 0: reward ")
    assert "kills" in proc.stdout and "tics 60" in proc.stdout


def _bad_config(tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text("resolution: 123x45\n")
    return str(path)


def _file_in_the_way(tmp_path: Path) -> str:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    return str(blocker / "out")


@pytest.mark.parametrize(
    "make_args, expected",
    [
        (lambda t: ["--scenario", "defend_the_moon"], "unknown scenario 'defend_the_moon'"),
        (lambda t: ["--scenario", str(t / "missing.cfg")], "scenario config not found"),
        (lambda t: ["--episodes", "0"], "--episodes must be at least 1"),
        (lambda t: ["--config", _bad_config(t)], "bad value for 'resolution'"),
        (lambda t: ["--policy", "llm"], "not available yet"),
        (lambda t: ["--out", _file_in_the_way(t)], "cannot write to --out"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, make_args, expected):
    proc = cli(*make_args(tmp_path), "--max-tics", "5")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert expected in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""
