"""Record a real headless episode into a Recording, then replay its .lmp: screens match, tampering shows,
bad inputs give one-line errors (exit 2) from the CLI."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_runtime.config import RunConfig
from agent_runtime.errors import UserError
from agent_runtime.session.events import EventBus
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.episode_recorder import EpisodeRecording
from agent_runtime.recording.recording import Recording, screen_hash
from agent_runtime.recording.replay_check import check_replay
from envs.doom_env import DoomEnv
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent


def record_episode(directory: Path, scenario: str = "defend_the_center", tics: int = 50, seed: int = 3) -> Path:
    """A random player; every frame_read carries the screen hash, as the engine's do."""
    manifest = Manifest.build(RunConfig(scenario=scenario, seed=seed), model_id="random-test")
    writer = EpisodeRecording.create_at(directory, manifest)
    bus = EventBus("test", clock="compute")
    bus.sinks.append(writer.events)
    rng = random.Random(seed)
    with DoomEnv(scenario, seed=seed) as env:
        frame = env.new_episode(record_path=writer.lmp_path)
        while frame is not None and frame.tic < tics:
            bus.emit("frame_read", "engine", tic=frame.tic, sim_ms=frame.tic * 1000 / 35, screen_hash=screen_hash(frame.screen))
            action = rng.choice(env.buttons)
            bus.emit("action_executed", "executor", tic=frame.tic, sim_ms=frame.tic * 1000 / 35, action=action)
            if rng.random() < 0.2:
                bus.emit("action_fenced", "executor", tic=frame.tic, action="ATTACK", reason="stale")
            env.act({action: 1}, 2)
            frame = env.read_frame()
        bus.emit("thinker_paragraph", "thinker", tic=env.tic, text="enemy on the left, turning")
    writer.close()  # after the env: the .lmp is finished, its hash goes into the manifest
    return directory


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    return record_episode(tmp_path_factory.mktemp("rec") / "defend")


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=REPO)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_recording_layout(recorded):
    names = {p.name for p in recorded.iterdir()}
    assert {"manifest.json", "events.jsonl", "episode.lmp"} <= names
    rec = Recording.open(recorded)
    assert rec.manifest.lmp["scenario"] == "defend_the_center" and len(rec.manifest.lmp["blake2b"]) == 32
    assert rec.manifest.model_id == "random-test" and rec.manifest.clock == "sync"
    assert len(rec.of_kind("frame_read")) >= 20


def test_replay_matches_every_recorded_frame(recorded):
    report = check_replay(Recording.open(recorded))
    assert report.ok and report.n_mismatched == 0 and report.n_missing == 0
    assert report.n_checked == len(Recording.open(recorded).of_kind("frame_read"))
    assert report.first_mismatch is None


def test_tampered_hash_is_reported(recorded, tmp_path):
    copy = Path(shutil.copytree(recorded, tmp_path / "tampered"))
    lines = (copy / "events.jsonl").read_text().splitlines()
    frame_lines = [i for i, line in enumerate(lines) if '"frame_read"' in line]
    target = frame_lines[len(frame_lines) // 2]
    event = json.loads(lines[target])
    event["payload"]["screen_hash"] = "0" * 16
    lines[target] = json.dumps(event)
    (copy / "events.jsonl").write_text("\n".join(lines) + "\n")
    report = check_replay(Recording.open(copy))
    assert not report.ok and report.n_mismatched == 1
    assert report.first_mismatch["tic"] == event["tic"] and report.first_mismatch["recorded"] == "0" * 16
    proc = cli("replay", str(copy), "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["check"]["n_mismatched"] == 1


def test_replay_cli_ok(recorded):
    proc = cli("replay", str(recorded))
    assert proc.returncode == 0, proc.stderr
    assert "0 mismatched" in proc.stdout and "OK" in proc.stdout


@pytest.mark.slow
def test_video_has_one_frame_per_replayed_tic(recorded, tmp_path):
    import cv2

    from agent_runtime.recording.video import write_video

    out = tmp_path / "replay.mp4"
    result = write_video(Recording.open(recorded), out, max_frames=40)
    assert result["frames"] == 40 and out.stat().st_size > 0
    cap = cv2.VideoCapture(str(out))
    try:
        assert cap.isOpened()
        assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 40
        ok, image = cap.read()
        assert ok and image.shape[1] == 640 and image.shape[0] > 480  # 4x screen plus the overlay panel
    finally:
        cap.release()


@pytest.mark.slow
def test_wrong_scenario_lmp_is_exit_2(recorded, tmp_path):
    other = record_episode(tmp_path / "basic", scenario="basic", tics=30)
    mixed = Path(shutil.copytree(recorded, tmp_path / "mixed"))
    shutil.copy(other / "episode.lmp", mixed / "episode.lmp")
    with pytest.raises(UserError, match="episode.lmp"):
        check_replay(Recording.open(mixed))
    assert_one_line_error(cli("replay", str(mixed)), "episode.lmp", "manifest.json", "defend_the_center")
    # the manifest edited to another scenario than the one its .lmp was recorded on
    data = json.loads((other / "manifest.json").read_text())
    data["scenario"] = "defend_the_center"
    (other / "manifest.json").write_text(json.dumps(data))
    assert_one_line_error(cli("replay", str(other)), "episode.lmp", "'basic'", "manifest.json")


def test_missing_dir_is_exit_2(tmp_path):
    assert_one_line_error(cli("replay", str(tmp_path / "nope")), "recording directory not found", "nope")


def test_unknown_format_version_is_exit_2(recorded, tmp_path):
    copy = Path(shutil.copytree(recorded, tmp_path / "future"))
    data = json.loads((copy / "manifest.json").read_text())
    data["format_version"] = 7
    (copy / "manifest.json").write_text(json.dumps(data))
    assert_one_line_error(cli("replay", str(copy)), "manifest.json", "unknown format_version 7")


def test_corrupt_middle_line_is_exit_2(recorded, tmp_path):
    copy = Path(shutil.copytree(recorded, tmp_path / "corrupt"))
    lines = (copy / "events.jsonl").read_text().splitlines()
    lines[3] = lines[3][: len(lines[3]) // 2]
    (copy / "events.jsonl").write_text("\n".join(lines) + "\n")
    assert_one_line_error(cli("replay", str(copy)), "events.jsonl", "line 4")


def test_missing_lmp_is_exit_2(recorded, tmp_path):
    copy = Path(shutil.copytree(recorded, tmp_path / "nolmp"))
    (copy / "episode.lmp").unlink()
    assert_one_line_error(cli("replay", str(copy)), "episode.lmp", "not found")


def test_create_refuses_unwritable_or_existing_dir(recorded, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    manifest = Manifest.build(RunConfig())
    with pytest.raises(UserError, match="cannot create recording directory"):
        EpisodeRecording.create_at(blocker / "rec", manifest)
    with pytest.raises(UserError, match="already holds a recording"):
        EpisodeRecording.create_at(recorded, manifest)
