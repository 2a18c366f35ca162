"""The multi-stream engine on a tiny random model, real ViZDoom and the fixed cost clock."""

from __future__ import annotations

import gc
import random

import psutil
import pytest
import torch

from agent_runtime.control.action_executor import Action, ActionExecutor
from agent_runtime.control.action_grammar import Command, CommandScorer
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.session.time_bounds import TimeBounds
from agent_runtime.session.sync_world import SyncWorld, TimedFrame
from agent_runtime.session.clocks import SessionClock
from agent_runtime.engine.view import View
from envs.doom_env import DoomEnv
from tests.engine_rig import ActRecorder, make_agent, make_runtime



@pytest.fixture
def env():
    with DoomEnv("defend_the_center", seed=3) as e:
        yield e


def test_frames_older_than_the_bound_are_dropped_never_prefilled(env):
    runtime = make_runtime(env, max_frame_age_ms=10.0)
    bus = EventBus()
    result = run_llm_episode(env, runtime, max_tics=150, fixed_cost=FixedCost(), bus=bus)
    prefilled = bus.of_kind("frame_prefilled")
    dropped = bus.of_kind("frame_dropped")
    assert prefilled and all(e.payload["age_ms"] <= 10.0 for e in prefilled)
    stale = [e for e in dropped if e.payload["reason"] == "stale"]
    assert stale and all(e.payload["age_ms"] > 10.0 for e in stale)
    assert result["frames_dropped"] == len(dropped)
    prefilled_tics = {e.tic for e in prefilled}
    assert not prefilled_tics & {e.tic for e in stale}


def test_actions_whose_frame_aged_past_the_bound_are_fenced_not_executed(env):
    recorder = ActRecorder(env)
    runtime = make_runtime(env, max_action_age_ms=15.0)  # every fixed-cost step takes longer than this
    result = run_llm_episode(env, runtime, max_tics=100, fixed_cost=FixedCost())
    assert result["decisions"] > 10
    assert result["actions_executed"] == 0 and result["actions_fenced"] == result["decisions"]
    assert recorder.calls == []  # nothing reached the game

    fresh = make_runtime(env, max_action_age_ms=1000.0)
    result = run_llm_episode(env, fresh, max_tics=100, fixed_cost=FixedCost())
    assert result["actions_fenced"] == 0 and result["actions_executed"] == result["decisions"]
    assert len(recorder.calls) > 0


def test_a_generation_bump_fences_every_in_flight_action():
    class World:
        tic = 0

        def hold(self, buttons, tics):
            raise AssertionError("a stale action reached the world")

    generation = SessionGeneration()
    executor = ActionExecutor(World(), generation, TimeBounds(max_action_age_ms=1e9))
    in_flight = [Action(Command("ATTACK", {"ATTACK": 1.0}, 4), generation.current, 10, 0.0, 0.0) for _ in range(5)]
    generation.bump("user_command")
    assert not any(executor.execute(a, 1.0) for a in in_flight)
    assert executor.stats.fenced_generation == 5 and executor.stats.executed == 0


def test_a_generation_bump_abandons_the_decision_in_progress(env):
    runtime = make_runtime(env)
    generation = SessionGeneration()
    agent = make_agent(runtime, env.scenario, generation, decision_mode="decode")
    try:
        agent.push_frame(TimedFrame(env.new_episode(), 0.0))
        first = agent.step(0.0)
        assert not first.actions and agent.action.decoder is not None  # a multi-step decision is under way
        agent.push_user_text("stop", 1.0)
        outcomes = [agent.step(1.0 + i) for i in range(6)]
        assert agent.stats.decisions_abandoned == 1
        emitted = [a for o in outcomes for a in o.actions]
        assert all(a.generation == generation.current for a in emitted)
    finally:
        agent.close()


@pytest.mark.parametrize("mode", ["score", "decode"])
def test_only_valid_commands_reach_the_env(env, mode):
    recorder = ActRecorder(env)
    runtime = make_runtime(env, max_action_age_ms=1000.0, engine={"decision_mode": mode})
    bus = EventBus()
    result = run_llm_episode(env, runtime, max_tics=120, fixed_cost=FixedCost(), bus=bus)
    valid = {c.text for c in runtime.grammar.commands} | {c.text for c, _ in runtime.grammar.candidates(runtime.loaded.tokenizer)}
    emitted = [e.payload["command"] for e in bus.of_kind("action_emitted")]
    assert result["actions_executed"] > 5 and set(emitted) <= valid
    assert recorder.calls
    for buttons, tics in recorder.calls:
        assert set(buttons) <= set(env.buttons) and all(v == 1.0 for v in buttons.values()) and 1 <= tics <= 8


@pytest.mark.parametrize("cadence", ["frame", "hold"])
def test_thinker_and_action_stream_decode_in_the_same_forward(env, cadence):
    runtime = make_runtime(env, engine={"decision_cadence": cadence, "think_while_deciding": True})
    bus = EventBus()
    before = runtime.runner.forwards
    result = run_llm_episode(env, runtime, max_tics=100, fixed_cost=FixedCost(), bus=bus)
    steps = bus.of_kind("engine_step")
    # one forward a step, plus the system prompt's prefill when the agent starts
    assert runtime.runner.forwards - before - 1 == len(steps) == result["engine_steps"]
    joint = [s for s in steps if {"thinker", "action"} <= {role for role, _ in s.payload["batch"]}]
    if cadence == "frame":  # a decision on every new frame: nearly every step
        assert len(joint) >= 0.9 * len(steps)
    else:  # a decision when its hold ends: each of them rides with a Thinker token
        assert result["decisions"] <= len(joint) < 0.9 * len(steps)
    assert result["joint_decode_steps"] == len(joint)
    assert result["thinker_tokens"] >= len(steps) - 1


@pytest.mark.parametrize("cadence", ["frame", "hold"])
def test_the_thinker_sits_out_a_deciding_step_but_never_two_in_a_row(env, cadence):
    runtime = make_runtime(env, engine={"decision_cadence": cadence, "think_while_deciding": False})
    bus = EventBus()
    result = run_llm_episode(env, runtime, max_tics=150, fixed_cost=FixedCost(), bus=bus)
    roles = [{role for role, _ in s.payload["batch"]} for s in bus.of_kind("engine_step")][1:]  # after the prompt
    deciding = [any(r.startswith("branch") for r in step) for step in roles]
    thinking = ["thinker" in step for step in roles]
    assert sum(deciding) > 10
    assert all(a or b for a, b in zip(thinking, thinking[1:]))  # never two steps in a row without a thought token
    sat_out = [d and not t for d, t in zip(deciding, thinking)]
    assert not any(not d and not t for d, t in zip(deciding, thinking))  # only a deciding step is sat out
    if cadence == "frame":  # decisions on every step: every other one carries a thought token
        assert sum(sat_out) >= 0.4 * sum(deciding)
    else:  # decisions between holds: most of them ride alone
        assert sum(sat_out) >= 0.6 * sum(deciding)
    assert result["thinker_tokens"] == sum(thinking)


@pytest.mark.cpu_sensitive  # precision: `make test` runs it again on the other CPU paths
def test_one_forward_scoring_equals_feeding_each_command_token_by_token(env):
    runtime = make_runtime(env)
    runner, store, tok = runtime.runner, runtime.store, runtime.loaded.tokenizer
    rng = random.Random(0)
    context = store.create("ctx")
    runner.prefill(View(store, own=context), [rng.randrange(100, 40000) for _ in range(20)])
    prompt = tok.encode("\nAct:", add_special_tokens=False)
    scorer = CommandScorer(runtime.grammar, tok)
    candidates = scorer.candidates

    view = View(store, [context])
    view.start_own("act")
    out = runner.forward([StreamInput(view, prompt)] + scorer.branch_inputs(view)).logits
    one_forward = scorer.scores(out[0], out[1:])  # what the agent runs in "score" mode

    for i, (_, cand) in enumerate(candidates):
        ref_view = View(store, [context])
        ref_view.start_own("ref")
        logits = runner.forward([StreamInput(ref_view, prompt + cand[:-1], logits="all")]).logits[0]
        logits = logits.reshape(-1, logits.shape[-1])[len(prompt) - 1:]
        ref = float(sum(torch.log_softmax(logits[k], -1)[t] for k, t in enumerate(cand)))
        assert abs(ref - one_forward[i]) < 1e-4
        ref_view.close()


def test_a_typed_user_command_bumps_the_generation_and_reaches_the_env_as_the_right_action(env):
    recorder = ActRecorder(env)
    runtime = make_runtime(env, max_action_age_ms=1000.0)
    bus = EventBus()
    turn_left = Command("TURN_LEFT", {"TURN_LEFT": 1.0}, 6)
    run_llm_episode(env, runtime, max_tics=80, fixed_cost=FixedCost(), bus=bus,
                    user_script={5: ("turn left", turn_left)})
    (bump,) = bus.of_kind("generation_bump")
    executed = bus.of_kind("action_executed")
    user = [e for e in executed if e.stream == "user"]
    assert len(user) == 1 and user[0].payload["command"] == "TURN_LEFT 6" and user[0].generation == bump.generation
    assert any(buttons == {"TURN_LEFT": 1.0} for buttons, _ in recorder.calls)
    assert all(e.generation == bump.generation for e in executed if e.seq > bump.seq)


def test_pool_and_process_memory_stay_flat_over_a_long_run(env):
    runtime = make_runtime(env, capacity_tokens=2048)
    process = psutil.Process()
    samples = []

    def progress(report):
        gc.collect()
        samples.append((runtime.store.used_pages, len(runtime.store.blocks), process.memory_info().rss))

    frames = paragraphs = 0
    while frames < 600:  # consecutive episodes on one runtime (the player dies after a few hundred tics)
        result = run_llm_episode(env, runtime, max_tics=1000, fixed_cost=FixedCost(), progress=progress)
        frames += result["frames_prefilled"]
        paragraphs += result["thinker_paragraphs"]
    assert paragraphs >= 10
    pages = [p for p, _, _ in samples]
    blocks = [b for _, b, _ in samples]
    assert max(pages) <= runtime.store.num_pages and max(blocks) <= 20
    half = len(samples) // 2
    assert max(pages[half:]) <= max(pages[:half]) + 8  # bounded: no growth with episode length
    rss_growth_mb = (samples[-1][2] - samples[half // 2][2]) / 2**20
    assert rss_growth_mb < 40, f"process memory grew {rss_growth_mb:.1f} MB"
    assert runtime.store.used_pages == 0 and not runtime.store.blocks  # everything freed at the end


def test_a_long_user_text_is_prefilled_in_chunks_while_the_action_stream_keeps_deciding(env):
    runtime = make_runtime(env)
    tok = runtime.loaded.tokenizer
    generation = SessionGeneration()
    agent = make_agent(runtime, env.scenario, generation, prefill_tokens_per_step=48, decision_cadence="frame")
    world = SyncWorld(env, SessionClock(FixedCost()))
    text = " ".join(["enemies keep coming from the left side of the room"] * 12)
    try:
        agent.push_frame(TimedFrame(env.new_episode(), 0.0))
        agent.push_user_text(text, 0.0)
        user_tokens, batches = 0, []
        for i in range(8):
            outcome = agent.step(i * 80.0)
            batches.append(outcome.batch)
            user_tokens += sum(n for role, n in outcome.batch if role == "user")
            for timed in world.advance_ms(80.0):
                agent.push_frame(timed)
        chunked = [b for b in batches if any(role == "user" for role, _ in b)]
        assert len(chunked) >= 3  # spread over several steps, never one long stall
        assert all(any(role == "action" for role, _ in b) for b in chunked)
        assert all(sum(n for role, n in b if role in ("frame", "user")) <= 48 + 60 for b in chunked)
        (block,) = agent.sections["user"]
        assert block.token_ids == tok.encode("\nUser: " + text, add_special_tokens=False) and user_tokens == block.length
        assert block in agent.thinker.view.blocks and block in agent.action.view.blocks
    finally:
        agent.close()
    assert runtime.store.used_pages == 0


def test_idle_steps_of_one_tic_release_exactly_one_tic_each():
    """Session time adds up in floats: 12 idle steps of MS_PER_TIC from 0 summed to a hair under 12 tics, so one step
    released no tic and a later one two (a player then decided a tic late)."""
    from agent_runtime.session.clocks import MS_PER_TIC

    clock = SessionClock()
    assert [clock.charge(MS_PER_TIC) for _ in range(400)] == [1] * 400
    assert clock.charge(MS_PER_TIC / 2) == 0 and clock.charge(MS_PER_TIC / 2) == 1
