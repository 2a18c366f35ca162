"""The action stream chooses a hold count with its command and decides again when that hold ends (cadence "hold"),
as the lag-aware expert plays; "frame" decides on every new frame; it reads none of its own past decisions unless
told (action_log_in_view), so it cannot learn to copy itself. Tiny random model, real ViZDoom, fixed cost."""

from __future__ import annotations

import pytest

from agent_runtime.control.action_grammar import ActionGrammar, CommandScorer
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.generation import SessionGeneration
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.sync_world import TimedFrame
from envs.doom_env import DoomEnv
from tests.engine_rig import make_agent, make_runtime, tiny_loaded



def _emitted(bus: EventBus) -> list[tuple[str, int, int]]:
    """(command name, hold tics, frame tic) of every decision."""
    out = []
    for e in bus.of_kind("action_emitted"):
        name, tics = e.payload["command"].split(" ")
        out.append((name, int(tics), e.payload["frame_tic"]))
    return out


@pytest.mark.parametrize("count_text,sep", [("joined", ""), ("spaced", " ")])
def test_with_hold_counts_every_command_is_a_candidate_at_every_hold_and_the_scorer_returns_its_hold(count_text, sep):
    tok = tiny_loaded().tokenizer
    buttons = ("ATTACK", "TURN_LEFT", "TURN_RIGHT")
    grammar = ActionGrammar(buttons, tok, hold_counts=True, count_text=count_text)
    pairs = grammar.candidates(tok)
    assert sorted(c.text for c, _ in pairs) == sorted(f"{n} {k}" for n in (*buttons, "NOOP") for k in range(1, 9))
    for command, tokens in pairs:  # " left3": the word, then the count, as the action log says it
        assert tok.decode(tokens) == f" {command.word}{sep}{command.tics}"
    words_only = ActionGrammar(buttons, tok, default_tics=4).candidates(tok)
    assert [c.text for c, _ in words_only] == ["ATTACK 4", "TURN_LEFT 4", "TURN_RIGHT 4", "NOOP 4"]

    import torch
    scorer = CommandScorer(grammar, tok)
    assert len(scorer.branches) == 4  # one branch per word (" left", and " " when spaced): its rows score the counts
    prefix = tok.encode(f" right{sep}", add_special_tokens=False)
    assert all(len(b) == len(prefix) for b in scorer.branches) and len(prefix) == (1 if count_text == "joined" else 2)
    vocab = tiny_loaded().config.vocab_size
    prompt = torch.full((1, vocab), -10.0)
    prompt[0, tok.encode(" right", add_special_tokens=False)[0]] = 5.0
    branches = [torch.zeros((len(prefix), vocab)) for _ in scorer.branches]
    right = scorer.branches.index(prefix)
    branches[right][-1, tok.encode("7", add_special_tokens=False)[0]] = 9.0
    command, fed = scorer.best(prompt[0], branches)
    assert command.text == "TURN_RIGHT 7" and tok.decode(fed) == f" right{sep}7"


@pytest.mark.parametrize("cadence", ["hold", "frame"])
def test_hold_cadence_decides_when_the_hold_ends_frame_cadence_on_every_new_frame(cadence):
    with DoomEnv("defend_the_center", seed=3) as env:
        # spaced counts: the random tiny model's rows after a joined word happen to put one count first everywhere
        runtime = make_runtime(env, max_action_age_ms=1000.0,
                               engine={"decision_cadence": cadence, "hold_count_text": "spaced"})
        bus = EventBus()
        result = run_llm_episode(env, runtime, max_tics=300, fixed_cost=FixedCost(), bus=bus)
    decisions = _emitted(bus)
    assert len(decisions) > 20 and result["decisions"] == len(decisions)
    holds = {tics for _, tics, _ in decisions}
    assert holds <= set(range(1, 9)) and holds != {4}  # the model chose the holds, not the default
    gaps = [(b[2] - a[2], a[1]) for a, b in zip(decisions, decisions[1:])]
    if cadence == "hold":  # never decided on a frame before the previous hold's end tic
        assert all(gap >= tics for gap, tics in gaps), gaps
    else:  # decided on new frames while holds were still running
        assert sum(gap < tics for gap, tics in gaps) > len(gaps) // 4, gaps


def test_an_interruption_lets_the_next_frame_decide_even_mid_hold():
    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env)
        generation = SessionGeneration()
        agent = make_agent(runtime, env.scenario, generation, think=False)
        try:
            frame = env.new_episode()
            agent.push_frame(TimedFrame(frame, 0.0))
            (first,) = agent.step(0.0).actions
            for tic in range(1, first.command.tics):  # frames inside the hold: no decision
                env.advance(1)
                agent.push_frame(TimedFrame(env.read_frame(), tic * 28.6))
                assert agent.step(tic * 28.6).actions == []
            agent.push_user_text("what do you see", 200.0)
            env.advance(1)
            agent.push_frame(TimedFrame(env.read_frame(), 210.0))
            actions = [a for i in range(4) for a in agent.step(210.0 + i).actions]
            assert actions and actions[0].generation == generation.current
        finally:
            agent.close()


def _count(tokens: list[int], part: list[int]) -> int:
    return sum(tokens[i:i + len(part)] == part for i in range(len(tokens) - len(part) + 1))


@pytest.mark.parametrize("log", [0, 1, 2, None])
def test_the_action_view_reads_as_many_of_its_past_decisions_as_configured(log):
    from agent_runtime.engine.prompts import ACTION_PROMPT

    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0, engine={"action_log_in_view": log})
        views: list[list[int]] = []
        result = run_llm_episode(env, runtime, max_tics=300, fixed_cost=FixedCost(),
                                 on_decision=lambda tokens, frame, command, spans, blocks: views.append(tokens))
    prompt = runtime.tokenizer.encode(ACTION_PROMPT, add_special_tokens=False)
    seen = [_count(tokens, prompt) for tokens in views]  # its own prompt, plus one per past decision in view
    assert len(views) == result["decisions"] > 20
    if log is None:  # the whole log: up to 16 decisions (two blocks of 8)
        assert max(seen) > 8 and seen[:5] == [1, 2, 3, 4, 5]
    else:
        assert seen[log + 1:] == [log + 1] * (len(seen) - log - 1) and seen[:log + 1] == list(range(1, log + 2))


@pytest.mark.parametrize("cadence", ["hold", "frame"])
def test_the_previous_command_sits_whole_after_its_own_prompt_even_when_the_next_decision_comes_at_once(cadence):
    """Cadence "frame" decides on every step, so a command's tokens cannot wait for an idle step to be fed: they
    must still land after their own prompt in the action log, not at the head of the next decision's block (where
    the view would read them as part of the newest frame line)."""
    from agent_runtime.engine.prompts import ACTION_PROMPT

    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0,
                               engine={"decision_cadence": cadence, "action_log_in_view": 1})  # the log read
        scorer = CommandScorer(runtime.grammar, runtime.tokenizer)
        seen: list[tuple[list[int], object]] = []
        run_llm_episode(env, runtime, max_tics=200, fixed_cost=FixedCost(),
                        on_decision=lambda tokens, frame, command, spans, blocks: seen.append((tokens, command)))
    prompt = runtime.tokenizer.encode(ACTION_PROMPT, add_special_tokens=False)
    assert len(seen) > 20
    for (_, previous), (tokens, _) in zip(seen, seen[1:]):
        logged = prompt + scorer.tokens_for(previous)
        assert _count(tokens, logged) >= 1, runtime.tokenizer.decode(tokens[-40:])
        assert _count(tokens, prompt) == 2  # the previous decision's, and its own at the very end
        assert tokens[-len(prompt):] == prompt and _count(tokens[-len(logged) - 8:], logged) == 0


@pytest.mark.parametrize("frames", [1, 3, None])
def test_the_action_view_reads_the_newest_frames_it_is_told_and_the_thinker_all_the_views_hold(frames):
    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env, frames_in_view=4, engine={"action_frames_in_view": frames})
        agent = make_agent(runtime, env.scenario)
        try:
            frame = env.new_episode()
            for tic in range(6):
                agent.push_frame(TimedFrame(frame, tic * 28.6))
                agent.step(tic * 28.6)
                env.advance(1)
                frame = env.read_frame()
            held = agent.sections["frames"]
            in_action = [b for b in agent.action.view.blocks if any(b is h for h in held)]
            in_thinker = [b for b in agent.thinker.view.blocks if any(b is h for h in held)]
        finally:
            agent.close()
    assert len(held) == 4 and in_thinker == held
    assert in_action == held[-(frames or 4):]  # the newest, in order
