"""`agent-runtime bench reaction --workers N`: every (episode, agent) pair is one task for a Ray worker.

A worker loads the model once and holds one engine, as the serial bench does; on the compute clock each
worker measures its own steps on the cores Ray reserved for it alone. The summary is computed from the
episodes put back in seed order, so with --fixed-cost it is the serial summary.
"""

from __future__ import annotations

import argparse

from agent_runtime.errors import UserError
from agent_runtime.fanout.outcome import Task


class ReactionBenchJob:
    """What a `bench reaction` worker holds: the model, one engine, the runtime."""

    def __init__(self, args: argparse.Namespace):
        self.args = argparse.Namespace(**{k: v for k, v in vars(args).items() if not k.startswith("_")})
        self.env = self.runtime = self.fixed_cost = None

    def setup(self, threads: int) -> dict:
        from agent_runtime.clocks import FixedCost
        from agent_runtime.config import load_config
        from agent_runtime.fanout.play_bench_fanout import load_bench_model
        from agent_runtime.runtime import Runtime

        a = self.args
        loaded, ready = load_bench_model(a, threads)
        config = load_config(scenario=a.scenario, seed=a.seed)
        self.runtime = Runtime.open(config, loaded=loaded, scenario=a.scenario, env_seed=a.seed)
        self.env = self.runtime.env
        self.fixed_cost = FixedCost() if a.fixed_cost else None
        return ready

    def play(self, task: Task) -> dict:
        from agent_runtime.benchmarks.reaction_bench import play_one

        index, name = task.key
        return play_one(name, self.env, self.runtime, seed=self.args.seed + index, think_tokens=self.args.think_tokens,
                        max_tics=self.args.max_tics, fixed_cost=self.fixed_cost)


def run_reaction_bench_on_ray(args: argparse.Namespace) -> tuple[dict, str]:
    """The serial bench's result (plus workers and the tasks lost) and the plot's title."""
    from agent_runtime.benchmarks.reaction_bench import AGENTS, report_episode, summarize_agents
    from agent_runtime.fanout.play_bench_fanout import episodes_by_agent

    if args.device != "cpu":
        raise UserError("--workers/--ray-address run on CPU workers; use --device cpu (or drop --workers)")
    per_agent, lost, info, machine = episodes_by_agent(args, ReactionBenchJob(args), AGENTS, "bench reaction",
                                                       report_episode)
    empty = [name for name, runs in per_agent.items() if not runs]
    if empty:
        raise UserError(f"no episode of {', '.join(empty)} finished on any worker; nothing to summarize")
    result = summarize_agents(per_agent, args.think_tokens)
    result.update(machine=machine, cpu_path=machine.get("cpu_path"), scenario=args.scenario, workers=args.workers,
                  adapter=info.get("adapter"), lost=[task.label for task, _ in lost])
    title = (f"{args.scenario}, {machine.get('model')}, {args.episodes} episodes, {args.workers} Ray workers x "
             f"{machine.get('threads')} thread(s)")
    return result, title
