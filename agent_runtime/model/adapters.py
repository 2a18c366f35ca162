"""LoRA adapters written by `agent-runtime train`: checked, then merged into the weights at load.

Merged once, an adapter costs nothing per engine step. One trained on other base weights, missing or corrupt is
one clear error. "default" is the adapter shipped for the embedded model and the scenario (agent_runtime/trained/,
`make adapters`; see SHIPPED_BY_SCENARIO).
"""

import contextlib
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from agent_runtime.errors import UserError, first_line
from agent_runtime.recording.manifest import hash_file

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "manifest.json")
TRAINED = Path(__file__).resolve().parent.parent / "trained"
SHIPPED_ADAPTER = TRAINED / "smollm2-doom"  # defend_the_center, and any scenario without one of its own
# scenarios whose buttons differ get their own (the command scorer compares that scenario's commands only)
SHIPPED_BY_SCENARIO = {"basic": TRAINED / "smollm2-doom-basic", "health_gathering": TRAINED / "smollm2-doom-health_gathering"}
DEFAULT = "default"
PREVIOUS = TRAINED / "previous"  # shipped adapters since replaced, kept so recordings made with them re-run
READ_ACT_TWIN = "-read-act"  # the shipped twin of an adapter, trained on its episodes without thoughts in view
# the engine settings that decide what an action view's tokens say and which commands it scores (what an adapter
# learned to read and choose among)
VIEW_SETTINGS = ("hold_counts", "hold_count_text", "action_hold_tics", "decision_cadence", "action_log_in_view",
                 "signed_bearings", "action_frames_in_view", "frame_line")


def shipped_adapter(scenario: str | None) -> Path:
    """The adapter shipped for a scenario (a name or a .cfg path): its own where one was trained, else the
    defend_the_center one."""
    own = SHIPPED_BY_SCENARIO.get(Path(scenario).stem) if scenario else None
    return own if own is not None and (own / "manifest.json").is_file() else SHIPPED_ADAPTER


def resolve_adapter(requested: str | None, model_spec: str | None, scenario: str | None = None) -> str | None:
    """The adapter directory to merge, or None. "default": the shipped adapter for `scenario` on the embedded model
    (model_spec None) and none on any other weights, which it was not trained on; "none" or None: none; else a path."""
    if requested in (None, "none"):
        return None
    if requested == DEFAULT:
        return str(shipped_adapter(scenario)) if model_spec is None else None
    return requested


def resolve_no_think_adapter(requested: str | None, adapter: str | None, model_spec: str | None,
                             scenario: str | None = None) -> str | None:
    """The adapter directory the no_think baseline merges, or None. "default": the read-act twin of the shipped
    adapter when the multi-stream agent plays the shipped one and its twin is shipped, else that agent's own
    adapter (`adapter`, as resolve_adapter reads it); otherwise as resolve_adapter reads `requested`."""
    if requested != DEFAULT:
        return resolve_adapter(requested, model_spec, scenario)
    own = resolve_adapter(adapter, model_spec, scenario)
    if own is not None and adapter == DEFAULT:
        twin = Path(own).with_name(Path(own).name + READ_ACT_TWIN)
        if (twin / "manifest.json").is_file():
            return str(twin)
    return own


@dataclass(frozen=True)
class AdapterInfo:
    path: str
    hash: str  # blake2b of the adapter weights: what manifests and caches key on
    base_weight_hash: str
    held_out_accuracy: float | None
    views: dict = field(default_factory=dict, hash=False, compare=False)  # the engine settings that shaped the views it learned from
    block_masks: bool = True  # trained as the engine attends (isolated blocks masked to themselves); False: before that


def read_adapter(path: str | Path) -> AdapterInfo:
    """The adapter at `path`, its files present and readable; anything else is a UserError."""
    path = Path(path).expanduser()
    missing = [name for name in ADAPTER_FILES if not (path / name).is_file()]
    if missing:
        raise UserError(f"adapter {path}: {', '.join(missing)} missing; pass a directory written by `agent-runtime "
                        "train`, or `none` for no adapter (--adapter or --no-think-adapter, whichever named it)")
    try:
        manifest = json.loads((path / "manifest.json").read_text())
        base = str(manifest["base_weight_hash"])
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"adapter {path}: manifest.json is unreadable ({first_line(e)}); train the adapter again") from None
    accuracy = (manifest.get("held_out") or {}).get("accuracy")
    weights_hash = hash_file(path / "adapter_model.safetensors", digest_size=8)
    views = manifest.get("engine") if isinstance(manifest.get("engine"), dict) else {}
    return AdapterInfo(str(path.resolve()), weights_hash, base, accuracy, views, bool(manifest.get("block_masks")))


def shipped_with_hash(weights_hash: str) -> Path | None:
    """The shipped adapter (current or previous) whose weights hash to `weights_hash`, or None."""
    candidates = sorted(TRAINED.glob("*/manifest.json")) + sorted(PREVIOUS.glob("*/manifest.json"))
    for manifest in candidates:
        weights = manifest.parent / "adapter_model.safetensors"
        if weights.is_file() and hash_file(weights, digest_size=8) == weights_hash:
            return manifest.parent
    return None


def view_mismatch(info: AdapterInfo | None, engine) -> str | None:
    """A warning when this run's action views are not written as the adapter's training views were (an adapter
    that records them: `train` stores its data's VIEW_SETTINGS), or when the adapter was trained without the
    engine's block masks (it learned from another computation than the runtime's: it plays near chance); else None."""
    if info is None:
        return None
    if not info.block_masks:
        return (f"warning: adapter {info.path} was trained before `train` scored views as the engine attends (no "
                "block_masks in its manifest): it scores commands near chance here; train it again on data from "
                "this version's `collect` (see README, The trained adapter)")
    differ = [f"engine.{k}: {info.views[k]!r} (this run {getattr(engine, k)!r})" for k in VIEW_SETTINGS
              if info.views.get(k) is not None and info.views[k] != getattr(engine, k)]
    return (f"warning: adapter {info.path} learned from views written with {', '.join(differ)}; it plays "
            f"worse on views it never saw: set those keys in the config, or train it again") if differ else None


@contextlib.contextmanager
def peft_quietly():
    """peft asks transformers for a method renamed in 5.x, which warns on every load: not the user's concern."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def merge_adapter(model, info: AdapterInfo, base_weight_hash: str):
    """The model with the adapter merged into its weights (peft's merge_and_unload)."""
    if info.base_weight_hash != base_weight_hash:
        raise UserError(f"adapter {info.path} was trained on weights {info.base_weight_hash}, not on this model's "
                        f"{base_weight_hash}; pass the base model it was trained on, or `none` for no adapter")
    from peft import PeftModel

    try:
        with peft_quietly():
            return PeftModel.from_pretrained(model, info.path).merge_and_unload()
    except Exception as e:  # safetensors/peft errors on a damaged file
        raise UserError(f"adapter {info.path} cannot be loaded ({first_line(e)}); train it again or pass `none` "
                        "for no adapter") from None
