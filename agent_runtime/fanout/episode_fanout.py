"""`agent-runtime episode --workers N`: the serial run's episodes, played by Ray workers.

A worker builds the serial run's player and plays with the same function, so episode i plays seed + i with the
same actions and recording; results are printed and appended to results.jsonl as episodes end.
"""

from __future__ import annotations

import argparse
import itertools
from contextlib import nullcontext
from pathlib import Path

from agent_runtime.fanout.outcome import Outcome, Task, plain_args
from agent_runtime.notices import stderr_line


class EpisodeJob:
    """What an `episode` worker holds: the player (the model, once) and where recordings go."""

    def __init__(self, args: argparse.Namespace, config, user_texts: dict, record_root: Path | None):
        self.args = plain_args(args)
        self.config, self.user_texts = config, user_texts
        self.record_root = record_root.resolve() if record_root is not None else None
        self.player = self.guard = None

    def setup(self, threads: int) -> dict:
        from agent_runtime.commands import episode
        from agent_runtime.fanout.episode_worker import decide_once
        from agent_runtime.recording.write_guard import WriteGuard

        self.args.threads = threads  # the CPUs Ray reserved for this worker
        if self.args.policy in episode.MODEL_POLICIES:
            decide_once(threads)
        env = episode._open_env(self.config, self.config.seed)
        try:
            self.player = episode.make_player(self.args, self.config, env, self.user_texts)
        finally:
            env.close()
        self.guard = WriteGuard(self.args.on_disk_full)
        loaded = getattr(self.player, "loaded", None)
        return {"policy": self.args.policy, **({"model": loaded.model_id, "cpu_path": loaded.cpu.name} if loaded else {})}

    def play(self, task: Task) -> dict:
        from agent_runtime.commands import episode

        index, seed = task.payload
        env = episode._open_env(self.config, seed)
        return episode._play_episode(self.player, env, seed, index, self.record_root, self.guard)


def run_episodes(args: argparse.Namespace, config, user_texts: dict, out_dir: Path | None,
                 record_root: Path | None) -> int:
    """Exit code 1 when an episode was lost (it failed on two workers), else 0."""
    from agent_runtime.commands.episode import report
    from agent_runtime.fanout.worker_pool import RunStopped, run_on_ray

    tasks = [Task(i, (i, config.seed + i), f"episode {i}") for i in range(args.episodes)]
    job = EpisodeJob(args, config, user_texts, record_root)
    done = itertools.count(1)  # the progress line counts over all workers
    with (out_dir / "results.jsonl").open("a") if out_dir else nullcontext() as results_file:

        def on_result(task: Task, outcome: Outcome, worker) -> None:
            """Each result as it arrives: the progress line, stdout, results.jsonl."""
            report(args, next(done), outcome.result, results_file, where=f"episode {task.key} ({worker.name()}): ")

        try:
            lost, _, _ = run_on_ray(args, job, tasks, on_result, command="episode")
        except RunStopped as e:  # the worker's guard printed nothing here: say it once
            stderr_line(f"agent-runtime episode: {e}")
            return 1
    return 1 if lost else 0
