"""Training the screen detector on a `collect-frames` data set, and scoring it: deterministic for a seed
(each step's batch is drawn from (seed, step)), resumable from its last checkpoint, held out by episode seed.

Scored against what the frame line would name (the first MAX_OBJECTS objects in aim order): an object is found
when a detection has its class, side, bearing within 5 degrees and distance band; a detection the pixel frame line
would name is false when no object of its class lies within 5 degrees of it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from envs.observation_text import MAX_OBJECTS, aim_rank, distance_band, object_words
from envs.screen_dataset import ScreenSet, load_screens, replaced
from envs.screen_detector import (BANDS, ScreenDetector, Targets, decode, detector_loss, screen_x_from_bearing,
                                  targets_from_objects)

BEARING_TOLERANCE = 5.0
WEIGHTS = "detector.safetensors"
CHECKPOINT = "checkpoint.pt"


class DetectorWeightsError(ValueError):
    """Weights that cannot be loaded; the message is one line that says what to do."""


class HoldOutError(ValueError):
    """A data set whose scenarios have too few seeds to hold some out."""


@dataclass
class DetectorSettings:
    steps: int = 8000
    batch: int = 32
    lr: float = 2e-3
    channels: int = 96
    seed: int = 0
    held_out: float = 0.2  # the fraction of episode seeds (the largest) kept for scoring
    checkpoint_every: int = 250


@dataclass
class DetectorHistory:
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


def split_by_seed(screens: ScreenSet, held_out: float) -> tuple[np.ndarray, np.ndarray]:
    """Masks (train, held out): of each scenario, the episodes of its largest `held_out` fraction of seeds (at least
    one seed) are held out, so every scenario is scored on games the detector never saw."""
    mask = np.zeros(len(screens), bool)
    for scenario in np.unique(screens.scenarios):
        mine = screens.scenarios == scenario
        seeds = np.unique(screens.seeds[mine])
        if len(seeds) < 2:
            raise HoldOutError(f"{scenario} has episodes of {len(seeds)} seed(s); hold-out by seed needs at least 2")
        mask |= mine & np.isin(screens.seeds, seeds[len(seeds) - max(1, round(held_out * len(seeds))):])
    return ~mask, mask


def column_targets(screens: ScreenSet, width: int) -> dict[str, torch.Tensor]:
    return Targets.stack([targets_from_objects([(n, b, u) for n, b, u, _ in screens.objects_of(i)], width)
                          for i in range(len(screens))])


def mirrored(x: torch.Tensor, targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The same screens seen in a mirror: bearings change sign, so columns reverse and offsets within them too."""
    return x.flip(2), {"present": targets["present"].flip(-1), "offset": (1.0 - targets["offset"]).flip(-1)}


class BalancedDraw:
    """Batches with each scenario equally likely (health_gathering's medikits must not drown the monsters)."""

    def __init__(self, groups: np.ndarray):
        order = np.argsort(groups, kind="stable")
        names, starts, sizes = np.unique(groups[order], return_index=True, return_counts=True)
        self.order, self.starts, self.sizes = (torch.from_numpy(order), torch.from_numpy(starts),
                                               torch.from_numpy(sizes))

    def __call__(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        group = torch.randint(0, len(self.sizes), (batch,), generator=generator)
        within = (torch.rand(batch, generator=generator, dtype=torch.float64) * self.sizes[group]).long()
        return self.order[self.starts[group] + within]


def train_detector(screens: ScreenSet, settings: DetectorSettings, out: Path, progress=None,
                   resume: bool = True) -> tuple[ScreenDetector, DetectorHistory]:
    """Train on the screens not held out; a checkpoint every settings.checkpoint_every steps in `out`, from which a
    run with the same settings and data goes on as if never stopped. progress(step, loss) after every step."""
    width = screens.screens.shape[2]
    train_mask, _ = split_by_seed(screens, settings.held_out)
    train = screens.subset(train_mask)
    x, targets = torch.from_numpy(train.screens), column_targets(train, width)
    draw = BalancedDraw(train.scenarios)
    torch.manual_seed(settings.seed)
    model = ScreenDetector(channels=settings.channels)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + np.cos(np.pi * s / settings.steps)))
    history, start = DetectorHistory(), 0
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / CHECKPOINT
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state["settings"] == asdict(settings):
            for part, value in (("model", model), ("optimizer", optimizer), ("schedule", schedule)):
                value.load_state_dict(state[part])
            history, start = DetectorHistory(**state["history"]), state["step"]
    model.train()
    for step in range(start, settings.steps):
        generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + step)
        index = draw(settings.batch, generator)
        batch, batch_targets = x[index], {k: v[index] for k, v in targets.items()}
        if torch.rand(1, generator=generator).item() < 0.5:
            batch, batch_targets = mirrored(batch, batch_targets)
        loss = detector_loss(model(batch), batch_targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        history.steps.append(step + 1)
        history.losses.append(loss.item())
        if progress is not None:
            progress(step + 1, history.losses[-1])
        if (step + 1) % settings.checkpoint_every == 0 or step + 1 == settings.steps:
            _save_checkpoint(checkpoint, model, optimizer, schedule, step + 1, history, settings)
    model.eval()
    return model, history


def train_and_score(shards, settings: DetectorSettings, out: Path, progress=None, announce=print) -> dict:
    """Train on `shards` (envs/screen_dataset.py) into `out` and score on the held-out seeds: detector.safetensors,
    examples.png and manifest.json (data hash, settings, held-out scores per class), which is returned."""
    screens, t0 = load_screens(shards), time.monotonic()
    digest = screens.data_hash
    train_mask, test_mask = split_by_seed(screens, settings.held_out)
    held_out_seeds = {str(s): sorted(set(screens.seeds[test_mask & (screens.scenarios == s)].tolist()))
                      for s in np.unique(screens.scenarios)}
    announce(f"{int(train_mask.sum())} screens to train on, {int(test_mask.sum())} held out (seeds {held_out_seeds})")
    model, history = train_detector(screens, settings, out, progress=progress)
    held_out = screens.subset(test_mask)
    score, found = evaluate(model, held_out)
    save_detector(model, out / WEIGHTS, {"data_hash": digest})
    draw_examples(held_out, found, out / "examples.png")
    manifest = {"data_hash": digest, "settings": asdict(settings), "parameters": sum(p.numel() for p in
                                                                                      model.parameters()),
                "train_screens": int(train_mask.sum()), "held_out_screens": int(test_mask.sum()),
                "held_out_seeds": held_out_seeds, "final_loss": history.losses[-1] if history.losses else None,
                "held_out": score.summary(), "weights_sha256": hashlib.sha256((out / WEIGHTS).read_bytes()).hexdigest(),
                "train_s": round(time.monotonic() - t0, 1), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    with replaced(out / "manifest.json") as temporary:
        temporary.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _save_checkpoint(path: Path, model, optimizer, schedule, step: int, history: DetectorHistory, settings) -> None:
    with replaced(path) as temporary:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(), "step": step, "history": asdict(history),
                    "settings": asdict(settings)}, temporary)


def side(bearing: float) -> str:
    return object_words("", bearing, "", signed=True).split()[0]


@dataclass
class Score:
    """Found / named per class and in all, and the pixel frame line's false objects."""

    found: Counter = field(default_factory=Counter)
    named: Counter = field(default_factory=Counter)
    false: Counter = field(default_factory=Counter)
    detected: Counter = field(default_factory=Counter)

    def summary(self) -> dict:
        def rate(a, b):
            return round(a / b, 4) if b else None
        classes = sorted(set(self.named) | set(self.detected))
        return {"found": rate(sum(self.found.values()), sum(self.named.values())),
                "false": rate(sum(self.false.values()), sum(self.detected.values())),
                "objects": sum(self.named.values()), "detections": sum(self.detected.values()),
                "per_class": {c: {"found": rate(self.found[c], self.named[c]), "objects": self.named[c],
                                  "false": rate(self.false[c], self.detected[c]), "detections": self.detected[c]}
                              for c in classes}}


def score_screen(score: Score, objects, detections) -> None:
    """objects: (name, bearing, units, rank) of one screen; detections: decode()'s for it."""
    for name, bearing, units, rank in objects:
        if rank >= MAX_OBJECTS:
            continue
        score.named[name] += 1
        band = distance_band(units)
        score.found[name] += any(d.name == name and d.band == band and side(d.bearing) == side(bearing)
                                 and abs(d.bearing - bearing) <= BEARING_TOLERANCE for d in detections)
    for d in aim_ordered(detections)[:MAX_OBJECTS]:
        score.detected[d.name] += 1
        score.false[d.name] += not any(name == d.name and abs(d.bearing - bearing) <= BEARING_TOLERANCE
                                       for name, bearing, _, _ in objects)


def aim_ordered(detections, turned: float = 0.0) -> list:
    """The frame line's aim order: near ones first, then by whole degrees from the crosshair after `turned`."""
    return sorted(detections, key=lambda d: (*aim_rank(d.band, d.bearing - turned), BANDS.index(d.band)))


def evaluate(model: ScreenDetector, screens: ScreenSet, batch: int = 256) -> tuple[Score, list]:
    """The score on `screens` and every screen's detections."""
    width, score, found = screens.screens.shape[2], Score(), []
    with torch.inference_mode():
        for lo in range(0, len(screens), batch):
            found += decode(model(torch.from_numpy(screens.screens[lo:lo + batch])), width, model.classes)
    for i, detections in enumerate(found):
        score_screen(score, screens.objects_of(i), detections)
    return score, found


def save_detector(model: ScreenDetector, path: Path, metadata: dict | None = None) -> None:
    meta = {"classes": json.dumps(list(model.classes)), "columns": str(model.columns),
            "channels": str(model.channels), **{k: str(v) for k, v in (metadata or {}).items()}}
    with replaced(path) as temporary:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(temporary), metadata=meta)


def load_detector(path: str | Path) -> ScreenDetector:
    """A detector from save_detector's file; DetectorWeightsError (one line) when it is missing, damaged or written
    for another layout of the network (an earlier version's weights)."""
    path = Path(path)
    if not path.is_file():
        raise DetectorWeightsError(f"detector weights {path} not found; train them with `agent-runtime "
                                   "train-detector` or use the shipped ones (leave the path unset)")
    try:
        with safe_open(str(path), "pt") as f:  # the settings and the tensors in one read of the file
            meta = f.metadata() or {}
            state = {name: f.get_tensor(name) for name in f.keys()}
        model = ScreenDetector(tuple(json.loads(meta["classes"])), int(meta["columns"]), int(meta["channels"]))
    except Exception as e:  # safetensors' and torch's errors on a damaged or foreign file
        raise DetectorWeightsError(f"detector weights {path} cannot be loaded ({str(e).splitlines()[0][:120]}); "
                                   "train them again with `agent-runtime train-detector`") from None
    expected = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    differ = [f"{name} {tuple(value.shape)} (this version: {expected.get(name)})" for name, value in state.items()
              if expected.get(name) != tuple(value.shape)]
    if differ or state.keys() != expected.keys():
        raise DetectorWeightsError(f"detector weights {path} were written for another detector layout ("
                                   f"{', '.join(differ) or 'other layers'}); train them again with `agent-runtime "
                                   "train-detector` on this version")
    model.load_state_dict(state)
    return model.eval()


def draw_examples(screens: ScreenSet, detections: list, path: Path, count: int = 12) -> None:
    """A PNG of held-out screens: the label boxes of what the frame line names (green) and the detections (red
    ticks at their bearing, with their words)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with_objects = [i for i in range(len(screens)) if screens.objects_of(i)]
    picks = with_objects[:: max(1, len(with_objects) // count)][:count]
    rows = (len(picks) + 3) // 4
    fig, axes = plt.subplots(rows, 4, figsize=(16, 3.2 * rows), squeeze=False)
    width, height = screens.screens.shape[2], screens.screens.shape[1]
    boxes = screens.objects["obj_box"]
    for ax, i in zip(axes.flat, picks):
        ax.imshow(screens.screens[i])
        lo, hi = np.searchsorted(screens.objects["obj_frame"], [i, i + 1])
        for row in range(lo, hi):
            if screens.objects["obj_rank"][row] < MAX_OBJECTS:
                x, y, w, h = (int(v) for v in boxes[row])
                ax.add_patch(plt.Rectangle((x, y), w, h, fill=False, color="lime", lw=1))
        for d in aim_ordered(detections[i])[:MAX_OBJECTS]:
            x = screen_x_from_bearing(d.bearing, width)
            ax.plot([x, x], [height * 0.2, height * 0.8], color="red", lw=1)
            ax.text(x, height * 0.18, d.describe(), color="red", fontsize=6, ha="center")
        ax.set(xticks=[], yticks=[], title=screens.scenarios[i])
    for ax in axes.flat[len(picks):]:
        ax.axis("off")
    fig.suptitle("held-out screens: label boxes of the named objects (green), detections (red)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

