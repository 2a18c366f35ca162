"""`agent-runtime collect`: DAgger data from real play (tiny model, real ViZDoom), labelled by the expert,
append-only and resumable after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_runtime.errors import UserError
from agent_runtime.model.model_loader import load_tokenizer
from agent_runtime.engine.prompts import ACTION_PROMPT, FRAME_PREFIX
from agent_runtime.training.decision_log import DECISIONS, EPISODES, NOTES, complete_bytes, parse_decisions
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parent.parent
BUTTONS = {"ATTACK", "TURN_LEFT", "TURN_RIGHT", "NOOP"}


def read_decisions(directory) -> list[dict]:
    """The decisions of a data set's complete episodes (what `train` reads)."""
    return parse_decisions(complete_bytes(directory))


def collect(out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--out", str(out), *args,
                   cwd=REPO)


def test_decisions_hold_the_view_tokens_the_model_choice_and_the_expert_label(tmp_path):
    proc = collect(tmp_path / "d", "--episodes", "2", "--max-tics", "120")
    assert proc.returncode == 0, proc.stderr
    decisions = read_decisions(tmp_path / "d")
    episodes = [json.loads(line) for line in (tmp_path / "d" / EPISODES).read_text().splitlines()]
    assert [e["episode"] for e in episodes] == [0, 1] and [e["seed"] for e in episodes] == [0, 1]
    assert sum(e["decisions"] for e in episodes) == len(decisions) > 20  # one per hold (1-8 tics)
    tok = load_tokenizer()
    prompt = tok.encode(ACTION_PROMPT, add_special_tokens=False)
    assert all(d["tokens"][-len(prompt):] == prompt for d in decisions)  # the view as read at the decision
    for d in decisions:  # the blocks that attended only themselves: system prompt first, the frame line last
        spans = d["isolated"]
        assert spans[0][0] == 0 and spans == sorted(spans) and spans[-1][1] == len(d["tokens"]) - len(prompt)
        assert all(a < b <= c for (a, b), (c, _) in zip(spans, spans[1:] + [[len(d["tokens"]), 0]]))
        assert tok.decode(d["tokens"][spans[-1][0]:spans[-1][1]]).startswith(FRAME_PREFIX)
    assert {d["chosen"] for d in decisions} <= BUTTONS and {d["label"] for d in decisions} <= BUTTONS
    assert all(1 <= d["label_tics"] <= 8 for d in decisions)
    assert len({d["label"] for d in decisions}) >= 2  # the expert reacts to what it sees
    frame_tics = [d["frame_tic"] for d in decisions if d["episode"] == 0]
    assert frame_tics == sorted(frame_tics)
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["model_id"] == "tiny:llama" and manifest["cpu_path"]["cpu_path"]
    assert manifest["expert"] == "view_expert"  # the default labeller: what the view holds


def test_a_killed_run_resumes_without_losing_or_repeating_episodes(tmp_path):
    out = tmp_path / "d"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime.cli", "collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1",
         "--out", str(out), "--episodes", "4", "--max-tics", "200"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ((out / EPISODES).is_file() and (out / EPISODES).read_text()):
        time.sleep(0.05)
    time.sleep(0.3)  # well into the second episode
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = [json.loads(line) for line in (out / EPISODES).read_text().splitlines()]
    assert 1 <= len(done) < 4
    assert (out / DECISIONS).stat().st_size > done[-1]["decisions_bytes"]  # a partial episode was on disk
    kept, kept_notes = read_decisions(out), parse_decisions(complete_bytes(out, NOTES))

    again = collect(out, "--episodes", "4", "--max-tics", "200")
    assert again.returncode == 0, again.stderr
    assert f"resuming {out}: {len(done)} episode(s) already collected" in again.stderr
    episodes = [json.loads(line) for line in (out / EPISODES).read_text().splitlines()]
    assert [e["episode"] for e in episodes] == [0, 1, 2, 3]
    decisions = read_decisions(out)
    assert decisions[: len(kept)] == kept  # finished episodes untouched
    assert [d["episode"] for d in decisions] == sorted(d["episode"] for d in decisions)
    assert sum(e["decisions"] for e in episodes) == len(decisions)
    notes = parse_decisions(complete_bytes(out, NOTES))  # the Thinker's notes resume alike
    assert kept_notes and notes[: len(kept_notes)] == kept_notes
    assert [n["episode"] for n in notes] == sorted(n["episode"] for n in notes)
    assert sum(e["notes"] for e in episodes) == len(notes)


def test_resuming_with_another_model_is_refused(tmp_path):
    assert collect(tmp_path / "d", "--episodes", "1", "--max-tics", "30").returncode == 0
    proc = run_cli("collect", "--model", "tiny:qwen2", "--fixed-cost", "--out", str(tmp_path / "d"), "--episodes", "2",
                   "--max-tics", "30", cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "model_id 'tiny:llama', not 'tiny:qwen2'" in proc.stderr


def test_reading_a_directory_that_is_no_data_set_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="not a data set"):
        read_decisions(tmp_path)


class _Rows:
    """An in-memory decision log."""

    def __init__(self):
        self.decisions = []

    def add(self, decision) -> None:
        self.decisions.append(decision)


def _contains(tokens: list[int], part: list[int]) -> bool:
    return any(tokens[i:i + len(part)] == part for i in range(len(tokens) - len(part) + 1))


@pytest.mark.parametrize("expert_acts", [1.0, 0.0])
def test_the_dagger_mix_executes_and_logs_the_experts_command_or_the_models(expert_acts):
    """--expert-acts 1: every decision executes the expert's command (hold included), and the action log says what
    was done (the next view reads it); 0: the model's commands, the expert labels."""
    from agent_runtime.control.action_grammar import CommandScorer
    from agent_runtime.session.clocks import FixedCost
    from agent_runtime.session.events import EventBus
    from agent_runtime.session.llm_episode import run_llm_episode
    from agent_runtime.engine.prompts import ACTION_PROMPT
    from agent_runtime.training.expert_labeler import ExpertLabeler
    from envs.doom_env import DoomEnv
    from tests.engine_rig import make_runtime

    with DoomEnv("defend_the_center", seed=3) as env:
        runtime = make_runtime(env, max_action_age_ms=1000.0, engine={"action_log_in_view": None})
        rows = _Rows()
        labeler = ExpertLabeler(env.buttons, rows, words=runtime.grammar.words, expert_acts=expert_acts)
        bus = EventBus()
        bus.sinks.append(labeler)
        labeler.start_episode(0, seed=3)
        result = run_llm_episode(env, runtime, seed=3, max_tics=400, fixed_cost=FixedCost(), bus=bus,
                                 on_decision=labeler.on_decision)
    emitted = [e.payload["command"] for e in bus.of_kind("action_emitted")]
    assert len(emitted) == len(rows.decisions) > 20
    experts = [f"{d.label} {d.label_tics}" for d in rows.decisions]
    if expert_acts:
        assert emitted == experts and labeler.expert_acted == len(emitted)
        assert result["kills"] >= 3  # the expert's play, through the runtime's own action stream
        scorer = CommandScorer(runtime.grammar, runtime.tokenizer)
        by_text = {c.text: c for c, _ in scorer.candidates}
        prompt = runtime.tokenizer.encode(ACTION_PROMPT, add_special_tokens=False)
        for text, later in zip(emitted, rows.decisions[1:]):
            done = scorer.tokens_for(by_text[text])  # right after its prompt, or (a new block) opening the next row
            assert _contains(later.tokens, prompt + done) or later.tokens[-len(done + prompt):] == done + prompt, text
    else:
        assert [c.split(" ")[0] for c in emitted] == [d.chosen for d in rows.decisions]
        assert labeler.expert_acted == 0 and emitted != experts
