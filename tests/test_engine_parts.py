"""The engine's parts on their own, without ViZDoom: the scheduler's order and budgets, the sections and what they
retain, each stream's expire / schedule / postprocess on the tiny model with stand-in frames, and interruptions."""

from __future__ import annotations

import pytest
import torch

from agent_runtime.config import BudgetConfig, EngineConfig, RunConfig
from agent_runtime.control.action_executor import ActionExecutor
from agent_runtime.engine.block_sections import BlockSections
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.engine.multistream_agent import MultiStreamAgent
from agent_runtime.engine.scheduler import schedule
from agent_runtime.engine.streams.stream import StepPlan, Stream
from agent_runtime.engine.streams.text_in import MIN_PREFILL_CHUNK
from agent_runtime.engine.view import View
from agent_runtime.session.events import EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.runtime import Runtime
from agent_runtime.session.sync_world import TimedFrame
from agent_runtime.session.time_bounds import TimeBounds
from envs.frame import Frame, ObjectLabel
from tests.engine_rig import tiny_loaded

BUTTONS = ("TURN_LEFT", "TURN_RIGHT", "ATTACK")  # defend_the_center's


def stand_in_frame(tic: int, *, ammo: float = 26.0, imp_x: float | None = None) -> Frame:
    """A frame as DoomEnv reads it: the player at the origin facing east; an imp at (imp_x, 0) when given."""
    labels = () if imp_x is None else (ObjectLabel(1, "DoomImp", "Monster", (70, 50, 20, 30), imp_x, 0.0),)
    return Frame(tic=tic, t_read=0.0, screen=None, labels=labels, episode=0,
                 variables={"HEALTH": 100.0, "AMMO2": ammo, "POSITION_X": 0.0, "POSITION_Y": 0.0, "ANGLE": 0.0})


def timed(tic: int, read_ms: float | None = None, **frame) -> TimedFrame:
    return TimedFrame(stand_in_frame(tic, **frame), tic * 28.6 if read_ms is None else read_ms)


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    config = RunConfig(kv={"capacity_tokens": 4096, "page_size": 16})
    return Runtime.build(tiny_loaded(), config, BUTTONS, scenario="defend_the_center")


def agent_for(runtime: Runtime, generation=None, *, bus=None, commentary=False, budgets=None, **engine):
    return MultiStreamAgent(runtime.runner, runtime.tokenizer, runtime.grammar, generation or SessionGeneration(),
                            engine=EngineConfig(**engine), budgets=budgets or BudgetConfig(),
                            scenario="defend_the_center", commentary=commentary, bus=bus)


def roles(outcome) -> list[str]:
    return [role for role, _ in outcome.batch]


# --- the scheduler ---------------------------------------------------------------------------------------------

class Recorder(Stream):
    """A stand-in stream that logs the calls it gets and spends `tokens` of the budget when it schedules."""

    def __init__(self, name, log, tokens=0):
        self.role, self.log, self.tokens = name, log, tokens

    def expire(self, now_ms):
        self.log.append(("expire", self.role))

    def schedule(self, plan):
        self.log.append(("schedule", self.role, plan.budget))
        plan.budget -= self.tokens


def test_the_scheduler_expires_every_stream_before_any_schedules_and_keeps_their_order():
    log = []
    streams = [Recorder("frame", log, 30), Recorder("user", log, 50), Recorder("action", log)]
    plan = schedule(5.0, 3, 96, streams)
    assert log == [("expire", "frame"), ("expire", "user"), ("expire", "action"),
                   ("schedule", "frame", 96), ("schedule", "user", 66), ("schedule", "action", 16)]
    assert (plan.now_ms, plan.generation, plan.budget) == (5.0, 3, 16)


def test_a_step_puts_the_frame_first_then_text_in_chunks_within_the_budget_then_the_decoders(runtime):
    agent = agent_for(runtime, prefill_tokens_per_step=20, think_while_deciding=True)
    try:
        agent.push_frame(timed(1))
        agent.push_user_text("the imps come from the left side of the room " * 6, 0.0)
        first = agent.step(30.0)
        assert roles(first)[:2] == ["status", "frame"]  # reactions start at the frame, whatever the budget
        frame_tokens = sum(n for role, n in first.batch if role in ("status", "frame"))
        user_tokens = sum(n for role, n in first.batch if role == "user")
        assert 12 < frame_tokens < 20 and user_tokens == MIN_PREFILL_CHUNK  # little budget left: a minimum chunk
        assert roles(first).index("user") < roles(first).index("action") < roles(first).index("thinker")
        second = agent.step(60.0)
        assert "frame" not in roles(second)  # no new frame: the whole budget goes to the text
        assert sum(n for role, n in second.batch if role == "user") == 20
    finally:
        agent.close()


# --- the sections ----------------------------------------------------------------------------------------------

def test_a_section_keeps_its_cap_and_its_followers_read_their_selection(runtime):
    store = KVBlockStore.for_model(runtime.loaded.config, capacity_tokens=512, page_size=16)
    sections = BlockSections(store, {"system": 1, "user": 2, "commentary": 1, "thoughts": 3, "actions": 1,
                                     "status": 1, "frames": 2})
    everything, newest = View(store, name="everything"), View(store, name="newest")
    sections.follow(everything, [("system", None), ("thoughts", None), ("frames", None)])
    sections.follow(newest, [("thoughts", 1), ("frames", 1)])
    system = store.create("system")
    sections.add("system", system)
    thoughts = [store.create(f"t{i}") for i in range(4)]
    for block in thoughts:
        sections.add("thoughts", block)
    assert sections["thoughts"] == thoughts[1:]  # past the cap of 3 the oldest left ...
    assert thoughts[0].freed  # ... and, held by no view, was freed
    assert everything.blocks == [system, *thoughts[1:]] and newest.blocks == [thoughts[3]]
    assert thoughts[1].refcount == 2  # the section's hold and the one view that reads it
    frame = store.create("frame")
    sections.add("frames", frame)
    assert everything.blocks[-1] is frame and newest.blocks == [thoughts[3], frame]
    assert sections.drop_oldest("frames") is frame and frame.freed  # gone from every view: freed
    assert everything.blocks == [system, *thoughts[1:]] and newest.blocks == [thoughts[3]]
    sections["thoughts"].clear()  # a copy: nothing outside the sections changes them
    assert len(sections["thoughts"]) == 3
    everything.close()
    newest.close()
    sections.release_all()
    assert not store.blocks and store.used_pages == 0


# --- the frame stream ------------------------------------------------------------------------------------------

def test_only_the_newest_fresh_frame_is_prefilled_and_old_frames_leave_the_views(runtime):
    bus = EventBus()
    agent = agent_for(runtime, bus=bus, budgets=BudgetConfig(max_frame_age_ms=100.0, frames_in_view=2), think=False)
    try:
        for tic in (1, 2, 3):
            agent.push_frame(timed(tic, read_ms=float(tic)))
        agent.push_frame(timed(4, read_ms=-500.0))  # read long ago: stale
        agent.step(10.0)
        dropped = {(e.tic, e.payload["reason"]) for e in bus.of_kind("frame_dropped")}
        assert dropped == {(1, "superseded"), (2, "superseded"), (4, "stale")}
        assert [e.tic for e in bus.of_kind("frame_prefilled")] == [3]
        for tic in (5, 6):
            agent.push_frame(timed(tic, read_ms=10.0 + tic))
            agent.step(20.0 + tic)
        assert [t.frame.tic for t in agent.frames.in_view] == [5, 6]  # the section's cap of 2
        assert len(agent.sections["frames"]) == 2
        assert sum(1 for b in agent.action.view.blocks if b.label.startswith("frame")) == 1  # the newest only
        assert sum(1 for b in agent.thinker.view.blocks if b.label.startswith("frame")) == 2
        agent.step(200.0)  # older than 100 ms now: out of every view, freed
        assert not agent.frames.in_view and not agent.sections["frames"]
        assert not any(b.label.startswith("frame") for b in agent.thinker.view.blocks)
    finally:
        agent.close()


def test_the_thinker_keeps_its_own_longer_history_of_frames_past_the_age_bound(runtime):
    budgets = BudgetConfig(max_frame_age_ms=100.0, frames_in_view=2, thinker_frames_in_view=3)
    used_before = runtime.store.used_pages
    agent = agent_for(runtime, budgets=budgets, think=False)

    def frame_tics(view) -> list[int]:
        return [int(b.label.removeprefix("frame")) for b in view.blocks if b.label.startswith("frame")]

    try:
        for tic in (1, 2, 3, 4):
            agent.push_frame(timed(tic, read_ms=10.0 * tic))
            agent.step(10.0 * tic + 1)
        assert frame_tics(agent.thinker.view) == [2, 3, 4]  # its own cap of 3, oldest first
        assert frame_tics(agent.action.view) == [4] and len(agent.sections["frames"]) == 2
        agent.step(500.0)  # every frame past the 100 ms bound: out of the other views, still the Thinker's history
        assert not agent.sections["frames"] and not frame_tics(agent.action.view)
        assert frame_tics(agent.thinker.view) == [2, 3, 4]
        held = [b for b in agent.thinker.view.blocks if b.label.startswith("frame")]
        agent.new_episode()  # tics start over: the history goes too, and its blocks are freed
        assert not frame_tics(agent.thinker.view) and all(b.freed for b in held)
    finally:
        agent.close()
    plain = agent_for(runtime, budgets=BudgetConfig(max_frame_age_ms=100.0, frames_in_view=2), think=False)
    try:  # without it the Thinker reads the frames section, as before
        for tic in (1, 2, 3):
            plain.push_frame(timed(tic, read_ms=10.0 * tic))
            plain.step(10.0 * tic + 1)
        assert frame_tics(plain.thinker.view) == [2, 3] and not plain.sections["history"]
    finally:
        plain.close()
    assert runtime.store.used_pages == used_before  # every block either agent made was freed


def test_a_status_block_is_written_only_when_the_status_changes(runtime):
    agent = agent_for(runtime, think=False, decision_cadence="frame")
    try:
        batches = []
        for tic, ammo in ((1, 26.0), (2, 26.0), (3, 25.0)):
            agent.push_frame(timed(tic, ammo=ammo))
            batches.append(roles(agent.step(tic * 28.6 + 1)))
        assert [b.count("status") for b in batches] == [1, 0, 1]
        assert len(agent.sections["status"]) == 1  # the newest status only
    finally:
        agent.close()


# --- the action stream -----------------------------------------------------------------------------------------

def test_the_action_stream_decides_once_per_hold_and_again_when_it_ends(runtime):
    agent = agent_for(runtime, think=False, decision_cadence="hold")
    try:
        agent.push_frame(timed(1))
        (first,) = agent.step(30.0).actions
        assert first.frame_tic == 1 and first.command.tics >= 1
        end = 1 + first.command.tics
        for tic in range(2, end):
            agent.push_frame(timed(tic))
            assert agent.step(tic * 28.6 + 1).actions == []  # inside the hold: no decision
        agent.push_frame(timed(end))
        (second,) = agent.step(end * 28.6 + 1).actions
        assert second.frame_tic == end
    finally:
        agent.close()


def test_an_interruption_reaches_every_stream_once_and_lets_the_next_frame_decide_mid_hold(runtime, monkeypatch):
    generation = SessionGeneration()
    agent = agent_for(runtime, generation, think=True, decision_cadence="hold")
    heard = []
    for stream in agent.streams:
        monkeypatch.setattr(stream, "on_interruption",
                            lambda gen, now, s=stream, orig=stream.on_interruption: (heard.append((s.role, gen)),
                                                                                     orig(gen, now)))
    try:
        agent.push_frame(timed(1))
        (first,) = agent.step(30.0).actions
        generation.bump("barge_in")  # from another thread, say: the streams hear it at the next step
        assert heard == []
        agent.push_frame(timed(2))  # inside the hold, yet the interruption lets it decide
        (second,) = agent.step(60.0).actions
        agent.step(90.0)
        assert sorted(heard) == sorted((s.role, 1) for s in agent.streams)
        assert second.generation == 1 and first.generation == 0
        fenced = ActionExecutor(None, generation, TimeBounds(max_action_age_ms=1e9))
        assert not fenced.execute(first, 90.0) and fenced.stats.fenced_generation == 1  # stale generation: never run
    finally:
        agent.close()


def test_a_decision_being_decoded_is_abandoned_by_an_interruption(runtime):
    generation = SessionGeneration()
    agent = agent_for(runtime, generation, think=False, decision_mode="decode")
    try:
        agent.push_frame(timed(1))
        assert agent.step(30.0).actions == [] and agent.action.decoder is not None
        generation.bump("user_command")
        agent.step(31.0)
        assert agent.stats.decisions_abandoned == 1
    finally:
        agent.close()


# --- the Thinker and the commentary ----------------------------------------------------------------------------

def test_thought_paragraphs_join_the_thoughts_section_and_the_thinker_sits_out_decisions(runtime):
    agent = agent_for(runtime, think=True, think_while_deciding=False,
                      budgets=BudgetConfig(thinker_tokens_per_paragraph=4, thinker_paragraphs_in_view=2))
    try:
        agent.push_frame(timed(1))
        assert "thinker" not in roles(agent.step(30.0))  # a decision step: the Thinker waits
        for i in range(12):
            assert "thinker" in roles(agent.step(60.0 + i))
        assert agent.stats.thinker_paragraphs >= 3  # a paragraph ends at 4 tokens at the latest
        thoughts = agent.sections["thoughts"]
        assert len(thoughts) == 2 and all(b.sealed for b in thoughts)  # the newest 2 stay
        assert agent.action.view.blocks.count(thoughts[-1]) == 1 and thoughts[0] not in agent.action.view.blocks
    finally:
        agent.close()


def test_a_remark_stops_at_the_next_step_after_an_interruption_and_never_enters_history(runtime):
    generation = SessionGeneration()
    bus = EventBus()
    agent = agent_for(runtime, generation, bus=bus, commentary=True, think=False, commentary_interval_ms=0.0,
                      commentary_max_tokens=200, temperature=5.0)
    try:
        agent.push_frame(timed(1))
        agent.step(30.0)
        agent.step(31.0)
        assert agent.commentary.view is not None  # a remark is being decoded
        generation.bump("barge_in")
        agent.step(32.0)
        (stopped,) = bus.of_kind("commentary_stopped")
        assert stopped.payload["reason"] == "generation" and agent.stats.remarks_stopped == 1
        assert not agent.sections["commentary"]  # what was not heard is not history
        agent.commit_heard("two imps on the left")
        agent.step(40.0)
        (heard,) = agent.sections["commentary"]
        assert runtime.tokenizer.decode(heard.token_ids).endswith("two imps on the left")
    finally:
        agent.close()


def test_closing_the_agent_frees_every_block(runtime):
    agent = agent_for(runtime, think=True, commentary=True, commentary_interval_ms=0.0)
    for tic in range(1, 8):
        agent.push_frame(timed(tic))
        agent.step(tic * 28.6 + 1)
    agent.push_user_text("go left", 300.0)
    agent.step(301.0)
    assert runtime.store.blocks
    agent.close()
    assert not runtime.store.blocks and runtime.store.used_pages == 0


def test_the_engine_reads_its_options_from_the_config_it_is_given(runtime):
    cold = agent_for(runtime, temperature=1e-4, action_frames_in_view=None, frame_line="seen")
    try:
        assert cold.action.mode == "score" and cold.thinker.while_deciding is False  # EngineConfig's defaults
        assert cold.frames.aimed is False
        logits = torch.tensor([0.0, 3.0, 1.0])
        assert {cold.thinker.sample(logits) for _ in range(20)} == {1}  # temperature ~0: greedy
    finally:
        cold.close()
