"""`bench play`: how well each agent plays, on the same seeds, interleaved, on the measured-compute clock.

Per agent (model agents with and without the adapter, and the players without a model): kills, reward and
survival tics (mean and standard deviation), reaction p50 for the model agents and how much their Thinker wrote
notes (notes per minute, decisions with a note in view: words_bench.note_rates); a bar chart of kills. Variants in
the same run: a model agent on another frame source (`llm_pixels`), any agent seeing the game late (`llm_lag4`:
four tics late, envs/lagged_env.py), which gives each agent's kills against lag.
"""

import re
import statistics
from pathlib import Path

from envs.doom_env import DoomEnv
from envs.lagged_env import LaggedEnv

from agent_runtime.benchmarks.measure import load_bench_model, progress, save_figure, subplots
from agent_runtime.benchmarks.words_bench import note_rates
from agent_runtime.config import from_args
from agent_runtime.fanout.episode_worker import decide_once
from agent_runtime.fanout.outcome import plain_args
from agent_runtime.model.adapters import read_adapter, resolve_adapter, resolve_no_think_adapter
from agent_runtime.model.model_loader import load_model
from agent_runtime.percentiles import percentile
from agent_runtime.session.clocks import MS_PER_TIC
from agent_runtime.policies.baseline_policies import make_policy, run_baseline_episode
from agent_runtime.policies.sequential_agent import run_sequential_episode
from agent_runtime.session.episodes import fixed_cost
from agent_runtime.session.llm_episode import run_llm_episode
from agent_runtime.session.runtime import Runtime

MODEL_AGENTS = ("llm", "llm_untrained", "sequential", "no_think")
VARIANT = re.compile(r"(?P<base>[a-z_]+?)(?:_(?P<source>labels|pixels))?(?:_lag(?P<lag>\d+))?")


def variant_names(agents: tuple[str, ...], lag_tics: tuple[int, ...] = (), frame_sources: tuple[str, ...] = ()) -> tuple:
    """The agents, then each model agent on every frame source after the first (`llm_pixels`: model agents read
    frame lines; the others read the game), then every agent at every lag but 0 (`expert_lag4`)."""
    names = list(agents)
    names += [f"{a}_{source}" for source in frame_sources[1:] for a in agents if a in MODEL_AGENTS]
    names += [f"{a}_lag{lag}" for lag in lag_tics if lag for a in agents]
    return tuple(dict.fromkeys(names))


def parse_variant(name: str, source: str) -> tuple[str, str, int]:
    """(agent, frame source, lag tics) of a variant name; `source`: the unsuffixed agents' frame source."""
    match = VARIANT.fullmatch(name)
    return match["base"], match["source"] or source, int(match["lag"] or 0)


def _agent_summary(runs: list[dict]) -> dict:
    """One agent's episodes: mean and sample std (n - 1) of kills, reward and tics, and its reaction p50."""
    out = {"episodes": len(runs)}
    for name in ("kills", "reward", "tics"):
        values = [float(r[name]) for r in runs]
        out[f"{name}_mean"] = float(statistics.mean(values))
        out[f"{name}_std"] = float(statistics.stdev(values)) if len(values) > 1 else 0.0
    samples = [x for r in runs for x in r.get("reaction_samples_ms", [])]
    out["reaction_ms_p50"] = percentile(samples, 50)
    if all("reaction_samples_ms" in r for r in runs):  # the model agents: how much their Thinker wrote notes
        out.update(note_rates({key: sum(max(r[key], 0) for r in runs)
                               for key in ("tics", "notes", "decisions", "decisions_with_note")}))
    bounds = [r["max_action_age_ms"] for r in runs if "max_action_age_ms" in r]
    if bounds:  # the multi-stream agents' action age bound (auto: as this machine resolved it)
        out["max_action_age_ms"] = max(bounds)
    out["kills_per_episode"] = [r["kills"] for r in runs]
    return out


class PlayBenchJob:
    """`bench play`'s tasks, (episode index, agent): what the serial bench and each Ray worker play them on, the
    model (the adapter the command names, else the shipped one), one engine and the runtimes `_runtime` opens."""

    command = "bench play"

    def __init__(self, args, agents: tuple[str, ...]):
        self.args, self.agents = plain_args(args), agents
        self.env = self.fixed_cost = self.loaded = self.config = None
        self.runtimes: dict[tuple[str, str], Runtime] = {}

    def setup(self, threads: int) -> dict:
        """A Ray worker's: the model loaded on the CPUs Ray reserved for it."""
        decide_once(threads)
        loaded, machine = load_bench_model(self.args, header=False, threads=threads)
        self.build(loaded)
        return {"model": loaded.model_id, "cpu_path": loaded.cpu.name,
                "adapter": loaded.adapter.hash if loaded.adapter else None, "_machine": machine}

    def build(self, loaded) -> None:
        """One engine for every agent of the model (its label buffer on when some agent reads labels); the
        runtimes are opened as their agents first play (`_runtime`)."""
        self.configure(loaded)
        sources = {parse_variant(name, self.config.engine.frame_source)[1] for name in self.agents}
        self.env = DoomEnv(self.args.scenario, seed=self.args.seed, labels="labels" in sources)

    def configure(self, loaded) -> None:
        self.fixed_cost, self.loaded, self.config = fixed_cost(self.args), loaded, from_args(self.args)

    def adapters(self) -> dict[str, str | None]:
        """{model agent: the adapter directory it plays with (None: the untrained model)}: no_think its own
        (model.no_think_adapter), the others the multi-stream agent's."""
        m = self.config.model
        own = resolve_adapter(m.adapter, m.path, self.config.scenario)
        return {"llm": own, "llm_untrained": None, "sequential": own,
                "no_think": resolve_no_think_adapter(m.no_think_adapter, m.adapter, m.path, self.config.scenario)}

    def named_adapters(self, agents) -> dict[str, dict | None]:
        """{model agent played: its adapter's directory and weights hash (None: the untrained model)}."""
        if self.config is None:  # on Ray the driver plays nothing itself
            self.config = from_args(self.args)
        played = {parse_variant(name, self.config.engine.frame_source)[0] for name in agents}
        return {agent: _adapter_named(path) for agent, path in self.adapters().items() if agent in played}

    def _runtime(self, kind: str, source: str) -> Runtime:
        """The runtime of the model agents on `source`: "trained" on the loaded model, "untrained" on the same
        weights without the adapter (the trained one when none is merged), "no_think" with the no_think baseline's
        adapter (the loaded model when it is the same one)."""
        if (kind, source) not in self.runtimes:
            config = self.config.model_copy(update={"engine": self.config.engine.model_copy(
                update={"frame_source": source})})
            loaded, adapters = self.loaded, self.adapters()
            if kind == "untrained" and loaded.adapter is not None:
                loaded = load_model(self.args.model, dtype=loaded.cpu.dtype)
            if kind == "no_think" and adapters["no_think"] != adapters["llm"]:
                loaded = load_model(self.args.model, dtype=loaded.cpu.dtype, adapter=adapters["no_think"] or "none")
            self.runtimes[(kind, source)] = Runtime.open(config, loaded=loaded, env=self.env, device=self.args.device)
        return self.runtimes[(kind, source)]

    def play(self, task) -> dict:
        """Episode i of one agent on seed + i; a player without a model plays on a fresh engine seeded alike."""
        index, name = task.key
        agent, source, lag = parse_variant(name, self.config.engine.frame_source)
        seed, max_tics, fixed_cost = self.args.seed + index, self.args.max_tics, self.fixed_cost
        env = LaggedEnv(self.env, lag) if lag else self.env
        if agent in ("llm", "llm_untrained"):
            runtime = self._runtime("untrained" if agent == "llm_untrained" else "trained", source)
            return run_llm_episode(env, runtime, seed=seed, max_tics=max_tics, fixed_cost=fixed_cost,
                                   agent_seed=seed)
        if agent in MODEL_AGENTS:
            think = self.args.think_tokens if agent == "sequential" else 0
            kind = "no_think" if agent == "no_think" else "trained"
            return run_sequential_episode(env, self._runtime(kind, source), think_tokens=think, seed=seed,
                                          max_tics=max_tics, fixed_cost=fixed_cost, agent_seed=seed)
        with DoomEnv(self.args.scenario, seed=seed) as fresh:
            policy = make_policy(agent, fresh.buttons, seed=seed, screen_width=fresh.resolution[1])
            result = run_baseline_episode(LaggedEnv(fresh, lag) if lag else fresh, policy, max_tics=max_tics)
        result["tics"] = max(result["tics"], 0)  # the engine reads tic 0 after a map that ended with the kill
        result.pop("reaction_samples_ms")  # a player without a model decides in no time: it has no reaction to report
        result.pop("frame_encode_samples_ms")
        return result

    def report(self, task, r: dict, where: str) -> None:
        progress(f"episode {task.key[0] + 1}/{self.args.episodes} {task.key[1]}{where}: kills {r['kills']}, "
                 f"reward {r['reward']:g}, {r['tics']} tics")

    def summarize(self, per_agent: dict[str, list[dict]]) -> dict:
        a = self.args
        agents = {name: _agent_summary(runs) for name, runs in per_agent.items()}
        result = {"agents": agents, "episodes": a.episodes, "seeds": [a.seed + i for i in range(a.episodes)]}
        result["adapters"] = self.named_adapters(agents)
        curves = lag_curves(agents, self.config.engine.frame_source if self.config else "labels")
        return {**result, "lag_curve": curves} if curves else result

    def title(self, machine: dict, adapter: str | None, workers: str) -> str:
        a = self.args
        return (f"{a.scenario}, {a.episodes} episodes, {machine.get('model')}"
                + (f" + adapter {adapter[:8]}" if adapter else ", no adapter") + (f", {workers}" if workers else ""))


def _adapter_named(path: str | None) -> dict | None:
    """An adapter as the JSON names it: its directory and the hash of its weights (None: the untrained model)."""
    return None if path is None else {"path": path, "hash": read_adapter(path).hash}


def lag_curves(agents: dict[str, dict], source: str) -> dict[str, list[dict]]:
    """Per agent played at more than one lag: its kills at each lag (tics and ms), lag 0 first."""
    points: dict[str, list[dict]] = {}
    for name, summary in agents.items():
        agent, agent_source, lag = parse_variant(name, source)
        key = agent if agent_source == source else f"{agent}_{agent_source}"
        points.setdefault(key, []).append({"lag_tics": lag, "lag_ms": round(lag * MS_PER_TIC, 1),
                                           "kills_mean": summary["kills_mean"], "kills_std": summary["kills_std"],
                                           "episodes": summary["episodes"]})
    return {key: sorted(p, key=lambda q: q["lag_tics"]) for key, p in points.items() if len(p) > 1}


def plot_lag_curve(result: dict, path: Path, title: str) -> None:
    """Kills against how late each agent sees the game."""
    fig, ax = subplots(figsize=(6, 4))
    for key, points in result["lag_curve"].items():
        ax.errorbar([p["lag_ms"] for p in points], [p["kills_mean"] for p in points],
                    yerr=[p["kills_std"] for p in points], marker="o", capsize=3, label=key)
    ax.set(xlabel="frames seen late by (ms; 28.6 ms a tic)", ylabel="kills per episode (mean ± sample std)",
           title=title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path, dpi=110)


def plot_kills(result: dict, path: Path, title: str) -> None:
    names = list(result["agents"])
    means = [result["agents"][n]["kills_mean"] for n in names]
    stds = [result["agents"][n]["kills_std"] for n in names]
    fig, ax = subplots(figsize=(8, 3.6))
    colors = ["tab:blue" if parse_variant(n, "labels")[0] in MODEL_AGENTS else "tab:gray" for n in names]
    ax.bar(names, means, yerr=stds, capsize=4, color=colors)
    ax.set(ylabel="kills per episode (mean ± sample std)", title=title)
    ax.tick_params(axis="x", labelrotation=20)
    save_figure(fig, path, dpi=110)
    if result.get("lag_curve"):
        result["lag_curve_plot"] = str(path.with_name("lag_curve.png"))
        plot_lag_curve(result, path.with_name("lag_curve.png"), title)
