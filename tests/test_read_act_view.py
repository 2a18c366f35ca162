"""The read-act cut of a collected decision: the tokens the no_think agent reads for the same frame (system prompt,
status, frame line, action prompt), so its own adapter trains the same way on the same episodes without thoughts;
and which adapter the no_think baseline plays with."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.engine.prompts import ACTION_PROMPT, encode, system_prompt
from agent_runtime.engine.streams.frames import frame_line, status_line
from agent_runtime.errors import UserError
from agent_runtime.model import adapters
from agent_runtime.model.adapters import resolve_no_think_adapter
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.training.read_act_view import read_act_view
from envs.doom_env import DoomEnv
from tests.engine_rig import make_runtime


def test_the_cut_keeps_system_newest_status_newest_frame_and_the_prompt_with_their_isolation():
    blocks = [["system", 3], ["thought", 2], ["status", 1], ["status", 2], ["frame7", 2], ["frame9", 3],
              ["actions", 4]]
    tokens = list(range(17))
    isolated = [[0, 3], [3, 5], [5, 6], [6, 8], [8, 10], [10, 13]]
    out, spans = read_act_view(tokens, isolated, blocks, prompt_length=2)
    assert out == [0, 1, 2] + [6, 7] + [10, 11, 12] + [15, 16]
    assert spans == [[0, 3], [3, 5], [5, 8]]  # the prompt attends to all of them; the blocks only to themselves
    assert read_act_view(tokens, None, blocks, 2) == (out, None)  # data from before isolated spans were kept


def test_a_decision_without_its_block_layout_is_one_clear_error():
    with pytest.raises(UserError, match="collect it again"):
        read_act_view([1, 2, 3], [], None, 1)
    with pytest.raises(UserError, match="damaged"):
        read_act_view([1, 2, 3], [], [["system", 2]], 1)


def test_a_collected_decision_cut_is_what_the_no_think_agent_reads_for_its_frame():
    """Oracle: the no_think agent's own texts (system prompt, status line, frame line, action prompt) for the very
    frame each decision was made on, while the multi-stream agent played with its Thinker writing."""
    seen = []
    with DoomEnv("defend_the_center", seed=4) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0)
        engine, tok = runtime.config.engine, runtime.tokenizer
        run_llm_episode(env, runtime, seed=4, max_tics=200, fixed_cost=FixedCost(),
                        on_decision=lambda tokens, timed, command, isolated, blocks: seen.append(
                            (tokens, timed, isolated, blocks)))
        system = encode(tok, system_prompt(env.scenario, runtime.grammar.describe()))
        prompt = encode(tok, ACTION_PROMPT)
        assert len(seen) > 5
        for tokens, timed, isolated, blocks in seen:
            expected = (system + encode(tok, status_line(timed.frame))
                        + encode(tok, frame_line(timed, engine.signed_bearings, engine.frame_line == "aimed"))
                        + prompt)
            cut, spans = read_act_view(tokens, isolated, blocks, len(prompt))
            assert cut == expected
            assert len(spans) == 3 and spans[-1][1] == len(expected) - len(prompt)
    thought = [len(tokens) - len(read_act_view(tokens, isolated, blocks, len(prompt))[0])
               for tokens, _, isolated, blocks in seen if any(label == "thought" for label, _ in blocks)]
    assert thought and min(thought) > 0  # the Thinker's paragraphs were in view, and cut out


def _adapter_dir(path: Path) -> str:
    path.mkdir(parents=True)
    (path / "manifest.json").write_text("{}")
    return str(path)


def test_the_no_think_baseline_plays_the_shipped_twin_when_there_is_one(tmp_path, monkeypatch):
    shipped = _adapter_dir(tmp_path / "smollm2-doom")
    monkeypatch.setattr(adapters, "SHIPPED_ADAPTER", Path(shipped))
    monkeypatch.setattr(adapters, "SHIPPED_BY_SCENARIO", {})
    scenario = "defend_the_center"
    assert resolve_no_think_adapter("default", "default", None, scenario) == shipped  # no twin: the agent's own
    twin = _adapter_dir(tmp_path / "smollm2-doom-read-act")
    assert resolve_no_think_adapter("default", "default", None, scenario) == twin
    mine = _adapter_dir(tmp_path / "mine")
    assert resolve_no_think_adapter("default", mine, None, scenario) == mine  # a chosen adapter has no twin
    assert resolve_no_think_adapter("default", "none", None, scenario) is None
    assert resolve_no_think_adapter("none", "default", None, scenario) is None
    assert resolve_no_think_adapter(mine, "default", None, scenario) == mine
    assert resolve_no_think_adapter("default", "default", "tiny:llama", scenario) is None  # other weights: none
