"""`bench play`: how well each agent plays, on the same seeds, interleaved, on the measured-compute clock.

Per agent (model agents with and without the adapter, and the players without a model): kills, reward and
survival tics (mean and standard deviation), reaction p50 for the model agents; a bar chart of kills.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from agent_runtime.benchmarks.measure import progress, save_figure, subplots, write_result
from agent_runtime.percentiles import percentile

MODEL_AGENTS = ("multi_stream", "multi_stream_untrained", "sequential", "no_think")
PLAYERS = ("scripted", "expert", "random")
AGENTS = MODEL_AGENTS + PLAYERS


def summarize(runs: list[dict]) -> dict:
    """One agent's episodes: mean and standard deviation of kills, reward and tics, and its reaction p50."""
    out = {"episodes": len(runs)}
    for name in ("kills", "reward", "tics"):
        values = [float(r[name]) for r in runs]
        out[f"{name}_mean"] = float(statistics.mean(values))
        out[f"{name}_std"] = float(statistics.pstdev(values)) if len(values) > 1 else 0.0
    samples = [x for r in runs for x in r.get("reaction_samples_ms", [])]
    out["reaction_ms_p50"] = percentile(samples, 50)
    bounds = [r["max_action_age_ms"] for r in runs if "max_action_age_ms" in r]
    if bounds:  # the multi-stream agents' action age bound (auto: as this machine resolved it)
        out["max_action_age_ms"] = max(bounds)
    out["kills_per_episode"] = [r["kills"] for r in runs]
    return out


def play_model_episode(name: str, env, runtimes: dict, *, seed: int, max_tics, fixed_cost, think_tokens: int) -> dict:
    from agent_runtime.llm_episode import run_llm_episode
    from agent_runtime.sequential_agent import run_sequential_episode

    if name in ("multi_stream", "multi_stream_untrained"):
        runtime = runtimes["untrained" if name == "multi_stream_untrained" else "trained"]
        return run_llm_episode(env, runtime, seed=seed, max_tics=max_tics, fixed_cost=fixed_cost, agent_seed=seed)
    think = think_tokens if name == "sequential" else 0
    return run_sequential_episode(env, runtimes["trained"], think_tokens=think, seed=seed, max_tics=max_tics,
                                  fixed_cost=fixed_cost, agent_seed=seed)


def play_runtimes(loaded, config, env, agents, *, model_spec) -> dict:
    """The runtimes the model agents play on: "trained" on `loaded`, "untrained" on the same weights without
    the adapter (loaded only when one is merged and multi_stream_untrained plays)."""
    from agent_runtime.runtime import Runtime
    from agent_runtime.model_loader import load_model

    if not any(name in MODEL_AGENTS for name in agents):
        return {}
    trained = Runtime.open(config, loaded=loaded, env=env)
    if loaded.adapter is None or "multi_stream_untrained" not in agents:
        return {"trained": trained, "untrained": trained}
    untrained = load_model(model_spec, dtype=loaded.cpu.dtype)
    return {"trained": trained, "untrained": Runtime.open(config, loaded=untrained, env=env)}


def play_one(name: str, env, open_env, runtimes: dict, *, seed: int, max_tics=None, fixed_cost=None,
             think_tokens: int = 64) -> dict:
    """One episode of one agent on seed `seed` (what a Ray worker plays too); a player without a model plays on a
    fresh engine seeded like the model agents' episode."""
    from agent_runtime.baseline_policies import make_policy, run_baseline_episode

    if name in MODEL_AGENTS:
        return play_model_episode(name, env, runtimes, seed=seed, max_tics=max_tics, fixed_cost=fixed_cost,
                                  think_tokens=think_tokens)
    with open_env(seed) as fresh:
        policy = make_policy(name, fresh.buttons, seed=seed, screen_width=fresh.resolution[1])
        result = run_baseline_episode(fresh, policy, max_tics=max_tics)
    result["tics"] = max(result["tics"], 0)  # the engine reads tic 0 after a map that ended with the kill
    result.pop("reaction_samples_ms")  # a player without a model decides in no time: it has no reaction to report
    return result


def report_episode(index: int, episodes: int, name: str, r: dict, where: str = "") -> None:
    progress(f"episode {index + 1}/{episodes} {name}{where}: kills {r['kills']}, reward {r['reward']:g}, "
             f"{r['tics']} tics")


def summarize_agents(per_agent: dict[str, list[dict]], *, episodes: int, seed: int) -> dict:
    return {"agents": {name: summarize(runs) for name, runs in per_agent.items()}, "episodes": episodes,
            "seeds": [seed + i for i in range(episodes)]}


def play_interleaved(agents, episodes: int, seed: int, play, report) -> dict[str, list[dict]]:
    """Episode i of every agent plays seed + i (`play(name, seed)`); agents take turns episode by episode."""
    per_agent: dict[str, list[dict]] = {name: [] for name in agents}
    for index in range(episodes):
        for name in agents:
            per_agent[name].append(play(name, seed + index))
            report(index, episodes, name, per_agent[name][-1])
    return per_agent


def run_play_bench(env, open_env, runtimes: dict, *, episodes: int, seed: int, max_tics=None, fixed_cost=None,
                   think_tokens: int = 64, agents=AGENTS) -> dict:
    per_agent = play_interleaved(agents, episodes, seed, lambda name, s: play_one(
        name, env, open_env, runtimes, seed=s, max_tics=max_tics, fixed_cost=fixed_cost, think_tokens=think_tokens),
        report_episode)
    return summarize_agents(per_agent, episodes=episodes, seed=seed)


def plot_kills(result: dict, path: Path, title: str) -> None:
    names = list(result["agents"])
    means = [result["agents"][n]["kills_mean"] for n in names]
    stds = [result["agents"][n]["kills_std"] for n in names]
    fig, ax = subplots(figsize=(8, 3.6))
    colors = ["tab:blue" if n in MODEL_AGENTS else "tab:gray" for n in names]
    ax.bar(names, means, yerr=stds, capsize=4, color=colors)
    ax.set_ylabel("kills per episode (mean ± std)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=20)
    save_figure(fig, path, dpi=110)


def write_outputs(result: dict, out_dir: Path, title: str) -> dict:
    return write_result(result, out_dir / "play.json", out_dir / "play_kills.png",
                        lambda path: plot_kills(result, path, title))
