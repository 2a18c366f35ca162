"""`agent-runtime episode`: play headless episodes with a baseline policy and report reward, kills and tics."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from agent_runtime.config import load_config
from agent_runtime.errors import UserError

POLICIES = ("random", "scripted", "llm")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", help="bundled scenario name (e.g. defend_the_center) or a path to a .cfg")
    p.add_argument("--episodes", type=int, default=1, help="number of episodes (default 1)")
    p.add_argument("--policy", choices=POLICIES, default="scripted", help="who plays (default scripted)")
    p.add_argument("--seed", type=int, help="base seed; episode k uses seed + k (default: from the config)")
    p.add_argument("--config", help="YAML run config (default configs/default.yaml)")
    p.add_argument("--clock", choices=("sync", "realtime"), help="override the config's clock")
    p.add_argument("--out", help="directory for one .lmp recording per episode plus results.jsonl")
    p.add_argument("--max-tics", type=int, help="stop an episode after this many tics")
    p.add_argument("--lag-tics", type=int, default=0, help="the policy sees frames this many tics old (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object per episode on stdout, nothing else")


def _check_args(args: argparse.Namespace) -> None:
    if args.episodes < 1:
        raise UserError(f"--episodes must be at least 1 (got {args.episodes})")
    if args.max_tics is not None and args.max_tics < 1:
        raise UserError(f"--max-tics must be at least 1 (got {args.max_tics})")
    if args.lag_tics < 0:
        raise UserError(f"--lag-tics must be 0 or more (got {args.lag_tics})")
    if args.policy == "llm":
        raise UserError("policy 'llm' is not available yet in `episode`; use --policy scripted or --policy random")


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
    return (
        f"episode {result['episode']}: reward {result['reward']:g}, kills {result['kills']}, tics {result['tics']}"
        f" ({result['policy']} on {result['scenario']}, seed {result['seed']})"
    )


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

    results_file = (out_dir / "results.jsonl").open("a") if out_dir else None
    try:
        with env:
            for index in range(args.episodes):
                policy = make_policy(args.policy, env.buttons, seed=config.seed + index, screen_width=env.resolution[1])
                record = out_dir / f"{env.scenario}_seed{config.seed + index}_ep{index:03d}.lmp" if out_dir else None
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
