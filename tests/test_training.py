"""Imitation training: the trained scores are the action stream's own, batches are class-balanced, LoRA learns a
learnable labelling, and `agent-runtime train` writes an adapter with its manifest from collected data."""

from __future__ import annotations

import json
import shutil
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import torch

from agent_runtime.control.action_grammar import ActionGrammar, CommandScorer
from agent_runtime.errors import UserError
from agent_runtime.engine.kv_block_store import KVBlockStore
from agent_runtime.model import adapters
from agent_runtime.model.model_loader import load_model
from agent_runtime.recording.rerun import rerun_recording
from agent_runtime.engine.model_runner import ModelRunner, StreamInput
from agent_runtime.training.command_scores import Candidates, candidate_scores
from agent_runtime.training.lora_trainer import Example, TrainSettings, balanced_batches, eval_sample, evaluate, train, with_adapters
from agent_runtime.engine.view import View
from tests.cli_runner import run_cli
from tests.engine_rig import prefilled_view

REPO = Path(__file__).resolve().parent.parent
# MOVE_LEFT/RIGHT say "step left"/"step right" beside TURN_LEFT/RIGHT: two-token commands with a shared branch
BUTTONS = ("MOVE_LEFT", "MOVE_RIGHT", "ATTACK", "TURN_LEFT", "TURN_RIGHT")


def _runtime_scores(loaded, views: list[list[int]], scorer: CommandScorer) -> torch.Tensor:
    """What the action stream computes: the view through the block runner, command branches in one forward."""
    out = []
    for tokens in views:
        store = KVBlockStore.for_model(loaded.config, capacity_tokens=1024, page_size=16)
        runner = ModelRunner(loaded, store)
        view = View(store, [])
        view.start_own("act")
        branches = scorer.branch_inputs(view)
        result = runner.forward([StreamInput(view, tokens)] + branches)
        out.append(scorer.scores(result.logits[0], result.logits[1:]))
    return torch.tensor(out)


@pytest.mark.parametrize("hold_counts,count_text", [(False, "joined"), (True, "joined"), (True, "spaced")])
def test_training_scores_equal_the_action_streams_scores_for_one_and_two_token_commands(hold_counts, count_text):
    """Without hold counts the candidates are one- and two-token words; with them every word at every hold."""
    runtime_model = load_model("tiny:llama", dtype="float32", seed=5)
    plain = load_model("tiny:llama", dtype="float32", seed=5, tokenizer=False).model
    tok = runtime_model.tokenizer
    grammar = ActionGrammar(BUTTONS, tok, hold_counts=hold_counts, count_text=count_text)
    candidates = Candidates.from_grammar(grammar, tok)
    lengths = {len(t) for t in candidates.tokens}
    spaced = count_text == "spaced"
    assert lengths == (({3, 4} if spaced else {2, 3}) if hold_counts else {1, 2})  # " left 3" / " left3"; " step left3"
    rng = random.Random(0)
    views = [[rng.randrange(100, 40000) for _ in range(n)] for n in (9, 23, 14)]  # padded to one width
    with torch.no_grad():
        trained = candidate_scores(plain, views, candidates, pad_id=tok.pad_token_id or 0)
    expected = _runtime_scores(runtime_model, views, CommandScorer(grammar, tok))
    assert trained.shape == (3, len(candidates.names))
    assert torch.allclose(trained, expected.float(), atol=1e-4)


def test_a_shared_system_prompt_is_run_once_with_the_same_scores_and_gradients(monkeypatch):
    """Views that start alike (the system prompt) share one pass over those tokens: the scores still equal the
    action stream's, and the adapters' gradients equal those of running every view whole."""
    from agent_runtime.training import command_scores

    loaded = load_model("tiny:llama", dtype="float32", seed=7)
    tok = loaded.tokenizer
    grammar = ActionGrammar(BUTTONS, tok)
    candidates = Candidates.from_grammar(grammar, tok)
    rng = random.Random(1)
    system = [rng.randrange(100, 40000) for _ in range(40)]
    views = [system + [rng.randrange(100, 40000) for _ in range(n)] for n in (5, 17, 11, 2)]
    assert command_scores.shared_prefix_length(views) == 40

    calls = []
    real_forward = loaded.model.forward
    monkeypatch.setattr(loaded.model, "forward", lambda *a, **k: calls.append(k["input_ids"].shape) or real_forward(*a, **k))
    with torch.no_grad():
        shared = candidate_scores(loaded.model, views, candidates, pad_id=0)
    assert calls[0] == (1, 40)  # the system prompt, once
    assert all(shape[1] < 40 for shape in calls[1:])  # the rest only the views' own tokens
    expected = _runtime_scores(loaded, views, CommandScorer(grammar, tok))
    assert torch.allclose(shared, expected.float(), atol=1e-4)

    model = with_adapters(load_model("tiny:llama", dtype="float32", seed=7, tokenizer=False).model,
                          TrainSettings(rank=4, layers_from=0))
    torch.manual_seed(0)
    for p in model.parameters():  # LoRA B starts at zero; give it values so every gradient path is live
        if p.requires_grad:
            p.data.normal_(0, 0.02)

    def grads() -> list[torch.Tensor]:
        model.zero_grad()
        labels = torch.tensor([0, 1, 2, 3])
        torch.nn.functional.cross_entropy(candidate_scores(model, views, candidates), labels).backward()
        return [p.grad.clone() for p in model.parameters() if p.requires_grad]

    with_sharing = grads()
    monkeypatch.setattr(command_scores, "MIN_SHARED", 10_000)
    whole = grads()
    assert len(whole) > 0 and all(w.abs().sum() > 0 for w in whole)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-3) for a, b in zip(with_sharing, whole))


def test_batches_are_balanced_across_labels_however_skewed_the_data():
    examples = [Example([1], 0, ("d", 0))] * 90 + [Example([2], 1, ("d", 0))] * 9 + [Example([3], 2, ("d", 0))]
    batches = balanced_batches(examples, 8, seed=0)
    counts = Counter(e.label for _ in range(300) for e in next(batches))
    assert all(700 <= counts[label] <= 900 for label in (0, 1, 2))


def test_an_expert_label_maps_to_its_exact_hold_and_batches_balance_commands_not_holds():
    tok = load_model("tiny:llama", dtype="float32", seed=1).tokenizer
    buttons = ("ATTACK", "TURN_LEFT", "TURN_RIGHT")
    counted = Candidates.from_grammar(ActionGrammar(buttons, tok, hold_counts=True), tok)
    words = Candidates.from_grammar(ActionGrammar(buttons, tok), tok)
    assert counted.texts[counted.index("TURN_LEFT", 3)] == "TURN_LEFT 3"
    assert words.texts[words.index("TURN_LEFT", 3)] == "TURN_LEFT 4"  # words alone: the command, held by default
    left = [Example([1], counted.index("TURN_LEFT", k), ("d", 0)) for k in range(1, 9) for _ in range(20)]
    fire = [Example([2], counted.index("ATTACK", 5), ("d", 0))] * 10
    batches = balanced_batches(left + fire, 8, seed=0, group=lambda e: counted.names[e.label])
    names = Counter(counted.names[e.label] for _ in range(300) for e in next(batches))
    assert 1100 <= names["ATTACK"] <= 1300 and 1100 <= names["TURN_LEFT"] <= 1300  # half each, not 1 in 9


def test_lora_learns_a_labelling_the_view_determines(tmp_path):
    """The label is the side a word in the view names: chance (1/3) before training, high after."""
    loaded = load_model("tiny:llama", dtype="float32", seed=1)
    tok = loaded.tokenizer
    candidates = Candidates.from_grammar(ActionGrammar(("ATTACK", "TURN_LEFT", "TURN_RIGHT"), tok), tok)
    cue = {"ATTACK": " ahead", "TURN_LEFT": " left", "TURN_RIGHT": " right"}
    rng = random.Random(0)

    def example(i: int) -> Example:
        label = rng.randrange(3)
        noise = [rng.randrange(100, 40000) for _ in range(rng.randrange(3, 12))]
        tokens = noise + tok.encode(cue[candidates.names[label]] + "\nAct:", add_special_tokens=False)
        return Example(tokens, label, ("synthetic", i))

    train_set, test_set = [example(i) for i in range(240)], [example(1000 + i) for i in range(60)]
    model = with_adapters(loaded.model, TrainSettings(rank=8, layers_from=0))
    before = evaluate(model, test_set, candidates)["accuracy"]
    history = train(model, train_set, test_set, candidates,
                    TrainSettings(steps=80, batch=8, lr=3e-3, rank=8, layers_from=0, eval_every=40, eval_examples=20))
    after = evaluate(model, test_set, candidates)
    assert before < 0.6 and after["accuracy"] >= 0.9
    # the curve's points along the way score a fixed sample of 20; the last, every held-out decision
    assert history.accuracies[-1] == after["accuracy"] and history.final == after and len(history.losses) == 80
    sample = eval_sample(test_set, 20, seed=0)
    assert len(sample) == 20 and sample == eval_sample(test_set, 20, seed=0) and eval_sample(test_set, 60, 0) == test_set
    assert sum(history.losses[-10:]) < sum(history.losses[:10])


def test_same_data_and_seed_give_the_same_adapter_and_another_seed_another():
    loaded = load_model("tiny:llama", dtype="float32", seed=1)
    tok = loaded.tokenizer
    candidates = Candidates.from_grammar(ActionGrammar(("ATTACK", "TURN_LEFT", "TURN_RIGHT"), tok), tok)
    rng = random.Random(3)
    system = [rng.randrange(100, 40000) for _ in range(20)]  # shared: the prefix pass takes part too
    data = [Example(system + [rng.randrange(100, 40000) for _ in range(rng.randrange(2, 9))], i % 3, ("d", i))
            for i in range(30)]

    def adapter(seed: int) -> list[torch.Tensor]:
        settings = TrainSettings(steps=6, batch=4, lr=1e-2, rank=4, layers_from=0, seed=seed, eval_every=100)
        model = with_adapters(load_model("tiny:llama", dtype="float32", seed=1, tokenizer=False).model, settings)
        train(model, data, [], candidates, settings)
        return [p.detach().clone() for p in model.parameters() if p.requires_grad]

    first, again, other = adapter(0), adapter(0), adapter(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=REPO)


def test_train_cli_writes_an_adapter_manifest_and_plot_from_collected_data(tmp_path):
    data = tmp_path / "data"
    proc = _cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--episodes", "3",
                "--max-tics", "90", "--out", str(data))
    assert proc.returncode == 0, proc.stderr
    adapter = tmp_path / "adapter"
    proc = _cli("train", "--data", str(data), "--out", str(adapter), "--steps", "12", "--threads", "1", "--held-out", "0.34")
    assert proc.returncode == 0, proc.stderr
    assert {"adapter_model.safetensors", "adapter_config.json", "manifest.json", "training.png"} <= {
        p.name for p in adapter.iterdir()}
    manifest = json.loads((adapter / "manifest.json").read_text())
    assert manifest["base_model_id"] == "tiny:llama" and len(manifest["data_hash"]) == 16
    assert manifest["settings"]["steps"] == 12 and len(manifest["history"]["losses"]) == 12
    assert 0.0 <= manifest["held_out"]["accuracy"] <= 1.0 and manifest["held_out"]["per_command"]
    assert manifest["train_decisions"] > manifest["held_out_decisions"] > 0 and manifest["views"] == "agent"
    assert not list(tmp_path.glob("adapter.tmp*"))

    # its read-act twin: the same episodes and split, each decision as the no_think agent reads it
    twin = tmp_path / "twin"
    proc = _cli("train", "--data", str(data), "--out", str(twin), "--steps", "3", "--threads", "1", "--held-out", "0.34",
                "--views", "read-act")
    assert proc.returncode == 0, proc.stderr
    twin_manifest = json.loads((twin / "manifest.json").read_text())
    assert twin_manifest["views"] == "read-act" and twin_manifest["data_hash"] == manifest["data_hash"]
    assert manifest["notes"]["train"] > 0 and twin_manifest["notes"]["train"] == 0  # no Thinker to write them
    proc = _cli("train", "--data", str(data), "--out", str(tmp_path / "commands"), "--steps", "1", "--threads", "1",
                "--held-out", "0.34", "--no-notes")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "commands" / "manifest.json").read_text())["notes"]["train"] == 0
    assert [twin_manifest[k] for k in ("train_decisions", "held_out_decisions")] == [
        manifest[k] for k in ("train_decisions", "held_out_decisions")]
    # bench play names the adapter each model agent played with: no_think its own
    proc = _cli("bench", "play", "--model", "tiny:llama", "--adapter", str(adapter), "--no-think-adapter", str(twin),
                "--agents", "llm,no_think", "--episodes", "1", "--max-tics", "40", "--fixed-cost", "--threads", "1",
                "--out", str(tmp_path / "play"), "--json")
    assert proc.returncode == 0, proc.stderr
    named = json.loads(proc.stdout)["adapters"]
    assert named["llm"]["path"] == str(adapter) and named["no_think"]["path"] == str(twin)
    assert named["llm"]["hash"] != named["no_think"]["hash"] and len(named["no_think"]["hash"]) == 16

    # the adapter merges into the weights at load; other weights or a damaged file are refused in one line
    base = load_model("tiny:llama", dtype="float32", tokenizer=False)
    merged = load_model("tiny:llama", dtype="float32", tokenizer=False, adapter=str(adapter))
    assert merged.base_weight_hash == base.base_weight_hash and merged.weight_hash != base.weight_hash
    assert merged.adapter.base_weight_hash == base.base_weight_hash and len(merged.adapter.hash) == 16
    in_bf16 = load_model("tiny:llama", dtype="bfloat16", tokenizer=False, adapter=str(adapter))  # data from either
    assert in_bf16.base_weight_hash == base.base_weight_hash and in_bf16.weight_hash != base.weight_hash
    assert all("lora" not in name for name, _ in merged.model.named_parameters())
    with pytest.raises(UserError, match="was trained on weights"):
        load_model("tiny:qwen2", dtype="float32", tokenizer=False, adapter=str(adapter))
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(UserError, match="cannot be loaded"):
        load_model("tiny:llama", dtype="float32", tokenizer=False, adapter=str(adapter))
    with pytest.raises(UserError, match="missing; .* or `none` .*--no-think-adapter"):  # either flag may have named it
        load_model("tiny:llama", dtype="float32", tokenizer=False, adapter=str(tmp_path))


@pytest.mark.parametrize("args, expected", [
    (("--steps", "0"), "--steps must be at least 1"),
    (("--held-out", "1.5"), "--held-out must be between 0 and 1"),
])
def test_train_bad_input_is_one_line_and_exit_code_2(tmp_path, args, expected):
    proc = _cli("train", "--data", str(tmp_path), "--out", str(tmp_path / "a"), *args)
    assert proc.returncode == 2 and expected in proc.stderr and "Traceback" not in proc.stderr


def test_train_on_a_directory_that_is_no_data_set_is_one_line(tmp_path):
    proc = _cli("train", "--data", str(tmp_path), "--out", str(tmp_path / "a"))
    assert proc.returncode == 2 and "not a data set" in proc.stderr and "Traceback" not in proc.stderr


def test_an_episode_plays_with_an_adapter_names_it_in_its_recording_and_reruns_with_it(tmp_path, monkeypatch):
    """`episode --adapter`: merged at load, its hash in the result, its path and hash in the manifest, and
    `replay --rerun` loads it again and emits the same actions; once another adapter took its place, a rerun finds
    the recorded one among the shipped adapters kept (agent_runtime/trained/previous/)."""
    data, adapter = tmp_path / "data", tmp_path / "adapter"
    assert _cli("collect", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--episodes", "2",
                "--max-tics", "60", "--out", str(data)).returncode == 0
    assert _cli("train", "--data", str(data), "--out", str(adapter), "--steps", "4", "--threads", "1",
                "--lr", "0.01").returncode == 0
    proc = _cli("episode", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--max-tics", "60", "--json",
                "--adapter", str(adapter), "--out", str(tmp_path / "rec"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    manifest = json.loads((Path(result["recording"]) / "manifest.json").read_text())
    assert result["adapter"] == manifest["extra"]["adapter"]["hash"]
    assert manifest["config"]["model"]["adapter"] == str(adapter.resolve())
    base = load_model("tiny:llama", dtype="float32", tokenizer=False)
    assert manifest["model_weight_hash"] != base.weight_hash  # the merged weights played
    rerun = _cli("replay", result["recording"], "--rerun")
    assert rerun.returncode == 0 and "same actions" in rerun.stdout, rerun.stdout + rerun.stderr

    kept, other = tmp_path / "previous" / "smollm2-doom-old", tmp_path / "other"
    shutil.copytree(adapter, kept)
    assert _cli("train", "--data", str(data), "--out", str(other), "--steps", "4", "--threads", "1", "--lr", "0.01",
                "--seed", "1").returncode == 0
    shutil.rmtree(adapter)
    shutil.copytree(other, adapter)  # the recorded path now holds other weights
    monkeypatch.setattr(adapters, "TRAINED", tmp_path / "no-shipped-adapters")
    monkeypatch.setattr(adapters, "PREVIOUS", tmp_path / "previous")
    assert rerun_recording(result["recording"])["same_actions"]
    shutil.rmtree(kept)
    with pytest.raises(UserError, match="weight hash"):
        rerun_recording(result["recording"])


def test_an_adapter_remembers_how_its_views_were_written_and_a_run_that_writes_them_otherwise_warns(tmp_path):
    """`train` stores the data's view settings (engine.frame_line, ...) in the adapter's manifest; a run whose config
    writes views otherwise says so in one line; data sets of two kinds are not trained on together."""
    seen = tmp_path / "seen.yaml"
    seen.write_text((REPO / "configs" / "default.yaml").read_text().replace("frame_line: aimed", "frame_line: seen"))
    assert "frame_line: seen" in seen.read_text()
    common = ("--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--episodes", "2", "--max-tics", "60")
    assert _cli("collect", *common, "--config", str(seen), "--out", str(tmp_path / "seen-data")).returncode == 0
    # the same decisions, as a data set whose manifest says its lines were aimed (what collect with the default
    # config writes there; one collect fewer)
    shutil.copytree(tmp_path / "seen-data", tmp_path / "aimed-data")
    manifest = json.loads((tmp_path / "aimed-data" / "manifest.json").read_text())
    assert manifest["config"]["engine"]["frame_line"] == "seen"
    manifest["config"]["engine"]["frame_line"] = "aimed"
    (tmp_path / "aimed-data" / "manifest.json").write_text(json.dumps(manifest))
    adapter = tmp_path / "adapter"
    assert _cli("train", "--data", str(tmp_path / "seen-data"), "--out", str(adapter), "--steps", "2",
                "--threads", "1").returncode == 0
    views = json.loads((adapter / "manifest.json").read_text())["engine"]
    assert views["frame_line"] == "seen" and views["hold_count_text"] == "joined" and views["hold_counts"] is True
    run = ("episode", "--model", "tiny:llama", "--fixed-cost", "--threads", "1", "--max-tics", "20", "--no-record",
           "--adapter", str(adapter))
    otherwise = _cli(*run)
    assert otherwise.returncode == 0, otherwise.stderr
    assert "engine.frame_line: 'seen' (this run 'aimed')" in otherwise.stderr
    same = _cli(*run, "--config", str(seen))
    assert same.returncode == 0 and "learned from views" not in same.stderr and "warning" not in same.stderr
    # an adapter from before `train` scored views as the engine attends plays near chance: the run says so
    trained = json.loads((adapter / "manifest.json").read_text())
    assert trained["block_masks"] is True
    del trained["block_masks"]
    (adapter / "manifest.json").write_text(json.dumps(trained))
    unmasked = _cli(*run, "--config", str(seen))
    assert unmasked.returncode == 0 and "no block_masks in its manifest" in unmasked.stderr
    mixed = _cli("train", "--data", str(tmp_path / "aimed-data"), str(tmp_path / "seen-data"), "--out",
                 str(tmp_path / "mixed"), "--steps", "2", "--threads", "1")
    assert mixed.returncode == 2 and "engine.frame_line: 'seen' vs 'aimed'" in mixed.stderr
    assert "Traceback" not in mixed.stderr and not (tmp_path / "mixed").exists()


def _engine_view_scores(loaded, blocks: list[tuple[list[int], bool]], prompt: list[int], scorer) -> torch.Tensor:
    """The action stream's numbers over blocks prefilled as the engine does: an isolated block (frame, status, system,
    user text) on a view of itself alone, any other after the blocks before it; then the prompt and the branches."""
    runner, view = prefilled_view(loaded, blocks, "act")
    assert [list(s) for s in view.isolated_spans()] == _spans(blocks)
    result = runner.forward([StreamInput(view, prompt)] + scorer.branch_inputs(view))
    return torch.tensor(scorer.scores(result.logits[0], result.logits[1:]))


def _spans(blocks) -> list[list[int]]:
    out, start = [], 0
    for tokens, isolated in blocks:
        if isolated:
            out.append([start, start + len(tokens)])
        start += len(tokens)
    return out


def test_training_scores_equal_the_engines_over_isolated_frame_and_status_blocks():
    """The engine's frame, status and system blocks attend only themselves; with the views' isolated spans the
    training forward (shared system prompt run once, left padding) gives the engine's scores, without them not."""
    engine_model = load_model("tiny:llama", dtype="float32", seed=3)
    plain = load_model("tiny:llama", dtype="float32", seed=3, tokenizer=False).model
    tok = engine_model.tokenizer
    grammar = ActionGrammar(BUTTONS, tok, hold_counts=True)
    candidates = Candidates.from_grammar(grammar, tok)
    rng = random.Random(4)
    words = lambda n: [rng.randrange(100, 40000) for _ in range(n)]  # noqa: E731
    system, prompt = words(30), words(3)
    layouts = [  # (tokens, isolated) blocks before the action prompt
        [(system, True), (words(7), True), (words(5), True)],  # system, status, frame
        [(system, True), (words(9), False), (words(4), True), (words(11), True)],  # a thought, then status and frame
        [(system, True), (words(6), True)],
    ]
    views = [[t for tokens, _ in blocks for t in tokens] + prompt for blocks in layouts]
    spans = [_spans(blocks) for blocks in layouts]
    with torch.no_grad():
        masked = candidate_scores(plain, views, candidates, pad_id=tok.pad_token_id or 0, isolated=spans)
        causal = candidate_scores(plain, views, candidates, pad_id=tok.pad_token_id or 0)
    engine = torch.stack([_engine_view_scores(engine_model, blocks, prompt, CommandScorer(grammar, tok)).float()
                          for blocks in layouts])
    assert torch.allclose(masked, engine, atol=1e-4)
    assert (causal - engine).abs().max() > 1e-2  # the plain forward is another model's numbers
