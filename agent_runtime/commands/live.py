"""`agent-runtime live`: real-time play with the multi-stream agent; typed commands, or voice with --voice."""

import argparse
import json
import os
import sys

from agent_runtime.commands import MODEL_OPTIONS, add_on_disk_full, add_options, require_cuda, writable_dir
from agent_runtime.errors import UserError
from agent_runtime.notices import stderr_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, "--scenario", "--config", "--frame-source")
    p.add_argument("--voice", action="store_true", help="spoken commands from the microphone and spoken commentary "
                                                          "(no sound card: see DOOM_AGENT_AUDIO in docs/voice.md)")
    p.add_argument("--no-window", action="store_true",
                   help="never open the ViZDoom window (it opens when a display exists)")
    p.add_argument("--seconds", type=float, help="stop after this many seconds (default: when the episode ends)")
    add_options(p, "--barge-in", "--command-pause-ms")
    p.add_argument("--input-device", help="microphone device index or name (default: the config's voice.input_device; "
                                          "see `python -m sounddevice`)")
    p.add_argument("--output-device", help="speaker device index or name (default: the config's voice.output_device)")
    add_options(p, *MODEL_OPTIONS, "--json")
    p.add_argument("--out", help="directory for the session recording (default: the config's recordings_dir)")
    add_options(p, "--no-record")
    add_on_disk_full(p, "session")


def _device(value):
    return int(value) if value is not None and value.isdigit() else value


def run(args: argparse.Namespace) -> int:
    from agent_runtime.config import from_args
    from agent_runtime.session.generation import SessionGeneration
    from agent_runtime.model.model_loader import load_for_cpu
    from agent_runtime.recording.write_guard import RecordingStopped

    config = from_args(args, clock="realtime")
    if args.seconds is not None and args.seconds <= 0:
        raise UserError(f"--seconds must be positive (got {args.seconds})")
    require_cuda(args.device)
    window = bool(os.environ.get("DISPLAY")) and not args.no_window
    generation = SessionGeneration()
    voice = _open_voice(args, config, generation)  # first: no device is a clear error before anything is written
    try:
        if not args.no_record:  # before the model loads: a recording that cannot be written is one line
            writable_dir(args.out or config.recordings_dir, "--out" if args.out else "recordings_dir")
        # the cores actually free: the real-time game and audio take well under half a core, and leaving them
        # a whole one cost reactions (2-core AVX2 box: p50 189 -> 131 ms with both cores, 7 -> 0 fenced)
        loaded = load_for_cpu(args.model, dtype=args.dtype, threads=args.threads, adapter=args.adapter,
                              scenario=config.scenario)
    except BaseException:
        if voice is not None:
            voice.close()
        raise
    bounds: dict = {}  # the runtime's TimeBounds, once it is open: what the recordings' manifests name
    recordings = None if args.no_record else _recordings(args, config, loaded, voice, bounds)
    try:
        result = _play(args, config, window, generation, loaded, voice, recordings, bounds)
    except RecordingStopped:  # --on-disk-full stop: the guard's line said why; the recording is closed below
        return 1
    finally:
        if recordings is not None:
            recordings.close()  # after the env closed inside _play: the last .lmp is complete
    if recordings is not None:
        result["recordings"] = [str(d) for d in recordings.dirs]
    print(json.dumps(result) if args.json else ", ".join(f"{k} {v:.0f}" if isinstance(v, float) else f"{k} {v}"
                                                         for k, v in result.items() if k != "recordings"))
    return 0


def _open_voice(args, config, generation):
    if not args.voice:
        return None
    from agent_runtime.voice.device_free import voice_options
    from agent_runtime.voice.voice_io import VoiceIO

    vc = config.voice
    return VoiceIO(generation, mode=args.barge_in,
                   input_device=_device(args.input_device) if args.input_device else vc.input_device,
                   output_device=_device(args.output_device) if args.output_device else vc.output_device,
                   command_pause_ms=config.voice.command_pause_ms,
                   **voice_options())  # DOOM_AGENT_AUDIO: the device-free backend instead of the sound devices


def _recordings(args, config, loaded, voice, bounds: dict):
    """Every episode of the session recorded in its own directory (bounds["time"]: the bounds it plays under)."""
    from agent_runtime.recording.episode_recorder import episode_manifest
    from agent_runtime.recording.live_recordings import LiveRecordings
    from agent_runtime.recording.write_guard import WriteGuard

    def manifest_for(index: int):
        return episode_manifest(config, policy="live", env_seed=config.seed + index, agent_seed=0, index=index,
                                model_spec=args.model, loaded=loaded, clock="realtime",
                                bounds=bounds.get("time"), frames=bounds.get("frames"))

    return LiveRecordings(args.out or config.recordings_dir, manifest_for, scenario=config.scenario,
                          voice=voice, guard=WriteGuard(args.on_disk_full),
                          announce=lambda d: stderr_line(f"recording: {d}"))


def _play(args, config, window, generation, loaded, voice, recordings, bounds: dict) -> dict:
    from agent_runtime.session.episodes import print_progress
    from agent_runtime.session.live_session import TypedCommands, run_live
    from agent_runtime.session.runtime import Runtime

    with Runtime.open(config, loaded=loaded, clock="realtime", window=window, device=args.device) as runtime:
        env = runtime.env  # (its grammar refused a scenario with delta buttons)
        bounds["time"], bounds["frames"] = runtime.time_bounds(announce=True), runtime.frame_identity()
        if recordings is not None and recordings.current is not None:  # opened before the bound was known
            recordings.current.manifest.config["budgets"]["max_action_age_ms"] = bounds["time"].max_action_age_ms
            recordings.current.manifest.extra.update(bounds["frames"])
        typed = TypedCommands() if sys.stdin.isatty() else None
        stderr_line(f"live: {env.scenario}, {loaded.model_id}, {loaded.cpu.threads} thread(s), "
                    f"window {'on' if window else 'off'}, voice {'on' if voice else 'off'}"
                    + ("; type commands like 'turn left' + Enter" if typed else ""))
        return run_live(env, runtime, seconds=args.seconds, voice=voice, typed=typed, generation=generation,
                        progress=print_progress, recordings=recordings)
