"""`agent-runtime episode`: play headless episodes with a baseline policy and report reward, kills and tics."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from agent_runtime.config import load_config
from agent_runtime.errors import UserError

POLICIES = ("llm", "sequential", "no_think", "scripted", "random")
MODEL_POLICIES = ("llm", "sequential", "no_think")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", help="bundled scenario name (e.g. defend_the_center) or a path to a .cfg")
    p.add_argument("--episodes", type=int, default=1, help="number of episodes (default 1)")
    p.add_argument("--policy", choices=POLICIES, default="llm",
                   help="who plays: llm = the multi-stream agent (default); sequential = read-think-act with the same "
                        "model; no_think = read-act; scripted = aim-and-shoot from labels; random")
    p.add_argument("--seed", type=int, help="base seed; episode k uses seed + k (default: from the config)")
    p.add_argument("--config", help="YAML run config (default configs/default.yaml)")
    p.add_argument("--clock", choices=("sync", "realtime"), help="override the config's clock")
    p.add_argument("--out", help="directory for one .lmp recording per episode plus results.jsonl")
    p.add_argument("--max-tics", type=int, help="stop an episode after this many tics")
    p.add_argument("--lag-tics", type=int, default=0, help="the policy sees frames this many tics old (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per episode on stdout, nothing else")
    p.add_argument("--model", help="model: a safetensors directory, a .gguf file or tiny:llama (default: the config's, "
                                   "else the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--think-tokens", type=int, default=64, help="sequential policy: thought tokens per cycle (default 64)")
    p.add_argument("--fixed-cost", action="store_true",
                   help="charge each engine step a fixed cost per token instead of its measured compute time (deterministic)")
    p.add_argument("--threads", type=int, help="torch threads (default: the config's, else the cores actually free)")


def _check_args(args: argparse.Namespace) -> None:
    if args.episodes < 1:
        raise UserError(f"--episodes must be at least 1 (got {args.episodes})")
    if args.max_tics is not None and args.max_tics < 1:
        raise UserError(f"--max-tics must be at least 1 (got {args.max_tics})")
    if args.lag_tics < 0:
        raise UserError(f"--lag-tics must be 0 or more (got {args.lag_tics})")
    if args.think_tokens < 1:
        raise UserError(f"--think-tokens must be at least 1 (got {args.think_tokens})")
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be at least 1 (got {args.threads})")


def _prepare_out_dir(out: str) -> Path:
    """Create DIR and prove it is writable before any episode runs."""
    path = Path(out).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as e:
        raise UserError(f"cannot write to --out {path}: {e.strerror or e}") from None
    return path


def _readable(result: dict) -> str:
    line = (
        f"episode {result['episode']}: reward {result['reward']:g}, kills {result['kills']}, tics {result['tics']}"
        f" ({result['policy']} on {result['scenario']}, seed {result['seed']})"
    )
    if "actions_executed" in result:
        p50, p95 = result.get("reaction_ms_p50"), result.get("reaction_ms_p95")
        line += (
            f"\n  actions executed {result['actions_executed']}, fenced {result['actions_fenced']}, "
            f"frames dropped {result['frames_dropped']}, thinker tokens {result['thinker_tokens']}, "
            f"reaction p50 {_ms(p50)} p95 {_ms(p95)}"
        )
    return line


def _ms(value) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    config = load_config(args.config, scenario=args.scenario, seed=args.seed, clock=args.clock)

    # Imported here so `agent-runtime --help` stays fast and other commands do not load the engine.
    from agent_runtime.baseline_policies import make_policy, run_baseline_episode
    from envs.doom_env import DoomEnv
    from envs.scenarios import ScenarioError, resolve_scenario

    try:
        resolve_scenario(config.scenario)
    except ScenarioError as e:
        raise UserError(str(e)) from None
    out_dir = _prepare_out_dir(args.out) if args.out else None

    try:
        env = DoomEnv(config.scenario, resolution=config.resolution, clock=config.clock, seed=config.seed)
    except (ValueError, OSError) as e:
        raise UserError(f"cannot start scenario {config.scenario}: {e}") from None
    except Exception as e:  # the engine's own exceptions (a broken .cfg or WAD)
        raise UserError(f"ViZDoom could not start scenario {config.scenario}: {str(e).strip().splitlines()[0]}") from None

    play = _model_player(args, config, env) if args.policy in MODEL_POLICIES else None
    results_file = (out_dir / "results.jsonl").open("a") if out_dir else None
    try:
        with env:
            for index in range(args.episodes):
                record = out_dir / f"{env.scenario}_seed{config.seed + index}_ep{index:03d}.lmp" if out_dir else None
                if play is not None:
                    result = play(index, record)
                else:
                    policy = make_policy(args.policy, env.buttons, seed=config.seed + index, screen_width=env.resolution[1])
                    result = run_baseline_episode(
                        env, policy, max_tics=args.max_tics, lag_tics=args.lag_tics, record_path=record
                    )
                result["episode"] = index
                if record is not None:
                    result["recording"] = str(record)
                print(
                    f"[{index + 1}/{args.episodes}] {result['tics']} tics, {result['kills']} kills, "
                    f"reward {result['reward']:g}, {result['wall_s']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                print(json.dumps(result) if args.json else _readable(result), flush=True)
                if results_file is not None:
                    results_file.write(json.dumps(result) + "\n")
                    results_file.flush()
    finally:
        if results_file is not None:
            results_file.close()
    return 0


def _model_player(args, config, env):
    """Load the model once and return play(index, record_path) -> result for the model policies."""
    import time

    from agent_runtime.clocks import FixedCost
    from agent_runtime.llm_episode import LLMRuntime, run_llm_episode
    from agent_runtime.model_loader import load_model, set_threads
    from agent_runtime.sequential_agent import run_sequential_episode

    from pathlib import Path

    from agent_runtime.action_grammar import expressible

    if config.clock != "sync":
        raise UserError("model policies in `episode` run headless on the sync clock; use `agent-runtime live` for real time")
    bad = [b for b in env.buttons if not expressible(b)]
    if bad:
        raise UserError(
            f"{env.scenario} has button(s) {', '.join(bad)} that the action grammar cannot express "
            "(only binary buttons such as ATTACK, TURN_LEFT, MOVE_FORWARD); pick a scenario without delta buttons"
        )
    spec = args.model or config.model.path
    if spec and not spec.startswith("tiny:") and not Path(spec).expanduser().exists():
        raise UserError(f"model path does not exist: {spec} (pass a safetensors directory, a .gguf file or tiny:llama)")
    threads = set_threads(args.threads or config.model.threads)
    print(f"loading model {spec or 'embedded SmolLM2-135M-Instruct'} ({config.model.dtype}, {threads} thread(s))...",
          file=sys.stderr, flush=True)
    loaded = load_model(spec, dtype=config.model.dtype)
    runtime = LLMRuntime.build(loaded, config, env.buttons, scenario=env.scenario)
    fixed = FixedCost() if args.fixed_cost else None

    def progress(tics, kills, executed):
        print(f"  .. tic {tics}, kills {kills}, actions {executed}", file=sys.stderr, flush=True)

    def play(index: int, record):
        seed = config.seed + index
        t0 = time.monotonic()
        common = dict(seed=seed, max_tics=args.max_tics, fixed_cost=fixed, progress=progress)
        if args.policy == "llm":
            result = run_llm_episode(env, runtime, record_path=str(record) if record else None, agent_seed=seed, **common)
        else:
            think = args.think_tokens if args.policy == "sequential" else 0
            result = run_sequential_episode(env, runtime, think_tokens=think, agent_seed=seed, **common)
        result.pop("reaction_samples_ms", None)
        result.update(scenario=env.scenario, policy=args.policy, seed=seed, model=loaded.model_id,
                      threads=threads, wall_s=time.monotonic() - t0)
        return result

    return play
