"""`agent-runtime collect-frames`: screens with their label-buffer objects (envs/screen_dataset.py), the screen
detector's data. Each scenario is played by each policy for --episodes episodes, one shard an episode; run it
again on the same --out to add what is missing (shards already there are kept as they are)."""

import argparse
import json
import time
from pathlib import Path

from envs.doom_env import DoomEnv
from envs.scenarios import ScenarioError, resolve_scenario
from envs.screen_dataset import SHARD_PATTERN, FrameTap, data_hash, list_shards, shard_name, write_shard

from agent_runtime.atomic_write import write_json_atomic
from agent_runtime.commands import add_options, at_least, own_dir
from agent_runtime.errors import UserError
from agent_runtime.model.adapters import SHIPPED_BY_SCENARIO
from agent_runtime.notices import progress_bar, stderr_line

POLICIES = ("expert", "random", "agent")  # agent: the multi-stream agent with the scenario's adapter
SHIPPED_SCENARIOS = ("defend_the_center", *SHIPPED_BY_SCENARIO)  # the scenarios an adapter ships for
MANIFEST = "manifest.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="data set directory (created, or completed when it exists)")
    p.add_argument("--episodes", type=int, required=True, help="episodes per scenario and policy")
    p.add_argument("--scenarios", default=",".join(SHIPPED_SCENARIOS),
                   help=f"comma-separated scenarios (default: {','.join(SHIPPED_SCENARIOS)})")
    p.add_argument("--policies", default="expert,random", help=f"comma-separated players among {', '.join(POLICIES)} "
                                                               "(default: expert,random)")
    p.add_argument("--every", type=int, default=3, help="keep every Nth screen read (default 3: neighbours are alike)")
    add_options(p, "--seed", "--max-tics", "--model", "--threads", "--json")


def _names(text: str, allowed=None, flag: str = "") -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if allowed is not None and n not in allowed]
    if not names or unknown:
        raise UserError(f"{flag}: {', '.join(unknown) or 'nothing given'}; use a comma-separated list of "
                        f"{', '.join(allowed)}")
    return names


def _play(policy: str, scenario: str, seed: int, args, runtimes: dict) -> list:
    """One episode of `policy` on a fresh engine; the screens it kept."""
    from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode

    with DoomEnv(scenario, seed=seed) as env:
        tap = FrameTap(env, every=args.every)
        if policy == "agent":
            from agent_runtime.session.llm_episode import run_llm_episode

            run_llm_episode(tap, runtimes[scenario], seed=seed, agent_seed=seed, max_tics=args.max_tics)
        else:
            run_baseline_episode(tap, make_policy(policy, env.buttons, seed=seed), max_tics=args.max_tics)
        return tap.frames


def _agent_runtimes(scenarios: list[str], args) -> dict:
    from agent_runtime.config import load_config
    from agent_runtime.session.runtime import Runtime

    config = load_config(None)
    return {s: Runtime.open(config, model=args.model, scenario=s, threads=args.threads) for s in scenarios}


def _out_dir(text: str):
    """--out: new, empty, or a data set of this command (its manifest and shards, nothing else)."""
    out = own_dir(text, "--out", frozenset({MANIFEST}), MANIFEST, "a data set from `collect-frames`") \
        if not (Path(text) / MANIFEST).is_file() else Path(text)
    out.mkdir(parents=True, exist_ok=True)
    strays = [p.name for p in out.iterdir() if p.name != MANIFEST and not SHARD_PATTERN.fullmatch(p.name)
              and not p.name.endswith(".npz.tmp")]
    if strays:
        raise UserError(f"--out {text} holds files `collect-frames` did not write ({', '.join(strays[:3])}); "
                        "name a new directory")
    return out


def run(args: argparse.Namespace) -> int:
    at_least(args, 1, "--episodes", "--every", "--max-tics")
    scenarios, policies = _names(args.scenarios, flag="--scenarios"), _names(args.policies, POLICIES, "--policies")
    for scenario in scenarios:  # an unknown scenario: one line before any play
        try:
            resolve_scenario(scenario)
        except ScenarioError as e:
            raise UserError(f"--scenarios: {e}") from None
    out = _out_dir(args.out)
    seed = args.seed = 1 if args.seed is None else args.seed
    settings = {"scenarios": scenarios, "policies": policies, "every": args.every, "max_tics": args.max_tics,
                "seed": args.seed, "episodes": args.episodes}
    runs = json.loads((out / MANIFEST).read_text()).get("runs", []) if (out / MANIFEST).is_file() else []
    write_json_atomic(out / MANIFEST, {"runs": runs})  # first: a killed run leaves a directory this command owns
    todo = [(s, p, seed + i) for s in scenarios for p in policies for i in range(args.episodes)
            if not (out / shard_name(s, p, seed + i)).exists()]
    runtimes = _agent_runtimes(scenarios, args) if "agent" in policies and todo else {}
    try:
        with progress_bar(len(todo), "collect-frames", "episode") as bar:
            for scenario, policy, episode_seed in todo:
                t0 = time.monotonic()
                frames = _play(policy, scenario, episode_seed, args, runtimes)
                if frames:
                    write_shard(out / shard_name(scenario, policy, episode_seed), frames)
                bar.update()
                stderr_line(f"{scenario} {policy} seed {episode_seed}: {len(frames)} screens, "
                            f"{sum(len(f.labels) for f in frames)} objects, {time.monotonic() - t0:.1f} s")
    finally:
        for runtime in runtimes.values():
            runtime.close()
    shards = list_shards(out)
    summary = {"out": str(out), "shards": len(shards), "data_hash": data_hash(shards)}
    runs.append({**settings, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})  # every run that added shards
    write_json_atomic(out / MANIFEST, {**summary, "runs": runs})
    print(json.dumps(summary) if args.json else f"{out}: {len(shards)} shards, data hash {summary['data_hash'][:12]}")
    return 0
