"""A vision-language model's frames in the engine: image blocks prefilled as frames arrive, beside the decoders;
a frame whose encoding ends too late is dropped, never prefilled; episodes record and re-run exactly."""

import json
import time
from pathlib import Path

import numpy as np
import pytest

from agent_runtime.config import BudgetConfig, EngineConfig, RunConfig
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.session.clocks import FixedCost, SessionClock
from agent_runtime.session.events import EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.runtime import Runtime
from agent_runtime.session.sync_world import TimedFrame
from envs.frame import Frame
from tests.cli_runner import run_cli
from tests.engine_rig import tiny_loaded

BUTTONS = ("TURN_LEFT", "TURN_RIGHT", "ATTACK")


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    config = RunConfig(kv={"capacity_tokens": 4096, "page_size": 16},
                       engine={"frame_source": "pixels", "frame_line": "none"})
    return Runtime.build(tiny_loaded("smolvlm"), config, BUTTONS, scenario="defend_the_center")


class SlowVision:
    """The runtime's vision encoder, `delay_s` slower: a stand-in for a big tower on a small CPU."""

    def __init__(self, vision, delay_s: float):
        self.vision, self.delay_s = vision, delay_s

    def encode(self, screens):
        time.sleep(self.delay_s)
        return self.vision.encode(screens)

    def frame_tokens(self):
        return self.vision.frame_tokens()


def frame_at(tic: int, read_ms: float) -> TimedFrame:
    screen = np.random.default_rng(tic).integers(0, 256, size=(120, 160, 3), dtype=np.uint8)
    return TimedFrame(Frame(tic=tic, t_read=0.0, screen=screen, labels=(), episode=0,
                            variables={"HEALTH": 100.0, "AMMO2": 26.0, "POSITION_X": 0.0, "POSITION_Y": 0.0,
                                       "ANGLE": 0.0}), read_ms)


def agent_with(runtime, vision, bus, encode_cost=None):
    return MultiStreamAgent(runtime.runner, runtime.tokenizer, runtime.grammar, SessionGeneration(),
                            engine=EngineConfig(frame_source="pixels", frame_line="none", think=False),
                            budgets=BudgetConfig(max_frame_age_ms=100.0), scenario="defend_the_center", bus=bus,
                            frame_encoder=None, vision=vision, encode_cost=encode_cost)


@pytest.mark.parametrize("delay_s,prefilled", [(0.0, True), (0.15, False)])
def test_a_frame_too_old_when_its_encoding_ends_is_dropped_not_prefilled(runtime, delay_s, prefilled):
    bus = EventBus()
    # the fast case is charged nothing for its encoding (as on the fixed-cost clock), so a loaded machine cannot
    # make it late; the slow one its measured time, which the sleep puts past the bound
    agent = agent_with(runtime, SlowVision(runtime.vision, delay_s), bus,
                       encode_cost=None if delay_s else (lambda ms: 0.0))
    try:
        agent.push_frame(frame_at(5, read_ms=0.0))  # fresh when the step starts: 10 ms old, bound 100 ms
        outcome = agent.step(10.0)
        frame_rows = [n for role, n in outcome.batch if role == "frame"]
        if prefilled:
            assert frame_rows == [len(runtime.vision.frame_tokens()) + 1]  # the line prefix, then the image
            event = bus.of_kind("frame_prefilled")[0]
            assert event.payload["image_tokens"] == runtime.vision.tokens_per_frame
            assert agent.stats.frames_dropped == 0 and len(agent.frames.in_view) == 1
        else:
            assert frame_rows == [] and not bus.of_kind("frame_prefilled") and not agent.frames.in_view
            dropped = bus.of_kind("frame_dropped")[0]
            assert dropped.payload["reason"] == "encoded_late" and dropped.payload["encode_cost_ms"] >= 150.0
            assert dropped.payload["age_ms"] > 100.0 and agent.stats.frames_dropped == 1
            assert outcome.measured_s >= 0.15  # the encoding is reaction time: the step is charged for it
    finally:
        agent.close()


def test_the_clock_decides_what_encoding_cost():
    """Measured on the compute clock, nothing on the fixed-cost clock, and in a rerun what the recording says (the
    same drops again), nothing past the recorded ones."""
    assert SessionClock().frame_encode_ms(7.5) == 7.5
    assert SessionClock(FixedCost()).frame_encode_ms(7.5) == 0.0
    replay = SessionClock(replay_costs=[10.0], replay_encode_ms=[3.0, 180.0])
    assert [replay.frame_encode_ms(1.0) for _ in range(3)] == [3.0, 180.0, 0.0]


def test_a_replayed_encoding_time_drops_the_frame_the_recorded_run_dropped(runtime):
    bus = EventBus()
    agent = agent_with(runtime, runtime.vision, bus, encode_cost=SessionClock(
        replay_costs=[], replay_encode_ms=[150.0]).frame_encode_ms)
    try:
        agent.push_frame(frame_at(6, read_ms=0.0))
        agent.step(10.0)  # the encoder is fast here; the recorded run's was not
        assert [e.payload["reason"] for e in bus.of_kind("frame_dropped")] == ["encoded_late"]
    finally:
        agent.close()


def test_frame_line_none_needs_image_tokens():
    with pytest.raises(Exception, match="frame_line none"):
        Runtime.build(tiny_loaded(), RunConfig(engine={"frame_line": "none", "frame_source": "pixels"}), BUTTONS,
                      scenario="defend_the_center")


@pytest.mark.parametrize("model,frame_line", [("tiny:smolvlm", None), ("tiny:llava", "none")])
def test_a_vision_language_episode_plays_decodes_beside_image_prefills_and_reruns(tmp_path, model, frame_line):
    """`episode --model tiny:smolvlm --frame-source pixels`: the Thinker and the action stream decode in the same
    forwards as image blocks are prefilled; the recording names the model and re-runs identically."""
    args = ["episode", "--model", model, "--frame-source", "pixels", "--max-tics", "120", "--out", tmp_path,
            "--json", "--threads", "1", "--fixed-cost"]  # the same steps however loaded the machine is
    if frame_line is not None:
        config = tmp_path / "config.yaml"
        config.write_text(f"engine:\n  frame_line: {frame_line}\n")
        args += ["--config", config]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert 120 <= result["tics"] <= 128  # the bound, plus what the last action's hold runs past it
    assert result["model"] == model and result["frames_prefilled"] > 50
    directory = Path(result["recording"])
    events = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    images = [e["payload"]["image_tokens"] for e in events if e["kind"] == "frame_prefilled"]
    assert len(images) == result["frames_prefilled"] and set(images) == {16}
    batches = [{role for role, _ in e["payload"]["batch"]} for e in events if e["kind"] == "engine_step"]
    for decoder in ("thinker", "action"):  # the Thinker sits out decision steps (engine.think_while_deciding)
        assert sum({"frame", decoder} <= roles for roles in batches) >= 5, f"{decoder} never beside an image prefill"
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["model_id"] == model and manifest["extra"]["frame_source"] == "pixels"
    again = run_cli("replay", directory, "--rerun", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["check"]["ok"] and report["rerun"]["same_actions"] and report["rerun"]["same_frames"]
    assert report["rerun"]["n_actions"] >= 10
