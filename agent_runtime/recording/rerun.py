"""Play a recorded llm-policy episode again from its recorded inputs and compare the actions it emits.

With the model (checked by weight hash), config, seeds, threads, the clock's step costs and the user's inputs
fixed, the agent must emit the same (command, frame_tic) sequence; the first difference is reported.
"""

from itertools import zip_longest
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_runtime.config import RunConfig
from agent_runtime.errors import UserError, first_line
from agent_runtime.model.adapters import read_adapter, resolve_adapter, shipped_with_hash
from agent_runtime.model.model_loader import EMBEDDED_MODEL_ID, load_for_cpu
from agent_runtime.recording.manifest import MANIFEST_FILE
from agent_runtime.recording.recording import Recording
from agent_runtime.recording.user_script import user_script_from_events
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.events import Event, EventBus, Kind
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.runtime import Runtime


def _played(events: list[Event]) -> tuple[list[dict], list[tuple]]:
    """Every action_emitted's {command, frame_tic} and every frame_read's (tic, screen_hash), in order."""
    return ([{"command": e.payload.get("command"), "frame_tic": e.payload.get("frame_tic")}
             for e in events if e.kind == Kind.ACTION_EMITTED],
            [(e.tic, e.payload.get("screen_hash")) for e in events if e.kind == Kind.FRAME_READ])


def recorded_step_costs(events: list[Event], source: str) -> list[float]:
    """cost_ms of the clock_advance events, which must run 0, 1, 2, ... without gaps."""
    costs: list[float] = []
    for e in (e for e in events if e.kind == "clock_advance"):
        step, cost = e.payload.get("step"), e.payload.get("cost_ms")
        if step != len(costs) or not isinstance(cost, (int, float)) or isinstance(cost, bool):
            raise UserError(f"{source}: clock_advance event seq {e.seq} is out of order or has no cost_ms "
                            f"(expected step {len(costs)}); the recording cannot be re-run")
        costs.append(float(cost))
    if not costs:
        raise UserError(f"{source}: no clock_advance events; the recording cannot be re-run "
                        "(it was made before step costs were recorded, or by a baseline policy)")
    return costs


# Recordings made before the action stream chose hold counts, waited for each hold to end, stopped reading its
# own action log, joined counts to their words, let the Thinker sit out decision steps and wrote aimed frame lines:
# re-run as they ran.
LEGACY_ENGINE = {"hold_counts": False, "decision_cadence": "frame", "action_log_in_view": None,
                 "signed_bearings": False, "action_frames_in_view": None, "hold_count_text": "spaced",
                 "think_while_deciding": True, "frame_line": "seen", "frame_source": "labels"}


def with_legacy_engine(config: dict) -> dict:
    """The manifest's config with the engine settings it predates set to what that runtime did."""
    return {**config, "engine": {**LEGACY_ENGINE, **(config.get("engine") or {})}}


def recorded_encode_costs(events: list[Event]) -> list[float]:
    """What each encoded frame cost on the recorded clock (encode_cost_ms of frame_prefilled and of encoded_late
    drops), in order: the rerun's frame-age checks read them. Recordings made before they were recorded have none
    (their runs made no such check)."""
    return [float(e.payload["encode_cost_ms"]) for e in events
            if e.kind in (Kind.FRAME_PREFILLED, Kind.FRAME_DROPPED) and "encode_cost_ms" in e.payload]


def first_divergence(recorded: list, rerun: list) -> dict[str, Any] | None:
    """{index, recorded, rerun} of the first differing action (None past the end), or None when equal."""
    return next(({"index": index, "recorded": a, "rerun": b}
                 for index, (a, b) in enumerate(zip_longest(recorded, rerun)) if a != b), None)


def rerun_recording(directory: str | Path | Recording) -> dict[str, Any]:
    """Re-run the recording in DIR (or an open Recording); {"same_actions", "n_actions", "n_actions_rerun",
    "first_divergence", ...}."""
    import torch

    recording = directory if isinstance(directory, Recording) else Recording.open(directory)
    manifest, source = recording.manifest, str(recording.dir / MANIFEST_FILE)
    policy = manifest.extra.get("policy")
    if policy != "llm":
        raise UserError(f"{source}: policy {policy!r} cannot be re-run; --rerun replays recordings of the "
                        "llm policy made by `agent-runtime episode`")
    try:
        config = RunConfig.model_validate(with_legacy_engine(manifest.config))
    except ValidationError as e:
        raise UserError(f"{source}: its config is not valid for this runtime: {e.errors()[0]['msg']}") from None
    events = recording.events
    costs = recorded_step_costs(events, str(recording.events_path))
    env_seed, agent_seed = manifest.seeds.get("env"), manifest.seeds.get("agent", 0)
    if not isinstance(env_seed, int):
        raise UserError(f"{source}: seeds.env is missing; the recording cannot be re-run")
    fixed = manifest.extra.get("fixed_cost")
    fixed_cost = FixedCost(**fixed) if isinstance(fixed, dict) else None

    previous_threads = torch.get_num_threads()
    try:
        bus, threads, n_user_inputs = _play_again(recording, config, costs, env_seed, agent_seed, fixed_cost, source)
    finally:
        torch.set_num_threads(previous_threads)  # a library call leaves the process's thread count as it was
    (recorded, recorded_frames), (rerun, rerun_frames) = _played(events), _played(bus.events)
    divergence = first_divergence(recorded, rerun)
    return {
        "same_actions": divergence is None,
        "n_actions": len(recorded),
        "n_actions_rerun": len(rerun),
        "first_divergence": divergence,
        "same_frames": recorded_frames == rerun_frames,
        "n_steps": len(costs),
        "n_user_inputs": n_user_inputs,
        "model": manifest.model_id,
        "threads": threads,
    }


def _play_again(recording: Recording, config, costs: list[float], env_seed: int, agent_seed: int, fixed_cost,
                source: str) -> tuple[EventBus, int, int]:
    """Load the recorded model (same weights, dtype, threads) and play the episode with the recorded inputs."""
    manifest = recording.manifest
    if manifest.model_id is None:
        raise UserError("the manifest names no model (model_id is null); only model-policy recordings can be re-run")
    spec = None if manifest.model_id == EMBEDDED_MODEL_ID else manifest.model_id
    # the recorded precision, threads and adapter (none when the manifest names none), whatever this CPU or the
    # config's default would pick: a rerun must compute what the run did
    loaded = load_for_cpu(spec, dtype=config.model.dtype, threads=manifest.threads or config.model.threads or 1,
                          seed=int(manifest.seeds.get("model", 0)), announce=False, warn=False,
                          adapter=_recorded_adapter(config, manifest, spec))
    if manifest.model_weight_hash is not None and loaded.weight_hash != manifest.model_weight_hash:
        raise UserError(f"model {manifest.model_id} has weight hash {loaded.weight_hash}, but the recording was "
                        f"made with {manifest.model_weight_hash} ({source}); a rerun needs the very same weights")
    bus = EventBus(f"rerun-{recording.dir.name}", keep=True)
    try:
        runtime = Runtime.open(config, loaded=loaded, env_seed=env_seed)
    except UserError as e:  # what the runtime itself refuses (missing detector weights, ...) says so itself
        raise UserError(f"{source}: {e}") from None
    except Exception as e:  # an unknown scenario, a broken .cfg or WAD
        raise UserError(f"{source}: cannot start scenario {config.scenario}: {first_line(e)}") from None
    with runtime:
        detector = manifest.extra.get("detector_hash")
        current = runtime.frame_identity()["detector_hash"]
        if detector is not None and current != detector:
            raise UserError(f"{source}: the frame lines were written by screen detector {detector}, but this one is "
                            f"{current} (engine.detector); a rerun needs the very same one")
        user_script = user_script_from_events(recording.events, runtime.grammar)
        max_tics = manifest.extra.get("max_tics")
        run_llm_episode(runtime.env, runtime, seed=env_seed, agent_seed=agent_seed, fixed_cost=fixed_cost, bus=bus,
                        max_tics=max_tics if isinstance(max_tics, int) else None, replay_costs=costs,
                        replay_encode_ms=recorded_encode_costs(recording.events),
                        user_script=user_script or None)
    return bus, loaded.cpu.threads, len(user_script)


def _recorded_adapter(config, manifest, spec: str | None) -> str | None:
    """The adapter the recording played with: the one its config names where that still has the recorded weights,
    else the shipped adapter (current or kept in agent_runtime/trained/previous/) with the recorded hash."""
    recorded = manifest.extra.get("adapter")
    if not recorded:
        return None
    requested = resolve_adapter(config.model.adapter, spec, config.scenario)
    recorded_hash = recorded.get("hash") if isinstance(recorded, dict) else None
    if recorded_hash and not _has_hash(requested, recorded_hash):
        shipped = shipped_with_hash(recorded_hash)
        if shipped is not None:
            return str(shipped)
    return requested  # where nothing has its weights, the weight hash check below says so


def _has_hash(path: str | None, weights_hash: str) -> bool:
    try:
        return path is not None and read_adapter(path).hash == weights_hash
    except UserError:  # moved or damaged since
        return False


def describe_rerun(result: dict[str, Any]) -> str:
    """One or two lines for people."""
    if result["same_actions"]:
        return (f"rerun: same actions ({result['n_actions']} actions over {result['n_steps']} engine steps, "
                f"frames {'identical' if result['same_frames'] else 'DIFFERENT'})")
    d = result["first_divergence"]
    return (f"rerun: DIFFERENT actions ({result['n_actions']} recorded, {result['n_actions_rerun']} re-run); "
            f"first divergence at action {d['index']}: recorded {d['recorded']}, rerun {d['rerun']}")
