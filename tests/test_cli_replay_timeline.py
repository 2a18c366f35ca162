"""`agent-runtime timeline` and `agent-runtime replay` end to end (in this process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

from agent_runtime.config import RunConfig
from agent_runtime.recording.manifest import Manifest
from agent_runtime.recording.episode_recorder import EpisodeRecording
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_timeline import synthetic_events  # noqa: E402


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=REPO)


@pytest.fixture()
def synthetic_recording(tmp_path) -> Path:
    writer = EpisodeRecording.create_at(tmp_path / "synthetic", Manifest.build(RunConfig()))
    for event in synthetic_events():
        writer.events.write(event)
    writer.close()
    return writer.dir


def test_timeline_cli_writes_png(synthetic_recording, tmp_path):
    out = tmp_path / "timeline.png"
    proc = cli("timeline", str(synthetic_recording), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "2 generation bumps" in proc.stdout
    assert cv2.imread(str(out)) is not None


def test_timeline_cli_from_to(synthetic_recording, tmp_path):
    out = tmp_path / "part.png"
    proc = cli("timeline", str(synthetic_recording), "-o", str(out), "--from", "1.1", "--to", "1.4")
    assert proc.returncode == 0, proc.stderr
    assert "0 generation bumps" in proc.stdout and "from 1.10 s to 1.40 s" in proc.stdout
    assert cv2.imread(str(out)) is not None


def test_timeline_cli_truncated_last_line_is_a_warning(synthetic_recording, tmp_path):
    log = synthetic_recording / "events.jsonl"
    log.write_bytes(log.read_bytes()[:-30])
    proc = cli("timeline", str(synthetic_recording), "-o", str(tmp_path / "t.png"))
    assert proc.returncode == 0, proc.stderr
    assert "warning:" in proc.stderr and "truncated" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("extra, needle", [
    (["--from", "3", "--to", "1"], "--to (1) must be after --from (3)"),
    (["-o", "timeline.jpg"], "ending in .png"),
])
def test_timeline_cli_bad_flags(synthetic_recording, extra, needle):
    args = ["timeline", str(synthetic_recording), *extra]
    if "-o" not in extra:
        args += ["-o", "unused.png"]
    proc = cli(*args)
    assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_timeline_cli_unwritable_output(synthetic_recording, tmp_path):
    proc = cli("timeline", str(synthetic_recording), "-o", str(tmp_path / "no" / "such" / "dir.png"))
    assert proc.returncode == 2 and "cannot write" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_replay_cli_json_video_and_rerun(tmp_path):
    from test_recording_replay import record_episode

    rec = record_episode(tmp_path / "rec", tics=40)
    out = tmp_path / "replay.mp4"
    proc = cli("replay", str(rec), "--json", "--video", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["check"]["ok"] and result["check"]["n_checked"] > 10
    cap = cv2.VideoCapture(str(out))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == result["video"]["frames"] > 0
    cap.release()
    assert result["video"]["codec"] in ("h264", "mpeg4")  # mpeg4: PyAV not installed
    proc = cli("replay", str(rec), "--rerun")
    # a hand-made recording (no policy, no clock_advance events) is checked, then refused for a rerun
    assert proc.returncode == 2 and "cannot be re-run" in proc.stderr and "Traceback" not in proc.stderr
