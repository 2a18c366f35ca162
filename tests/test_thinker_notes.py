"""The Thinker's notes as data: the planner labels each paragraph from the Thinker's view and may write it into the
view (collect), training reads the note after the view under the engine's block masks (train), and the action
stream's labeller reads the note the action view holds."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import torch

from agent_runtime.engine.model_runner import StreamInput
from agent_runtime.engine.prompts import ACTION_PROMPT, THOUGHT_PROMPT
from agent_runtime.model.model_loader import load_model, load_tokenizer
from agent_runtime.thinking.vocabulary import parse_claims
from agent_runtime.training.decision_log import NOTES, complete_bytes, parse_decisions
from agent_runtime.policies.view_expert import ViewExpert
from agent_runtime.training.lora_trainer import TrainSettings, with_adapters
from agent_runtime.training.note_scores import NoteTarget, evaluate_notes, note_logits, note_loss
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import EventBus
from agent_runtime.session.llm_episode import run_llm_episode
from envs.doom_env import DoomEnv
from envs.observation_text import parse_seen
from tests.cli_runner import run_cli
from tests.engine_rig import make_runtime, prefilled_view
from tests.test_expert_policy import TURNERS, frame_with_monster
from tests.test_training import _spans

REPO = Path(__file__).resolve().parent.parent


def _engine_note_logits(loaded, blocks, prompt: list[int], target: list[int]) -> torch.Tensor:
    """The Thinker's logits as the engine decodes a forced note: blocks prefilled as the engine does (isolated ones on
    a view of their own), then the prompt, then each note token fed one step at a time."""
    runner, view = prefilled_view(loaded, blocks, "thought")
    rows = [runner.forward([StreamInput(view, prompt)]).logits[0]]
    for token in target[:-1]:
        rows.append(runner.forward([StreamInput(view, [token])]).logits[0])
    return torch.stack([r.reshape(-1) for r in rows]).float()


def test_note_training_logits_equal_the_engines_as_it_writes_the_note():
    engine_model = load_model("tiny:llama", dtype="float32", seed=3)
    plain = load_model("tiny:llama", dtype="float32", seed=3, tokenizer=False).model
    rng = random.Random(5)
    words = lambda n: [rng.randrange(100, 40000) for _ in range(n)]  # noqa: E731
    system, prompt = words(30), words(3)
    layouts = [[(system, True), (words(7), True), (words(5), True)],
               [(system, True), (words(9), False), (words(4), True), (words(11), True)]]
    targets = [words(6), words(3)]  # unequal lengths: left padding and the kept positions differ per row
    examples = [NoteTarget([t for tokens, _ in b for t in tokens], prompt, target, ("synthetic", i), _spans(b))
                for i, (b, target) in enumerate(zip(layouts, targets))]
    with torch.no_grad():
        masked = note_logits(plain, examples)
        causal = note_logits(plain, [replace(e, isolated=None) for e in examples])
    for rows, plain_rows, blocks, target in zip(masked, causal, layouts, targets):
        engine = _engine_note_logits(engine_model, blocks, prompt, target)
        assert rows.shape == engine.shape == (len(target), engine.shape[1])
        assert torch.allclose(rows.float(), engine, atol=1e-4)
        assert (plain_rows.float() - engine).abs().max() > 1e-2  # without the masks: another model's numbers


def test_training_on_notes_learns_a_note_the_view_determines():
    """The note names the side a cue word in the view says: the trained adapter writes it token for token."""
    loaded = load_model("tiny:llama", dtype="float32", seed=1)
    tok = loaded.tokenizer
    prompt = tok.encode(THOUGHT_PROMPT, add_special_tokens=False)
    rng = random.Random(0)

    def example(i: int) -> NoteTarget:
        side = rng.choice(("left", "right"))
        noise = [rng.randrange(100, 40000) for _ in range(rng.randrange(3, 10))]
        view = noise + tok.encode(f"\nimp {side} 30 mid", add_special_tokens=False)
        return NoteTarget(view, prompt, tok.encode(f" 1 imp {side}, 14 rounds\n", add_special_tokens=False),
                          ("synthetic", i))

    train_set, test_set = [example(i) for i in range(160)], [example(1000 + i) for i in range(40)]
    model = with_adapters(loaded.model, TrainSettings(rank=8, layers_from=0))
    before = evaluate_notes(model, test_set)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for step in range(60):
        model.train()
        loss = note_loss(model, rng.sample(train_set, 8))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    after = evaluate_notes(model, test_set)
    assert sum(losses[-10:]) < sum(losses[:10]) - 5.0, losses  # (a tiny random model's logits stay flat-ish)
    assert before["exact"] < 0.1 and after["exact"] >= 0.9, (before, after)
    assert after["token_accuracy"] > before["token_accuracy"]


def test_the_view_expert_turns_toward_the_side_the_note_says_a_monster_was_lost():
    expert = ViewExpert(TURNERS, aimed=True)
    empty = replace(frame_with_monster(0.0), labels=())
    assert expert.command_for(empty, 0.0, note="nothing in view, lost imp behind left, 14 rounds") == ("TURN_LEFT", 8)
    assert expert.command_for(empty, 0.0, note="nothing in view, lost imp behind right, 14 rounds") == ("TURN_RIGHT", 8)
    assert expert.command_for(empty, 0.0, note="2022-08-08") == ("TURN_RIGHT", 8)  # noise: it scans as before
    seen = frame_with_monster(20.0)  # something in view: the note does not turn it away
    assert expert.command_for(seen, 0.0, note="lost imp behind right")[0] == "TURN_LEFT"


def test_an_episode_counts_its_notes_and_the_decisions_that_had_one_in_view():
    with DoomEnv("defend_the_center", seed=0) as env:
        runtime = make_runtime(env)
        tok = runtime.tokenizer
        note = tok.encode(" nothing in view, 26 rounds\n", add_special_tokens=False)
        forced_bus, plain_bus = EventBus(), EventBus()
        forced = run_llm_episode(env, runtime, max_tics=300, fixed_cost=FixedCost(), bus=forced_bus,
                                 on_paragraph=lambda view: list(note))
        plain = run_llm_episode(env, runtime, max_tics=300, fixed_cost=FixedCost(), bus=plain_bus)
    assert forced["notes"] == forced["thinker_paragraphs"] >= 5
    assert 0 < forced["decisions_with_note"] < forced["decisions"]  # the decisions before the first note had none
    assert plain["thinker_paragraphs"] >= 2 and plain["notes"] == plain["decisions_with_note"] == 0  # noise
    # each note is an event of its own, stamped with the newest frame's tic, and each decision says whether it had one
    notes, paragraphs = forced_bus.of_kind("thinker_note"), forced_bus.of_kind("thinker_paragraph")
    assert len(notes) == forced["notes"]
    assert all(n.payload["claims"] == ["nothing in view", "26 rounds"] and n.payload["noise"] == 0 for n in notes)
    assert [n.tic for n in notes] == [p.tic for p in paragraphs]
    tics = [p.tic for p in paragraphs]
    read = {e.tic for e in forced_bus.of_kind("frame_read")}
    assert None not in tics and tics == sorted(tics) and set(tics) <= read and len(set(tics)) > 1
    decided = forced_bus.of_kind("action_emitted")
    assert sum(e.payload["note_in_view"] for e in decided) == forced["decisions_with_note"]
    first_note = notes[0].seq
    assert not any(e.payload["note_in_view"] for e in decided if e.seq < first_note)
    assert all(e.payload["note_in_view"] for e in decided if e.seq > first_note)
    assert not plain_bus.of_kind("thinker_note")
    assert not any(e.payload["note_in_view"] for e in plain_bus.of_kind("action_emitted"))


def test_a_low_thinker_temperature_writes_the_same_thoughts_whatever_the_seed():
    """engine.thinker_temperature: the Thinker's own sampler; near 0 it writes the model's most likely tokens, so two
    agent seeds think alike; at the shared temperature they do not."""
    def paragraphs(env, runtime, seed: int) -> list[str]:
        bus = EventBus()
        run_llm_episode(env, runtime, max_tics=120, fixed_cost=FixedCost(), bus=bus, agent_seed=seed)
        return [e.payload["text"] for e in bus.of_kind("thinker_paragraph")]

    with DoomEnv("defend_the_center", seed=0) as env:
        greedy = make_runtime(env, engine={"thinker_temperature": 1e-4})
        shared = make_runtime(env)
        low = [paragraphs(env, greedy, seed) for seed in (1, 2)]
        warm = [paragraphs(env, shared, seed) for seed in (1, 2)]
    assert low[0] and low[0] == low[1]
    assert warm[0] and warm[0] != warm[1]


def _collect(out: Path, *args: str):
    return run_cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--out", str(out),
                   "--episodes", "1", "--max-tics", "150", *args, cwd=REPO)


def test_collect_stores_the_planners_note_for_each_thinker_view_and_writes_it_into_the_views(tmp_path):
    proc = _collect(tmp_path / "d")
    assert proc.returncode == 0, proc.stderr
    notes = parse_decisions(complete_bytes(tmp_path / "d", NOTES))
    tok = load_tokenizer()
    assert len(notes) >= 3 and all(n["written_by"] == "planner" for n in notes)
    thought = tok.encode(THOUGHT_PROMPT, add_special_tokens=False)
    for n in notes:
        assert n["prompt"] == thought and tok.decode(n["target"]) == f" {n['note']}\n"
        claims, noise = parse_claims(n["note"])
        assert claims and not noise
        newest = n["isolated"][-1]  # the view's last block is its newest frame line: the note says what it shows
        seen = parse_seen(tok.decode(n["tokens"][newest[0]:newest[1]]))
        said = sum(c.count for c in claims if c.kind == "seen")
        assert said == len(seen), (n["note"], seen)
    decisions = parse_decisions(complete_bytes(tmp_path / "d"))
    read = [tok.decode(d["tokens"]) for d in decisions]
    # the action view reads the newest note the planner wrote, after the Thinker's prompt
    assert sum(any(f"{THOUGHT_PROMPT} {n['note']}\n" in text for n in notes) for text in read) >= len(notes) - 1
    assert all(text.endswith(ACTION_PROMPT) for text in read)
    episode = json.loads((tmp_path / "d" / "episodes.jsonl").read_text())
    assert episode["notes"] == episode["notes_planner_wrote"] == len(notes)

    proc = _collect(tmp_path / "m", "--planner-writes", "0")  # the model writes: the planner's notes are labels only
    assert proc.returncode == 0, proc.stderr
    notes = parse_decisions(complete_bytes(tmp_path / "m", NOTES))
    assert notes and all(n["written_by"] == "model" for n in notes)
    read = " ".join(tok.decode(d["tokens"]) for d in parse_decisions(complete_bytes(tmp_path / "m")))
    assert not any(f"{THOUGHT_PROMPT} {n['note']}\n" in read for n in notes)
    assert _collect(tmp_path / "x", "--planner-writes", "1.5").returncode == 2
