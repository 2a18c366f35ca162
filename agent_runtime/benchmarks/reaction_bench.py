"""`bench reaction`: the multi-stream agent against read-think-act and read-act baselines, same model and seeds.

Interleaved per episode on the compute clock (the world advances by each forward's measured time). Reaction
latency = session time from reading a frame to executing the action conditioned on it.
"""

import statistics
from pathlib import Path

import numpy as np

from agent_runtime.benchmarks.measure import progress, save_figure, shown, stats, subplots
from agent_runtime.benchmarks.play_bench import PlayBenchJob
from agent_runtime.errors import UserError
from agent_runtime.percentiles import percentile
from agent_runtime.session.runtime import Runtime

AGENTS = ("llm", "sequential", "no_think")  # llm: the multi-stream agent, as `episode --policy llm` names it


def _summary(episodes: list[dict], think_tokens: int) -> dict:
    samples = [x for e in episodes for x in e["reaction_samples_ms"]]
    per_episode_p50 = [e["reaction_ms_p50"] for e in episodes if e["reaction_ms_p50"] is not None]
    session_s = sum(e["session_ms"] for e in episodes) / 1000.0
    first = [e["first_action_ms"] for e in episodes if e.get("first_action_ms") is not None]
    return {
        "episodes": len(episodes),
        **stats("reaction_ms", samples, ("p50", "p95", "p99")),
        "reaction_ms_p50_episode_median": statistics.median(per_episode_p50) if per_episode_p50 else None,
        "reaction_ms_p50_episode_spread": [min(per_episode_p50), max(per_episode_p50)] if per_episode_p50 else None,
        "frame_age_at_execution_ms_p50": percentile(samples, 50),
        "time_to_first_action_ms": statistics.median(first) if first else None,
        "actions_executed": sum(e["actions_executed"] for e in episodes),
        "actions_fenced": sum(e["actions_fenced"] for e in episodes),
        # the fence they ran under (the multi-stream agent's auto bound as resolved; the others' own)
        "max_action_age_ms": max((e["max_action_age_ms"] for e in episodes if "max_action_age_ms" in e), default=None),
        "frames_dropped": sum(e["frames_dropped"] for e in episodes),
        "kills": statistics.mean(e["kills"] for e in episodes), "kills_per_episode": [e["kills"] for e in episodes],
        "reward": statistics.mean(e["reward"] for e in episodes),
        "thinker_tokens_per_s": sum(e["thinker_tokens"] for e in episodes) / session_s if session_s else 0.0,
        "actions_per_s": sum(e["decisions"] for e in episodes) / session_s if session_s else 0.0,
        "think_tokens_per_cycle": think_tokens, "samples": len(samples), "_samples": samples,
    }


class ReactionBenchJob(PlayBenchJob):
    """`bench reaction`'s tasks: one runtime (and its engine) that every agent plays on."""

    command = "bench reaction"

    def build(self, loaded) -> None:
        self.configure(loaded)
        runtime = Runtime.open(self.config, loaded=loaded, scenario=self.args.scenario, env_seed=self.args.seed,
                               device=self.args.device)
        self.env, self.runtimes = runtime.env, {("trained", self.config.engine.frame_source): runtime}

    def report(self, task, r: dict, where: str) -> None:
        progress(f"episode {task.key[0] + 1}/{self.args.episodes} {task.key[1]}{where}: reaction p50 "
                 f"{shown(r['reaction_ms_p50'], ' ms')}, kills {r['kills']}, actions {r['actions_executed']} "
                 f"(+{r['actions_fenced']} fenced), {r['tics']} tics")

    def summarize(self, per_agent: dict[str, list[dict]]) -> dict:
        """Per agent summaries, the sequential/multi-stream ratios and the targets, from episodes in seed order."""
        empty = [name for name, runs in per_agent.items() if not runs]
        if empty:  # every task of an agent lost on Ray
            raise UserError(f"no episode of {', '.join(empty)} finished on any worker; nothing to summarize")
        think_tokens = self.args.think_tokens
        agents = {name: _summary(runs, think_tokens if name == "sequential" else 0) for name, runs in per_agent.items()}
        multi = agents["llm"]

        def ratio(name, q):
            x, y = agents[name][f"reaction_ms_{q}"], multi[f"reaction_ms_{q}"]
            return x / y if x is not None and y else None

        ratios = {f"reaction_{q}_{short}_over_multi": ratio(name, q)
                  for short, name in (("seq", "sequential"), ("nothink", "no_think")) for q in ("p50", "p95")}
        # writing the multi-stream agent's frame lines (pixels: the detector's forward), charged to its steps; wall
        # time, measured on any clock, so it stays out of the agents' summaries (which --fixed-cost makes exact)
        encode = stats("frame_encode_ms", [x for e in per_agent["llm"] for x in e["frame_encode_samples_ms"]],
                       ("p50", "p95"))
        return {"agents": agents, "ratios": ratios, **encode, "adapters": self.named_adapters(agents), "targets": {
            "multi_p50_le_150ms": multi["reaction_ms_p50"] is not None and multi["reaction_ms_p50"] <= 150,
            "multi_p95_le_250ms": multi["reaction_ms_p95"] is not None and multi["reaction_ms_p95"] <= 250,
            "seq_over_multi_p50_ge_20": (ratios["reaction_p50_seq_over_multi"] or 0) >= 20,
        }}

    def title(self, machine: dict, adapter: str | None, workers: str) -> str:
        return (f"{self.args.scenario}, {machine.get('model')}, {self.args.episodes} episodes, "
                + (f"{workers} x " if workers else "") + f"{machine.get('threads')} thread(s)")


def plot_cdf(result: dict, path: Path, title: str) -> None:
    fig, ax = subplots(figsize=(7, 4.2), dpi=120)
    for name, summary in result["agents"].items():
        xs = np.sort(np.asarray(summary["_samples"]))
        if len(xs) == 0:
            continue
        ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post",
                label=f"{name} (p50 {np.percentile(xs, 50):.0f} ms, n={len(xs)})")
    ax.set(xscale="log", xlabel="reaction latency: frame read → action executed (ms, log scale)",
           ylabel="fraction of actions")
    ax.axvline(150, color="grey", ls=":", lw=1)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    save_figure(fig, path)
