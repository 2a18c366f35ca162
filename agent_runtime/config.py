"""Run configuration: YAML files under configs/, validated so a bad value names its key and the allowed values."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_runtime.errors import UserError, first_line

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
RESOLUTIONS = ("160x120", "200x150", "256x192", "320x240", "400x300", "640x480")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetConfig(_Strict):
    """Time bounds: stale frames and stale actions are dropped, never used late."""

    max_frame_age_ms: float = Field(250.0, gt=0)
    # auto: 250 ms, or two decision steps where this machine's decision step is slower than 125 ms (session/time_bounds.py)
    max_action_age_ms: float | Literal["auto"] = "auto"
    frames_in_view: int = Field(4, ge=1, le=64)
    thinker_tokens_per_paragraph: int = Field(48, ge=4, le=512)
    thinker_paragraphs_in_view: int = Field(2, ge=1, le=32)

    @field_validator("max_action_age_ms")
    @classmethod
    def _positive_age(cls, v):
        if v != "auto" and not v > 0:
            raise ValueError("must be auto or a number of milliseconds above 0")
        return v


class EngineConfig(_Strict):
    """How the multi-stream engine schedules its streams."""

    decision_mode: Literal["score", "decode"] = "score"  # score: a command in one forward; decode: token by token
    think: bool = True  # run the Thinker stream alongside the action stream
    temperature: float = Field(0.8, gt=0, le=5)
    prefill_tokens_per_step: int = Field(96, ge=8, le=4096)  # longer texts are prefilled in chunks
    action_hold_tics: int = Field(4, ge=1, le=35)  # how long a command without a count holds its button
    # score mode chooses the hold too (every command at 1..8 tics), as the expert does; false: held action_hold_tics
    hold_counts: bool = True
    # how a hold count is written: "joined" to its word ("left3": one row per word scores the counts), or "spaced"
    # ("left 3", as recordings and adapters made before this setting: the space is a row of its own)
    hold_count_text: Literal["joined", "spaced"] = "joined"
    # "hold": decide on the frame of the tic the hold ends (as the expert plays); "frame": on every new frame
    decision_cadence: Literal["hold", "frame"] = "hold"
    # own past decisions the action stream reads: 0 (aimed frame lines allow for the turn in flight, and training
    # scores a command block only approximately), 1 (more invites copying); null: all, as older recordings ran
    action_log_in_view: int | None = Field(0, ge=0, le=64)
    # frame lines say the side of every bearing ("imp left 3"); false: within 5 degrees "ahead", without a side
    signed_bearings: bool = True
    # "aimed": bearings once the turn in flight is done (control/turning.py), objects in the order an aimer takes them, as
    # the view expert labels; "seen": as the frame shows them (recordings and adapters made before this setting)
    frame_line: Literal["aimed", "seen"] = "aimed"
    # frames the action stream reads, the newest K of the budgets.frames_in_view the views hold (the view expert
    # decides from the newest alone, and each older line is ~25 tokens to learn to ignore); null: all of them
    action_frames_in_view: int | None = Field(1, ge=1, le=64)
    # the Thinker decodes in steps that decide a command too; false: it sits those out (a decision step's cost is
    # the reaction time, and a thought token can wait one step)
    think_while_deciding: bool = False
    commentary_interval_ms: float = Field(4000.0, ge=0)
    commentary_max_tokens: int = Field(24, ge=1, le=256)


class VoiceConfig(_Strict):
    """Live voice: which sound devices (index or name, see `python -m sounddevice`), how barge-in works."""

    input_device: int | str | None = None  # None: the system default microphone
    output_device: int | str | None = None  # None: the system default speaker
    barge_in: Literal["pause_confirm", "half_duplex", "immediate"] = "pause_confirm"


class ModelConfig(_Strict):
    """Which weights to run and how. path=None means the embedded SmolLM2-135M-Instruct."""

    path: str | None = None
    # a LoRA adapter directory from `agent-runtime train`, merged at load; "default": the shipped one (embedded model
    # only); "none" or None: the untrained model
    adapter: str | None = "default"
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"  # auto: the CPU path's choice (agent_runtime/model/cpu_path.py)
    threads: int | None = Field(None, ge=1, description="torch threads; None = the cores actually free")


class KVConfig(_Strict):
    """Fixed capacity of the shared KV block store."""

    capacity_tokens: int = Field(8192, ge=64)
    page_size: int = Field(16, ge=1, le=1024)


class RunConfig(_Strict):
    scenario: str = "defend_the_center"
    resolution: Literal[RESOLUTIONS] = "160x120"
    clock: Literal["sync", "realtime"] = "sync"
    seed: int = 0
    recordings_dir: str = "recordings"
    budgets: BudgetConfig = BudgetConfig()
    engine: EngineConfig = EngineConfig()
    voice: VoiceConfig = VoiceConfig()
    model: ModelConfig = ModelConfig()
    kv: KVConfig = KVConfig()


def _describe(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "<root>"
    plain = {"extra_forbidden": "unknown key",
             "literal_error": "must be one of " + first.get("ctx", {}).get("expected", "?")}
    msg = plain.get(first["type"], first["msg"].removeprefix("Value error, "))  # a validator's own message
    return f"{source}: bad value for '{key}': {msg}"


def load_config(path: str | Path | None = None, **overrides) -> RunConfig:
    """Load configs/default.yaml (or PATH), apply CLI overrides, validate."""
    source = Path(path) if path else CONFIG_DIR / "default.yaml"
    if not source.is_file():
        raise UserError(f"config file not found: {source} (pass an existing YAML file with --config)")
    try:
        data = yaml.safe_load(source.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserError(f"{source}: not valid YAML: {first_line(e)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of keys at the top level")
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(_describe(e, str(source))) from None
