"""`agent-runtime bench play|reaction --workers N`: every (episode, agent) pair is one task for a Ray worker.

The summary is computed from the results put back in episode order: the serial summary on the same seeds (for
reaction with --fixed-cost; without it each worker measures its own steps on the cores Ray reserved for it).
"""

from __future__ import annotations

import argparse

from agent_runtime.errors import UserError
from agent_runtime.fanout.outcome import Task, plain_args


class PlayBenchJob:
    """What a bench worker holds: the model (the adapter the command names, else the shipped one), one engine
    and the runtimes of the model agents `_build` makes on them."""

    def __init__(self, args: argparse.Namespace, agents: tuple[str, ...]):
        self.args, self.agents = plain_args(args), agents
        self.env = self.fixed_cost = self.runtimes = None

    def setup(self, threads: int) -> dict:
        from agent_runtime.commands import fixed_cost
        from agent_runtime.commands.bench import load_bench_model
        from agent_runtime.config import load_config
        from agent_runtime.fanout.episode_worker import decide_once

        a = self.args
        decide_once(threads)
        loaded, machine = load_bench_model(a, header=False, threads=threads)
        self._build(loaded, load_config(a.config, scenario=a.scenario, seed=a.seed))
        self.fixed_cost = fixed_cost(a)
        return {"model": loaded.model_id, "cpu_path": loaded.cpu.name,
                "adapter": loaded.adapter.hash if loaded.adapter else None, "_machine": machine}

    def _build(self, loaded, config) -> None:
        from agent_runtime.benchmarks.play_bench import play_runtimes
        from envs.doom_env import DoomEnv

        self.env = DoomEnv(self.args.scenario, seed=self.args.seed)
        self.runtimes = play_runtimes(loaded, config, self.env, self.agents, model_spec=self.args.model)

    def play(self, task: Task) -> dict:
        from agent_runtime.benchmarks.play_bench import play_one
        from envs.doom_env import DoomEnv

        index, name = task.key
        return play_one(name, self.env, lambda s: DoomEnv(self.args.scenario, seed=s), self.runtimes,
                        seed=self.args.seed + index, max_tics=self.args.max_tics, fixed_cost=self.fixed_cost,
                        think_tokens=self.args.think_tokens)


class ReactionBenchJob(PlayBenchJob):
    """`bench reaction`: one runtime (and its engine) that every agent plays on."""

    def _build(self, loaded, config) -> None:
        from agent_runtime.runtime import Runtime

        runtime = Runtime.open(config, loaded=loaded, scenario=self.args.scenario, env_seed=self.args.seed)
        self.env, self.runtimes = runtime.env, {"trained": runtime}


def bench_on_ray(args: argparse.Namespace, job: PlayBenchJob, command: str, report_episode) -> tuple[dict, dict, dict]:
    """Episode i of every agent on the Ray workers: ({agent: its results in seed order}, what the fanned-out
    result adds to the serial one, the first worker's info). Prints the machine header."""
    from agent_runtime.benchmarks.measure import print_header
    from agent_runtime.fanout.worker_pool import run_on_ray

    agents = job.agents
    tasks = [Task((i, name), None, f"episode {i} {name}") for i in range(args.episodes) for name in agents]
    results: dict[tuple[int, str], dict] = {}

    def on_result(task, outcome, worker) -> None:
        results[task.key] = outcome.result
        report_episode(task.key[0], args.episodes, task.key[1], outcome.result, f" ({worker.name()})")

    lost, info, described = run_on_ray(args, job, tasks, on_result, command=command)
    per_agent = {name: [results[(i, name)] for i in range(args.episodes) if (i, name) in results] for name in agents}
    machine = {**info.get("_machine", {}), "workers": args.workers, "ray": described}
    print_header(machine)
    added = dict(machine=machine, cpu_path=machine.get("cpu_path"), scenario=args.scenario,
                 adapter=info.get("adapter"), workers=args.workers, lost=[task.label for task, _ in lost])
    return per_agent, added, info


def run_play_bench_on_ray(args: argparse.Namespace, agents: tuple[str, ...]) -> tuple[dict, str]:
    """The serial bench's result (plus workers and the tasks lost) and the plot's title."""
    from agent_runtime.benchmarks.play_bench import report_episode, summarize_agents

    per_agent, added, info = bench_on_ray(args, PlayBenchJob(args, agents), "bench play", report_episode)
    result = {**summarize_agents(per_agent, episodes=args.episodes, seed=args.seed), **added}
    adapter = info.get("adapter")
    title = (f"{args.scenario}, {args.episodes} episodes, {info.get('model')}"
             + (f" + adapter {adapter[:8]}" if adapter else ", no adapter") + f", {args.workers} Ray workers")
    return result, title


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
