"""`agent-runtime train`: a LoRA adapter that makes the model score the expert's command highest, write the
planner's notes and say the describer's remarks.

LoRA (peft) on the upper layers of the model the `collect` data came from, in float32, trained with
class-balanced cross-entropy over the action stream's candidate commands (and, where the data holds Thinker notes
or remarks, token cross-entropy of them: one adapter for every stream), fixed seeds. ADAPTER/ holds peft's files,
manifest.json (data hashes, base weight hash, settings, held-out accuracy, curves) and training.png; it is
written to a temporary directory and renamed, so a killed run leaves no half adapter.
"""

import argparse
import hashlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from agent_runtime.atomic_write import atomic_path
from agent_runtime.commands import OPTIONS, add_options, at_least, own_dir, require_cuda
from agent_runtime.errors import UserError
from agent_runtime.notices import progress_bar, stderr_line
from agent_runtime.training.read_act_view import VIEWS, read_act_view


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", nargs="+", required=True, metavar="DIR", help="data set directories from `collect`")
    p.add_argument("--out", required=True, metavar="ADAPTER", help="directory to write the adapter to")
    p.add_argument("--model", help="base model (default: the one the data was collected with)")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    p.add_argument("--batch", type=int, default=8, help="examples per step (default 8)")
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (default 3e-4)")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank (default 16)")
    p.add_argument("--layers-from", type=int, help="first layer with adapters (default: the upper half)")
    p.add_argument("--held-out", type=float, default=0.1, help="fraction of episodes held out (default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--views", choices=VIEWS, default="agent",
                   help="agent: the decisions as the multi-stream action view read them (thought and remark in view); "
                        "read-act: as the no_think agent reads them (system, status, frame line, prompt): its adapter, "
                        "trained the same way on the same episodes (default agent)")
    p.add_argument("--no-notes", action="store_true",
                   help="train the commands only, even where the data holds Thinker notes (default: both)")
    p.add_argument("--no-remarks", action="store_true",
                   help="leave out the remarks where the data holds them (`collect --remarks`; default: trained too)")
    add_options(p, "--threads", "--device", "--json")
    p.add_argument("--dtype", **{**OPTIONS["--dtype"], "help": "float32 (or auto): LoRA trains in float32"})


def _data_sets(dirs: list[str]) -> tuple[list[dict], list[list[dict]], list[list[dict]], list[list[dict]], str]:
    """Manifests, decisions, Thinker notes, remarks and a hash of the data (the complete episodes' bytes) of every
    data set."""
    from agent_runtime.training.decision_log import MANIFEST, NOTES, REMARKS, complete_bytes, parse_decisions

    manifests, decisions, notes, remarks = [], [], [], []
    h = hashlib.sha256()
    for d in dirs:
        data = complete_bytes(d)  # a directory that is no data set is a clear error
        note_data, remark_data = complete_bytes(d, NOTES), complete_bytes(d, REMARKS)
        h.update(data)
        h.update(note_data)  # b"" for a data set without notes (or remarks): the hash of older data is unchanged
        h.update(remark_data)
        manifests.append(json.loads((Path(d) / MANIFEST).read_text()))
        decisions.append(parse_decisions(data))
        notes.append(parse_decisions(note_data))
        remarks.append(parse_decisions(remark_data))
    for key in ("buttons", "model_weight_hash"):
        if len({json.dumps(m.get(key)) for m in manifests}) > 1:
            raise UserError(f"the data sets differ in {key}; "
                            "train on data of one scenario's buttons and one base model")
    if not any(decisions):
        raise UserError("the data sets hold no complete episode yet; run `agent-runtime collect` first")
    return manifests, decisions, notes, remarks, h.hexdigest()[:16]


def run(args: argparse.Namespace) -> int:
    from agent_runtime.control.action_grammar import ActionGrammar
    from agent_runtime.engine.prompts import ACTION_PROMPT, encode
    from agent_runtime.model.model_loader import EMBEDDED_MODEL_ID, load_for_cpu
    from agent_runtime.training.command_scores import Candidates
    from agent_runtime.training.lora_trainer import Example, TrainSettings, evaluate, split, train, with_adapters

    _check_options(args)
    manifests, decisions, note_rows, remark_rows, data_hash = _data_sets(args.data)
    engine = _view_settings(manifests, args.data)
    out = adapter_out(args.out, args.data)  # before the model loads: a bad --out costs no training
    spec = args.model or (manifests[0]["model_id"] if manifests[0]["model_id"] != EMBEDDED_MODEL_ID else None)
    loaded = load_for_cpu(spec, dtype="float32", threads=args.threads, warn=False)  # training needs float32
    if loaded.base_weight_hash != manifests[0]["model_weight_hash"]:
        raise UserError(f"the data was collected with weights {manifests[0]['model_weight_hash']}, but "
                        f"{loaded.model_id} has {loaded.base_weight_hash}; pass the base model the data came from "
                        "with --model")
    grammar = ActionGrammar(tuple(manifests[0]["buttons"]), loaded.tokenizer, scenario=manifests[0]["scenario"],
                            default_tics=engine["action_hold_tics"] or 4, hold_counts=engine["hold_counts"],
                            count_text=engine["hold_count_text"])
    candidates = Candidates.from_grammar(grammar, loaded.tokenizer)
    examples = _examples(args, decisions, candidates, len(encode(loaded.tokenizer, ACTION_PROMPT)))
    settings = TrainSettings(steps=args.steps, batch=args.batch, lr=args.lr, rank=args.rank,
                             layers_from=args.layers_from, held_out=args.held_out, seed=args.seed)
    train_set, test_set = split(examples, settings.held_out, settings.seed)
    texts = _text_targets(args, {"notes": (note_rows, args.no_notes), "remarks": (remark_rows, args.no_remarks)},
                          test_set, settings)
    model = with_adapters(loaded.model.to(args.device), settings)
    pad = loaded.tokenizer.pad_token_id or 0
    before = evaluate(model, test_set, candidates, batch=settings.batch, pad_id=pad)
    stderr_line(f"{len(train_set)} training and {len(test_set)} held-out decisions; held-out accuracy untrained "
                f"{before['accuracy']:.1%}")
    t0 = time.monotonic()
    # closed on a stop (SIGINT) or an error mid-training too: the next line is a line of its own
    with progress_bar(settings.steps, "train", "step") as bar:
        history = train(model, train_set, test_set, candidates, settings, pad_id=pad, progress=_progress(bar),
                        notes=texts["notes"], remarks=texts["remarks"])
    after = history.final or evaluate(model, test_set, candidates, batch=settings.batch, pad_id=pad)
    curves = {k: v for k, v in asdict(history).items() if k not in ("final", "final_notes", "final_remarks")}
    manifest = {
        "format_version": 1, "base_model_id": loaded.model_id, "base_weight_hash": loaded.base_weight_hash,
        "data": [str(Path(d).resolve()) for d in args.data], "data_hash": data_hash,
        "scenarios": sorted({m["scenario"] for m in manifests}), "buttons": manifests[0]["buttons"],
        "candidates": list(candidates.texts), "settings": settings.__dict__, "train_decisions": len(train_set),
        "held_out_decisions": len(test_set), "held_out_untrained": before, "held_out": after, "engine": engine,
        "block_masks": all(e.isolated is not None for e in examples),  # scored as the engine attends
        "views": args.views,
        "notes": {"train": len(texts["notes"][0]), "held_out": len(texts["notes"][1]),
                  "held_out_result": history.final_notes},
        "remarks": {"train": len(texts["remarks"][0]), "held_out": len(texts["remarks"][1]),
                    "held_out_result": history.final_remarks},
        "train_seconds": round(time.monotonic() - t0, 1), "device": args.device, "history": curves,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _write_adapter(model, out, manifest)
    _report(args, out, before, after, history.final_notes, history.final_remarks)
    return 0


def _examples(args, decisions: list[list[dict]], candidates, prompt_length: int) -> list:
    """One Example per decision, its view as --views asks."""
    from agent_runtime.training.lora_trainer import Example

    examples = []
    for d, rows in zip(args.data, decisions):
        for row in rows:
            tokens, isolated = row["tokens"], row.get("isolated")
            if args.views == "read-act":
                tokens, isolated = read_act_view(tokens, isolated, row.get("blocks"), prompt_length)
            examples.append(Example(tokens, candidates.index(row["label"], row["label_tics"]), (d, row["episode"]),
                                    isolated))
    return examples


def _check_options(args) -> None:
    """Bad flags are one line, before anything loads."""
    at_least(args, 1, "--steps", "--batch", "--rank")
    if not 0 < args.held_out < 1:
        raise UserError(f"--held-out must be between 0 and 1 (got {args.held_out})")
    if args.dtype not in (None, "auto", "float32"):
        raise UserError(f"--dtype {args.dtype}: train computes in float32 (the adapter is merged at load in any dtype)")
    require_cuda(args.device)


def _report(args, out: Path, before: dict, after: dict, notes: dict | None, remarks: dict | None) -> None:
    """The closing line (or JSON object): held-out accuracy before and after, and how the notes and remarks came
    out."""
    if args.json:
        print(json.dumps({"adapter": str(out), "held_out_untrained": before, "held_out": after, "notes": notes,
                          "remarks": remarks}))
        return
    texts = "".join(f"; {name}: {r['token_accuracy']:.1%} of held-out {name[:-1]} tokens, {r['exact']:.1%} of "
                    f"{name} whole" for name, r in (("notes", notes), ("remarks", remarks)) if r)
    print(f"{out}: held-out accuracy {before['accuracy']:.1%} -> {after['accuracy']:.1%} (the command alone, any "
          f"hold: {before['command_accuracy']:.1%} -> {after['command_accuracy']:.1%}; "
          f"{', '.join(f'{k} {v:.0%}' for k, v in after['per_command'].items())}){texts}; plot {out / 'training.png'}")


def _text_targets(args, rows: dict, test_set: list, settings) -> dict[str, tuple[list, list]]:
    """Per kind of text (notes, remarks: (rows per data set, left out)), its (training, held-out) targets: the
    held-out decisions' episodes held out (the read-act agent has no Thinker and makes no remarks: none)."""
    from agent_runtime.training.note_scores import NoteTarget

    return {name: _split_like([NoteTarget(row["tokens"], row["prompt"], row["target"], (d, row["episode"]),
                                          row.get("isolated"))
                               for d, rows_of_set in zip(args.data, per_set) for row in rows_of_set
                               if args.views == "agent" and not left_out], test_set, settings)
            for name, (per_set, left_out) in rows.items()}


def _split_like(notes: list, test_set: list, settings) -> tuple[list, list]:
    """The notes of the held-out decisions' episodes held out too (one episode: a split of its own notes)."""
    from agent_runtime.training.lora_trainer import split

    held = {e.episode for e in test_set}
    if len({e.episode for e in notes}) < 2 or not any(n.episode in held for n in notes):
        return split(notes, settings.held_out, settings.seed) if len(notes) > 1 else (notes, [])
    return [n for n in notes if n.episode not in held], [n for n in notes if n.episode in held]


def _view_settings(manifests: list[dict], data: list[str]) -> dict:
    """The engine settings the data's views were written with (what older data predates: what that runtime did),
    the same for every data set: an adapter learns one way of writing views."""
    from agent_runtime.model.adapters import VIEW_SETTINGS
    from agent_runtime.recording.rerun import with_legacy_engine

    engines = [with_legacy_engine(m.get("config", {}))["engine"] for m in manifests]
    settings = [{k: engine.get(k) for k in VIEW_SETTINGS} for engine in engines]
    for d, s in zip(data[1:], settings[1:]):
        differ = [k for k in VIEW_SETTINGS if s[k] != settings[0][k]]
        if differ:
            raise UserError(f"--data {d} was collected with views written otherwise than {data[0]} "
                            f"({', '.join(f'engine.{k}: {s[k]!r} vs {settings[0][k]!r}' for k in differ)}); "
                            "train on data sets of one kind")
    return settings[0]


def _progress(bar):
    """The trainer's progress callback: the loss, and the last held-out accuracy, on the bar (without a bar: a line
    at each held-out evaluation)."""
    state = {"acc": None}

    def update(step: int, loss: float, accuracy: float | None) -> None:
        if accuracy is not None:
            state["acc"] = accuracy
            if bar.disable:
                stderr_line(f"step {step}: loss {loss:.3f}, held-out accuracy {accuracy:.1%}")
        bar.set_postfix(loss=f"{loss:.3f}", held_out="n/a" if state["acc"] is None else f"{state['acc']:.1%}")
        bar.update(1)

    return update


# What `train` writes into ADAPTER/ (peft's files, the manifest, the plot) and `make adapter` adds (README.md):
# a directory holding anything else is not a previous adapter, and train will not replace it.
ADAPTER_FILES = frozenset({"adapter_model.safetensors", "adapter_config.json", "manifest.json", "training.png",
                           "README.md"})


def adapter_out(out_text: str, data: list[str]) -> Path:
    """--out as a path that train may (re)place: new, or a previous adapter, never a data set nor a folder of
    other files (train replaces what it names, so it must only ever name what train wrote)."""
    resolved = Path(out_text).expanduser().resolve()
    for d in data:
        data_dir = Path(d).expanduser().resolve()
        if resolved == data_dir or resolved in data_dir.parents or data_dir in resolved.parents:
            raise UserError(f"--out {out_text} is, holds or lies inside the --data set {d}; "
                            "write the adapter to a directory of its own")
    return own_dir(out_text, "--out", ADAPTER_FILES, "adapter_config.json", "an adapter from `agent-runtime train`")


def _write_adapter(model, out: Path, manifest: dict) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    # a previous adapter (adapter_out checked) is moved aside for the rename, and removed once the new one is in place
    old = out.with_name(f"{out.name}.old{os.getpid()}") if out.is_dir() else None
    with atomic_path(out) as tmp:
        model.save_pretrained(str(tmp))
        # the LoRA matrices in float16: half the bytes (a shipped adapter stays under 5 MB), and merging them at
        # load differs from float32 by ~1e-3 of each update; peft casts them back on load
        weights = tmp / "adapter_model.safetensors"
        save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in load_file(weights).items()},
                  weights, metadata={"format": "pt"})
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        _plot(manifest["history"], tmp / "training.png", manifest)
        if old:
            os.replace(out, old)
    if old:
        for f in old.iterdir():
            if f.name in ADAPTER_FILES:
                f.unlink()
        old.rmdir()


def _plot(history: dict, path: Path, manifest: dict) -> None:
    from agent_runtime.benchmarks.measure import save_figure, subplots

    fig, ax = subplots(figsize=(7, 3.5))
    ax.plot(history["steps"], history["losses"], color="tab:blue", alpha=0.6, label="training loss")
    for key, color, label in (("note_losses", "tab:purple", "of which the notes' tokens"),
                              ("remark_losses", "tab:red", "of which the remarks' tokens")):
        if history.get(key):
            ax.plot(history["steps"], history[key], color=color, alpha=0.6, label=label)
    ax.set(xlabel="step", ylabel="cross-entropy (commands + texts)",
           title=f"LoRA imitation: {', '.join(manifest['scenarios'])}, {manifest['base_model_id']}")
    twin = ax.twinx()
    twin.plot(history["eval_steps"], history["accuracies"], color="tab:green", marker="o",
              label="held-out accuracy (a fixed sample; last point: all)")
    twin.set(ylim=(0, 1), ylabel="held-out accuracy")
    fig.legend(loc="upper right", fontsize=8)
    save_figure(fig, path, dpi=110)
