"""Run configuration: YAML files under configs/, validated so a bad value names its key and the allowed values."""

import functools
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envs.scenarios import ScenarioError, resolve_scenario

from agent_runtime.errors import UserError, first_line

CONFIG_DIR = Path(__file__).resolve().parent / "configs"  # package data; the checkout's configs/ links here
RESOLUTIONS = ("160x120", "200x150", "256x192", "320x240", "400x300", "640x480")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetConfig(_Strict):
    """Time bounds: stale frames and stale actions are dropped, never used late."""

    max_frame_age_ms: float = Field(250.0, gt=0, description="A frame older than this is dropped, never prefilled.")
    max_action_age_ms: float | Literal["auto"] = Field("auto", description=(
        "An action whose frame is older than this when it would run is fenced. auto: 250 ms, or two "
        "decision steps where one takes over 125 ms here."))
    frames_in_view: int = Field(4, ge=1, le=64, description="Frames the views hold: the newest K.")
    thinker_tokens_per_paragraph: int = Field(48, ge=4, le=512, description="Thinker tokens in one block.")
    thinker_paragraphs_in_view: int = Field(2, ge=1, le=32, description="Thinker blocks the views hold: the newest K.")
    thinker_frames_in_view: int | None = Field(None, ge=1, le=256, description=(
        "Frames the Thinker's view holds, the newest K, kept past max_frame_age_ms (which drops them from the "
        "other views): the history a note remembers from. null: the same frames as the other views."))

    @field_validator("max_action_age_ms")
    @classmethod
    def _positive_age(cls, v):
        if v != "auto" and not v > 0:
            raise ValueError("must be auto or a number of milliseconds above 0")
        return v


class EngineConfig(_Strict):
    """How the multi-stream engine schedules its streams."""

    decision_mode: Literal["score", "decode"] = Field("score", description=(
        "score: a command in one forward (prompt and branches); decode: token by token."))
    think: bool = Field(True, description="Run the Thinker stream in the same forwards as the action stream.")
    temperature: float = Field(0.8, gt=0, le=5, description="Sampling temperature of the decoding streams.")
    thinker_temperature: float | None = Field(None, gt=0, le=5, description=(
        "The Thinker's own sampling temperature (a low one writes a trained note as learned); null: temperature, "
        "drawn from the one generator the streams share."))
    prefill_tokens_per_step: int = Field(96, ge=8, le=4096, description=(
        "Longer user or heard text is prefilled in chunks across steps, so a reaction never waits long."))
    action_hold_tics: int = Field(4, ge=1, le=35, description="How long a command without a count holds its button.")
    hold_counts: bool = Field(True, description=(
        "Score mode chooses the hold too (every command at 1..8 tics), as the expert does; false: held "
        "action_hold_tics."))
    hold_count_text: Literal["joined", "spaced"] = Field("joined", description=(
        'How a hold count is written: joined ("left3", one branch row per word) or spaced ("left 3", a row more; '
        'for recordings and adapters made so).'))
    decision_cadence: Literal["hold", "frame"] = Field("hold", description=(
        "hold: decide again on the frame of the tic the hold ends (as the expert plays); frame: on every new frame."))
    action_log_in_view: int | None = Field(0, ge=0, le=64, description=(
        "Own past decisions the action stream reads. 0: none (aimed frame lines carry the turn in flight); "
        "1: the previous command (invites copying); null: all."))
    signed_bearings: bool = Field(True, description=(
        'Frame lines give every bearing a side ("imp left 3"); false: "ahead" within 5 degrees, without a side.'))
    frame_line: Literal["aimed", "seen", "none"] = Field("aimed", description=(
        "aimed: bearings once the turn in flight is done, objects in aiming order (what the view expert labels "
        "from); seen: as the frame shows them; none: no words, the frame block holds only the image tokens of a "
        "vision-language model (with frame_source pixels)."))
    frame_source: Literal["labels", "pixels"] = Field("labels", description=(
        "labels: frame lines from the engine's label buffer (the game's hidden state); pixels: from the screen alone, "
        "by the screen detector (the engine runs without label and depth buffers)."))
    detector: str | None = Field(None, description=(
        "Screen detector weights (`agent-runtime train-detector`) for frame_source pixels; null: the shipped ones."))
    action_frames_in_view: int | None = Field(1, ge=1, le=64, description=(
        "Frames the action stream reads: the newest K of budgets.frames_in_view (the view expert decides from "
        "the newest alone); null: all."))
    think_while_deciding: bool = Field(False, description=(
        "The Thinker decodes in steps that decide a command too; false: it sits those out (a decision step's "
        "cost is reaction time)."))
    commentary_interval_ms: float = Field(4000.0, ge=0, description="Time between two spoken or printed remarks.")
    commentary_max_tokens: int = Field(24, ge=1, le=256, description="Tokens in one remark at most.")
    vocabulary: Literal["free", "remarks", "notes", "both"] = Field("free", description=(
        "Which texts decode under the checkable vocabulary's token grammar (thinking/phrase_grammar.py): remarks, "
        "the Thinker's notes, both; the model chooses among the phrases only. free: any tokens."))


class VoiceConfig(_Strict):
    """Live voice (`live --voice`): which sound devices (see `python -m sounddevice`), how barge-in works."""

    input_device: int | str | None = Field(None, description="Microphone: index or name; null: the system default.")
    output_device: int | str | None = Field(None, description="Speaker: index or name; null: the system default.")
    barge_in: Literal["pause_confirm", "half_duplex", "immediate"] = Field("pause_confirm", description=(
        "What user speech does while the agent talks: pause_confirm (open speakers), half_duplex, immediate "
        "(headset); see docs/voice.md."))
    command_pause_ms: int = Field(64, ge=0, le=1024, description=(
        "A whole command phrase that no longer phrase begins with is acted on after this much quiet, instead of "
        "after the end-of-speech window (256 ms); 0: only on the end of speech."))


class ModelConfig(_Strict):
    """Which weights to run and how."""

    path: str | None = Field(None, description=(
        "A safetensors directory or a .gguf file; null: the embedded SmolLM2-135M-Instruct."))
    adapter: str | None = Field("default", description=(
        'A LoRA adapter directory from `agent-runtime train`, merged at load; "default": the one shipped for the '
        'scenario (embedded model only); "none" or null: the untrained model.'))
    no_think_adapter: str | None = Field("default", description=(
        'The adapter the read-act baseline (`no_think`) plays with. "default": the twin of the shipped adapter '
        '(trained the same way on the same episodes, on views without thoughts: `train --views read-act`) where '
        'one is shipped, else the multi-stream agent\'s own adapter; "none" or null: the untrained model; else a '
        'path.'))
    dtype: Literal["auto", "float32", "bfloat16"] = Field("auto", description=(
        "auto: what the CPU path measured fastest here (docs/cpu_paths.md); float32 or bfloat16 to force one."))
    threads: int | None = Field(None, ge=1, description="torch threads; null: the cores actually free.")


class KVConfig(_Strict):
    """Fixed capacity of the shared KV block store: running out is a clear error, never growth."""

    capacity_tokens: int = Field(8192, ge=64, description="Tokens the KV pool holds.")
    page_size: int = Field(16, ge=1, le=1024, description="Tokens a page of the pool holds.")


class RunConfig(_Strict):
    """Top-level keys: what plays, on which clock, where recordings go."""

    scenario: str = Field("defend_the_center", description="A ViZDoom scenario name or a .cfg file.")
    resolution: Literal[RESOLUTIONS] = Field("160x120", description="Screen resolution of the engine.")
    clock: Literal["sync", "realtime"] = Field("sync", description=(
        "sync: the runtime says how many tics pass (headless); realtime: ASYNC_PLAYER at 35 tics/s."))
    seed: int = Field(0, description="Seed of the first episode; episode i plays seed + i.")
    recordings_dir: str = Field("recordings", description="Where recordings go unless --out says otherwise.")
    budgets: BudgetConfig = Field(BudgetConfig(), description="Time bounds for frames and actions.")
    engine: EngineConfig = Field(EngineConfig(), description="How the multi-stream engine schedules its streams.")
    voice: VoiceConfig = Field(VoiceConfig(), description="Sound devices and barge-in for `live --voice`.")
    model: ModelConfig = Field(ModelConfig(), description="Weights, adapter, precision, threads.")
    kv: KVConfig = Field(KVConfig(), description="The fixed KV pool.")


def _describe(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "<root>"
    plain = {"extra_forbidden": "unknown key",
             "literal_error": "must be one of " + first.get("ctx", {}).get("expected", "?")}
    msg = plain.get(first["type"], first["msg"].removeprefix("Value error, "))  # a validator's own message
    return f"{source}: bad value for '{key}': {msg}"


# a flag (its dest) -> the config key it overrides; a flag left unset takes the config's value (from_args)
FLAG_KEYS = {"scenario": "scenario", "seed": "seed", "clock": "clock", "model": "model.path",
             "adapter": "model.adapter", "no_think_adapter": "model.no_think_adapter", "dtype": "model.dtype",
             "threads": "model.threads", "barge_in": "voice.barge_in",
             "command_pause_ms": "voice.command_pause_ms", "frame_source": "engine.frame_source"}


def from_args(args, **fixed) -> RunConfig:
    """--config under the flags given and `fixed` (the command's own); the flags left unset are filled from it. A
    scenario that does not resolve is a UserError naming the choices."""
    overrides: dict = {}
    for dest, key in FLAG_KEYS.items():
        *section, name = key.split(".")
        if (value := fixed.get(dest, getattr(args, dest, None))) is not None:
            (overrides.setdefault(section[0], {}) if section else overrides)[name] = value
    config = load_config(getattr(args, "config", None), **overrides)
    try:
        resolve_scenario(config.scenario)
    except ScenarioError as e:
        raise UserError(str(e)) from None
    for dest, key in FLAG_KEYS.items():
        if hasattr(args, dest):
            setattr(args, dest, functools.reduce(getattr, key.split("."), config))
    return config


def load_config(path: str | Path | None = None, **overrides) -> RunConfig:
    """Load configs/default.yaml (or PATH), apply CLI overrides (a section's as a dict: model={...}), validate."""
    source = Path(path) if path else CONFIG_DIR / "default.yaml"
    if not source.is_file():
        raise UserError(f"config file not found: {source} (pass an existing YAML file with --config)")
    try:
        data = yaml.safe_load(source.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserError(f"{source}: not valid YAML: {first_line(e)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of keys at the top level")
    data.update({k: {**data[k], **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
                 for k, v in overrides.items() if v is not None})  # a section's keys go into the file's section
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(_describe(e, str(source))) from None
