"""Headless episodes with a policy, each recorded: what `agent-runtime episode` plays, here or on a Ray worker.

Each episode runs in its own DoomEnv, closed before its recording so the .lmp is finished when its hash is taken.
"""

import time
from collections.abc import Callable
from pathlib import Path

from envs.doom_env import DoomEnv
from envs.engine_guard import EngineDied, EngineHung

from agent_runtime import signals
from agent_runtime.control.action_grammar import check_expressible
from agent_runtime.errors import UserError, first_line
from agent_runtime.model.adapters import resolve_no_think_adapter
from agent_runtime.model.model_loader import model_path
from agent_runtime.notices import stderr_line, warning_line
from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode
from agent_runtime.policies.sequential_agent import run_sequential_episode
from agent_runtime.recording.episode_recorder import EpisodeRecording, RecordedEnv, episode_manifest
from agent_runtime.recording.write_guard import END_REASON, RecordingStopped
from agent_runtime.session.clocks import FixedCost
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.runtime import Runtime

MODEL_POLICIES = ("llm", "sequential", "no_think")
MODEL_SEED = 0  # tiny random models are drawn with this seed (load_model's default)


def fixed_cost(args) -> FixedCost | None:
    """The FixedCost clock with --fixed-cost, else None (steps cost their measured compute time)."""
    return FixedCost() if args.fixed_cost else None


def print_progress(report: dict) -> None:
    """The progress line a session prints every couple of seconds while it plays (SessionLoop.report)."""
    stderr_line(f"  .. tic {report['tic']}, kills {report['kills']}, actions {report['actions']}")


def play_episodes(args, config, player, env, record_root: Path | None, guard,
                  on_result: Callable[[int, dict], None]) -> int:
    """args.episodes episodes, each on its own engine (`env` is the first), each result to on_result(done, result);
    returns how many were lost to a dead engine (stops at the first with args.on_engine_death "exit")."""
    lost = 0
    try:
        for index in range(args.episodes):
            signals.check()
            seed = config.seed + index
            if env is None:
                env = open_env(config, seed, args.policy)
            played, env = env, None  # play_episode closes it, whatever happens
            try:
                result = play_episode(player, played, seed, index, record_root, guard)
            except EngineDied as e:
                lost += 1
                where = getattr(e, "recording_dir", None)
                warning_line(f"agent-runtime episode: error: episode {index}: {e}"
                            + (f"; its recording is closed as incomplete: {where}" if where else ""))
                if args.on_engine_death == "exit":
                    return lost
                continue
            on_result(index + 1, result)
    finally:
        if env is not None:
            env.close()
    return lost


def open_env(config, seed: int, policy: str) -> DoomEnv:
    """A DoomEnv for one episode; the constructor seed is what a baseline's new_episode() uses. The label buffer is
    on for the baselines (they aim by it) and for a model that reads frame lines from labels, off for pixels."""
    labels = policy not in MODEL_POLICIES or config.engine.frame_source == "labels"
    try:
        return DoomEnv(config.scenario, resolution=config.resolution, clock=config.clock, seed=seed, labels=labels)
    except (ValueError, OSError) as e:
        raise UserError(f"cannot start scenario {config.scenario}: {e}") from None
    except Exception as e:  # the engine's own exceptions (a broken .cfg or WAD)
        raise UserError(f"ViZDoom could not start scenario {config.scenario}: {first_line(e)}") from None


def play_episode(player, env, seed: int, index: int, record_root: Path | None, guard) -> dict:
    """One episode on `env` (closed here); its recording is closed as incomplete when the episode ends early.
    Once `guard` (the run's WriteGuard) saw a write fail, the episode plays unrecorded."""
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
                    warning_line(f"recording (incomplete, {end_reason}): {recording.dir}")
    result["episode"] = index
    if recording is not None:
        result["recording"] = str(recording.dir)
    return result


def make_player(args, config, env, user_texts: dict[int, str]):
    """The player of args.policy: a model loaded once on `env`, or a baseline."""
    if args.policy in MODEL_POLICIES:
        return ModelPlayer(args, config, env, user_texts)
    return BaselinePlayer(args, config)


class BaselinePlayer:
    """scripted / random: no model; the recording gets the .lmp plus frame_read and action_executed events."""

    def __init__(self, args, config):
        self.args, self.config = args, config

    def manifest(self, seed: int, index: int):
        return episode_manifest(self.config, policy=self.args.policy, env_seed=seed,
                                agent_seed=seed if self.args.policy == "random" else None, index=index,
                                max_tics=self.args.max_tics, lag_tics=self.args.lag_tics)

    def play(self, env, seed: int, recording) -> dict:
        policy = make_policy(self.args.policy, env.buttons, seed=seed, screen_width=env.resolution[1])
        played = RecordedEnv(env, recording) if recording is not None else env
        return run_baseline_episode(played, policy, max_tics=self.args.max_tics, lag_tics=self.args.lag_tics)


class ModelPlayer:
    """llm / sequential / no_think: the model is loaded once; each episode plays on its own DoomEnv."""

    def __init__(self, args, config, env, user_texts: dict[int, str]):
        if config.clock != "sync":
            raise UserError("model policies in `episode` run headless on the sync clock; "
                            "use `agent-runtime live` for real time")
        check_expressible(env.buttons, env.scenario)  # before the model loads
        spec = args.model or config.model.path
        if spec and not spec.startswith("tiny:"):
            model_path(spec)  # a path or a cached Hugging Face id, before the model loads: one line if neither
        self.args, self.config, self.spec = args, config, spec
        adapter = args.adapter
        if args.policy == "no_think":  # the read-act baseline plays with its own adapter (model.no_think_adapter)
            adapter = resolve_no_think_adapter(config.model.no_think_adapter, config.model.adapter, spec,
                                               config.scenario) or "none"
        self.runtime = Runtime.open(config, model=spec, env=env, threads=args.threads, seed=MODEL_SEED,
                                    adapter=adapter, device=args.device)
        self.loaded = self.runtime.loaded
        self.fixed = fixed_cost(args)
        # the bounds the multi-stream agent plays under (max_action_age_ms auto resolved once, announced)
        self.bounds = self.runtime.time_bounds(self.fixed, announce=True) if args.policy == "llm" else None
        self.user_script = dict(user_texts) or None  # typed at engine steps; a command also acts (user_inputs)
        self.think_tokens = {"sequential": args.think_tokens, "no_think": 0}.get(args.policy)

    def manifest(self, seed: int, index: int):
        return episode_manifest(self.config, policy=self.args.policy, env_seed=seed, agent_seed=seed, index=index,
                                model_spec=self.spec, loaded=self.loaded, model_seed=MODEL_SEED, fixed_cost=self.fixed,
                                think_tokens=self.think_tokens, max_tics=self.args.max_tics, bounds=self.bounds,
                                frames=self.runtime.frame_identity())

    def play(self, env, seed: int, recording) -> dict:
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
        result.pop("frame_encode_samples_ms", None)
        result.update(scenario=env.scenario, policy=self.args.policy, seed=seed, model=self.loaded.model_id,
                      threads=self.loaded.cpu.threads, cpu_path=self.loaded.cpu.name,
                      adapter=self.loaded.adapter.hash if self.loaded.adapter else None, wall_s=time.monotonic() - t0)
        return result
