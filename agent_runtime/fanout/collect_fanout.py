"""`agent-runtime collect --workers N`: Ray workers play and label episodes; the driver writes the data set.

The driver appends each episode's decisions in episode order (holding one that ends early until those before it
are in), so the data set is the serial one and resumes the same way.
"""

import argparse
from pathlib import Path
from types import SimpleNamespace

from agent_runtime.fanout.episode_worker import decide_once
from agent_runtime.fanout.outcome import Task, plain_args
from agent_runtime.fanout.worker_pool import run_on_ray
from agent_runtime.notices import stderr_line, warning_line
from agent_runtime.training.collection import collect_episode, episode_line, open_runtime, print_totals
from agent_runtime.training.decision_log import DecisionLog, read_episodes


class CollectJob:
    """What a `collect` worker holds: the runtime (the model, loaded once, and one engine)."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.runtime = plain_args(args), None

    def setup(self, threads: int) -> dict:
        decide_once(threads)
        self.runtime, manifest = open_runtime(self.args, threads, announce=False)
        loaded = self.runtime.loaded
        return {"model": loaded.model_id, "cpu_path": loaded.cpu.name, "_manifest": manifest}

    def play(self, task: Task) -> dict:
        """The episode's decisions, kept here, and its summary; the driver writes them."""
        decisions: list = []
        summary = collect_episode(self.runtime, SimpleNamespace(add=decisions.append), task.key, self.args)
        return {"decisions": decisions, "summary": summary}


class _OrderedWriter:
    """Appends finished episodes to the data set in index order, as soon as every earlier one is in."""

    def __init__(self, out: Path, first: int, total: int):
        self.out, self.next, self.total = out, first, total
        self.log, self.waiting, self.done = None, {}, 0

    def open(self, worker) -> None:
        """The first loaded worker's manifest: a data set made with other settings is refused here."""
        if self.log is None:
            self.log = DecisionLog(self.out, worker.info["_manifest"])

    def __call__(self, task: Task, outcome, worker) -> None:
        self.done += 1
        stderr_line(f"[{self.done}/{self.total}] episode {task.key} ({worker.name()}): "
                    f"{episode_line(outcome.result['summary'])}")
        self.waiting[task.key] = outcome.result
        while self.next in self.waiting:
            episode = self.waiting.pop(self.next)
            for decision in episode["decisions"]:
                self.log.add(decision)
            self.log.finish_episode(episode["summary"])
            self.next += 1


def run_collect(args: argparse.Namespace, out: Path) -> int:
    """Exit 1 when an episode was lost (the ones after it are not written: run again to resume)."""
    # the resume point, read as DecisionLog reads it; the manifest is checked once a worker has loaded the model
    first = len(read_episodes(out))
    if first:
        stderr_line(f"resuming {out}: {first} episode(s) already collected")
    tasks = [Task(i, None, f"episode {i}") for i in range(first, args.episodes)]
    writer, lost = _OrderedWriter(out, first, len(tasks)), []
    try:
        if tasks:
            lost, _, _ = run_on_ray(args, CollectJob(args), tasks, writer, command="collect", on_ready=writer.open)
    finally:
        if writer.log is not None:
            writer.log.close()
    if lost:
        warning_line(f"agent-runtime collect: {out} holds episodes up to {writer.next - 1}; run it again to collect "
                    "the rest")
    print_totals(out, writer.log.episodes if writer.log is not None else read_episodes(out), args.json)
    return 1 if lost else 0
