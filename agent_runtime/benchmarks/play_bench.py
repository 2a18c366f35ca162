"""`bench play`: how well each agent plays, on the same seeds, interleaved, on the measured-compute clock.

Per agent (model agents with and without the adapter, and the players without a model): kills, reward and
survival tics (mean and standard deviation), reaction p50 for the model agents; a bar chart of kills.
"""

import statistics
from pathlib import Path

from envs.doom_env import DoomEnv

from agent_runtime.benchmarks.measure import load_bench_model, progress, save_figure, subplots
from agent_runtime.config import from_args
from agent_runtime.fanout.episode_worker import decide_once
from agent_runtime.fanout.outcome import plain_args
from agent_runtime.model.model_loader import load_model
from agent_runtime.percentiles import percentile
from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode
from agent_runtime.policies.sequential_agent import run_sequential_episode
from agent_runtime.session.episodes import fixed_cost
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.runtime import Runtime

MODEL_AGENTS = ("llm", "llm_untrained", "sequential", "no_think")


def _agent_summary(runs: list[dict]) -> dict:
    """One agent's episodes: mean and sample std (n - 1) of kills, reward and tics, and its reaction p50."""
    out = {"episodes": len(runs)}
    for name in ("kills", "reward", "tics"):
        values = [float(r[name]) for r in runs]
        out[f"{name}_mean"] = float(statistics.mean(values))
        out[f"{name}_std"] = float(statistics.stdev(values)) if len(values) > 1 else 0.0
    samples = [x for r in runs for x in r.get("reaction_samples_ms", [])]
    out["reaction_ms_p50"] = percentile(samples, 50)
    bounds = [r["max_action_age_ms"] for r in runs if "max_action_age_ms" in r]
    if bounds:  # the multi-stream agents' action age bound (auto: as this machine resolved it)
        out["max_action_age_ms"] = max(bounds)
    out["kills_per_episode"] = [r["kills"] for r in runs]
    return out


class PlayBenchJob:
    """`bench play`'s tasks, (episode index, agent): what the serial bench and each Ray worker play them on, the
    model (the adapter the command names, else the shipped one), one engine and the runtimes `_build` makes."""

    command = "bench play"

    def __init__(self, args, agents: tuple[str, ...]):
        self.args, self.agents = plain_args(args), agents
        self.env = self.fixed_cost = self.runtimes = None

    def setup(self, threads: int) -> dict:
        """A Ray worker's: the model loaded on the CPUs Ray reserved for it."""
        decide_once(threads)
        loaded, machine = load_bench_model(self.args, header=False, threads=threads)
        self.build(loaded)
        return {"model": loaded.model_id, "cpu_path": loaded.cpu.name,
                "adapter": loaded.adapter.hash if loaded.adapter else None, "_machine": machine}

    def build(self, loaded) -> None:
        a = self.args
        self.fixed_cost = fixed_cost(a)
        self._build(loaded, from_args(a))

    def _build(self, loaded, config) -> None:
        """The runtimes the model agents play on: "trained" on `loaded`, "untrained" on the same weights without
        the adapter (loaded only when one is merged and llm_untrained plays)."""
        self.env = DoomEnv(self.args.scenario, seed=self.args.seed, labels=config.engine.frame_source == "labels")
        self.runtimes = {}
        if any(name in MODEL_AGENTS for name in self.agents):
            trained = untrained = Runtime.open(config, loaded=loaded, env=self.env, device=self.args.device)
            if loaded.adapter is not None and "llm_untrained" in self.agents:
                untrained = Runtime.open(config, loaded=load_model(self.args.model, dtype=loaded.cpu.dtype),
                                         env=self.env, device=self.args.device)
            self.runtimes = {"trained": trained, "untrained": untrained}

    def play(self, task) -> dict:
        """Episode i of one agent on seed + i; a player without a model plays on a fresh engine seeded alike."""
        index, name = task.key
        seed, max_tics, fixed_cost = self.args.seed + index, self.args.max_tics, self.fixed_cost
        if name in ("llm", "llm_untrained"):
            runtime = self.runtimes["untrained" if name == "llm_untrained" else "trained"]
            return run_llm_episode(self.env, runtime, seed=seed, max_tics=max_tics, fixed_cost=fixed_cost,
                                   agent_seed=seed)
        if name in MODEL_AGENTS:
            think = self.args.think_tokens if name == "sequential" else 0
            return run_sequential_episode(self.env, self.runtimes["trained"], think_tokens=think, seed=seed,
                                          max_tics=max_tics, fixed_cost=fixed_cost, agent_seed=seed)
        with DoomEnv(self.args.scenario, seed=seed) as fresh:
            policy = make_policy(name, fresh.buttons, seed=seed, screen_width=fresh.resolution[1])
            result = run_baseline_episode(fresh, policy, max_tics=max_tics)
        result["tics"] = max(result["tics"], 0)  # the engine reads tic 0 after a map that ended with the kill
        result.pop("reaction_samples_ms")  # a player without a model decides in no time: it has no reaction to report
        result.pop("frame_encode_samples_ms")
        return result

    def report(self, task, r: dict, where: str) -> None:
        progress(f"episode {task.key[0] + 1}/{self.args.episodes} {task.key[1]}{where}: kills {r['kills']}, "
                 f"reward {r['reward']:g}, {r['tics']} tics")

    def summarize(self, per_agent: dict[str, list[dict]]) -> dict:
        a = self.args
        return {"agents": {name: _agent_summary(runs) for name, runs in per_agent.items()}, "episodes": a.episodes,
                "seeds": [a.seed + i for i in range(a.episodes)]}

    def title(self, machine: dict, adapter: str | None, workers: str) -> str:
        a = self.args
        return (f"{a.scenario}, {a.episodes} episodes, {machine.get('model')}"
                + (f" + adapter {adapter[:8]}" if adapter else ", no adapter") + (f", {workers}" if workers else ""))


def plot_kills(result: dict, path: Path, title: str) -> None:
    names = list(result["agents"])
    means = [result["agents"][n]["kills_mean"] for n in names]
    stds = [result["agents"][n]["kills_std"] for n in names]
    fig, ax = subplots(figsize=(8, 3.6))
    colors = ["tab:blue" if n in MODEL_AGENTS else "tab:gray" for n in names]
    ax.bar(names, means, yerr=stds, capsize=4, color=colors)
    ax.set(ylabel="kills per episode (mean ± sample std)", title=title)
    ax.tick_params(axis="x", labelrotation=20)
    save_figure(fig, path, dpi=110)
