"""`agent-runtime bench reaction --workers N`: every (episode, agent) pair is one task for a Ray worker.

Each worker measures its own steps on the cores Ray reserved for it; with --fixed-cost the summary is the serial one.
"""

from __future__ import annotations

import argparse

from agent_runtime.errors import UserError
from agent_runtime.fanout.play_bench_fanout import PlayBenchJob, bench_on_ray


class ReactionBenchJob(PlayBenchJob):
    """`bench reaction`: one runtime (and its engine) that every agent plays on."""

    def _build(self, loaded, config) -> None:
        from agent_runtime.runtime import Runtime

        runtime = Runtime.open(config, loaded=loaded, scenario=self.args.scenario, env_seed=self.args.seed)
        self.env, self.runtimes = runtime.env, {"trained": runtime}


def run_reaction_bench_on_ray(args: argparse.Namespace) -> tuple[dict, str]:
    """The serial bench's result (plus workers and the tasks lost) and the plot's title."""
    from agent_runtime.benchmarks.reaction_bench import AGENTS, report_episode, summarize_agents

    if args.device != "cpu":
        raise UserError("--workers/--ray-address run on CPU workers; use --device cpu (or drop --workers)")
    per_agent, added, _ = bench_on_ray(args, ReactionBenchJob(args, AGENTS), "bench reaction", report_episode)
    empty = [name for name, runs in per_agent.items() if not runs]
    if empty:
        raise UserError(f"no episode of {', '.join(empty)} finished on any worker; nothing to summarize")
    machine = added["machine"]
    title = (f"{args.scenario}, {machine.get('model')}, {args.episodes} episodes, {args.workers} Ray workers x "
             f"{machine.get('threads')} thread(s)")
    return {**summarize_agents(per_agent, args.think_tokens), **added}, title
