"""#36's pipeline on real ViZDoom screens: collect-frames writes whole shards and resumes, train-detector is
deterministic for a seed and goes on from its checkpoint as if never stopped, bad weights are one line (exit 2),
and a pixels episode plays with the engine's label buffer off."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.detector_training import (DetectorSettings, DetectorWeightsError, load_detector, save_detector,
                                   train_detector)
from envs.frame_encoders import LabelEncoder, PixelEncoder
from envs.screen_dataset import data_hash, list_shards, load_screens
from envs.screen_detector import ScreenDetector
from tests.cli_runner import run_cli


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("frames") / "data"
    done = run_cli("collect-frames", "--out", out, "--episodes", "2", "--scenarios", "basic",
                   "--policies", "expert,random", "--max-tics", "60", "--every", "2", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["shards"] == 4 and len(summary["data_hash"]) == 64
    return out


def test_collect_frames_writes_screens_with_their_objects_and_resumes_without_touching_them(frames_dir):
    shards = list_shards(frames_dir)
    assert sorted((s.policy, s.seed) for s in shards) == [("expert", 1), ("expert", 2), ("random", 1), ("random", 2)]
    screens = load_screens(shards)
    assert screens.screens.dtype == np.uint8 and screens.screens.shape[1:] == (120, 160, 3)
    with_cacodemon = [i for i in range(len(screens)) if any(n == "cacodemon" for n, *_ in screens.objects_of(i))]
    assert len(with_cacodemon) >= len(screens) // 2  # basic: the cacodemon is in view most of the time
    name, bearing, units, rank = screens.objects_of(with_cacodemon[0])[0]
    assert -45.5 <= bearing <= 45.5 and units > 0 and rank == 0
    before = data_hash(shards)
    again = run_cli("collect-frames", "--out", frames_dir, "--episodes", "2", "--scenarios", "basic",
                    "--policies", "expert,random", "--max-tics", "60", "--every", "2", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["data_hash"] == before  # nothing replayed


def test_collect_frames_refuses_a_directory_it_did_not_write(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    done = run_cli("collect-frames", "--out", tmp_path, "--episodes", "1")
    assert done.returncode == 2 and "mine.txt" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_training_is_deterministic_and_resumes_as_if_never_stopped(frames_dir, tmp_path):
    screens = load_screens(list_shards(frames_dir))
    settings = DetectorSettings(steps=12, batch=8, channels=16, seed=3, checkpoint_every=5)
    whole, history = train_detector(screens, settings, tmp_path / "a")
    assert len(history.losses) == 12

    class Stop(Exception):
        pass

    def stop_at_8(step, loss):
        if step == 8:
            raise Stop
    (tmp_path / "b").mkdir()
    with pytest.raises(Stop):
        train_detector(screens, settings, tmp_path / "b", progress=stop_at_8)
    resumed, resumed_history = train_detector(screens, settings, tmp_path / "b")  # from the step-5 checkpoint
    assert resumed_history.losses == history.losses
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_train_detector_writes_weights_a_manifest_and_examples(frames_dir, tmp_path):
    out = tmp_path / "det"
    done = run_cli("train-detector", "--data", frames_dir, "--out", out, "--steps", "6", "--batch", "4",
                   "--channels", "8", "--held-out", "0.5", "--json")
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    assert manifest["data_hash"] == data_hash(list_shards(frames_dir))
    assert manifest["held_out_seeds"] == {"basic": [2]} and manifest["held_out"]["objects"] > 0
    assert "cacodemon" in manifest["held_out"]["per_class"]
    assert (out / "examples.png").read_bytes()[:4] == b"\x89PNG"
    assert load_detector(out / "detector.safetensors").channels == 8


def test_missing_or_damaged_weights_are_one_line_and_exit_2(tmp_path):
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(b"not a safetensors file")
    for weights in (damaged, tmp_path / "missing.safetensors"):
        config = tmp_path / "pixels.yaml"
        config.write_text(f"engine:\n  frame_source: pixels\n  detector: {weights}\n")
        done = run_cli("episode", "--config", config, "--model", "tiny:llama", "--max-tics", "10", "--no-record")
        assert done.returncode == 2, done.stderr
        error = [line for line in done.stderr.splitlines() if "error" in line]
        assert len(error) == 1 and str(weights) in error[0] and "train-detector" in error[0], done.stderr
        assert "Traceback" not in done.stderr


def test_weights_of_another_detector_layout_are_refused_in_one_line(tmp_path):
    """An earlier version's detector (one band per column: 18 + 1 + 3 outputs) names the layer that differs."""
    weights = tmp_path / "earlier.safetensors"
    earlier = ScreenDetector(channels=8)
    earlier.head = torch.nn.Conv1d(8, 18 + 1 + 3, 1)
    save_detector(earlier, weights)
    with pytest.raises(DetectorWeightsError, match=r"another detector layout .*head.weight \(22, 8, 1\) \(this "
                       r"version: \(57, 8, 1\)\).*train-detector"):
        load_detector(weights)
    save_detector(ScreenDetector(channels=8), weights)
    assert load_detector(weights).channels == 8


def test_a_pixels_episode_plays_with_the_label_buffer_off(tmp_path):
    """The engine runs without the label buffer (no frame has labels) and the frame lines come from the detector."""
    from agent_runtime.config import load_config
    from agent_runtime.session.events import EventBus
    from agent_runtime.session.llm_episode import run_llm_episode
    from agent_runtime.session.runtime import Runtime

    weights = tmp_path / "detector.safetensors"
    torch.manual_seed(0)
    save_detector(ScreenDetector(channels=8), weights)
    config = load_config(None, engine={"frame_source": "pixels", "detector": str(weights)})
    bus = EventBus("pixels", keep=True)
    with Runtime.open(config, model="tiny:llama", scenario="basic", announce=False) as runtime:
        assert isinstance(runtime.frame_encoder, PixelEncoder)
        assert not runtime.env.game.is_labels_buffer_enabled()
        result = run_llm_episode(runtime.env, runtime, seed=1, max_tics=40, bus=bus)
        assert runtime.env.read_frame() is None or runtime.env.read_frame().labels == ()
    prefilled = [e for e in bus.events if e.kind == "frame_prefilled"]
    assert result["tics"] > 0 and prefilled
    assert all(e.payload["encode_ms"] > 0 for e in prefilled)  # each frame line cost one detector forward


def test_both_encoders_write_the_frame_lines_words():
    """The label encoder is the frame line as it always was; the pixel encoder writes its detections the same way,
    in the same aim order, turned by the turn in flight."""
    from envs.doom_env import DoomEnv
    from envs.observation_text import encode_seen
    from envs.screen_detector import Detection

    with DoomEnv("basic", seed=1) as env:
        frame = env.new_episode()
    assert LabelEncoder().seen(frame, signed=True, aim_order=True, turned=3.0) == encode_seen(
        frame, signed=True, aim_order=True, turned=3.0)
    encoder = PixelEncoder(ScreenDetector(channels=8))
    encoder._cache = (frame.screen, [Detection("imp", -20.0, "far", 0.9), Detection("cacodemon", 10.0, "mid", 0.8),
                                     Detection("demon", 30.0, "near", 0.7)])
    assert encoder.seen(frame, signed=True, aim_order=True, turned=5.0) == \
        "demon left 25 near; cacodemon left 5 mid; imp right 25 far"


def test_a_pixels_recording_names_its_detector_and_reruns_as_it_ran(tmp_path):
    """The manifest names the frame source and the detector's hash; `replay --rerun` reproduces the actions, and
    refuses (one line) when the detector at the recorded path is another one."""
    weights = tmp_path / "detector.safetensors"
    torch.manual_seed(1)
    save_detector(ScreenDetector(channels=8), weights)
    config = tmp_path / "pixels.yaml"
    config.write_text(f"engine:\n  frame_source: pixels\n  detector: {weights}\n")
    done = run_cli("episode", "--config", config, "--model", "tiny:llama", "--fixed-cost", "--max-tics", "60",
                   "--threads", "1", "--scenario", "basic", "--json", "--out", tmp_path / "rec")
    assert done.returncode == 0, done.stderr
    directory = Path(json.loads(done.stdout)["recording"])
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["extra"]["frame_source"] == "pixels" and len(manifest["extra"]["detector_hash"]) == 16
    again = run_cli("replay", directory, "--rerun", "--json")
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)["rerun"]
    assert rerun["same_actions"] and rerun["n_actions"] >= 3
    torch.manual_seed(2)
    save_detector(ScreenDetector(channels=8), weights)  # another detector at the same path
    refused = run_cli("replay", directory, "--rerun")
    assert refused.returncode == 2 and "detector" in refused.stderr and "Traceback" not in refused.stderr
    weights.unlink()  # no detector at all: the runtime's own one line, not a scenario that cannot start
    missing = run_cli("replay", directory, "--rerun")
    assert missing.returncode == 2 and str(weights) in missing.stderr and "cannot start scenario" not in missing.stderr


def test_collect_frames_under_the_agent(tmp_path):
    """The multi-stream agent plays too (here the tiny model): its screens are kept like the expert's."""
    done = run_cli("collect-frames", "--out", tmp_path / "agent", "--episodes", "1", "--scenarios", "basic",
                   "--policies", "agent", "--model", "tiny:llama", "--max-tics", "40", "--every", "2")
    assert done.returncode == 0, done.stderr
    (shard,) = list_shards(tmp_path / "agent")
    assert shard.policy == "agent" and len(load_screens([shard])) >= 10
