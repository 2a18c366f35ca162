"""`agent-runtime episode`: play headless episodes with a policy, report reward, kills and tics, and record each one.

Each episode runs in its own DoomEnv, closed before its recording so the .lmp is finished when its hash is taken.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from envs.engine_guard import EngineDied, EngineHung

from agent_runtime import fanout, signals
from agent_runtime.commands import (add_on_disk_full, add_options, at_least, check_scenario, fixed_cost, print_progress,
                                    writable_dir)
from agent_runtime.errors import UserError, first_line
from agent_runtime.fanout.episode_fanout import run_episodes
from agent_runtime.notices import stderr_line

POLICIES = ("llm", "sequential", "no_think", "scripted", "expert", "random")
MODEL_POLICIES = ("llm", "sequential", "no_think")
MODEL_SEED = 0  # tiny random models are drawn with this seed (load_model's default)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", help="bundled scenario name (e.g. defend_the_center) or a path to a .cfg")
    p.add_argument("--episodes", type=int, default=1, help="number of episodes (default 1)")
    p.add_argument("--policy", choices=POLICIES, default="llm",
                   help="who plays: llm = the multi-stream agent (default); sequential = read-think-act with the same "
                        "model; no_think = read-act; scripted = aim-and-shoot from labels; expert = "
                        "lag-aware aim with hold counts from labels; random")
    p.add_argument("--seed", type=int, help="base seed; episode k uses seed + k (default: from the config)")
    add_options(p, "--config", "--max-tics", "--fixed-cost")
    p.add_argument("--clock", choices=("sync", "realtime"), help="override the config's clock")
    p.add_argument("--out", help="directory for the episodes' recordings and results.jsonl "
                                 "(default: recordings go to the config's recordings_dir, results only to stdout)")
    p.add_argument("--lag-tics", type=int, default=0, help="the policy sees frames this many tics old (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per episode on stdout, nothing else")
    add_options(p, "--no-record", "--model", "--adapter")
    p.add_argument("--think-tokens", type=int, default=64,
                   help="sequential policy: thought tokens per cycle (default 64)")
    p.add_argument("--threads", type=int, help="torch threads (default: the config's, else the cores actually free)")
    p.add_argument("--on-engine-death", choices=("exit", "continue"), default="exit",
                   help="when the ViZDoom engine dies or hangs mid-episode (its recording is closed as incomplete "
                        "either way): exit = stop with exit code 1 (default); continue = go on with the next "
                        "episode on a fresh engine, and exit 1 at the end")
    add_on_disk_full(p, "run")
    p.add_argument("--user-text", action="append", metavar="STEP:TEXT",
                   help="llm policy: type TEXT to the agent at engine step STEP (repeatable); a command such as "
                        "TURN_LEFT or 'ATTACK 3' also acts at once. Recorded as user_input, replayed by --rerun")
    fanout.add_arguments(p)  # --workers, --ray-address


def _readable(result: dict) -> str:
    from agent_runtime.benchmarks.measure import shown

    line = (f"episode {result['episode']}: reward {result['reward']:g}, kills {result['kills']}, tics {result['tics']}"
            f" ({result['policy']} on {result['scenario']}, seed {result['seed']})")
    if "actions_executed" in result:
        p50, p95 = result.get("reaction_ms_p50"), result.get("reaction_ms_p95")
        line += (f"\n  actions executed {result['actions_executed']}, fenced {result['actions_fenced']}, "
                 f"frames dropped {result['frames_dropped']}, thinker tokens {result['thinker_tokens']}, "
                 f"reaction p50 {shown(p50, ' ms')} p95 {shown(p95, ' ms')}")
    return line


def run(args: argparse.Namespace) -> int:
    from agent_runtime.config import load_config
    from agent_runtime.recording.user_script import parse_user_text_args
    from agent_runtime.recording.write_guard import RecordingStopped, WriteGuard

    at_least(args, 1, "--episodes", "--max-tics", "--think-tokens", "--threads")
    at_least(args, 0, "--lag-tics")
    if args.user_text and args.policy != "llm":
        raise UserError("--user-text is for the llm policy")
    fanout.check(args)
    config = load_config(args.config, scenario=args.scenario, seed=args.seed, clock=args.clock)
    check_scenario(config.scenario)
    user_texts = parse_user_text_args(args.user_text)
    out_dir = writable_dir(args.out, "--out") if args.out else None
    record_root = None if args.no_record else out_dir or writable_dir(config.recordings_dir, "recordings_dir")
    if fanout.wanted(args):  # --workers N / --ray-address: the same episodes, played by Ray workers
        return run_episodes(args, config, user_texts, out_dir, record_root)

    env = _open_env(config, config.seed)
    try:
        player = make_player(args, config, env, user_texts)
    except BaseException:
        env.close()
        raise
    results_file = (out_dir / "results.jsonl").open("a") if out_dir else None
    guard = WriteGuard(args.on_disk_full)  # a write that fails mid-run stops every file of the run, not the play
    try:
        with signals.stoppable():
            lost = _play_all(args, config, player, env, record_root, results_file, guard)
    except RecordingStopped:  # --on-disk-full stop: the guard's line said why; the recording is closed
        return 1
    finally:
        if results_file is not None:
            try:
                results_file.close()
            except OSError as e:
                guard.report(results_file.name, e)
    return 1 if lost or (guard.failed and guard.policy == "stop") else 0


def _play_all(args, config, player, env, record_root, results_file, guard) -> int:
    """Every episode, each on its own engine (`env` is the first); returns how many were lost to a dead engine
    (stops at the first with --on-engine-death exit)."""
    lost = 0
    try:
        for index in range(args.episodes):
            signals.check()
            seed = config.seed + index
            if env is None:
                env = _open_env(config, seed)
            played, env = env, None  # _play_episode closes it, whatever happens
            try:
                result = _play_episode(player, played, seed, index, record_root, guard)
            except EngineDied as e:
                lost += 1
                where = getattr(e, "recording_dir", None)
                stderr_line(f"agent-runtime episode: error: episode {index}: {e}"
                            + (f"; its recording is closed as incomplete: {where}" if where else ""))
                if args.on_engine_death == "exit":
                    return lost
                continue
            report(args, index + 1, result, results_file, guard)
    finally:
        if env is not None:
            env.close()
    return lost


def _open_env(config, seed: int):
    """A DoomEnv for one episode; the constructor seed is what a baseline's new_episode() uses."""
    # Imported here so `agent-runtime --help` stays fast and other commands do not load the engine.
    from envs.doom_env import DoomEnv

    try:
        return DoomEnv(config.scenario, resolution=config.resolution, clock=config.clock, seed=seed)
    except (ValueError, OSError) as e:
        raise UserError(f"cannot start scenario {config.scenario}: {e}") from None
    except Exception as e:  # the engine's own exceptions (a broken .cfg or WAD)
        raise UserError(f"ViZDoom could not start scenario {config.scenario}: {first_line(e)}") from None


def _play_episode(player, env, seed: int, index: int, record_root: Path | None, guard) -> dict:
    """One episode on `env` (closed here); its recording is closed as incomplete when the episode ends early.
    Once `guard` (the run's WriteGuard) saw a write fail, the episode plays unrecorded."""
    from agent_runtime.recording.episode_recorder import EpisodeRecording
    from agent_runtime.recording.write_guard import END_REASON, RecordingStopped

    recording, end_reason, detail = None, None, None
    try:
        if record_root is not None:
            recording = EpisodeRecording.create(record_root, player.manifest(seed, index), scenario=env.scenario,
                                                index=index, guard=guard, mid_run=True)
        result = player.play(env, seed, recording)
    except EngineDied as e:
        if signals.requested() is not None:  # Ctrl-C reaches the engine too: the stop came first
            stop = signals.Interrupted(signals.requested())
            end_reason, detail = stop.reason, str(stop)
            raise stop from None
        end_reason, detail = ("engine_hung" if isinstance(e, EngineHung) else "engine_died"), str(e)
        e.recording_dir = recording.dir if recording is not None else None  # named in the one error line
        raise
    except signals.Interrupted as e:
        end_reason, detail = e.reason, str(e)
        e.recording_dir = recording.dir if recording is not None else None  # a Ray worker reports it
        raise
    except Exception as e:  # anything else that ends the episode early (--on-disk-full stop, a full KV pool, ...)
        end_reason, detail = (END_REASON, str(e)) if isinstance(e, RecordingStopped) else ("error", first_line(e))
        raise
    finally:
        try:
            env.close()  # finishes the .lmp: before the recording takes its hash
        finally:
            if recording is not None:
                recording.close(end_reason, detail)
                if end_reason in signals.REASONS.values():
                    stderr_line(f"recording (incomplete, {end_reason}): {recording.dir}")
    result["episode"] = index
    if recording is not None:
        result["recording"] = str(recording.dir)
    return result


def report(args, done: int, result: dict, results_file, guard=None, where: str = "") -> None:
    """An episode's result: the progress line (the `done`-th of the run), stdout, results.jsonl."""
    stderr_line(f"[{done}/{args.episodes}] {where}{result['tics']} tics, {result['kills']} kills, "
                f"reward {result['reward']:g}, {result['wall_s']:.1f} s")
    if "recording" in result:
        stderr_line(f"recording: {result['recording']}")
    print(json.dumps(result) if args.json else _readable(result), flush=True)
    if results_file is None or (guard is not None and guard.failed):
        return
    try:
        results_file.write(json.dumps(result) + "\n")
        results_file.flush()
    except OSError as e:  # a full disk: stdout has the result; the guard's one line says what stopped
        if guard is None:
            raise
        guard.report(results_file.name, e)


def make_player(args, config, env, user_texts: dict[int, str]):
    """The player of --policy: a model loaded once on `env`, or a baseline."""
    if args.policy in MODEL_POLICIES:
        return _ModelPlayer(args, config, env, user_texts)
    return _BaselinePlayer(args, config)


class _BaselinePlayer:
    """scripted / random: no model; the recording gets the .lmp plus frame_read and action_executed events."""

    def __init__(self, args, config):
        self.args, self.config = args, config

    def manifest(self, seed: int, index: int):
        from agent_runtime.recording.episode_recorder import episode_manifest

        return episode_manifest(self.config, policy=self.args.policy, env_seed=seed,
                                agent_seed=seed if self.args.policy == "random" else None, index=index,
                                max_tics=self.args.max_tics, lag_tics=self.args.lag_tics)

    def play(self, env, seed: int, recording) -> dict:
        from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode
        from agent_runtime.recording.episode_recorder import RecordedEnv

        policy = make_policy(self.args.policy, env.buttons, seed=seed, screen_width=env.resolution[1])
        played = RecordedEnv(env, recording) if recording is not None else env
        return run_baseline_episode(played, policy, max_tics=self.args.max_tics, lag_tics=self.args.lag_tics)


class _ModelPlayer:
    """llm / sequential / no_think: the model is loaded once; each episode plays on its own DoomEnv."""

    def __init__(self, args, config, env, user_texts: dict[int, str]):
        from agent_runtime.control.action_grammar import check_expressible
        from agent_runtime.recording.user_script import command_for_text
        from agent_runtime.session.runtime import Runtime

        if config.clock != "sync":
            raise UserError("model policies in `episode` run headless on the sync clock; "
                            "use `agent-runtime live` for real time")
        check_expressible(env.buttons, env.scenario)  # before the model loads
        spec = args.model or config.model.path
        if spec and not spec.startswith("tiny:") and not Path(spec).expanduser().exists():
            raise UserError(f"model path does not exist: {spec} "
                            "(pass a safetensors directory, a .gguf file or tiny:llama)")
        self.args, self.config, self.spec = args, config, spec
        self.runtime = Runtime.open(config, model=spec, env=env, threads=args.threads, seed=MODEL_SEED,
                                    adapter=args.adapter)
        self.loaded = self.runtime.loaded
        self.fixed = fixed_cost(args)
        # the bounds the multi-stream agent plays under (max_action_age_ms auto resolved once, announced)
        self.bounds = self.runtime.time_bounds(self.fixed, announce=True) if args.policy == "llm" else None
        # texts that spell a command also act directly (as a typed button command does)
        self.user_script = {step: (text, command_for_text(self.runtime.grammar, text))
                            for step, text in user_texts.items()} or None
        self.think_tokens = {"sequential": args.think_tokens, "no_think": 0}.get(args.policy)

    def manifest(self, seed: int, index: int):
        from agent_runtime.recording.episode_recorder import episode_manifest

        return episode_manifest(self.config, policy=self.args.policy, env_seed=seed, agent_seed=seed, index=index,
                                model_spec=self.spec, loaded=self.loaded, model_seed=MODEL_SEED, fixed_cost=self.fixed,
                                think_tokens=self.think_tokens, max_tics=self.args.max_tics, bounds=self.bounds)

    def play(self, env, seed: int, recording) -> dict:
        from agent_runtime.session.llm_episode import run_llm_episode
        from agent_runtime.recording.episode_recorder import RecordedEnv
        from agent_runtime.policies.sequential_agent import run_sequential_episode

        t0 = time.monotonic()
        bus = recording.bus if recording is not None else None
        common = dict(seed=seed, max_tics=self.args.max_tics, fixed_cost=self.fixed, progress=print_progress,
                      agent_seed=seed, bus=bus)
        if self.args.policy == "llm":
            lmp = str(recording.lmp_path) if recording is not None else None
            result = run_llm_episode(env, self.runtime, record_path=lmp, user_script=self.user_script, **common)
        else:
            # the executor emits action_executed/fenced on the bus; the wrapper adds the .lmp and frame_read
            played = RecordedEnv(env, recording, emit_actions=False) if recording is not None else env
            result = run_sequential_episode(played, self.runtime, think_tokens=self.think_tokens, **common)
        result.pop("reaction_samples_ms", None)
        result.update(scenario=env.scenario, policy=self.args.policy, seed=seed, model=self.loaded.model_id,
                      threads=self.loaded.cpu.threads, cpu_path=self.loaded.cpu.name,
                      adapter=self.loaded.adapter.hash if self.loaded.adapter else None, wall_s=time.monotonic() - t0)
        return result
