"""`agent-runtime collect --workers N`: Ray workers play and label episodes; the driver writes the data set.

The driver appends each episode's decisions in episode order (holding one that ends early until those before it
are in), so the data set is the serial one and resumes the same way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agent_runtime.fanout.outcome import Task, plain_args
from agent_runtime.notices import stderr_line


class _EpisodeDecisions(list):
    """The part of DecisionLog a labeller and one collected episode use (add, finish_episode), in memory."""

    add = list.append

    def finish_episode(self, summary: dict) -> None:
        self.summary = summary


class CollectJob:
    """What a `collect` worker holds: the model, one engine, the runtime, the labeller and its event bus."""

    def __init__(self, args: argparse.Namespace):
        self.args = plain_args(args)
        self.env = self.runtime = self.labeler = self.bus = None

    def setup(self, threads: int) -> dict:
        from agent_runtime.commands import collect
        from agent_runtime.config import load_config
        from agent_runtime.events import EventBus
        from agent_runtime.fanout.episode_worker import decide_once
        from agent_runtime.runtime import Runtime
        from agent_runtime.training.expert_labeler import ExpertLabeler

        a = self.args
        config = load_config(a.config, scenario=a.scenario, seed=a.seed)
        decide_once(threads)
        self.runtime = Runtime.open(config, model=a.model, threads=threads, seed=collect.MODEL_SEED, adapter=a.adapter,
                                    env_seed=a.seed, announce=False)
        self.env, loaded = self.runtime.env, self.runtime.loaded
        self.labeler = ExpertLabeler(self.env.buttons, _EpisodeDecisions(), screen_width=self.env.resolution[1],
                                     words=self.runtime.grammar.words, expert_acts=self.args.expert_acts,
                                     expert=self.args.labeller, aimed=config.engine.frame_line == "aimed")
        self.bus = EventBus("collect", keep=False)
        self.bus.sinks.append(self.labeler)
        return {"model": loaded.model_id, "cpu_path": loaded.cpu.name,
                "_manifest": collect._manifest(a, loaded, config, self.env.buttons)}

    def play(self, task: Task) -> dict:
        from agent_runtime.commands import collect

        episode = _EpisodeDecisions()
        self.labeler.log = episode
        collect._collect_episode(self.env, self.runtime, episode, self.labeler, self.bus, task.key, self.args)
        return {"decisions": list(episode), "summary": episode.summary}


class _OrderedWriter:
    """Appends finished episodes to the data set in index order, as soon as every earlier one is in."""

    def __init__(self, out: Path, first: int, total: int):
        self.out, self.next, self.total = out, first, total
        self.log, self.waiting, self.done = None, {}, 0

    def open(self, worker) -> None:
        """The first loaded worker's manifest: a data set made with other settings is refused here."""
        from agent_runtime.training.decision_log import DecisionLog

        if self.log is None:
            self.log = DecisionLog(self.out, worker.info["_manifest"])

    def __call__(self, task: Task, outcome, worker) -> None:
        self.done += 1
        summary = outcome.result["summary"]
        agreement = "n/a" if summary["agreement"] is None else f"{summary['agreement']:.0%}"
        stderr_line(f"[{self.done}/{self.total}] episode {task.key} ({worker.name()}): {summary['decisions']} "
                    f"decisions, model agrees with the expert on {agreement}, {summary['kills']} kills, "
                    f"{summary['tics']} tics")
        self.waiting[task.key] = outcome.result
        while self.next in self.waiting:
            episode = self.waiting.pop(self.next)
            for decision in episode["decisions"]:
                self.log.add(decision)
            self.log.finish_episode(episode["summary"])
            self.next += 1


def run_collect(args: argparse.Namespace, out: Path) -> int:
    """Exit 1 when an episode was lost (the ones after it are not written: run again to resume)."""
    from agent_runtime.fanout.worker_pool import run_on_ray
    from agent_runtime.training.decision_log import EPISODES, _read_lines

    # the resume point, read as DecisionLog reads it; the manifest is checked once a worker has loaded the model
    first = len(_read_lines(out / EPISODES))
    if first:
        stderr_line(f"resuming {out}: {first} episode(s) already collected")
    tasks = [Task(i, None, f"episode {i}") for i in range(first, args.episodes)]
    writer = _OrderedWriter(out, first, len(tasks))
    lost = []
    try:
        if tasks:
            lost, _, _ = run_on_ray(args, CollectJob(args), tasks, writer, command="collect", on_ready=writer.open)
    finally:
        if writer.log is not None:
            writer.log.close()
    if lost:
        stderr_line(f"agent-runtime collect: {out} holds episodes up to {writer.next - 1}; run it again to collect "
                    "the rest")
    written = writer.log.episodes if writer.log is not None else _read_lines(out / EPISODES)
    print(f"{out}: {len(written)} episode(s), {sum(e['decisions'] for e in written)} decisions", flush=True)
    return 1 if lost else 0
