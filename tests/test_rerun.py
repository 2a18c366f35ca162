"""Record headless episodes through `agent-runtime episode`, then `replay` them: the .lmp re-renders the recorded
frames, `--rerun` emits the same actions, and a tampered log or model is caught. The committed sample too.

The CLI runs in-process (agent_runtime.cli.main) so torch and the tiny model load once for the whole file.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from agent_runtime.cli import main
from agent_runtime.control.user_inputs import user_command
from agent_runtime.errors import UserError
from agent_runtime.recording.engine_paths import MAX_ENGINE_LMP_PATH
from agent_runtime.recording.manifest import FORMAT_VERSION
from agent_runtime.recording.recording import Recording
from agent_runtime.recording.rerun import first_divergence, rerun_recording
from agent_runtime.recording.user_script import parse_user_text_args

pytestmark = pytest.mark.cpu_sensitive  # `make test` runs it again on the forced AVX2 path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "recordings" / "sample"


def run_cli(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `agent-runtime ARGS`; torch's thread count is restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        torch.set_num_threads(threads)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A 60-tic llm episode of the tiny model on the fixed-cost clock, with a typed command, a remark and a phrase
    (a command too, as typed in `live`)."""
    out = tmp_path_factory.mktemp("episode")
    code, stdout, stderr = run_cli("episode", "--model", "tiny:llama", "--fixed-cost", "--max-tics", "60",
                                   "--threads", "1", "--seed", "5", "--json", "--out", str(out),
                                   "--user-text", "8:TURN_RIGHT", "--user-text", "16:look left",
                                   "--user-text", "24:turn left")
    assert code == 0, stderr
    result = json.loads(stdout)
    directory = Path(result["recording"])
    assert f"recording: {directory}" in stderr and directory.parent == out
    return directory


def tampered_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_manifest_says_how_to_rerun(recorded):
    recording = Recording.open(recorded)
    m = recording.manifest
    assert m.format_version == FORMAT_VERSION and m.clock == "fixed_cost" and m.threads == 1
    assert m.model_id == "tiny:llama" and m.model_weight_hash and m.config["model"]["path"] == "tiny:llama"
    assert m.seeds["env"] == 5 and m.seeds["agent"] == 5
    assert m.extra["policy"] == "llm" and m.extra["fixed_cost"]["base_ms"] > 0 and m.extra["max_tics"] == 60
    assert m.lmp and m.lmp["blake2b"] and {"torch", "vizdoom"} <= set(m.packages)
    kinds = {e.kind for e in recording.events}
    assert {"frame_read", "action_emitted", "clock_advance", "user_input", "generation_bump"} <= kinds
    assert [e.payload["command"] for e in recording.of_kind("user_input")] == ["TURN_RIGHT 4", None, "TURN_LEFT 4"]


def test_replay_frames_and_rerun_actions_match(recorded):
    code, stdout, stderr = run_cli("replay", str(recorded), "--rerun", "--json")
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["check"]["ok"] and result["check"]["n_checked"] > 50
    rerun = result["rerun"]
    assert rerun["same_actions"] and rerun["first_divergence"] is None and rerun["same_frames"]
    assert rerun["n_actions"] == rerun["n_actions_rerun"] > 5 and rerun["n_user_inputs"] == 3


def test_tampered_action_is_the_first_divergence(recorded, tmp_path):
    copy = tampered_copy(recorded, tmp_path / "tampered")
    log = copy / "events.jsonl"
    lines = log.read_text().splitlines()
    emitted = [i for i, line in enumerate(lines) if '"kind":"action_emitted"' in line]
    event = json.loads(lines[emitted[5]])
    original = event["payload"]["command"]
    event["payload"]["command"] = "ATTACK 7" if original != "ATTACK 7" else "TURN_LEFT 7"
    lines[emitted[5]] = json.dumps(event, separators=(",", ":"))
    log.write_text("\n".join(lines) + "\n")

    code, stdout, stderr = run_cli("replay", str(copy), "--rerun")
    assert code == 1, stderr
    assert "OK: the replay matches the recording" in stdout  # the frames are untouched
    assert "rerun: DIFFERENT actions" in stdout and "first divergence at action 5" in stdout
    divergence = rerun_recording(copy)["first_divergence"]
    assert divergence["index"] == 5
    assert divergence["recorded"]["command"] == event["payload"]["command"]
    assert divergence["rerun"] == {"command": original, "frame_tic": event["payload"]["frame_tic"]}


def test_other_weights_are_refused(recorded, tmp_path):
    copy = tampered_copy(recorded, tmp_path / "other-weights")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["model_weight_hash"] = "0123456789abcdef"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="weight hash .* but the recording was made with 0123456789abcdef"):
        rerun_recording(copy)


def test_baseline_recording_replays_but_does_not_rerun(tmp_path):
    code, stdout, stderr = run_cli("episode", "--policy", "scripted", "--max-tics", "40", "--json", "--out", str(tmp_path))
    assert code == 0, stderr
    recording = Recording.open(json.loads(stdout)["recording"])
    assert recording.manifest.extra["policy"] == "scripted" and recording.manifest.model_id is None
    assert len(recording.of_kind("frame_read")) > 30 and recording.of_kind("action_executed")
    code, stdout, _ = run_cli("replay", str(recording.dir))
    assert code == 0 and "OK: the replay matches" in stdout
    with pytest.raises(UserError, match="policy 'scripted' cannot be re-run"):
        rerun_recording(recording.dir)


def test_long_recording_paths_are_staged_for_the_engine(tmp_path):
    deep = tmp_path / ("d" * max(1, MAX_ENGINE_LMP_PATH - len(str(tmp_path)) + 10))
    code, stdout, stderr = run_cli("episode", "--policy", "random", "--max-tics", "40", "--json", "--out", str(deep))
    assert code == 0, stderr
    directory = Path(json.loads(stdout)["recording"])
    assert len(str(directory / "episode.lmp")) > MAX_ENGINE_LMP_PATH and (directory / "episode.lmp").is_file()
    code, stdout, _ = run_cli("replay", str(directory))
    assert code == 0 and "0 mismatched" in stdout


@pytest.mark.skipif(not (SAMPLE / "manifest.json").is_file(), reason="the committed sample recording is missing")
def test_committed_sample_replays_and_reruns_identically():
    code, stdout, stderr = run_cli("replay", str(SAMPLE), "--rerun", "--json")
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["check"]["ok"] and result["check"]["n_checked"] >= 150 and result["check"]["n_mismatched"] == 0
    assert result["rerun"]["same_actions"] and result["rerun"]["n_actions"] > 50
    assert result["rerun"]["n_user_inputs"] == 2
    assert sum(f.stat().st_size for f in SAMPLE.iterdir()) <= 2 * 1024 * 1024


def test_first_divergence_covers_length_differences():
    a = [{"command": "ATTACK 4", "frame_tic": 3}, {"command": "TURN_LEFT 2", "frame_tic": 5}]
    assert first_divergence(a, list(a)) is None
    assert first_divergence(a, a[:1]) == {"index": 1, "recorded": {"command": "TURN_LEFT 2", "frame_tic": 5}, "rerun": None}
    assert first_divergence([], a)["index"] == 0


def test_user_text_arguments_and_command_spelling():
    assert parse_user_text_args(["3:TURN_LEFT", "10: look around "]) == {3: "TURN_LEFT", 10: "look around"}
    for bad in (["TURN_LEFT"], ["x:TURN_LEFT"], ["4:"], ["2:a", "2:b"]):
        with pytest.raises(UserError):
            parse_user_text_args(bad)

    class Grammar:
        buttons, default_tics, commands = ("ATTACK", "TURN_LEFT"), 4, []

    assert user_command("attack", Grammar).text == "ATTACK 4"
    assert user_command("TURN_LEFT 2", Grammar).buttons == {"TURN_LEFT": 1.0}
    assert user_command("NOOP 3", Grammar).buttons == {}
    assert user_command("look around", Grammar) is None and user_command("JUMP", Grammar) is None
