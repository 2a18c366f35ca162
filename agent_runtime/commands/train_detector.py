"""`agent-runtime train-detector`: the screen detector (envs/screen_detector.py) from a `collect-frames` data set,
scored on the episodes whose seeds it never saw. Writes detector.safetensors, manifest.json (data hash, settings,
held-out metrics per class) and examples.png to --out; run it again on the same --out to go on from its checkpoint."""

import argparse
import hashlib
import json
import time

from agent_runtime.atomic_write import write_json_atomic
from agent_runtime.commands import at_least, own_dir
from agent_runtime.errors import UserError
from agent_runtime.notices import progress_bar, stderr_line

FILES = frozenset({"detector.safetensors", "manifest.json", "examples.png", "checkpoint.pt"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="a data set from `agent-runtime collect-frames`")
    p.add_argument("--out", required=True, help="directory for the detector (created, or resumed when it exists)")
    p.add_argument("--steps", type=int, default=4000, help="training steps (default 4000)")
    p.add_argument("--batch", type=int, default=32, help="screens a step (default 32)")
    p.add_argument("--channels", type=int, default=64, help="the detector's width (default 64)")
    p.add_argument("--held-out", type=float, default=0.2,
                   help="fraction of the episode seeds (the largest) held out for scoring (default 0.2)")
    p.add_argument("--seed", type=int, default=0, help="initial weights and batches (default 0)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON on stdout, nothing else")


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from envs.detector_training import (CHECKPOINT, WEIGHTS, DetectorSettings, draw_examples, evaluate,
                                        save_detector, split_by_seed, train_detector)
    from envs.screen_dataset import data_hash, list_shards, load_screens

    at_least(args, 1, "--steps", "--batch", "--channels", "--threads")
    if not 0.0 < args.held_out < 1.0:
        raise UserError(f"--held-out must be a fraction between 0 and 1 (got {args.held_out})")
    shards = list_shards(args.data)
    if not shards:
        raise UserError(f"--data {args.data}: no shards; make a data set with `agent-runtime collect-frames`")
    out = own_dir(args.out, "--out", FILES, CHECKPOINT, "a detector from `train-detector`")
    out.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    screens = load_screens(shards)
    settings = DetectorSettings(steps=args.steps, batch=args.batch, channels=args.channels, seed=args.seed,
                                held_out=args.held_out)
    try:
        train_mask, test_mask = split_by_seed(screens, settings.held_out)
    except ValueError as e:
        raise UserError(f"--data {args.data}: {e}; collect more episodes") from None
    held_out_seeds = {str(s): sorted(set(screens.seeds[test_mask & (screens.scenarios == s)].tolist()))
                      for s in np.unique(screens.scenarios)}
    stderr_line(f"{int(train_mask.sum())} screens to train on, {int(test_mask.sum())} held out (seeds {held_out_seeds})")
    t0 = time.monotonic()
    with progress_bar(settings.steps, "train-detector", "step") as bar:
        def progress(step, loss):
            bar.n = step
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            bar.update(0)
        model, history = train_detector(screens, settings, out, progress=progress)
    held_out = screens.subset(test_mask)
    score, found = evaluate(model, held_out)
    save_detector(model, out / WEIGHTS, {"data_hash": data_hash(shards)})
    draw_examples(held_out, found, out / "examples.png")
    manifest = {"data": str(args.data), "data_hash": data_hash(shards), "settings": vars(settings),
                "parameters": sum(p.numel() for p in model.parameters()),
                "train_screens": int(train_mask.sum()), "held_out_screens": int(test_mask.sum()),
                "held_out_seeds": held_out_seeds,
                "final_loss": history.losses[-1] if history.losses else None, "held_out": score.summary(),
                "weights_sha256": hashlib.sha256((out / WEIGHTS).read_bytes()).hexdigest(),
                "train_s": round(time.monotonic() - t0, 1), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json_atomic(out / "manifest.json", manifest)
    summary = manifest["held_out"]
    if args.json:
        print(json.dumps(manifest))
    else:
        print(f"{out / WEIGHTS}: held-out {summary['found'] or 0:.1%} of {summary['objects']} named objects found, "
              f"{summary['false'] or 0:.1%} of {summary['detections']} detections not there")
    return 0
