"""`agent-runtime episode` end to end (in this process): JSON output, recording directories, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
RESULT_KEYS = {"scenario", "policy", "episode", "seed", "reward", "kills", "tics"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli("episode", *args, cwd=REPO)


def test_json_output_one_object_per_episode_and_recordings(tmp_path):
    out = tmp_path / "runs" / "a"
    proc = cli("--scenario", "defend_the_center", "--episodes", "2", "--seed", "7", "--json",
               "--max-tics", "120", "--out", str(out), "--policy", "scripted")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    results = [json.loads(line) for line in lines]
    for index, result in enumerate(results):
        assert RESULT_KEYS <= set(result)
        assert result["episode"] == index and result["seed"] == 7 + index and result["tics"] == 120
        assert result["policy"] == "scripted" and result["scenario"] == "defend_the_center"
        recording = Path(result["recording"])
        assert recording.parent == out and (recording / "episode.lmp").is_file()
        assert (recording / "manifest.json").is_file() and (recording / "events.jsonl").is_file()
    assert len({r["recording"] for r in results}) == 2  # one directory per episode
    assert proc.stderr.count("recording: ") == 2 and len(proc.stderr.strip().splitlines()) >= 4
    saved = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert saved == results


def _bad_budget(tmp_path: Path) -> str:
    path = tmp_path / "budget.yaml"
    path.write_text("budgets:\n  max_frame_age_ms: -5\n")
    return str(path)


LLM_KEYS = {"reward", "kills", "actions_executed", "actions_fenced", "frames_dropped", "reaction_ms_p50",
            "reaction_ms_p95", "thinker_tokens", "cpu_path"}


def test_llm_policy_is_the_default_and_reports_timing_keys():
    proc = cli("--model", "tiny:llama", "--fixed-cost", "--max-tics", "60", "--json", "--no-record")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    result = json.loads(line)
    assert LLM_KEYS | RESULT_KEYS <= set(result)
    assert result["policy"] == "llm" and result["tics"] >= 60
    assert result["actions_executed"] + result["actions_fenced"] > 5
    assert result["thinker_tokens"] > 5 and result["reaction_ms_p50"] > 0


def test_readable_output_with_random_policy():
    proc = cli("--policy", "random", "--episodes", "1", "--max-tics", "60", "--no-record")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("episode 0: reward ")
    assert "kills" in proc.stdout and "tics 60" in proc.stdout
    assert "recording:" not in proc.stderr


def test_recordings_go_to_the_configs_recordings_dir_by_default(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"recordings_dir: {tmp_path / 'recs'}\n")
    proc = cli("--policy", "random", "--max-tics", "20", "--config", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    (recording,) = (tmp_path / "recs").iterdir()
    assert f"recording: {recording}" in proc.stderr
    assert json.loads(proc.stdout)["recording"] == str(recording)
    assert {"manifest.json", "events.jsonl", "episode.lmp"} <= {p.name for p in recording.iterdir()}


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
        (lambda t: ["--model", str(t / "no-such-model")], "model path does not exist"),
        (lambda t: ["--scenario", "deathmatch", "--model", "tiny:llama"], "action grammar cannot express"),
        (lambda t: ["--config", _bad_budget(t)], "bad value for 'budgets.max_frame_age_ms'"),
        (lambda t: ["--policy", "sequential", "--think-tokens", "0"], "--think-tokens must be at least 1"),
        (lambda t: ["--out", _file_in_the_way(t)], "cannot write to --out"),
        (lambda t: ["--user-text", "soon:TURN_LEFT"], "expected STEP:TEXT"),
        (lambda t: ["--policy", "random", "--user-text", "3:TURN_LEFT"], "--user-text is for the llm policy"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, make_args, expected):
    proc = cli(*make_args(tmp_path), "--max-tics", "5")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert expected in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_the_readable_result_says_how_many_notes_the_thinker_wrote_and_how_many_decisions_read_one():
    from agent_runtime.commands.episode import _readable

    result = {"episode": 0, "reward": 5.0, "kills": 6, "tics": 2100, "policy": "llm", "scenario": "defend_the_center",
              "seed": 0, "actions_executed": 190, "actions_fenced": 0, "frames_dropped": 9, "thinker_tokens": 400,
              "reaction_ms_p50": 60.0, "reaction_ms_p95": 90.0, "thinker_paragraphs": 40, "notes": 30,
              "decisions": 200, "decisions_with_note": 150}
    # 2,100 tics are one minute of game time
    assert "notes 30 of 40 paragraphs (30 a minute), decisions with a note in view 150/200" in _readable(result)
    assert "notes" not in _readable({**result, "thinker_paragraphs": 0})  # no Thinker (no_think): nothing to say
