"""`agent-runtime train-detector`: the screen detector (envs/screen_detector.py) from a `collect-frames` data set,
scored on the episodes whose seeds it never saw. Writes detector.safetensors, manifest.json (data hash, settings,
held-out metrics per class) and examples.png to --out; run it again on the same --out to go on from its checkpoint."""

import argparse
import json

from agent_runtime.commands import at_least, own_dir
from agent_runtime.errors import UserError
from agent_runtime.notices import progress_bar, stderr_line

FILES = frozenset({"detector.safetensors", "manifest.json", "examples.png", "checkpoint.pt"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="a data set from `agent-runtime collect-frames`")
    p.add_argument("--out", required=True, help="directory for the detector (created, or resumed when it exists)")
    p.add_argument("--steps", type=int, default=8000, help="training steps (default 8000)")
    p.add_argument("--batch", type=int, default=32, help="screens a step (default 32)")
    p.add_argument("--channels", type=int, default=96, help="the detector's width (default 96)")
    p.add_argument("--held-out", type=float, default=0.2,
                   help="fraction of the episode seeds (the largest) held out for scoring (default 0.2)")
    p.add_argument("--seed", type=int, default=0, help="initial weights and batches (default 0)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON on stdout, nothing else")


def run(args: argparse.Namespace) -> int:
    import torch

    from envs.detector_training import CHECKPOINT, WEIGHTS, DetectorSettings, HoldOutError, train_and_score
    from envs.screen_dataset import list_shards

    at_least(args, 1, "--steps", "--batch", "--channels", "--threads")
    if not 0.0 < args.held_out < 1.0:
        raise UserError(f"--held-out must be a fraction between 0 and 1 (got {args.held_out})")
    shards = list_shards(args.data)
    if not shards:
        raise UserError(f"--data {args.data}: no shards; make a data set with `agent-runtime collect-frames`")
    out = own_dir(args.out, "--out", FILES, CHECKPOINT, "a detector from `train-detector`")
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = DetectorSettings(steps=args.steps, batch=args.batch, channels=args.channels, seed=args.seed,
                                held_out=args.held_out)
    with progress_bar(settings.steps, "train-detector", "step") as bar:
        def progress(step, loss):
            bar.n = step
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            bar.update(0)
        try:
            manifest = train_and_score(shards, settings, out, progress, announce=stderr_line)
        except HoldOutError as e:
            raise UserError(f"--data {args.data}: {e}; collect more episodes") from None
    summary = manifest["held_out"]
    if args.json:
        print(json.dumps(manifest))
    else:
        print(f"{out / WEIGHTS}: held-out {summary['found'] or 0:.1%} of {summary['objects']} named objects found, "
              f"{summary['false'] or 0:.1%} of {summary['detections']} detections not there")
    return 0
