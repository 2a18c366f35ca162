"""`agent-runtime bench play --workers N`: every (episode, agent) pair is one task for a Ray worker.

A worker loads the model (and the untrained one when the adapter is compared) once and holds one engine for
the model agents, as the serial bench does; players without a model open their own engine per episode. The
summary is computed from the results put back in episode order, so it is the serial summary on the same seeds.
"""

from __future__ import annotations

import argparse
import sys

from agent_runtime.fanout.outcome import Task


def load_bench_model(args: argparse.Namespace, threads: int):
    """A bench worker's model (the adapter the command names, else the shipped one) and what ready() reports."""
    from agent_runtime.adapters import DEFAULT
    from agent_runtime.benchmarks.measure import machine_info
    from agent_runtime.fanout.cpu_probe import decide_once
    from agent_runtime.model_loader import load_for_cpu

    decide_once(threads)
    loaded = load_for_cpu(args.model, dtype=args.dtype, threads=threads, adapter=args.adapter or DEFAULT,
                          announce=False)
    clock = "fixed_cost" if args.fixed_cost else "compute (world advanced by measured step time)"
    return loaded, {"model": loaded.model_id, "cpu_path": loaded.cpu.name,
                    "adapter": loaded.adapter.hash if loaded.adapter else None,
                    "_machine": machine_info(loaded.model_id, loaded.cpu.threads, clock=clock, cpu=loaded.cpu)}


class PlayBenchJob:
    """What a `bench play` worker holds: the model(s), the runtimes built on them, one engine."""

    def __init__(self, args: argparse.Namespace, agents: tuple[str, ...]):
        self.args = argparse.Namespace(**{k: v for k, v in vars(args).items() if not k.startswith("_")})
        self.agents = agents
        self.env = self.runtimes = self.fixed_cost = None

    def setup(self, threads: int) -> dict:
        from agent_runtime.benchmarks.play_bench import play_runtimes
        from agent_runtime.clocks import FixedCost
        from agent_runtime.config import load_config
        from envs.doom_env import DoomEnv

        a = self.args
        config = load_config(scenario=a.scenario, seed=a.seed)
        loaded, ready = load_bench_model(a, threads)
        self.env = DoomEnv(a.scenario, seed=a.seed)
        self.runtimes = play_runtimes(loaded, config, self.env, self.agents, model_spec=a.model)
        self.fixed_cost = FixedCost() if a.fixed_cost else None
        return ready

    def play(self, task: Task) -> dict:
        from agent_runtime.benchmarks.play_bench import play_one
        from envs.doom_env import DoomEnv

        index, name = task.key
        return play_one(name, self.env, lambda s: DoomEnv(self.args.scenario, seed=s), self.runtimes,
                        seed=self.args.seed + index, max_tics=self.args.max_tics, fixed_cost=self.fixed_cost,
                        think_tokens=self.args.think_tokens)


def episodes_by_agent(args: argparse.Namespace, job, agents, command: str,
                      report_episode) -> tuple[dict, list, dict, dict]:
    """Episode i of every agent on the Ray workers: ({agent: its results in seed order}, the tasks lost, the first
    worker's info, the machine header (printed))."""
    from agent_runtime.benchmarks.measure import print_header
    from agent_runtime.fanout.ray_cluster import connect
    from agent_runtime.fanout.worker_pool import WorkerPool

    tasks = [Task((i, name), None, f"episode {i} {name}") for i in range(args.episodes) for name in agents]
    results: dict[tuple[int, str], dict] = {}

    def on_result(task, outcome, worker) -> None:
        results[task.key] = outcome.result
        report_episode(task.key[0], args.episodes, task.key[1], outcome.result, f" ({worker.name()})")

    with connect(args.ray_address, args.workers, args.threads) as cluster:
        print(cluster.describe(args.workers), file=sys.stderr, flush=True)
        pool = WorkerPool(cluster, job, args.workers, command=command)
        lost = pool.run(tasks, on_result)
        info = pool.first_info or {}
    per_agent = {name: [results[(i, name)] for i in range(args.episodes) if (i, name) in results] for name in agents}
    machine = {**info.get("_machine", {}), "workers": args.workers, "ray": cluster.describe(args.workers)}
    print_header(machine)
    return per_agent, lost, info, machine


def run_play_bench_on_ray(args: argparse.Namespace, agents: tuple[str, ...]) -> tuple[dict, str]:
    """The serial bench's result (plus workers and the tasks lost) and the plot's title."""
    from agent_runtime.benchmarks.play_bench import report_episode, summarize_agents

    per_agent, lost, info, machine = episodes_by_agent(args, PlayBenchJob(args, agents), agents, "bench play",
                                                       report_episode)
    result = summarize_agents(per_agent, episodes=args.episodes, seed=args.seed)
    result.update(machine=machine, cpu_path=machine.get("cpu_path"), scenario=args.scenario,
                  adapter=info.get("adapter"), workers=args.workers, lost=[task.label for task, _ in lost])
    adapter = info.get("adapter")
    title = (f"{args.scenario}, {args.episodes} episodes, {info.get('model')}"
             + (f" + adapter {adapter[:8]}" if adapter else ", no adapter") + f", {args.workers} Ray workers")
    return result, title
